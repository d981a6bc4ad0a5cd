"""The simulator library: dynamics against Pinocchio (payload as a URDF link), sensor statics, energy,
friction, limit stops and refusal of bad commands."""
import numpy as np
import pinocchio as pin
import pytest

import robodyn_ros as rd
from conftest import assert_close, erd_path
from robodyn_ros.simulation.simulator import INTEGRATORS, Payload, SensorNoise, Simulator, SimulatorConfig
from robodyn_ros.model import spatial

PANDA = erd_path("panda_description/urdf/panda.urdf")
LOCK = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}


@pytest.fixture
def panda():
    return rd.Model.from_urdf(PANDA, locked_joints=LOCK)


def urdf_with_payload(mass, com):
    xml = open(PANDA).read()
    extra = (f'<link name="load"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/><mass value="{mass}"/>'
             '<inertia ixx="0.001" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.003"/></inertial></link>'
             '<joint name="load_joint" type="fixed"><parent link="panda_link8"/><child link="load"/></joint>')
    return xml.replace("</robot>", extra + "</robot>")


def test_payload_dynamics_match_pinocchio(panda, rng):
    mass, com = 2.0, np.array([0.01, -0.02, 0.05])
    pm = pin.buildModelFromXML(urdf_with_payload(mass, com))
    pm = pin.buildReducedModel(pm, [pm.getJointId(n) for n in LOCK], pin.neutral(pm))
    sim = Simulator(panda, SimulatorConfig(limit_stiffness=0.0))
    sim.attach_payload(Payload("panda_link8", spatial.numpy_inertia_params(mass, com, np.diag([0.001, 0.002, 0.003]))))
    q, v, tau = panda.random_configuration(rng), rng.normal(size=7), rng.normal(size=7) * 5
    expected = pin.aba(pm, pm.createData(), q, v, tau)
    assert_close(sim.forward_dynamics(q, v, tau, sim.inertial_parameters), expected, rtol=1e-9)


def test_static_wrench_reads_weight(panda):
    """Holding still with the payload: the sensor transmits +m g against gravity, and the moment of the
    weight about the sensor origin."""
    sim = Simulator(panda, SimulatorConfig(), q0=[0, -0.785, 0, -2.356, 0, 1.571, 0.785], sensor_link="panda_link8")
    load = Payload.box("panda_link8", 2.0, com=(0.0, 0.0, 0.08))
    sim.attach_payload(load)
    hold = rd.gravity_torque(panda.with_inertial_parameters(sim.inertial_parameters), sim.q)
    sim.step(hold)
    w = sim.measure_wrench()
    R, p = rd.frame_placement(panda, sim.q, "panda_link8")
    f_world = R @ w[:3]
    assert_close(f_world, [0, 0, 2.0 * 9.81], rtol=1e-6, atol=1e-5)
    n_world = R @ w[3:]
    assert_close(n_world, np.cross(R @ np.array([0, 0, 0.08]), [0, 0, 2.0 * 9.81]), atol=1e-5)


def test_energy_conserved_without_friction_or_control(panda, rng):
    panda = panda.with_friction(viscous=0.0, coulomb=0.0)
    sim = Simulator(panda, SimulatorConfig(limit_stiffness=0.0, limit_damping=0.0), q0=[0, -0.3, 0, -2.0, 0, 1.5, 0.5],
                    v0=rng.normal(size=7) * 0.3)

    def energy():
        pot = sum(-panda.gravity @ (pi[0] * p + R @ pi[1:4]) for (R, p), pi in zip(rd.forward_kinematics(panda, sim.q), panda.inertias))
        return 0.5 * sim.v @ rd.crba(panda, sim.q) @ sim.v + pot
    e0 = energy()
    for _ in range(300):
        sim.step(np.zeros(7))
    assert abs(energy() - e0) < 1e-8 * max(1.0, abs(e0))


def test_friction_dissipates(panda):
    model = panda.with_friction(viscous=2.0, coulomb=1.0)
    sim = Simulator(model, SimulatorConfig(limit_stiffness=0.0), q0=[0, -0.3, 0, -2.0, 0, 1.5, 0.5], v0=np.ones(7))
    g = lambda: rd.gravity_torque(model, sim.q)
    ke0 = 0.5 * sim.v @ rd.crba(model, sim.q) @ sim.v
    for _ in range(200):
        sim.step(g())        # gravity compensated: only friction acts
    assert 0.5 * sim.v @ rd.crba(model, sim.q) @ sim.v < 0.5 * ke0


def test_limit_stop_pushes_back(panda):
    q0 = np.array([0, -0.3, 0, -2.0, 0, 1.5, 0.5])
    q0[0] = panda.upper[0] - 1e-3
    v0 = np.zeros(7)
    v0[0] = 1.0
    sim = Simulator(panda, q0=q0, v0=v0)
    for _ in range(200):
        sim.step(rd.gravity_torque(panda, sim.q))
    assert sim.q[0] < panda.upper[0] + 0.01 and sim.v[0] <= 0.0


def test_noise_and_quantisation(panda):
    cfg = SimulatorConfig(noise=SensorNoise(position=1e-3, effort=0.5, encoder_resolution=1e-4), seed=3)
    sim = Simulator(panda, cfg)
    m = sim.measure_joints()
    assert np.allclose(np.round(m.q / 1e-4) * 1e-4, m.q) and not np.allclose(m.q, sim.q)
    taus = np.array([sim.measure_joints().tau for _ in range(2000)])
    assert 0.45 < taus.std() < 0.55


def test_bad_commands_and_config_are_refused(panda):
    sim = Simulator(panda)
    q = sim.q.copy()
    for bad in (np.full(7, np.nan), np.zeros(6)):
        with pytest.raises(rd.ModelError):
            sim.step(bad)
    assert np.array_equal(sim.q, q)
    with pytest.raises(rd.ModelError, match="dt"):
        Simulator(panda, SimulatorConfig(dt=-1.0))
    with pytest.raises(rd.ModelError, match="nolink"):
        sim.attach_payload(Payload("nolink", np.zeros(10)))


def test_effort_limits_clamp_commands(panda):
    sim = Simulator(panda)
    sim.step(np.full(7, 1e6))
    assert_close(sim.tau_command, panda.effort_limit, rtol=0, atol=0)


# ------------------------------------------------------------------------------- compiled whole step
@pytest.fixture(scope="module")
def compiled_steps():
    """The Panda with Coulomb friction (so the tanh term is traced) and its compiled steps, one per integrator."""
    from robodyn_ros.simulation.simulation_step import CompiledStep

    model = rd.Model.from_urdf(PANDA, locked_joints=LOCK).with_friction(viscous=0.3, coulomb=0.8)
    return model, {name: CompiledStep(model, name) for name in INTEGRATORS}


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_compiled_step_matches_python_step(compiled_steps, integrator, rng):
    """One C call per step agrees with the Python Simulator.step to rounding, in the free interior, beyond
    both joint limits (the stops active), with a payload attached to the wrist or to another link (other
    parameters, same function: nothing is rebuilt for a new load),
    with effort clamping, and with sign(v) instead of tanh (coulomb_smoothing 0)."""
    model, steps = compiled_steps
    load = Payload.box("panda_link8", 2.5, com=(0.01, 0.0, 0.06))
    for smoothing in (1e-3, 0.0):
        cfg = SimulatorConfig(integrator=integrator, limit_stiffness=800.0, limit_damping=8.0,
                              coulomb_smoothing=smoothing)
        for k in range(6):
            q0 = model.random_configuration(rng)
            if k in (1, 2):                       # beyond the upper / lower limits of three joints
                q0[[0, 3, 6]] = (model.upper if k == 1 else model.lower)[[0, 3, 6]] + (0.02 if k == 1 else -0.02)
            v0, tau = rng.normal(size=7), rng.normal(size=7) * (400.0 if k == 3 else 20.0)
            python = Simulator(model, cfg, q0=q0, v0=v0)
            compiled = Simulator(model, cfg, q0=q0, v0=v0, step_function=steps[integrator])
            if k >= 4:                            # a load on the wrist, then another on the elbow
                other = load if k == 4 else Payload.box("panda_link4", 1.2, com=(0.0, 0.05, 0.0))
                python.attach_payload(other), compiled.attach_payload(other)
            for _ in range(3):
                python.step(tau), compiled.step(tau)
            assert_close(compiled.q, python.q, rtol=0, atol=1e-12)
            assert_close(compiled.v, python.v, rtol=0, atol=1e-12)
            assert_close(compiled.a, python.a, rtol=1e-12, atol=1e-10)
            assert_close(compiled.tau_command, python.tau_command, rtol=0, atol=0)
            assert compiled.t == python.t


def test_compiled_step_refuses_like_python(compiled_steps):
    model, steps = compiled_steps
    sim = Simulator(model, step_function=steps["rk4_implicit"])
    q = sim.q.copy()
    for bad in (np.full(7, np.nan), np.zeros(6)):
        with pytest.raises(rd.ModelError):
            sim.step(bad)
    assert np.array_equal(sim.q, q)
    fast = Simulator(model, SimulatorConfig(dt=0.1), v0=np.full(7, 1e90), step_function=steps["rk4_implicit"])
    with pytest.raises(rd.ModelError, match="diverged"):
        fast.step(np.zeros(7))            # v^2 terms overflow in the later RK4 stages
    assert np.array_equal(fast.v, np.full(7, 1e90)) and fast.t == 0.0
    with pytest.raises(rd.ModelError, match="integrates"):
        Simulator(model, SimulatorConfig(integrator="rk4"), step_function=steps["semi_implicit_euler"])


# ----------------------------------------------------------------- implicit joint friction (rk4_implicit)
def test_implicit_step_is_classic_rk4_without_friction(panda, rng):
    """No friction and no joint beyond a limit: rk4_implicit is the classic RK4, bit for bit (Python step)."""
    model = panda.with_friction(viscous=0.0, coulomb=0.0)
    q0, v0 = np.array([0, -0.3, 0, -2.0, 0, 1.5, 0.5]), rng.normal(size=7) * 0.3
    sims = [Simulator(model, SimulatorConfig(integrator=name), q0=q0, v0=v0) for name in ("rk4_implicit", "rk4")]
    for _ in range(20):
        for sim in sims:
            sim.step(np.full(7, 0.5))
    assert np.array_equal(sims[0].q, sims[1].q) and np.array_equal(sims[0].v, sims[1].v)


@pytest.mark.parametrize("viscous", [50.0, 5.0])
def test_stiff_damping_relaxes_as_the_matrix_exponential(panda, rng, viscous):
    """Viscous damping on every joint (at 50 N m s/rad the wrist's time constant is tens of µs, far below
    the 1 ms step), no gravity, a slow random state: the exact step is ``v+ = expm(-h M^-1 D) v`` (the
    rigid-body terms negligible at this speed). One step of ``rk4_implicit`` (each joint's exact
    first-order relaxation) lands within a fifth of implicit Euler's distance ``(M + h D)^-1 M v`` from it
    (measured: a seventh at 50, a sixty-sixth at 5) and loses kinetic energy; explicit RK4 multiplies the
    wrist's velocity by far more than 1 at 50."""
    from scipy.linalg import expm
    model = panda.with_friction(viscous=viscous, coulomb=0.0).with_gravity((0.0, 0.0, 0.0))
    q0, v0 = np.array([0.2, -0.3, 0.1, -2.0, 0.3, 1.5, 0.5]), rng.normal(size=7) * 1e-3
    h = 1e-3
    M = rd.crba(model, q0)
    exact = expm(-h * viscous * np.linalg.inv(M)) @ v0
    implicit_euler = np.linalg.solve(M + h * viscous * np.eye(7), M @ v0)
    sim = Simulator(model, SimulatorConfig(limit_stiffness=0.0), q0=q0, v0=v0)
    sim.step(np.zeros(7))
    assert np.abs(sim.v - exact).max() < 0.2 * np.abs(implicit_euler - exact).max()
    assert sim.v @ M @ sim.v < v0 @ M @ v0
    if viscous >= 50.0:
        explicit = Simulator(model, SimulatorConfig(integrator="rk4", limit_stiffness=0.0), q0=q0, v0=v0)
        explicit.step(np.zeros(7))
        assert np.abs(explicit.v).max() > 10 * np.abs(v0).max()


def test_one_damped_joint_relaxes_exactly():
    """One revolute joint of inertia ``m`` and damping ``w`` under a constant torque: ``v(t) = v_inf + (v -
    v_inf) e^(-w t / m)`` and ``q(t) = q + v_inf t + (v - v_inf) m / w (1 - e^(-w t / m))``, the closed form
    that ``rk4_implicit`` reproduces in one step for every ratio ``x = h w / m`` (1e-3 to 1e3), compiled
    and in Python."""
    from robodyn_ros.model.model import Model
    from robodyn_ros.simulation.simulation_step import CompiledStep
    urdf = """<robot name="wheel"><link name="base"/><link name="wheel"><inertial><origin xyz="0 0 0"/>
      <mass value="1.0"/><inertia ixx="0.01" iyy="0.01" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="spin" type="continuous"><parent link="base"/><child link="wheel"/><axis xyz="0 0 1"/>
      <dynamics damping="1.0"/></joint></robot>"""
    m, h, v0, torque = 0.02, 1e-3, 0.7, 0.3
    for x in (1e-3, 0.3, 2.0, 14.0, 1e3):
        w = x * m / h
        model = Model.from_urdf(urdf).with_friction(viscous=w, coulomb=0.0)
        v_inf = torque / w
        decay = np.exp(-x)
        v_exact = v_inf + (v0 - v_inf) * decay
        q_exact = v_inf * h + (v0 - v_inf) * h / x * (1.0 - decay)
        for step_function in (None, CompiledStep(model, compiled=False)):
            sim = Simulator(model, SimulatorConfig(limit_stiffness=0.0), v0=[v0], step_function=step_function)
            sim.step([torque])
            assert_close(sim.v, [v_exact], atol=1e-12 * v0)
            assert_close(sim.q, [q_exact], atol=1e-12 * v0 * h)


def test_coulomb_friction_holds_and_releases_a_light_wrist(panda):
    """A 3 N m Coulomb friction (tanh over 1e-3 rad/s) on the Panda's wrist joint 7, gravity held: a torque of
    half the friction leaves the joint at rest (within the smoothing width); 1.5 times the friction
    accelerates it by what the other half accelerates the frictionless joint, to 5 % after 0.1 s (the
    friction is first order in the step: leaving rest takes a few steps of 1 ms; measured 2 %).""" 
    coulomb = np.zeros(7)
    coulomb[6] = 3.0
    model = panda.with_friction(viscous=0.0, coulomb=coulomb)
    free = panda.with_friction(viscous=0.0, coulomb=0.0)
    q0 = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.5, 0.5])
    push = np.zeros(7)
    for factor, check in ((0.5, "rest"), (1.5, "slip")):
        push[6] = factor * 3.0
        sim = Simulator(model, q0=q0)
        reference = Simulator(free, q0=q0)
        for _ in range(100):
            sim.step(rd.gravity_torque(model, sim.q) + push)
            if check == "slip":
                reference.step(rd.gravity_torque(free, reference.q) + push - np.eye(7)[6] * 3.0)
        if check == "rest":
            assert abs(sim.v[6]) < 1e-3 and abs(sim.q[6] - q0[6]) < 1e-4
        else:
            assert abs(sim.v[6] - reference.v[6]) < 0.05 * abs(reference.v[6]) and abs(reference.v[6]) > 1.0


def test_vendor_urdf_damping_needs_no_substeps():
    """The xArm7 of example-robot-data (viscous 2-10 N m s/rad and 1 N m Coulomb friction on joints down to
    1.4e-4 kg m²) falling from mid-range states for 1 s at 1 kHz: explicit RK4 diverges; rk4_implicit with
    one step per ms stays within 5e-3 rad of itself with 50 (the friction is first order in the step)."""
    from robodyn_ros.simulation.simulation_step import CompiledStep

    model = rd.Model.from_urdf(erd_path("xarm_description/urdf/xarm7.urdf"))
    rng = np.random.default_rng(0)
    middle = np.where(np.isfinite(model.lower + model.upper), 0.5 * (model.lower + model.upper), 0.0)
    q0, v0 = middle + rng.uniform(-0.3, 0.3, 7), rng.normal(size=7) * 0.5
    step = CompiledStep(model, "rk4_implicit")

    def fall(integrator, substeps, step_function):
        sim = Simulator(model, SimulatorConfig(integrator=integrator, substeps=substeps), q0=q0, v0=v0,
                        step_function=step_function)
        path = []
        for _ in range(1000):
            sim.step(np.zeros(7))
            path.append(sim.q.copy())
        return np.array(path)

    one, fine = fall("rk4_implicit", 1, step), fall("rk4_implicit", 50, step)
    assert np.all((fine > model.lower) & (fine < model.upper)) and np.abs(fine - q0).max() > 0.5
    assert np.abs(one - fine).max() < 5e-3
    with pytest.raises(rd.ModelError, match="diverged"):
        fall("rk4", 1, CompiledStep(model, "rk4"))
