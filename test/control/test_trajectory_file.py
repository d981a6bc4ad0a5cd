"""The trajectory-file reference (the CSV `robodyn excite` writes, followed by cubic spline): against the
analytic Fourier trajectory it was sampled from, periodic looping, clamped ends, columns by name, and
one-line errors for bad files."""
import numpy as np
import pytest

from robodyn_ros.cli.excite import trajectory_csv
from robodyn_ros.control.trajectory_file import TrajectoryFileReference
from robodyn_ros.identification.exciting_trajectory import FourierTrajectory
from robodyn_ros.model.errors import ModelError
from robodyn_ros.model.model import Model
from robodyn_ros.robots import bundled_robot_info

NAMES = ["j1", "j2", "j3"]


def _fourier(seed=3):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(3, 4)) * 0.3, rng.normal(size=(3, 4)) * 0.3
    a[:, 0] -= a.sum(axis=1)            # at rest at t = 0 like an excite file: v(0) = sum_k a_k = 0
    return FourierTrajectory(q0=rng.normal(size=3), a=a, b=b, period=4.0)


def _write(path, traj, names=NAMES, dt=1e-3):
    t = np.arange(int(round(traj.period / dt)) + 1) * dt
    path.write_text(trajectory_csv(names, t, traj.evaluate(t)[0]))
    return path


def test_spline_reproduces_the_sampled_trajectory_and_its_derivatives(tmp_path):
    traj = _fourier()
    ref = TrajectoryFileReference(_write(tmp_path / "t.csv", traj), NAMES)
    assert ref.periodic and ref.duration == pytest.approx(4.0)
    for t in np.random.default_rng(0).uniform(0.0, 4.0, 50):
        q, v, a = ref.evaluate(t)
        q_true, v_true, a_true = traj.evaluate(t)
        np.testing.assert_allclose(q, q_true, atol=1e-8)   # the CSV keeps every digit
        np.testing.assert_allclose(v, v_true, atol=1e-5)
        np.testing.assert_allclose(a, a_true, atol=1e-4 * max(1.0, np.abs(a_true).max()))


@pytest.mark.parametrize("periodic", [True, False])
def test_the_spline_is_scipys_cubic_spline_at_any_time(tmp_path, periodic):
    """The reference evaluates its spline itself (scipy's call costs more than the rest of a controller's
    step): against ``scipy.interpolate.CubicSpline`` of the same rows (periodic or clamped ends) and its two
    derivatives, at random times, at every break of an interval, at both ends and beyond them, at a quarter
    speed and looped."""
    from scipy.interpolate import CubicSpline
    rng = np.random.default_rng(5)
    t = 0.7 + np.cumsum(rng.uniform(0.001, 0.02, 400))           # uneven rows, not starting at 0
    q = np.cumsum(rng.normal(size=(400, 3)), axis=0) * 0.01
    if periodic:
        q[-1] = q[0]
    (tmp_path / "t.csv").write_text(trajectory_csv(NAMES, t, q))
    ref = TrajectoryFileReference(tmp_path / "t.csv", NAMES, t_start=1.0, loop=periodic, speed=0.25)
    spline = CubicSpline(t, q, axis=0, bc_type="periodic" if periodic else "clamped")
    s = np.concatenate([rng.uniform(t[0], t[-1], 500), t, [t[0], t[-1]]])
    for x in s:
        time = 1.0 + (x - t[0]) / 0.25
        x = t[0] + 0.25 * (time - 1.0)                            # the file's time the reference is at
        q_d, v_d, a_d = ref.evaluate(time)
        for got, want in ((q_d, spline(x)), (v_d, 0.25 * spline(x, 1)), (a_d, 0.0625 * spline(x, 2))):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(want).max()))
    beyond = ref.evaluate(1.0 + 3 * (t[-1] - t[0]) / 0.25 + 0.1)
    if periodic:                                                 # looped: the motion again
        x = t[0] + 0.1 * 0.25
        np.testing.assert_allclose(beyond[0], spline(x), rtol=1e-9, atol=1e-12)
    else:                                                        # held at the last row, at rest
        np.testing.assert_array_equal(beyond[0], q[-1])
        assert not beyond[1].any() and not beyond[2].any()


def test_loop_hold_and_start_time(tmp_path):
    traj = _fourier()
    path = _write(tmp_path / "t.csv", traj)
    looped = TrajectoryFileReference(path, NAMES, t_start=2.0, loop=True)
    once = TrajectoryFileReference(path, NAMES, t_start=2.0)
    for t in (2.3, 3.7, 5.1):
        for x, y in zip(looped.evaluate(t + 3 * 4.0), once.evaluate(t)):
            np.testing.assert_allclose(x, y, atol=1e-9)
    q, v, a = once.evaluate(100.0)                      # after the end: at rest at the last row
    np.testing.assert_allclose(q, traj.evaluate(4.0)[0], atol=1e-8)
    assert not v.any() and not a.any()
    q, v, a = once.evaluate(0.0)                        # before t_start: the first row
    np.testing.assert_allclose(q, traj.evaluate(0.0)[0], atol=1e-8)


def test_columns_by_name_and_clamped_ends(tmp_path):
    t = np.linspace(0.0, 1.0, 11)
    q = np.stack([t ** 2, 1 - t, np.sin(t)], axis=1)
    csv = trajectory_csv(["j3", "extra", "j1"], t, np.column_stack([q[:, 2], q[:, 1], q[:, 0]]))
    (tmp_path / "t.csv").write_text(csv)
    ref = TrajectoryFileReference(tmp_path / "t.csv", ["j1", "j3"])
    assert not ref.periodic
    q_d, v_d, _ = ref.evaluate(0.5)
    np.testing.assert_allclose(q_d, [0.25, np.sin(0.5)], atol=2e-3)
    np.testing.assert_allclose(ref.evaluate(0.0)[1], 0.0, atol=1e-12)   # clamped: rest at both ends
    np.testing.assert_allclose(ref.evaluate(1.0)[1], 0.0, atol=1e-12)
    with pytest.raises(ModelError, match="loop needs a periodic file"):
        TrajectoryFileReference(tmp_path / "t.csv", ["j1"], loop=True)


@pytest.mark.parametrize("case", ["header", "nan", "order", "joint", "limits", "missing", "short"])
def test_bad_files_give_one_line_naming_the_fault(tmp_path, case):
    path = tmp_path / "t.csv"
    text = "time,j1,j2,j3\n0,0,0,0\n0.001,0.1,0,0\n0.002,0.2,0,0\n"
    names, model, expected = NAMES, None, ""
    if case == "header":
        text, expected = text.replace("time", "t", 1), "header"
    elif case == "nan":
        text, expected = text.replace("0.1,0,0", "0.1,nan,0"), "line 3: column 'j2'"
    elif case == "order":
        text, expected = text.replace("0.002,", "0.001,"), "line 4"
    elif case == "joint":
        names, expected = ["j1", "j9"], "j9"
    elif case == "short":
        text, expected = "time,j1\n0,1\n", "at least 2"
    elif case == "missing":
        path, expected = tmp_path / "none.csv", "none.csv"
    elif case == "limits":
        info = bundled_robot_info("panda")
        model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
        names = list(model.joint_names)
        home = [str(x) for x in info["home"]]
        text = "time," + ",".join(names) + "\n0," + ",".join(home) + "\n1," + ",".join(home[:6] + ["5"]) + "\n"
        expected = "panda_joint7 at t = 1 s"
    if case != "missing":
        path.write_text(text)
    with pytest.raises(ModelError) as info:
        TrajectoryFileReference(path, names, model=model)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_approach_then_follow_meets_the_file_at_rest_within_the_speed_bound(tmp_path):
    from robodyn_ros.control.trajectory_file import ApproachThenFollow
    traj = _fourier()
    ref = TrajectoryFileReference(_write(tmp_path / "t.csv", traj), NAMES, loop=True)
    q_now, v_max = np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, 0.5])
    motion = ApproachThenFollow(ref, q_now, t_now=3.0, velocity_limit=v_max, speed_fraction=0.2)
    np.testing.assert_allclose(motion.evaluate(3.0)[0], q_now)
    times = np.linspace(3.0, motion.switch, 2001)
    speeds = np.array([motion.evaluate(t)[1] for t in times])
    assert np.all(np.abs(speeds) <= 0.2 * v_max * (1 + 1e-9))
    assert np.max(np.abs(speeds) / (0.2 * v_max)) > 0.999            # the slowest joint sets the duration
    before, after = motion.evaluate(motion.switch - 1e-9), motion.evaluate(motion.switch)
    np.testing.assert_allclose(before[0], after[0], atol=1e-8)
    np.testing.assert_allclose(before[1], 0.0, atol=1e-6)
    np.testing.assert_allclose(after[1], traj.evaluate(0.0)[1], atol=1e-5)
    for x, y in zip(motion.evaluate(motion.switch + 1.3), traj.evaluate(1.3)):
        np.testing.assert_allclose(x, y, atol=1e-3 * max(1.0, np.abs(y).max()))


def test_the_control_loop_follows_a_trajectory_file_after_approaching_it(tmp_path):
    """``reference: file`` in the inverse_dynamics node's control loop: from a configuration 0.1 rad away the
    Panda (simulated, its own model) approaches the file's first row, then tracks the file (to 1e-3 rad)
    with computed torque; a file with a missing joint fails the loop's construction with one line."""
    from robodyn_ros.control.control_loop import ControlLoop
    from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
    from robodyn_ros.simulation.simulation_step import engine_step
    from robodyn_ros.simulation.simulator import Simulator, SimulatorConfig
    robot = load_robot(resolve_node_config("inverse_dynamics", {}))
    model, n = robot.model, robot.model.nv
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(n, 3)) * 0.05, rng.normal(size=(n, 3)) * 0.05
    a[:, 0] -= a.sum(axis=1)
    traj = FourierTrajectory(q0=robot.home, a=a, b=b, period=2.0)
    path = _write(tmp_path / "excite.csv", traj, names=list(model.joint_names))
    config = resolve_node_config("inverse_dynamics", {"reference": "file", "trajectory_file": str(path)})
    loop = ControlLoop(robot, config, lambda tau: None)
    sim = Simulator(model, q0=robot.home + 0.1, step_function=engine_step(model, SimulatorConfig()))  # compiled
    errors = []
    for k in range(6000):
        t = 1e-3 * k
        tau, e = loop.on_state(t, sim.q.copy(), sim.v.copy())
        errors.append(np.abs(sim.q - traj.evaluate(t - loop.reference.switch)[0]).max() if t > loop.reference.switch
                      else np.nan)
        sim.step(tau)
    switch = loop.reference.switch
    assert 1.0 <= switch < 4.0                                           # the approach, then the file
    after = np.array(errors)[int(1e3 * switch) + 500:]
    assert np.all(np.isfinite(after)) and after.max() < 1e-3, after.max()
    bad = tmp_path / "bad.csv"
    bad.write_text(trajectory_csv(list(model.joint_names)[:-1], np.array([0.0, 1.0]), np.zeros((2, n - 1))))
    with pytest.raises(ModelError, match="no column for joint"):
        ControlLoop(robot, resolve_node_config("inverse_dynamics", {"reference": "file", "trajectory_file": str(bad)}),
                    lambda tau: None)


def test_a_speed_fraction_slows_the_file_down(tmp_path):
    """``speed`` s (the node's ``trajectory_speed``): the reference at t is the file's at s t, with velocities
    scaled by s and accelerations by s²; the control loop takes it from the node's parameters; outside (0, 1]
    it is refused."""
    from robodyn_ros.control.control_loop import ControlLoop
    from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
    traj = _fourier()
    path = _write(tmp_path / "t.csv", traj)
    full = TrajectoryFileReference(path, NAMES, loop=True)
    slow = TrajectoryFileReference(path, NAMES, loop=True, speed=0.25)
    for t in (0.7, 3.1, 9.9):
        q, v, a = slow.evaluate(t)
        q_f, v_f, a_f = full.evaluate(0.25 * t)
        np.testing.assert_allclose(q, q_f, atol=1e-12)
        np.testing.assert_allclose(v, 0.25 * v_f, atol=1e-12)
        np.testing.assert_allclose(a, 0.0625 * a_f, atol=1e-12)
    for bad in (0.0, 1.5):
        with pytest.raises(ModelError, match="trajectory speed"):
            TrajectoryFileReference(path, NAMES, speed=bad)
    robot = load_robot(resolve_node_config("inverse_dynamics", {}))
    names = list(robot.model.joint_names)
    panda_file = _write(tmp_path / "p.csv", FourierTrajectory(q0=robot.home, a=np.zeros((len(names), 1)),
                                                              b=np.zeros((len(names), 1)), period=2.0), names=names)
    config = resolve_node_config("inverse_dynamics", {"reference": "file", "trajectory_file": str(panda_file),
                                                      "trajectory_speed": 0.25})
    assert ControlLoop(robot, config, lambda tau: None).file_reference.speed == 0.25
