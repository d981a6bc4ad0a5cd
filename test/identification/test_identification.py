"""Identification on data generated with PINOCCHIO (not our dynamics): a "true" Panda whose inertias,
armature and friction differ from the URDF's, measured with noise.

Signal model of the true robot: tau = RNEA_pinocchio(q, v, a) + armature a + viscous v
+ coulomb tanh(v / 0.05) + offset (the smooth Coulomb model the identification uses, see
test_identify_real_panda.py), noise added to what a controller would record.
"""
import os
import time

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import erd_path
from robodyn_ros.identification.blas_threads import limit_blas_threads
from robodyn_ros.identification.base_parameters import (compute_base_parameters, identifiability_explanation,
                                                        parameter_identifiability, smooth_sign)
from robodyn_ros.identification.batch import accumulate, identify, predict_torques
from robodyn_ros.identification.batch_regressor import batch_regressor
from robodyn_ros.identification.least_squares import weighted_least_squares
from robodyn_ros.identification.signal_filters import encoder_resolution, quantize
from robodyn_ros.model.urdf_edit import lock_joints

pin = pytest.importorskip("pinocchio")
limit_blas_threads()

LOCKED = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
WIDTH = 0.05
RNG_SEED = 20261123


# ------------------------------------------------------------------------------------------- the robot
class TrueRobot:
    """A Pinocchio Panda (fingers locked) with perturbed inertias plus armature and friction."""

    def __init__(self, seed=RNG_SEED):
        rng = np.random.default_rng(seed)
        self.xml = lock_joints(open(erd_path("panda_description/urdf/panda.urdf")).read(), LOCKED)
        self.nominal = rd.Model.from_urdf(self.xml)
        self.pm = pin.buildModelFromXML(self.xml)
        for i in range(1, self.pm.njoints):
            I = self.pm.inertias[i]
            m = I.mass * rng.uniform(0.8, 1.2)
            c = I.lever + rng.uniform(-0.01, 0.01, 3)
            Ic = I.inertia * rng.uniform(0.8, 1.2) + np.diag(rng.uniform(0.0, 0.002, 3))
            self.pm.inertias[i] = pin.Inertia(m, c, Ic)
        nv = self.pm.nv
        self.armature = rng.uniform(0.05, 0.3, nv)
        self.viscous = rng.uniform(0.1, 0.6, nv)
        self.coulomb = rng.uniform(0.2, 1.0, nv)
        self.offset = rng.uniform(-0.2, 0.2, nv)
        self.pm.armature = self.armature
        self.data = self.pm.createData()

    def pi_full(self):
        """Our full parameter vector of the true robot (Pinocchio's dynamic parameters per joint)."""
        pi = np.concatenate([self.pm.inertias[i].toDynamicParameters() for i in range(1, self.pm.njoints)])
        joint = np.stack([self.armature, self.viscous, self.coulomb, self.offset], axis=1).reshape(-1)
        return np.concatenate([pi, joint])

    def friction(self, V, width=WIDTH):
        return self.viscous * V + self.coulomb * smooth_sign(V, width) + self.offset

    def torques(self, Q, V, A, width=WIDTH):
        rnea = np.array([pin.rnea(self.pm, self.data, Q[k], V[k], A[k]) for k in range(len(Q))])
        return rnea + self.friction(V, width)

    def with_payload(self, mass, com, link="panda_link8"):
        """A copy carrying a box payload of ``mass`` at ``com`` in ``link``'s frame; returns (robot, pi_p)."""
        other = TrueRobot.__new__(TrueRobot)
        other.__dict__.update(self.__dict__)
        other.pm = self.pm.copy()
        fid = other.pm.getFrameId(link)
        payload = pin.Inertia(mass, np.asarray(com), np.diag([0.004, 0.005, 0.003]))
        jid = other.pm.frames[fid].parentJoint
        other.pm.inertias[jid] = other.pm.inertias[jid] + other.pm.frames[fid].placement.act(payload)
        other.data = other.pm.createData()
        return other, payload


@pytest.fixture(scope="module")
def robot():
    return TrueRobot()


@pytest.fixture(scope="module")
def trajectories(robot):
    """Two exciting trajectories (identification, validation): 20 s and 10 s at 1 kHz."""
    from robodyn_ros.identification.exciting_trajectory import design_exciting_trajectory
    m = robot.nominal
    out = []
    for seed, periods in ((1, 2), (7, 1)):
        traj = design_exciting_trajectory(m.nv, m.lower, m.upper, 0.6 * m.velocity_limit, a_max=np.full(m.nv, 4.0),
                                          period=10.0, harmonics=5, seed=seed, max_iterations=4)
        out.append(traj.sample(0.001, periods))
    return out


def measure(robot, t, Q, V, A, rng, noise=0.01, counts=2 ** 18):
    """What a robot would record: quantised positions, torques with noise of ``noise`` x their range."""
    tau = robot.torques(Q, V, A)
    sigma = noise * (tau.max(axis=0) - tau.min(axis=0))
    return quantize(Q, encoder_resolution(counts)), tau + rng.normal(size=tau.shape) * sigma, tau


def rel(err, ref):
    return float(np.linalg.norm(err) / np.linalg.norm(ref))


# ------------------------------------------------------------------------------------------- structure
def test_batch_regressor_matches_pinocchio(robot, rng):
    m = robot.nominal
    Q = np.stack([m.random_configuration(rng) for _ in range(20)])
    V, A = rng.normal(size=(20, m.nv)), rng.normal(size=(20, m.nv))
    Y = batch_regressor(m, Q, V, A)
    pm, pd = pin.buildModelFromXML(robot.xml), None
    pd = pm.createData()
    for k in range(20):
        np.testing.assert_allclose(Y[k], pin.computeJointTorqueRegressor(pm, pd, Q[k], V[k], A[k]), atol=1e-10)


def test_noise_free_base_parameters_recovered(robot, rng):
    """Pinocchio torques at random states: the base parameters come out to 1e-8 (relative)."""
    m = robot.nominal
    base = compute_base_parameters(m, coulomb_width=WIDTH)
    N = 400
    Q = np.stack([m.random_configuration(rng) for _ in range(N)])
    V, A = rng.uniform(-2, 2, size=(N, m.nv)), rng.uniform(-5, 5, size=(N, m.nv))
    tau = robot.torques(Q, V, A)
    beta_true = base.from_full(robot.pi_full())
    np.testing.assert_allclose(base.regressor(m, Q, V, A) @ beta_true, tau, rtol=0, atol=1e-10)
    fit = weighted_least_squares(accumulate(m, base, Q, V, A, tau), iterations=0)
    err = np.abs(fit.beta - beta_true) / np.maximum(np.abs(beta_true), 1.0)
    print(f"\nnoise-free: {base.count} base parameters, max relative error {err.max():.2e}, "
          f"condition number {fit.condition_number:.1f}")
    assert err.max() < 1e-8
    assert fit.relative_error < 1e-10


def test_identifiability_of_the_first_link(robot):
    """Cărmizaru Rem. 4.2.7-4.2.8: the first link of a fixed-base arm is seen only through its inertia
    about the joint-1 axis; deeper links are mostly identifiable."""
    m = robot.nominal
    base = compute_base_parameters(m)
    groups = parameter_identifiability(m, base)
    assert groups["panda_link1"]["none"] == ["m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz"]
    assert groups["panda_link1"]["combined"] == ["Izz"] and groups["panda_link1"]["alone"] == []
    assert any(n.startswith("Izz_panda_link1") and "armature_panda_joint1" in n for n in base.names)
    assert len(groups["panda_link7"]["none"]) == 0 and len(groups["panda_link7"]["alone"]) >= 5
    text = identifiability_explanation(m, base)
    assert "first joint of a fixed base" in text["panda_link1"] and "Izz" in text["panda_link1"]
    assert "Rem. 4.2.8" in text["panda_link1"]
    assert "first joint" not in text["panda_link4"]
    n_rigid = sum(1 for i in base.independent if i < 10 * m.nbodies)
    print(f"\npanda: {base.count} base parameters ({n_rigid} with inertial terms); link 1: {text['panda_link1'][:160]}...")
    assert base.count == 69


# ---------------------------------------------------------------------------------- realistic noise
@pytest.fixture(scope="module")
def identified(robot, trajectories):
    rng = np.random.default_rng(5)
    t, Q, V, A = trajectories[0]
    q_meas, tau_meas, _ = measure(robot, t, Q, V, A, rng)
    result = identify(robot.nominal, t, q_meas, None, tau_meas, cutoff_hz=5.0, coulomb_width=WIDTH)
    return result


def test_noisy_exciting_trajectory_predicts_validation_torques(robot, trajectories, identified, tmp_path):
    t, Q, V, A = trajectories[1]
    tau_true = robot.torques(Q, V, A)
    ident = predict_torques(identified.identified, Q, V, A, WIDTH)
    least_squares = identified.base.regressor(robot.nominal, Q, V, A, ) @ identified.fit.beta
    nominal = predict_torques(robot.nominal, Q, V, A, WIDTH)
    e_id, e_ls, e_nom = rel(tau_true - ident, tau_true), rel(tau_true - least_squares, tau_true), rel(tau_true - nominal, tau_true)
    print(f"\nnoisy 20 s identification, 10 s validation: consistent model {100 * e_id:.2f} %, least squares "
          f"{100 * e_ls:.2f} %, nominal URDF {100 * e_nom:.2f} % (ratio {e_nom / e_id:.1f}x); fit relative error "
          f"{100 * identified.fit.relative_error:.2f} %, condition number {identified.fit.condition_number:.1f}")
    assert e_id <= 0.03 and e_ls <= 0.03
    assert e_nom >= 5 * e_id
    # the consistent fit reproduces the least-squares torques, with physically consistent bodies
    from robodyn_ros.identification.physical_consistency import is_consistent
    assert rel(ident - least_squares, least_squares) < 0.01
    assert all(is_consistent(pi_b) for pi_b in identified.identified.inertias)
    from robodyn_ros.identification.physical_consistency import pseudo_inertia_margin
    margins = [pseudo_inertia_margin(pi_b) for pi_b in identified.identified.inertias]
    assert min(margins) >= 1e-3 * (1 - 1e-6), margins
    assert np.all(identified.identified.viscous >= 0) and np.all(identified.identified.coulomb >= 0)

    # the identified URDF, loaded by Pinocchio, reproduces the identified rigid-body torques
    from robodyn_ros.identification.results import identified_urdf
    model = identified.identified
    xml = identified_urdf(robot.xml, model)
    pm = pin.buildModelFromXML(xml)
    pd = pm.createData()
    rigid = batch_regressor(model, Q[::50], V[::50], A[::50]) @ model.inertial_parameters()
    theirs = np.array([pin.rnea(pm, pd, q, v, a) for q, v, a in zip(Q[::50], V[::50], A[::50])])
    np.testing.assert_allclose(theirs, rigid, rtol=1e-9, atol=1e-9)
    ours = rd.Model.from_urdf(xml)
    np.testing.assert_allclose(ours.inertias, model.inertias, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.viscous, model.viscous, rtol=1e-12)
    np.testing.assert_allclose(ours.coulomb, model.coulomb, rtol=1e-12)


def _wrench_measurements(robot_p, payload, Q, V, A, link, rng, bias):
    """Wrench at ``link`` the sensor applies to the payload (Pinocchio kinematics), with bias and noise."""
    pm, pd = robot_p.pm, robot_p.data
    fid = pm.getFrameId(link)
    W = np.empty((len(Q), 6))
    for k in range(len(Q)):
        pin.forwardKinematics(pm, pd, Q[k], V[k], A[k])
        pin.updateFramePlacements(pm, pd)
        v = pin.getFrameVelocity(pm, pd, fid, pin.LOCAL)
        a = pin.getFrameAcceleration(pm, pd, fid, pin.LOCAL)
        a = a + pin.Motion(pd.oMf[fid].rotation.T @ (-pm.gravity.linear), np.zeros(3))
        W[k] = (payload * a + v.cross(payload * v)).vector
    sigma = 0.01 * (W.max(axis=0) - W.min(axis=0))
    return W + bias + rng.normal(size=W.shape) * sigma


def test_payload_from_wrist_ft_sensor(robot, trajectories):
    from robodyn_ros.identification.batch import filtered_samples
    from robodyn_ros.identification.payload import payload_from_wrench
    rng = np.random.default_rng(11)
    robot_p, payload = robot.with_payload(2.0, [0.01, -0.02, 0.05])
    t, Q, V, A = trajectories[1]
    q_meas, _, _ = measure(robot_p, t, Q, V, A, rng)
    bias = np.array([1.5, -0.7, 2.0, 0.05, -0.03, 0.02])
    W = _wrench_measurements(robot_p, payload, Q, V, A, "panda_link8", rng, bias)
    T, Qf, Vf, Af, Wf = filtered_samples(t, q_meas, None, W, 5.0)
    est = payload_from_wrench(robot.nominal, "panda_link8", Qf, Vf, Af, Wf)
    print(f"\npayload from F/T: {est.mass:.4f} kg (true 2 kg, ±{est.std[0]:.4f}), com {np.round(est.com, 4)}, "
          f"bias {np.round(est.bias, 3)}")
    assert abs(est.mass - 2.0) <= 0.02 * 2.0
    np.testing.assert_allclose(est.com, [0.01, -0.02, 0.05], atol=0.005)
    np.testing.assert_allclose(est.bias, bias, atol=0.1)


def test_payload_from_joint_torques(robot, trajectories, identified):
    from robodyn_ros.identification.batch import filtered_samples
    from robodyn_ros.identification.payload import payload_from_joint_torques
    rng = np.random.default_rng(12)
    robot_p, _ = robot.with_payload(2.0, [0.01, -0.02, 0.05])
    t, Q, V, A = trajectories[0]
    q_meas, tau_meas, _ = measure(robot_p, t, Q, V, A, rng)
    T, Qf, Vf, Af, TAUf = filtered_samples(t, q_meas, None, tau_meas, 5.0)
    model = identified.identified
    est = payload_from_joint_torques(model, Qf, Vf, Af, TAUf, lambda Q, V, A: predict_torques(model, Q, V, A, WIDTH))
    # the payload sits in panda_link8's frame, 0.107 m along z of body 7's frame
    mass = est.mass
    print(f"\npayload from joint torques alone: {mass:.4f} kg (true 2 kg)")
    assert abs(mass - 2.0) <= 0.05 * 2.0


def test_recursive_estimator_tracks_a_payload_change(robot, trajectories, identified):
    """The online identifier (causal filter -> base regressor -> RLS, as in the estimator node) replays
    250 Hz joint states; a 2 kg payload is attached at t = 10 s. The payload mass read from the base
    parameters (change of the last body's parameters) must stay within 5 % of its final value from at
    most 2 s after the change."""
    from robodyn_ros.identification.payload import body_parameter_change
    from robodyn_ros.estimation.recursive import OnlineIdentifier
    rng = np.random.default_rng(13)
    robot_p, _ = robot.with_payload(2.0, [0.01, -0.02, 0.05])
    t, Q, V, A = (x[::4] for x in trajectories[0])
    change_at = 10.0
    tau = np.where((t >= change_at)[:, None], robot_p.torques(Q, V, A), robot.torques(Q, V, A))
    tau_meas = tau + rng.normal(size=tau.shape) * 0.01 * (tau.max(axis=0) - tau.min(axis=0))
    q_meas = quantize(Q, encoder_resolution(2 ** 18))
    base, fit = identified.base, identified.fit
    last = model_last_body_rows(base, robot.nominal)
    online = OnlineIdentifier(robot.nominal, base, fit.beta, fit.cov * 100.0, noise_std=fit.sigma * 3.0,
                              cutoff_hz=5.0, forgetting=0.999, boost_indices=last,
                              boost_variance=np.maximum(fit.beta[last] ** 2, 0.05))
    start = time.perf_counter()
    estimates = online.replay(t, q_meas, None, tau_meas)
    seconds = time.perf_counter() - start
    masses = np.array([body_parameter_change(base, fit.beta, b, robot.nominal.nbodies - 1)[0] for b in estimates])
    final = masses[-1]
    outside = np.flatnonzero(np.abs(masses - final) > 0.05 * abs(final))
    settle = t[outside[-1]] - change_at if outside.size else 0.0
    before = masses[(t > 3.0) & (t < change_at)]
    print(f"\nonline RLS: {len(t)} samples in {seconds:.2f} s ({1e6 * seconds / len(t):.0f} us each), payload mass "
          f"final {final:.3f} kg, within 5 % of it {settle:.2f} s after the change, changes detected "
          f"{online.rls.changes}, outliers rejected {online.rls.rejected}; before the change |m| <= "
          f"{np.abs(before).max():.3f} kg")
    assert settle <= 2.0
    assert abs(final - 2.0) < 0.1
    assert online.rls.changes >= 1
    online.reset()
    np.testing.assert_array_equal(online.beta, fit.beta)


def model_last_body_rows(base, model):
    """Base parameters that contain a parameter of the last body (those a payload changes)."""
    b = model.nbodies - 1
    return np.flatnonzero(np.any(base.K[:, 10 * b:10 * b + 10] != 0.0, axis=1))


# ------------------------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def small_motion(robot, trajectories):
    """6 s of the identification trajectory at 200 Hz, measured."""
    t, Q, V, A = (x[:6000:5] for x in trajectories[0])
    _, tau, _ = measure(robot, t, Q, V, A, np.random.default_rng(3))
    return t, Q, V, tau


def _run_identify(tmp_path, bag, capsys, *extra):
    from robodyn_ros.cli.identify import main
    urdf = tmp_path / "panda_locked.urdf"
    urdf.write_text(TrueRobot().xml)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    code = main([str(bag), "--urdf", str(urdf), "--output", str(out / "p.yaml"), "--urdf-out",
                 str(out / "p.urdf"), "--plot", str(out / "p.png"), "--quiet", *extra])
    err = capsys.readouterr().err
    return code, err, sorted(os.listdir(out))


NAMES = [f"panda_joint{i}" for i in range(1, 8)]


@pytest.mark.parametrize("case", ["missing_topic", "names", "nan", "out_of_order", "still", "no_effort", "lock_typo"])
def test_bad_inputs_end_with_a_clear_message_and_write_nothing(case, small_motion, tmp_path, capsys):
    from robodyn_ros.bags import write_joint_states_bag
    t, Q, V, tau = (np.array(x) for x in small_motion)
    names, extra, receive = NAMES, [], None
    expected = {"missing_topic": "topic '/robot/joint_states' not found",
                "names": "joint names do not match",
                "nan": "NaN", "out_of_order": "out-of-order",
                "still": "too little excitation", "no_effort": "no effort",
                "lock_typo": "cannot lock joint"}[case]
    if case == "missing_topic":
        extra = ["--joint-states", "/robot/joint_states"]
    elif case == "names":
        names = [f"joint_{i}" for i in range(1, 8)]
    elif case == "nan":
        Q[100, 3] = np.nan
    elif case == "out_of_order":
        receive = t.copy()
        t[[200, 201]] = t[[201, 200]]        # stamps of two messages swapped
    elif case == "still":
        Q[:] = Q[0]
        V[:] = 0.0
        tau[:] = tau[0]
    elif case == "lock_typo":
        extra = ["--lock-joint", "panda_joint_9=0"]
        expected = "panda_joint_9"
    write_joint_states_bag(tmp_path / "bag", t, names, Q, V, None if case == "no_effort" else tau, receive_t=receive)
    code, err, written = _run_identify(tmp_path, tmp_path / "bag", capsys, *extra)
    print(f"\n{case}: exit {code}: {err.strip().splitlines()[0]}")
    assert code == 2
    assert expected in err, err
    assert written == []


def test_out_of_order_and_nan_repaired_on_request(small_motion, tmp_path, capsys):
    from robodyn_ros.bags import write_joint_states_bag
    t, Q, V, tau = (np.array(x) for x in small_motion)
    Q[100, 3] = np.nan
    write_joint_states_bag(tmp_path / "bag", t, NAMES, Q, V, tau)
    code, err, written = _run_identify(tmp_path, tmp_path / "bag", capsys, "--repair")
    assert code == 0, err
    assert written == ["p.png", "p.urdf", "p.yaml"]


# ------------------------------------------------------------------------------------------- speed
def test_replay_speed_100k_samples(robot, trajectories, tmp_path, capsys):
    """100 000 joint-state samples (100 s at 1 kHz) from a bag to identified parameters."""
    from robodyn_ros.bags import write_joint_states_bag
    from robodyn_ros.cli.identify import main
    t0, Q0, V0, A0 = trajectories[0]
    reps = 5
    t = np.concatenate([t0 + 20.0 * k for k in range(reps)])
    Q, V, A = (np.concatenate([x] * reps) for x in (Q0, V0, A0))
    _, tau, _ = measure(robot, t0, Q0, V0, A0, np.random.default_rng(21))
    tau = np.concatenate([tau] * reps)
    assert len(t) == 100_000
    write_joint_states_bag(tmp_path / "bag", t, NAMES, Q, V, tau)
    urdf = tmp_path / "panda.urdf"
    urdf.write_text(robot.xml)
    wall, cpu = time.perf_counter(), time.process_time()
    code = main([str(tmp_path / "bag"), "--urdf", str(urdf), "--output", str(tmp_path / "p.yaml"), "--quiet"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert code == 0, capsys.readouterr().err
    with capsys.disabled():
        print(f"\nreplay speed: 100 000 samples through `robodyn identify` (read, filter, regress, weighted LS, "
              f"consistent fit, YAML): {cpu:.2f} s CPU, {wall:.2f} s wall")
    # CPU time: the machine is shared with other test workers, wall time measures them too
    assert cpu <= 10.0


def test_identify_command_with_wrist_ft_sensor(robot, trajectories, tmp_path, capsys):
    """`robodyn identify --wrench TOPIC --wrench-link LINK` adds the payload to the YAML."""
    import yaml
    from robodyn_ros.bags import WrenchSeries, write_joint_states_bag
    from robodyn_ros.cli.identify import main
    rng = np.random.default_rng(31)
    robot_p, payload = robot.with_payload(2.0, [0.01, -0.02, 0.05])
    t, Q, V, A = (x[::5] for x in trajectories[0])
    q_meas, tau, _ = measure(robot_p, t, Q, V, A, rng)
    W = _wrench_measurements(robot_p, payload, Q, V, A, "panda_link8", rng, np.array([1.0, 0.5, -2.0, 0.1, 0.0, -0.05]))
    wrench = WrenchSeries(t=t, frame_id="panda_link8", w=W)
    write_joint_states_bag(tmp_path / "bag", t, NAMES, q_meas, None, tau, wrench=wrench, wrench_topic="/ft")
    urdf = tmp_path / "panda.urdf"
    urdf.write_text(robot.xml)
    code = main([str(tmp_path / "bag"), "--urdf", str(urdf), "--output", str(tmp_path / "p.yaml"), "--quiet",
                 "--wrench", "/ft", "--wrench-link", "panda_link8"])
    assert code == 0, capsys.readouterr().err
    doc = yaml.safe_load(open(tmp_path / "p.yaml"))
    p = doc["payload"]
    print(f"\ncommand with F/T (1 % noise on wrench and torques, 18-bit encoders): payload {p['mass']:.4f} kg "
          f"(true 2, std {p['mass_std']:.4f}), com {np.round(p['com'], 4)} (true [0.01, -0.02, 0.05]), "
          f"bias {np.round(p['sensor_bias'], 3)}")
    # stated tolerances: mass within 2 % and within 4 of its reported standard deviations (or 10 g), COM within
    # 5 mm, sensor bias within 0.1 N and 0.05 N m
    assert abs(p["mass"] - 2.0) <= 0.04
    np.testing.assert_allclose(p["com"], [0.01, -0.02, 0.05], atol=0.005)
    np.testing.assert_allclose(p["sensor_bias"][:3], [1.0, 0.5, -2.0], atol=0.1)
    np.testing.assert_allclose(p["sensor_bias"][3:], [0.1, 0.0, -0.05], atol=0.05)
    assert abs(p["mass"] - 2.0) <= max(4 * p["mass_std"], 0.01)
    assert "first joint of a fixed base" in doc["identifiability"]["panda_link1"]


# ------------------------------------------------------------------------------------------- pieces
def test_rank_deficient_regressor_is_reported_by_name():
    from robodyn_ros.identification.least_squares import InsufficientExcitation, RegressorAccumulator
    rng = np.random.default_rng(2)
    Y = rng.normal(size=(200, 2, 3))
    Y[:, :, 2] = 2.0 * Y[:, :, 0] - Y[:, :, 1]          # the third column is a combination of the others
    acc = RegressorAccumulator(2, 3)
    acc.add(Y, rng.normal(size=(200, 2)))
    with pytest.raises(InsufficientExcitation, match="cannot separate .*p2"):
        weighted_least_squares(acc, names=["p0", "p1", "p2"])


@pytest.mark.parametrize("locks", [{"panda_finger_joint1": 0.03, "panda_finger_joint2": 0.01},
                                   {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0, "panda_joint6": 1.2}])
def test_lock_joints_in_xml_equals_locking_in_the_loader(locks):
    xml = open(erd_path("panda_description/urdf/panda.urdf")).read()
    edited = rd.Model.from_urdf(lock_joints(xml, locks))
    loaded = rd.Model.from_urdf(xml, locked_joints=locks)
    assert edited.joint_names == loaded.joint_names
    np.testing.assert_allclose(edited.inertias, loaded.inertias, atol=1e-12)
    q = np.linspace(-0.5, 0.5, edited.nq)
    np.testing.assert_allclose(rd.rnea(edited, q, q, q), rd.rnea(loaded, q, q, q), atol=1e-10)
    pm = pin.buildModelFromXML(lock_joints(xml, locks))
    np.testing.assert_allclose(pin.rnea(pm, pm.createData(), q, q, q), rd.rnea(loaded, q, q, q), atol=1e-10)


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    from robodyn_ros.identification.results import write_atomically
    with pytest.raises(OSError):
        write_atomically({str(tmp_path / "a.yaml"): "a: 1\n", str(tmp_path / "missing" / "b.urdf"): "<robot/>"})
    assert os.listdir(tmp_path) == []
    (tmp_path / "a.yaml").write_text("old\n")
    write_atomically({str(tmp_path / "a.yaml"): "a: 2\n"})
    assert (tmp_path / "a.yaml").read_text() == "a: 2\n" and os.listdir(tmp_path) == ["a.yaml"]


def test_rls_bounded_covariance_at_standstill_and_outlier_rejection():
    """Standstill: the regressor repeats one row pair, exponential forgetting alone winds P up without
    bound; the trace bound keeps it at trace(P0) and the estimate does not jump when motion resumes.
    A 50-sigma spike while moving is rejected and leaves the estimate unchanged."""
    from robodyn_ros.estimation.recursive import RecursiveLeastSquares
    rng = np.random.default_rng(4)
    beta_true = rng.normal(size=6)
    still = rng.normal(size=(2, 6))

    def run(trace_max):
        rls = RecursiveLeastSquares(np.zeros(6), 10.0, noise_std=0.01, forgetting=0.99, trace_max=trace_max,
                                    detector=None)
        for _ in range(300):                                   # moving: converge
            Y = rng.normal(size=(2, 6))
            rls.update(Y, Y @ beta_true + 0.01 * rng.normal(size=2))
        for _ in range(3000):                                  # standing still
            rls.update(still, still @ beta_true + 0.01 * rng.normal(size=2))
        trace = np.trace(rls.P)
        before = rls.beta.copy()
        Y = rng.normal(size=(2, 6))                            # the first sample of motion again
        rls.update(Y, Y @ beta_true + 0.01 * rng.normal(size=2))
        return rls, trace, np.abs(rls.beta - before).max(), Y

    rls, trace, jump, Y = run(trace_max=None)
    _, trace_unbounded, jump_unbounded, _ = run(trace_max=np.inf)
    print(f"\nRLS at standstill: trace(P) {trace:.3g} with the bound (trace(P0) = 60), {trace_unbounded:.3g} "
          f"without; first step after standstill moves beta by {jump:.2g} (unbounded: {jump_unbounded:.2g})")
    assert trace <= 60.0 + 1e-9 and trace_unbounded > 1e6
    assert jump < 0.01
    for _ in range(300):                                       # moving again: P shrinks
        Y = rng.normal(size=(2, 6))
        rls.update(Y, Y @ beta_true + 0.01 * rng.normal(size=2))
    before = rls.beta.copy()
    step = rls.update(Y, Y @ beta_true + 0.5)                  # 50 sigma
    assert not step.accepted and step.nis > 1000
    np.testing.assert_array_equal(rls.beta, before)
    assert rls.rejected == 1


def test_batched_joint_columns_equal_friction_regressor(robot, rng):
    from robodyn_ros.dynamics.friction_regressor import joint_parameter_regressor
    from robodyn_ros.identification.base_parameters import batch_joint_parameter_regressor
    m = robot.nominal
    V, A = rng.normal(size=(5, m.nv)), rng.normal(size=(5, m.nv))
    ours = batch_joint_parameter_regressor(m, V, A)
    for k in range(5):
        np.testing.assert_array_equal(ours[k], joint_parameter_regressor(m, V[k], A[k]))


# ------------------------------------------------------------------------------------------- validation
def test_validate_on_a_second_noisy_bag(robot, trajectories, tmp_path, capsys):
    """`identify --validate BAG2` on simulated noisy bags: the reported held-out errors equal an in-memory
    evaluation of the same models (filtered and raw, per joint), the identified model predicts the second
    trajectory within 3 % and the nominal URDF does at least 5 times worse."""
    import yaml
    from robodyn_ros.bags import read_joint_states, write_joint_states_bag
    from robodyn_ros.cli.identify import main
    from robodyn_ros.identification.batch import filtered_samples, model_with_full_parameters
    rng = np.random.default_rng(41)
    for name, (t, Q, V, A) in zip(("train", "test"), trajectories):
        q_meas, tau_meas, _ = measure(robot, t, Q, V, A, rng)
        write_joint_states_bag(tmp_path / name, t, NAMES, q_meas, None, tau_meas)
    urdf = tmp_path / "panda.urdf"
    urdf.write_text(robot.xml)
    code = main([str(tmp_path / "train"), "--urdf", str(urdf), "--output", str(tmp_path / "p.yaml"),
                 "--validate", str(tmp_path / "test"), "--plot", str(tmp_path / "p.png")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "held-out validation" in captured.out and "validating" in captured.err
    doc = yaml.safe_load(open(tmp_path / "p.yaml"))
    val = doc["validation"]
    series = read_joint_states(tmp_path / "test", joint_names=NAMES)
    T, Qf, Vf, Af, TAUf = filtered_samples(series.t, series.q, None, series.tau, 5.0, decimate=1)
    raw = series.tau[np.searchsorted(series.t, T)]
    # the identified model from the YAML (links about the COM, joints) rebuilt independently of the command
    from robodyn_ros.model.spatial import numpy_inertia_params
    pi = []
    for link in robot.nominal.body_names:
        e = doc["links"][link]
        ixx, ixy, ixz, iyy, iyz, izz = e["inertia"]
        pi.append(numpy_inertia_params(e["mass"], e["com"], np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])))
    joints = np.array([[doc["joints"][n][k] for k in ("armature", "viscous", "coulomb", "offset")] for n in NAMES])
    identified = model_with_full_parameters(robot.nominal, np.concatenate(pi + [joints.reshape(-1)]))
    for label, model in (("identified", identified), ("nominal", robot.nominal)):
        tau_hat = predict_torques(model, Qf, Vf, Af, WIDTH)
        assert abs(val["filtered"][label]["overall"] - rel(TAUf - tau_hat, TAUf)) < 1e-6
        assert abs(val["raw"][label]["overall"] - rel(raw - tau_hat, raw)) < 1e-6
        for j, name in enumerate(NAMES):
            assert abs(val["filtered"][label]["per_joint"][name] - rel(TAUf[:, j] - tau_hat[:, j], TAUf[:, j])) < 1e-6
    _, Q, V, A = trajectories[1]
    tau_true = robot.torques(Q, V, A)
    e_true = rel(tau_true - predict_torques(identified, Q, V, A, WIDTH), tau_true)
    print(f"\nnoisy bags, held out: identified {100 * val['filtered']['identified']['overall']:.2f} % (filtered), "
          f"{100 * val['raw']['identified']['overall']:.2f} % (raw), nominal {100 * val['filtered']['nominal']['overall']:.2f} %; "
          f"against the noise-free torques {100 * e_true:.2f} %")
    assert val["filtered"]["identified"]["overall"] <= 0.03 and e_true <= 0.03
    assert val["filtered"]["nominal"]["overall"] >= 5 * val["filtered"]["identified"]["overall"]
    assert val["raw"]["identified"]["overall"] > val["filtered"]["identified"]["overall"]  # the noise is in raw only
    assert (tmp_path / "p.png").stat().st_size > 10000


# ------------------------------------------------------------------------------------------- bounded memory
@pytest.mark.parametrize("chunk", [3000, 20000, 10 ** 6])
def test_chunked_identification_equals_in_memory(robot, trajectories, chunk):
    """The streamed pipeline (windowed filter, regressor accumulated block by block) gives the in-memory
    result to rounding, whatever the window (chunk) and block sizes."""
    from robodyn_ros.identification.batch import identify_samples
    from robodyn_ros.identification.chunked_filter import ArraySamples
    rng = np.random.default_rng(8)
    t, Q, V, A = trajectories[0]
    t = t + rng.uniform(-2e-4, 2e-4, len(t))      # jittered stamps
    q_meas, tau_meas, _ = measure(robot, t, Q, V, A, rng)
    ref = identify(robot.nominal, t, q_meas, V, tau_meas, cutoff_hz=5.0, coulomb_width=WIDTH, consistent=False)
    got = identify_samples(robot.nominal, ArraySamples(t, q_meas, V, tau_meas, block=chunk // 3 + 7), cutoff_hz=5.0,
                           coulomb_width=WIDTH, base=ref.base, consistent=False, chunk=chunk)
    assert got.samples_used == ref.samples_used
    scale = np.abs(ref.fit.beta) + ref.fit.std
    assert np.max(np.abs(got.fit.beta - ref.fit.beta) / scale) < 1e-8
    assert abs(got.fit.relative_error - ref.fit.relative_error) < 1e-10


def test_streamed_bag_equals_the_in_memory_identification(robot, trajectories, tmp_path):
    """A bag read block by block (BagJointStates, 500 messages a block, 700-sample filter windows) gives the
    in-memory identification of the same bag (read_joint_states, whole-signal filter) to rounding."""
    from robodyn_ros.bags import BagJointStates, read_joint_states, scan_joint_states, write_joint_states_bag
    from robodyn_ros.identification.batch import identify_samples
    t, Q, V, A = (x[::5] for x in trajectories[0])
    q_meas, tau, _ = measure(robot, t, Q, V, A, np.random.default_rng(17))
    write_joint_states_bag(tmp_path / "bag", t, NAMES, q_meas, V, tau, storage="mcap")
    scan = scan_joint_states(tmp_path / "bag", "/joint_states", NAMES)
    assert scan.clean and scan.messages == len(t) and scan.velocity_complete
    source = BagJointStates(tmp_path / "bag", "/joint_states", NAMES, scan, block=500)
    series = read_joint_states(tmp_path / "bag", joint_names=NAMES)
    ref = identify(robot.nominal, series.t, series.q, series.v, series.tau, cutoff_hz=5.0, coulomb_width=WIDTH,
                   consistent=False)
    got = identify_samples(robot.nominal, source, cutoff_hz=5.0, coulomb_width=WIDTH, base=ref.base,
                           consistent=False, chunk=700)
    assert got.samples_used == ref.samples_used
    assert np.max(np.abs(got.fit.beta - ref.fit.beta) / (np.abs(ref.fit.beta) + ref.fit.std)) < 1e-8
