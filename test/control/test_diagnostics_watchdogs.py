"""/diagnostics that say what is wrong: a joint that does not track (TrackingWatchdog, through the control loop
and the inverse_dynamics node over DDS), adaptation that applies nothing (AdaptationWatchdog with the parameter
gate's reason), a payload-change detector that alarms again and again (the estimator), and the throttled note
of a failed consistent-parameter fit."""
import time

import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.control.adaptation_watchdog import AdaptationWatchdog
from robodyn_ros.control.control_loop import ControlLoop
from robodyn_ros.control.reference import fourier_reference
from robodyn_ros.control.tracking_watchdog import TrackingWatchdog
from robodyn_ros.estimation.estimator_status import repeated_change_note
from robodyn_ros.estimation.online_estimator import OnlineEstimator
from robodyn_ros.kernels import compile_kernels
from robodyn_ros.robots import bundled_robot_info
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config

UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")


# ------------------------------------------------------------------------------------------- tracking
def test_tracking_watchdog_names_the_joint_that_does_not_follow():
    rng = np.random.default_rng(1)
    dog = TrackingWatchdog(("a", "b", "c"), threshold=0.1, window=1.0)
    assert dog.note() is None and np.isnan(dog.values()["tracking_rms_max"])
    t = np.arange(0, 1.0005, 0.001)
    for tk in t:
        dog.update(tk, np.array([0.01 * rng.normal(), 0.05 * np.sin(7 * tk), 0.5 * np.sin(2 * np.pi * tk)]))
    note = dog.note()
    assert note is not None and note.startswith("tracking error above 0.1 rad RMS over the last 1 s: c ")
    assert " a " not in note and " b " not in note
    assert dog.values()["tracking_rms_worst_joint"] == "c"
    assert dog.values()["tracking_rms_max"] == pytest.approx(0.5 / np.sqrt(2), rel=0.01)
    dog.threshold = 0.0
    assert dog.note() is None                       # off
    dog.threshold = 0.1
    for tk in t + 1.001:                            # the joint follows again: the next window is quiet
        dog.update(tk, np.full(3, 0.01 * rng.normal()))
    assert dog.note() is None
    dog.update(0.0, np.ones(3))                      # time went back: a new window, the last result kept
    assert dog.rms is not None and dog.note() is None
    dog.restart()
    assert dog.rms is None


def closed_loop(loop, model, kernels, state, duration, dt=0.001, stuck=None, effort_noise=0.0, rng=None):
    """Run ``loop`` against the plant ``model`` (the controller's own, friction included) for ``duration`` s from
    ``state`` = ``(t, q, v)``; ``stuck``: index of a joint held by a brake (it never moves). The plant's torques,
    measured with ``effort_noise``, go to the base-parameter gate's window. Returns the last ``(t, q, v)``."""
    t0, q, v = state
    q_brake = q.copy()
    for k in range(int(round(duration / dt))):
        t = t0 + k * dt
        tau = loop.robot.from_command(loop.on_state(t, q, v, None)[0])
        if loop.base_update is not None:
            loop.base_update.observe(t, q, v, tau + rng.normal(0.0, effort_noise, model.nv))
        a = kernels.aba(q, v, tau - rd.friction_torque(model, v))
        v = v + dt * a
        q = q + dt * v
        if stuck is not None:
            q[stuck], v[stuck] = q_brake[stuck], 0.0
    return t + dt, q, v


def test_control_loop_warns_while_a_braked_joint_lags_its_reference():
    """The inverse_dynamics node's loop on a UR5 whose wrist_3 is held by a brake: WARN naming wrist_3_joint only;
    the same loop on the free robot: OK ("controlling")."""
    robot = load_robot(resolve_node_config("inverse_dynamics", {"robot": "ur5"}))
    kernels = compile_kernels(robot.model, register=False)
    for stuck in (5, None):
        loop = ControlLoop(robot, resolve_node_config("inverse_dynamics", {"robot": "ur5"}), lambda tau: None)
        loop.start()
        closed_loop(loop, robot.model, kernels, (0.0, robot.home, np.zeros(6)), 1.2, stuck=stuck)
        level, text, values = loop.status()
        if stuck is None:
            assert (level, text) == ("OK", "controlling") and values["tracking_rms_max"] < 0.01, text
        else:
            assert level == "WARN" and "tracking error above 0.1 rad RMS over the last 1 s: wrist_3_joint" in text
            assert text.count(" rad") == 2 and values["tracking_rms_worst_joint"] == "wrist_3_joint"   # one joint
        loop.close()


# ----------------------------------------------------------------------------------------- adaptation
def test_adaptation_watchdog_waits_for_the_timeout_and_ends_with_the_first_applied_estimate():
    dog = AdaptationWatchdog(timeout=2.0)
    assert dog.note("why") is None
    for t in np.arange(0.0, 1.9, 0.1):
        dog.observe(10.0 + t)
    assert dog.note("why") is None
    dog.observe(12.5)
    assert dog.note("the gate said no") == ("adaptation on, but no estimate applied 2.5 s after the first joint "
                                            "state: the gate said no")
    dog.observe(0.1)                                 # a time reset: the wait starts again
    assert dog.note("why") is None
    dog.observe(2.2)
    assert dog.note("why") is not None
    dog.applied()
    dog.observe(100.0)
    assert dog.note("why") is None and dog.applied_at == 2.2
    dog.timeout = 0.0
    assert AdaptationWatchdog(0.0).note("why") is None


def test_control_loop_says_why_no_base_parameter_estimate_is_applied():
    """use_base_parameters on a UR5 whose links are 30 % heavier than its URDF: past adaptation_timeout the status
    is WARN with the reason, which follows what the loop got (nothing; estimates without a covariance; a
    consistent fit not yet due, then a candidate waiting for the new samples it is judged on, then for a window's
    worth of motion), until the gate accepts the plant's own parameters (its torques measured with noise): OK."""
    from robodyn_ros.identification.base_parameters import full_parameters
    robot = load_robot(resolve_node_config("inverse_dynamics", {"robot": "ur5"}))
    config = resolve_node_config("inverse_dynamics", {"robot": "ur5", "use_base_parameters": True,
                                                      "adaptation_timeout": 0.3})
    loop = ControlLoop(robot, config, lambda tau: None)
    plant = robot.model.with_inertial_parameters(1.3 * robot.model.inertial_parameters())
    kernels = compile_kernels(plant, register=False)
    rng = np.random.default_rng(0)
    try:
        loop.start()
        state = closed_loop(loop, plant, kernels, (0.0, robot.home, np.zeros(6)), 0.5, effort_noise=0.05, rng=rng)
        level, text, _ = loop.status()
        assert level == "WARN" and "adaptation on, but no estimate applied 0.499 s after the first joint state: no " \
                                   "base parameters received" in text, text
        beta = loop.base_update.base.from_full(full_parameters(plant))
        loop.apply_base_parameters(beta)
        assert "no covariance received on base_covariance_topic (the estimator needs publish_covariance: true)" in \
            loop.status()[1]
        P = np.eye(len(beta)) * 1e-10
        assert loop.apply_base_parameters(beta, P) == "unconverged"          # a fit submitted, not yet due
        deadline = time.monotonic() + 120.0
        while loop.base_update.worker.fits == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert loop.base_update.worker.fits == 1, loop.base_update.worker.last_failure
        assert "the parameter gate's last decision: unconverged: no consistent parameter set fitted yet" in \
            loop.status()[1], loop.status()[1]
        state = closed_loop(loop, plant, kernels, state, 0.6, effort_noise=0.05, rng=rng)
        assert loop.apply_base_parameters(beta, P) == "unconverged"          # due now: pending on new samples
        assert "predicted 0 of the 50 new samples it is judged on" in loop.status()[1], loop.status()[1]
        state = closed_loop(loop, plant, kernels, state, 0.6, effort_noise=0.05, rng=rng)
        assert loop.apply_base_parameters(beta, P) == "unconverged"          # judged after a window of motion
        assert "of the 400 samples observed before a first estimate is judged" in loop.status()[1], loop.status()[1]
        state = closed_loop(loop, plant, kernels, state, 2.6, effort_noise=0.05, rng=rng)
        worker = loop.base_update.worker
        assert loop.apply_base_parameters(beta, P) == "accepted", (loop.base_update.gate.last_reason, worker.fits,
                                                                   worker.failures, worker.last_failure)
        assert loop.status()[:2] == ("OK", "controlling"), loop.status()[1]
        # the accepted set enters the law over base_parameters.blend_time (0.5 s), from the nominal one
        applied, nominal, t_switch = loop.base_update.gate.applied, loop.base_update.beta_nominal, loop.base_update.t
        state = closed_loop(loop, plant, kernels, state, 0.25, rng=rng)
        s = (state[0] - 0.001 - t_switch) / config["base_parameters.blend_time"]
        assert 0.4 < s < 0.6 and np.allclose(loop.controller.beta, nominal + s * (applied - nominal))
        closed_loop(loop, plant, kernels, state, 0.3, rng=rng)
        assert np.array_equal(loop.controller.beta, applied)
    finally:
        loop.close()


def test_a_failed_consistent_fit_is_a_status_not_solver_output(capfd):
    """An estimate IPOPT cannot evaluate (infinite): no CasADi line on stderr (the node's log used to carry
    "consistent_parameters:nlp_f failed: Inf detected"), the worker counts the failure with IPOPT's status and
    the update reports it once, for the node to log throttled."""
    from robodyn_ros.control.base_parameter_update import BaseParameterUpdate
    from robodyn_ros.identification.base_parameters import compute_base_parameters

    model = rd.Model.from_urdf("ur5")
    update = BaseParameterUpdate(model, compute_base_parameters(model, coulomb_width=1e-3), consistent_period=0.0)
    try:
        capfd.readouterr()
        r = update.base.count
        update.set_covariance(np.eye(r))
        update.offer(np.full(r, np.inf))
        deadline = time.monotonic() + 60.0
        while update.worker.failures == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert update.worker.failures == 1 and update.worker.fits == 0
        assert update.worker.result(np.inf, wait=True) is None
        note = update.failure_note()
        assert note == ("consistent-parameter fit failed (1 so far; the last estimate kept): IPOPT "
                        "Invalid_Number_Detected")
        assert update.failure_note() is None                     # reported once
        assert "failed, the last: IPOPT Invalid_Number_Detected" in update.waiting_reason()
        out, err = capfd.readouterr()
        assert "CasADi" not in out + err and "nlp_" not in out + err, err
    finally:
        update.close()


# ---------------------------------------------------------------------------------- repeated alarms
def test_repeated_change_note_counts_the_alarms_of_the_window():
    events = [(1.0, 0.0), (1.6, 2.0), (2.2, -599.0), (2.8, 36.0)]
    assert repeated_change_note(events[:2], 3.0, 3, 10.0) is None
    note = repeated_change_note(events, 3.0, 3, 10.0)
    assert note.startswith("payload change detected 4 times in the last 10 s (payload mass before them from "
                           "-599 to 36 kg)")
    assert repeated_change_note(events, 3.0, 3, 1.0) is None           # only two within 1 s of t = 3
    assert repeated_change_note(events, 3.0, 0, 10.0) is None           # off
    assert repeated_change_note(events, 30.0, 3, 10.0) is None          # long ago


def test_estimator_warns_when_its_noise_level_is_set_far_below_the_real_one():
    """A UR5 measured with 0.5 N m torque noise: with the noise learnt (the default) or set to 0.5 the estimator
    stays OK; told 0.02 N m, its estimate never looks converged, so its change detector never arms (no false
    payload alarm, as once: masses swinging both ways every half second) and the status says which joints'
    noise is set far below what the data show."""
    info = bundled_robot_info("ur5")
    model = rd.Model.from_urdf(info["urdf"])
    rate, duration = 250.0, 8.0
    t = np.arange(int(rate * duration)) / rate
    Q, V, A = fourier_reference(info["home"], 0.4, 4.0, 3).evaluate(t)
    rng = np.random.default_rng(0)
    tau = compile_kernels(model).rnea_batch(Q, V, A) + np.array([rd.friction_torque(model, v) for v in V]) \
        + rng.normal(0.0, 0.5, Q.shape)
    results = {}
    for label, config in (("learnt", {}), ("right", {"effort_noise": 0.5}), ("too low", {"effort_noise": 0.02})):
        est = OnlineEstimator(model, {"use_wrench": False, **config})
        for k in range(len(t)):
            est.update(t[k], Q[k], V[k], tau[k])
        results[label] = (len(est.payload_events), est.status(t[-1]))
    for label in ("learnt", "right"):
        assert results[label][0] == 0 and results[label][1][0] == "OK", (label, results[label])
    count, (level, text, values) = results["too low"]
    assert count == 0 and not values["change_detector_armed"]
    assert level == "WARN" and "torque noise set far below what the data show" in text
    assert all(name in text for name in model.joint_names), text


# ---------------------------------------------------------------------------------------- over DDS
def test_inverse_dynamics_node_publishes_the_tracking_warning():
    """The node's /diagnostics while its joint states show the robot standing still at home (a robot that does not
    follow the generator): WARN naming the joints."""
    pytest.importorskip("rclpy")
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    from sensor_msgs.msg import JointState

    from robodyn_ros.ros import qos
    from robodyn_ros.ros.bringup import Bringup
    from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
    from robodyn_ros.ros.messages import make_joint_state
    from robodyn_ros.ros.testing import ros_context

    entry = NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics")
    with ros_context() as context, Bringup([entry], context, config_file("ur5"),
                                           overrides={"inverse_dynamics": {"state_timeout": 1.0}}) as up:
        driver = rclpy.create_node("driver", context=context)
        statuses = []
        driver.create_subscription(DiagnosticArray, "/diagnostics",
                                   lambda m: statuses.extend(s for s in m.status if "inverse dynamics" in s.name),
                                   qos.DIAGNOSTICS_QOS)
        pub = driver.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        up.add_node(driver)
        up.activate()
        assert up.spin_until(lambda: pub.get_subscription_count() > 0, 30.0)
        home = up.nodes["inverse_dynamics"].robot.home
        warned = lambda: any(s.level == DiagnosticStatus.WARN and "tracking error above" in s.message  # noqa: E731
                             for s in statuses)
        t, deadline = 0.0, time.monotonic() + 60.0
        while not warned() and time.monotonic() < deadline:
            pub.publish(make_joint_state(t, list(UR5_JOINTS), home, np.zeros(6)))
            t += 0.01
            up.spin_until(lambda: False, 0.01)
        assert warned(), [s.message for s in statuses][-3:]
        message = next(s.message for s in statuses if "tracking error above" in s.message)
        assert "over the last 1 s:" in message and "shoulder_pan_joint" in message
        up.executor.remove_node(driver)
        driver.destroy_node()
