"""MuJoCo as the plant's engine: the model written as MJCF has our dynamics (MuJoCo's forward dynamics
against our ABA on real URDFs), the passive motion of the bundled robots agrees between the engines,
payloads reach MuJoCo's bodies, the node runs on it, and a missing mujoco package is one line."""
import sys

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close, erd_path
from robodyn_ros.robots import bundled_robot_info
from robodyn_ros.simulation.simulator import Payload, Simulator, SimulatorConfig

mujoco = pytest.importorskip("mujoco", reason="the mujoco package is not installed (pip install '.[mujoco]')")

from robodyn_ros.simulation.mujoco_engine import MujocoEngine  # noqa: E402
from robodyn_ros.simulation.simulation_step import CompiledStep  # noqa: E402

ERD = {"xarm7": "xarm_description/urdf/xarm7.urdf", "z1": "z1_description/urdf/z1.urdf",
       "kinova": "kinova_description/robots/kinova.urdf", "so101": "so_arm_description/urdf/so101.urdf"}


def bundled(name):
    info = bundled_robot_info(name)
    return rd.Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])


def load(name):
    return bundled(name) if name in ("panda", "ur5", "iiwa") else rd.Model.from_urdf(erd_path(ERD[name]))


@pytest.mark.parametrize("name", ["panda", "ur5", "iiwa", "xarm7", "z1", "kinova", "so101"])
def test_mujoco_forward_dynamics_match_ours(name, rng):
    """MuJoCo's acceleration (mj_forward on the MJCF we write: bodies, merged inertials, axes, armature)
    equals our ABA at random states and torques: an engine we did not write agrees with our dynamics."""
    model = load(name).with_armature(0.01)
    frictionless = model.with_friction(viscous=np.zeros(model.nv), coulomb=np.zeros(model.nv))
    engine = MujocoEngine(frictionless)
    for _ in range(5):
        q, v, tau = frictionless.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        engine.mj_data.qpos[:], engine.mj_data.qvel[:], engine.mj_data.qfrc_applied[:] = q, v, tau
        mujoco.mj_forward(engine.mj_model, engine.mj_data)
        assert_close(engine.mj_data.qacc, rd.aba(frictionless, q, v, tau), rtol=1e-8, what=name)


def passive_path(model, q0, v0, engine, mujoco_integrator="implicitfast", seconds=1.0, steps_per_period=4):
    step = (CompiledStep(model, "rk4_implicit") if engine == "robodyn"
            else MujocoEngine(model, mujoco_integrator, steps_per_period=steps_per_period))
    sim = Simulator(model, SimulatorConfig(engine=engine, integrator="rk4_implicit"), q0=q0, v0=v0,
                    step_function=step)
    path = []
    for _ in range(int(round(seconds / sim.config.dt))):
        sim.step(np.zeros(model.nv))
        path.append(sim.q.copy())
    return np.array(path)


@pytest.mark.parametrize("name", ["panda", "ur5", "iiwa"])
def test_passive_motion_agrees_between_engines(name):
    """Zero torque, the URDF's damping and Coulomb friction on (the iiwa's 0.1-0.3 N m; the Panda's damping;
    the UR5 has none), 1 s at 1 kHz from random states (positions in the middle 40 % of each range,
    velocities N(0, 0.3²) rad/s): our rk4_implicit (one step per ms) and MuJoCo's implicitfast (its default
    four steps per ms) agree to 1e-3 rad (measured 3e-5 to 3.5e-4, the iiwa's the largest: MuJoCo's
    friction loss is static friction, ours a tanh over 1e-3 rad/s; 1.2-3.3e-4 with one MuJoCo step per
    ms). Without gravity: under gravity the Panda and the iiwa fall into their joint limits within the
    second, whose models differ by design (our spring-damper stops, MuJoCo's limit constraint); states
    that reach a limit are drawn again."""
    model = bundled(name).with_gravity((0.0, 0.0, 0.0))
    rng = np.random.default_rng(7)
    lo, hi = model.lower, model.upper
    compared = 0
    for _ in range(10):
        q0, v0 = rng.uniform(lo + 0.3 * (hi - lo), hi - 0.3 * (hi - lo)), rng.normal(size=model.nv) * 0.3
        ours = passive_path(model, q0, v0, "robodyn")
        if not np.all((ours > lo) & (ours < hi)):
            continue
        theirs = passive_path(model, q0, v0, "mujoco")
        assert np.abs(ours - q0).max() > 0.1                   # it moved
        assert np.abs(theirs - ours).max() < 1e-3, f"{name}: {np.abs(theirs - ours).max():.2e} rad"
        compared += 1
        if compared == 2:
            break
    assert compared == 2


def test_falling_ur5_agrees_with_mujoco_rk4():
    """The UR5 (no friction) falling under gravity for 1 s at 1 kHz, 1.5 rad and more of motion: our
    rk4_implicit (the classic RK4 without friction) and MuJoCo's RK4, one step per ms each, agree to 1e-9
    rad."""
    model = bundled("ur5")
    q0, v0 = np.array([0.3, -1.2, 1.0, -0.5, 0.8, 0.2]), np.array([0.1, -0.2, 0.1, 0.3, -0.1, 0.2])
    ours = passive_path(model, q0, v0, "robodyn")
    theirs = passive_path(model, q0, v0, "mujoco", "RK4", steps_per_period=1)
    assert np.abs(ours - q0).max() > 1.0
    assert np.abs(theirs - ours).max() < 1e-9


def test_payload_reaches_mujocos_bodies(rng):
    """A payload attached in the simulator changes MuJoCo's body inertia: the acceleration the engine
    reports after a step is our ABA with the robot's plus the payload's parameters at the new state, and
    detaching restores the robot's."""
    model = bundled("panda").with_friction(viscous=0.0, coulomb=0.0)
    sim = Simulator(model, SimulatorConfig(engine="mujoco"), q0=[0.1, -0.4, 0.2, -2.0, 0.1, 1.6, 0.4])
    tau = rd.gravity_torque(model, sim.q) + rng.normal(size=7)
    for payload in (Payload.box("panda_link8", 2.0, com=(0.02, 0.0, 0.06)), Payload.box("panda_link4", 1.0), None):
        if payload is None:
            sim.detach_payload()
        else:
            sim.attach_payload(payload)
        sim.step(tau)
        expected = rd.aba(model, sim.q, sim.v, sim.tau_command, pi=sim.inertial_parameters)
        assert_close(sim.a, expected, rtol=1e-8)
    assert np.array_equal(sim.inertial_parameters, model.inertial_parameters())


def test_mujoco_step_is_a_function_of_its_inputs(rng):
    """The same (q, v, tau, pi) gives the same step, bit for bit, whatever the engine stepped before (no
    solver warm start): what the simulator node's replay checks rely on."""
    model = bundled("iiwa")
    engine = MujocoEngine(model)
    config = SimulatorConfig(engine="mujoco")
    q, v, tau, pi = model.random_configuration(rng), rng.normal(size=7), rng.normal(size=7), model.inertial_parameters()
    first = engine.step(q, v, tau, pi, config)
    for _ in range(5):
        engine.step(model.random_configuration(rng), rng.normal(size=7), rng.normal(size=7) * 10, pi, config)
    again = engine.step(q, v, tau, pi, config)
    for a, b in zip(first[:4], again[:4]):
        assert np.array_equal(a, b)


def test_diverging_mujoco_state_is_refused(tmp_path, monkeypatch):
    """A state MuJoCo cannot integrate is refused as our engine's is: ModelError, state unchanged."""
    monkeypatch.chdir(tmp_path)          # MuJoCo writes its warning to MUJOCO_LOG.TXT in the working directory
    model = bundled("panda")
    sim = Simulator(model, SimulatorConfig(engine="mujoco", dt=0.1), v0=np.full(7, 1e90))
    with pytest.raises(rd.ModelError, match="diverged"):
        sim.step(np.zeros(7))
    assert np.array_equal(sim.v, np.full(7, 1e90)) and sim.t == 0.0


def test_missing_mujoco_is_one_line(monkeypatch, capsys):
    """Without the mujoco package, the engine is refused with one line saying how to install it, from the
    library and from ``robodyn demo --engine mujoco``."""
    from robodyn_ros.cli.main import main

    monkeypatch.setitem(sys.modules, "mujoco", None)          # import mujoco raises ImportError
    with pytest.raises(rd.ModelError, match=r'pip install "robodyn_ros\[mujoco\]"'):
        Simulator(bundled("ur5"), engine="mujoco")
    assert main(["demo", "--engine", "mujoco", "--library", "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "engine mujoco needs the mujoco package" in err[0]


def test_smoothed_friction_plant_keeps_its_law_on_mujoco():
    """The Panda twin's friction is defined as ``coulomb tanh(v / 0.05)`` (identified so): on MuJoCo it keeps
    that law (applied through MuJoCo's implicit damping, not ``frictionloss``), and the passive motion
    (zero torque, no gravity, 1 s at 1 kHz, random states) agrees with our engine to 1e-3 rad (measured
    5.0-5.8e-5)."""
    from robodyn_ros.simulation.plant import Plant, load_plant
    from robodyn_ros.simulation.simulation_step import engine_step

    nominal = bundled("panda")
    twin = load_plant("panda_twin", nominal)
    plant = Plant(twin.model.with_gravity((0.0, 0.0, 0.0)), twin.coulomb_width, None, "twin without gravity")
    assert twin.coulomb_width == 0.05 and np.all(plant.model.coulomb > 0.1)
    rng = np.random.default_rng(3)
    lo, hi = nominal.lower, nominal.upper
    for _ in range(2):
        q0, v0 = rng.uniform(lo + 0.3 * (hi - lo), hi - 0.3 * (hi - lo)), rng.normal(size=7) * 0.3
        paths = []
        for engine in ("robodyn", "mujoco"):
            config = SimulatorConfig(engine=engine, coulomb_smoothing=plant.coulomb_width)
            sim = Simulator(nominal, config, q0=q0, v0=v0, plant=plant, step_function=engine_step(plant, config))
            path = []
            for _ in range(1000):
                sim.step(np.zeros(7))
                path.append(sim.q.copy())
            paths.append(np.array(path))
        assert np.abs(paths[0] - q0).max() > 0.2
        assert np.abs(paths[1] - paths[0]).max() < 1e-3
    assert "frictionloss" not in engine_step(plant, SimulatorConfig(engine="mujoco")).model_xml
