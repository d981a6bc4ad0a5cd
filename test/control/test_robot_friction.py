"""A robot that compensates its own friction (UR e-series, ``robot_compensates_friction``, the ``ur`` profile):
its compensation is identified from the controller's commands and the measured efforts, and a base-parameter
law that has learned the joints' friction sends only the residual, the learned friction less the robot's.

The efforts include the robot's compensation (they are what its motors produce), so the estimator learns the
whole friction: sent as it is, friction is compensated twice; left out (what the ``ur`` profile did before),
the residual the robot leaves is not compensated at all. On a perturbed UR5 (``perturbed:3``, library loop,
:func:`test_the_adapted_loop_on_a_ur_sends_the_residual`) the oracle, the plant's exact model, tracks 145 times
worse without the residual than with it (2.4e-3 against 1.6e-5 rad RMS over 5-7.5 s), the adapted loop 11
times (2.8e-3 against 2.5e-4 rad)."""
import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.control.base_parameter_control import BaseParameterComputedTorque, BaseParameterSlotineLi
from robodyn_ros.control.base_parameter_update import EFFORT_PARAMETERS
from robodyn_ros.control.control_loop import ControlLoop
from robodyn_ros.control.robot_friction import MIN_SAMPLES, RobotFrictionFit, robot_added_torque
from robodyn_ros.estimation.effort_measurement import EffortMeasurement
from robodyn_ros.identification.base_parameters import compute_base_parameters, full_parameters
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.perturbed_plant import perturbed_plant

WIDTH = 0.02
VISCOUS, COULOMB, OFFSET = np.array([1.2, 0.3, 0.05]), np.array([3.0, 0.6, 0.2]), np.array([0.2, -0.1, 0.0])


def robot_compensation(v, width=0.01):
    """A robot's friction compensation (3 joints); its Coulomb sign sharper than the fit's by default."""
    return VISCOUS * v + COULOMB * np.tanh(v / width) + OFFSET


def swing(t, amplitude=(0.4, 0.2, 0.1), period=(2.0, 1.3, 0.9)):
    """Joint velocities (N, 3) swinging both ways."""
    return np.stack([a * np.sin(2 * np.pi * t / p) for a, p in zip(amplitude, period)], axis=1)


def feed(fit, V, rng, width=0.01, noise=0.05):
    """Commands and the efforts answering them (gravity-compensated: the command plus the robot's friction)."""
    for v in V:
        command = rng.normal(0.0, 5.0, 3)
        fit.commanded(v, command)
        fit.observe(command + robot_compensation(v, width) + rng.normal(0.0, noise, 3))


def test_the_fit_recovers_the_robots_compensation_from_commands_and_efforts():
    """A compensation of the fit's own law is recovered to the noise; a sharper one (the robot's own sign) to
    3 % of its largest value wherever a joint moves (faster than 0.05 rad/s): the viscous coefficient then
    absorbs part of the difference in shape, the torque is what counts."""
    t = np.arange(0.0, 6.0, 0.002)
    for width in (WIDTH, 0.01):
        rng = np.random.default_rng(0)
        fit = RobotFrictionFit(3, WIDTH)
        feed(fit, swing(t[:MIN_SAMPLES // 2]), rng, width)
        assert not fit.trusted and np.all(fit.torque(np.full(3, 0.3)) == 0.0)      # too few samples: none
        feed(fit, swing(t), rng, width)
        assert fit.trusted
        V = swing(np.linspace(0.0, 2.0, 400))
        error = np.array([fit.torque(v) - robot_compensation(v, width) for v in V])
        if width == WIDTH:    # noise 0.05 N m over 3000 samples
            np.testing.assert_allclose(fit.theta[:, 1:], np.stack([COULOMB, OFFSET], axis=1), atol=0.02)
            assert np.abs(error).max() < 0.02
            continue
        largest = np.abs(robot_compensation(np.array([0.4, 0.2, 0.1]))).max()
        assert np.abs(error[np.abs(V) > 0.05]).max() < 0.03 * largest


@pytest.mark.parametrize("motion", ["stands", "one_way"])
def test_a_joint_without_motion_both_ways_keeps_the_fit_untrusted(motion):
    """Its Coulomb term and offset cannot be told apart: the robot's compensation stands, nothing is sent."""
    rng = np.random.default_rng(1)
    t = np.arange(0.0, 8.0, 0.002)
    V = swing(t)
    V[:, 2] = 0.0 if motion == "stands" else np.abs(V[:, 2]) + 0.05
    fit = RobotFrictionFit(3, WIDTH)
    feed(fit, V, rng)
    assert not fit.trusted and np.all(fit.torque(np.full(3, 0.3)) == 0.0)


def test_a_sample_needs_the_command_it_answers():
    fit = RobotFrictionFit(3, WIDTH, min_samples=1)
    fit.observe(np.ones(3))                     # no command sent yet
    fit.commanded(np.zeros(3), np.array([np.nan, 0.0, 0.0]))
    fit.observe(np.ones(3))                     # a non-finite command was not applied as sent
    fit.commanded(np.zeros(3), np.zeros(3))
    fit.forget_command()                        # a time reset
    fit.observe(np.ones(3))
    fit.commanded(np.full(3, np.nan), np.zeros(3))
    fit.observe(np.ones(3))                     # a non-finite velocity
    assert fit.samples == 0


@pytest.fixture(scope="module")
def ur5():
    return load_robot(resolve_node_config("inverse_dynamics", {"robot": "ur5"}))


def test_the_robots_added_torque_from_each_kind_of_effort(ur5):
    model = ur5.model
    rng = np.random.default_rng(2)
    q = rng.uniform(-1.0, 1.0, model.nv)
    g = rd.gravity_torque(model, q)
    tau = rng.normal(0.0, 10.0, model.nv)          # what the joints apply: command + gravity + friction
    gravity = lambda q: rd.gravity_torque(model, q)

    def measurement(**effort):
        defaults = resolve_node_config("estimator", {"robot": "ur5"})
        config = {**{name: defaults[name] for name in EFFORT_PARAMETERS}, **effort}
        return EffortMeasurement(model, config, ur5.wrist_link)

    # gravity-compensated: the effort is already the torque less the robot's gravity (whatever its model)
    added = robot_added_torque(measurement(**{"effort.kind": "gravity_compensated"}), gravity)
    np.testing.assert_array_equal(added(q, tau - g), tau - g)
    np.testing.assert_allclose(robot_added_torque(None, gravity)(q, tau), tau - g, atol=1e-12)
    k = np.linspace(5.0, 10.0, model.nv)
    added = robot_added_torque(measurement(**{"effort.kind": "current", "effort.torque_constants": list(k)}), gravity)
    np.testing.assert_allclose(added(q, tau / k), tau - g, atol=1e-9)
    with pytest.raises(ValueError, match="effort.filter_cutoff 10 Hz.*friction_compensation: false"):
        robot_added_torque(measurement(**{"effort.filter_cutoff": 10.0}), gravity)


@pytest.mark.parametrize("kind", ["computed_torque", "slotine_li"])
def test_the_base_parameter_laws_take_the_robots_compensation_off_their_friction(ur5, kind):
    model = ur5.model
    base = compute_base_parameters(model, coulomb_width=WIDTH)
    plant = perturbed_plant(model, 4).model
    rng = np.random.default_rng(3)
    q, v = ur5.home + rng.uniform(-0.02, 0.02, model.nv), rng.uniform(-0.5, 0.5, model.nv)
    q_d, v_d, a_d = ur5.home, v + 0.01, rng.uniform(-1.0, 1.0, model.nv)
    robot = rng.uniform(0.5, 2.0, model.nv) * np.sign(v)
    sent = {}
    for with_robot in (False, True):
        law = BaseParameterComputedTorque(model, base, kp=400.0, kd=40.0, hold=0.002) if kind == "computed_torque" \
            else BaseParameterSlotineLi(model, base, Lambda=10.0, kd=5.0, compiled=True)
        law.set_parameters(base.from_full(full_parameters(plant)))
        law.robot_friction = (lambda x: robot * (x == v).all()) if with_robot else None
        sent[with_robot] = law.compute(q, v, q_d, v_d, a_d)[0]
    np.testing.assert_allclose(sent[False] - sent[True], robot, atol=1e-9)


def _ur_loop(robot, **options):
    config = resolve_node_config("inverse_dynamics", {"robot": "ur5", "driver": "ur", "use_base_parameters": True,
                                                      "reference": "hold", "kp": 1.0, "kd": 1.0, **options})
    return ControlLoop(robot, config, lambda command: None)


def test_the_ur_profile_sends_the_residual_once_both_are_known(ur5):
    """The inverse_dynamics loop of the ``ur`` profile on a stream of states whose efforts answer its commands
    as a UR's do (command + the robot's friction compensation, gravity-compensated): no friction sent until the
    robot's compensation is identified and a learned set applied (sending the residual as soon as the robot's
    compensation is known would take it away while the URDF's friction, none on the UR5, is what the law has);
    then the learned friction less the robot's. The same loop without ``robot_compensates_friction`` sends the
    learned friction whole: the difference of each command is the robot's compensation."""
    model = ur5.model
    rng = np.random.default_rng(4)
    ur, plain = _ur_loop(ur5), _ur_loop(ur5, robot_compensates_friction=False)
    assert plain.controller.friction_compensation and not ur.controller.friction_compensation
    width = ur.base_update.base.coulomb_width
    scale = rng.uniform(1.0, 3.0, model.nv)
    compensation = lambda v: scale * (0.5 * v + np.tanh(v / width)) + 0.1
    learned = ur.base_update.base.from_full(full_parameters(perturbed_plant(model, 5).model))
    dt, switch, effort, records = 0.002, 1300, None, []
    phase = np.linspace(0.0, 2.0, model.nv)
    try:
        for k in range(1500):
            t = 1.0 + k * dt
            q = ur5.home + 0.2 * np.sin(2.0 * np.pi * t / 1.5 + phase)
            v = 0.2 * 2.0 * np.pi / 1.5 * np.cos(2.0 * np.pi * t / 1.5 + phase) + rng.normal(0.0, 1e-3, model.nv)
            if k == switch:             # a learned set applied (as the gate would), at once
                for loop in (ur, plain):
                    loop.blend.switch(learned, t, 0.0)
            samples = ur.robot_friction.fit.samples
            tau, _ = ur.on_state(t, q, v, effort)
            tau_plain, _ = plain.on_state(t, q, v)
            assert ur.robot_friction.fit.samples == samples + (0 < k != 501)
            effort = tau + compensation(v) + rng.normal(0.0, 0.05, model.nv)
            if k == 500:               # a watchdog command between two states: the next effort answers it
                effort = ur.output.publish(np.zeros(model.nv)) + compensation(v)
            records.append((k, ur.robot_friction.fit.trusted, tau_plain - tau, v))
    finally:
        ur.close()
        plain.close()
    trusted_at = next(k for k, trusted, _, _ in records if trusted)
    assert MIN_SAMPLES <= trusted_at < switch
    for k, trusted, difference, v in records:
        if k < switch:        # the URDF's friction (none) until a learned set is applied: both send none
            assert np.abs(difference).max() < 1e-9, k
        elif k > switch:      # from the state after the switch: the learned friction less the robot's
            np.testing.assert_allclose(difference, compensation(v), atol=0.05 * scale.max(), err_msg=str(k))
    v = np.full(model.nv, 0.3)
    assert np.abs(ur.controller.dynamics.friction(v, v, learned)).max() > 0.5     # there was friction to send


def _window_rms(series, lo, hi):
    t, e = series["t"], series["error"]
    return float(np.sqrt(np.mean(e[(t >= lo) & (t < hi)] ** 2)))


@pytest.mark.parametrize("seed", [3])
def test_the_adapted_loop_on_a_ur_sends_the_residual(ur5, seed):
    """The library loop (:mod:`robodyn_ros.simulation.adaptive_loop`) on a perturbed UR5 through the emulated UR
    driver (gravity and 0.85 times the plant's friction added, gravity-compensated efforts, 500 Hz): with the
    residual the adapted loop tracks better than with the friction left to the robot (the ``ur`` profile before),
    and so does the oracle, the plant's exact model, sending the exact residual."""
    from robodyn_ros.control.reference import fourier_reference
    from robodyn_ros.simulation.adaptive_loop import AdaptiveLoop, AdaptiveLoopConfig, OracleLoop
    model = ur5.model
    plant = perturbed_plant(model, seed)
    reference = fourier_reference(ur5.home, 0.3, 4.0, 2)
    config = AdaptiveLoopConfig(duration=7.5, attach_time=None, driver="ur", payload_link=ur5.wrist_link)
    rms = {}
    for residual in (True, False):
        adapted, oracle = AdaptiveLoop(model, plant, reference, config), OracleLoop(model, plant, reference, config)
        if not residual:               # the friction left to the robot's compensation
            adapted.robot_friction = None
            oracle.controller.friction_compensation, oracle.controller.robot_friction = False, None
        run = adapted.run()
        rms[residual] = (_window_rms(run, 5.0, 7.5), _window_rms(oracle.run(), 5.0, 7.5))
        if residual:
            assert adapted.controller.friction_compensation and adapted.robot_friction.fit.trusted
            assert run["non_finite_commands"] == 0
    assert rms[True][0] < 0.5 * rms[False][0]
    assert rms[True][1] < 0.1 * rms[False][1]


def test_the_mpc_loop_sends_the_residual_once_both_are_known(ur5):
    """The ``mpc`` node's loop with ``output: commands`` under the ``ur`` profile, on states whose efforts answer
    its commands as a UR's do: its plans leave friction out until the robot's compensation is identified and a
    learned set applied (as the parameter gate applies one); then they keep it, and each command is the plan's
    torque and the learned Coulomb term less the robot's compensation at the measured velocity."""
    from types import SimpleNamespace

    from robodyn_ros.control.mpc.config import parameter_vector
    from robodyn_ros.control.mpc.solution import OMIT_FRICTION
    from robodyn_ros.control.mpc_loop import MpcLoop
    model = ur5.model
    config = resolve_node_config("mpc", {"robot": "ur5", "driver": "ur", "use_base_parameters": True,
                                         "output": "commands", "horizon": 3, "dt": 0.02, "time_limit": 10.0,
                                         "compiled": False, "generator.amplitude": 0.2, "generator.period": 1.5})
    loop = MpcLoop(ur5, config, publish=lambda command: None)
    rng = np.random.default_rng(6)
    width = loop.base_update.base.coulomb_width
    scale = rng.uniform(0.3, 1.0, model.nv)
    compensation = lambda v: scale * (0.5 * v + np.tanh(v / width))
    plant = perturbed_plant(model, 6).model
    try:
        assert loop.mpc.wait(600.0), loop.mpc.error
        assert loop.omitted & OMIT_FRICTION and not loop.friction_compensation
        effort, t = None, 1.0
        for k in range(1400):
            t = 1.0 + 0.002 * k
            q, v, _ = loop.reference.evaluate(t - 1.0)          # on the reference (the first state's time)
            if k == 1200:          # a learned set, as the gate applies one
                u = loop.base_update
                u.gate.applied = u.base.from_full(full_parameters(plant))
                u.gate.applied_tag = parameter_vector(plant)
                u.theta = u.gate.applied_tag.copy()
                assert loop._take(SimpleNamespace(status="accepted")) == "accepted"
            tau = loop.on_state(t, q, v, effort)
            if k % 10 == 0:
                loop.solve()
            if k == 1199:          # identified, but nothing learned: the robot's compensation stands
                assert loop.robot_friction.fit.trusted and not loop.friction_compensation
                assert loop.solution[1].omitted & OMIT_FRICTION
            effort = None if tau is None else tau + compensation(v)
        assert loop.friction_compensation and not loop.solution[1].omitted & OMIT_FRICTION
        # the next command, against the plan it is taken from
        t += 0.002
        q, v, _ = loop.reference.evaluate(t - 1.0)
        t_plan, plan = loop.solution
        v_d = loop.reference.evaluate(t - loop.t0)[1]
        expected = (plan.torque(np.concatenate([q, v]), t - t_plan) + loop.coulomb * np.tanh(v_d / width)
                    - loop.robot_friction.fit.torque(v))
        tau = loop.on_state(t, q, v, effort)
        np.testing.assert_allclose(tau, expected, atol=1e-9)
        np.testing.assert_allclose(loop.robot_friction.fit.torque(v), compensation(v), atol=0.02 * scale.max())
        assert np.abs(loop.coulomb).max() > 0.5          # the learned Coulomb term is sent
    finally:
        loop.close()
