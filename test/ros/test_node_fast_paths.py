"""The 1 kHz paths of the nodes after the issue-#9 profiling:

* the inverse_dynamics node's fast paths (FourierSampler for the generator reference, FastComputedTorque for
  the control law, the inlined guard and reused message of TorqueOutput) publish the same commands as the
  library path (FourierTrajectory.evaluate, ComputedTorqueController.compute, CommandGuard.accept,
  Robot.to_command) for one message sequence that includes shuffled joint order, a duplicated stamp, a
  malformed state, references clipped at the joint limits, saturated and rate-limited torques and a live
  payload update;
* the estimator node, fed faster than it processes, takes the messages already waiting on each wake-up
  (its backlog stays within the subscription depth) and estimates from the newest due sample.

States are fed to the callbacks directly except in the last test, which goes through DDS and rclpy's
EventsExecutor (the executor the node processes use).
"""
import warnings
from collections import deque

import numpy as np
import pytest
from conftest import assert_close
from geometry_msgs.msg import InertiaStamped
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robodyn_ros.control import ComputedTorqueController
from robodyn_ros.control.command_guard import CommandGuard, ControlStatus, effort_bounds, torque_rate_bounds
from robodyn_ros.control.kernel_dynamics import KernelDynamics
from robodyn_ros.control.reference import FourierSampler, ReferenceClippedWarning, fourier_reference
from robodyn_ros.identification.exciting_trajectory import FourierTrajectory
from robodyn_ros.ros import estimator_node, qos
from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.estimator_node import PENDING_LIMIT
from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
from robodyn_ros.ros.messages import (inertia_stamped_to_body_parameters, inertial_parameters_to_inertia_stamped,
                                      make_joint_state)
from robodyn_ros.ros.testing import ros_context


@pytest.fixture
def bringup():
    """``make(kind, **overrides)`` -> an active node of that kind (panda.yaml + overrides) and its Bringup."""
    stack = []

    def make(kind, **overrides):
        context_cm = ros_context()
        context = context_cm.__enter__()
        up = Bringup([NodeEntry(kind, kind, kind)], context, config_file("panda"), overrides={kind: overrides})
        stack.append((context_cm, up))
        up.activate()
        return up.nodes[kind], up

    yield make
    for context_cm, up in reversed(stack):
        up.close()
        context_cm.__exit__(None, None, None)


def test_fourier_sampler_equals_fourier_trajectory():
    rng = np.random.default_rng(3)
    traj = FourierTrajectory(q0=rng.normal(size=7), a=rng.normal(size=(7, 3)), b=rng.normal(size=(7, 3)), period=2.5)
    sampler = FourierSampler(traj)
    for t in (0.0, 0.123, 1.7, 12.345, 1e4 + 0.5):
        for got, want, order in zip(sampler.evaluate(t), traj.evaluate(t), range(3)):
            assert_close(got, want, rtol=1e-12, what=f"derivative {order} at t = {t}")
    reference = fourier_reference(np.zeros(7), 0.3, 4.0, 2)      # b = 0: the node's generator
    for got, want in zip(FourierSampler(reference).evaluate(0.77), reference.evaluate(0.77)):
        assert_close(got, want, rtol=1e-14)


class Recorder:
    def __init__(self):
        self.data = []

    def publish(self, msg):
        # the controller publishes its commands serialized (CDR bytes), as the middleware carries them
        msg = deserialize_message(msg, Float64MultiArray) if isinstance(msg, bytes) else msg
        self.data.append(np.array(msg.data))


def test_controller_commands_equal_the_library_path(bringup):
    # amplitude 2.5 rad, period 1 s: some joints' references leave the limits (clipped: the fast path hands over to the
    # controller); q lags the reference so torques saturate and hit the rate limit
    node, _ = bringup("inverse_dynamics", **{"generator.amplitude": 2.5, "generator.period": 1.0})
    c, robot, model = node.config, node.robot, node.robot.model
    recorder = node.command_pub = Recorder()

    reference = fourier_reference(robot.home, c["generator.amplitude"], c["generator.period"],
                                  c["generator.harmonics"])
    controller = ComputedTorqueController(model, c["kp"], c["kd"], friction_compensation=c["friction_compensation"],
                                          functions=KernelDynamics(model, node.kernels),
                                          gravity_compensated_by_robot=c["gravity_compensated_by_robot"])
    tau_max = effort_bounds(model)
    guard = CommandGuard(tau_max, max_rate=torque_rate_bounds(tau_max, c["max_torque_rate"]))

    names = list(robot.joints)
    shuffled = [3, 0, 6, 1, 5, 2, 4]
    rng = np.random.default_rng(7)
    payload = np.array([2.0, 0.0, 0.0, 0.1, 0.02, 0.0, 0.02, 0.0, 0.0, 0.01])
    expected, t0, last_stamp, clipped = [], None, None, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReferenceClippedWarning)
        for k in range(1500):
            t = 2.0 + k * 1e-3
            if k == 400:                       # duplicated stamp: dropped by the stamp gate, no command
                t = 2.0 + 399 * 1e-3
            q_ref = reference.evaluate(t - (t0 if t0 is not None else t))[0]
            q = q_ref + 0.05 * rng.normal(size=7)
            v = rng.normal(size=7)
            if k == 600:                       # live model update (the estimator's payload)
                msg = inertial_parameters_to_inertia_stamped(t, "panda_link8", payload)
                node._on_payload(msg)
                body, pi_body = inertia_stamped_to_body_parameters(msg, model)
                pi = model.inertial_parameters()
                pi[10 * body:10 * body + 10] += pi_body
                controller.set_parameters(pi)
            order = shuffled if k % 3 == 0 else list(range(7))
            v_msg = np.full(7, np.nan) if k == 700 else v      # no velocities: rejected, no command
            msg = make_joint_state(t, [names[i] for i in order], q[order], v_msg[order])
            node._on_state(msg)
            if k in (400, 700):
                continue
            t0 = t if t0 is None else t0
            q_d, v_d, a_d = reference.evaluate(t - t0)
            clipped += bool(np.any((q_d < model.lower) | (q_d > model.upper)))
            tau, _ = controller.compute(q, v, q_d, v_d, a_d)
            dt = t - last_stamp if last_stamp is not None else None
            tau = guard.accept(tau, ControlStatus(), dt)
            last_stamp = t
            expected.append(robot.to_command(tau))
    assert len(recorder.data) == len(expected) == 1498
    assert clipped > 50, "the sequence must exercise the clipped-reference hand-over"
    assert node.output.rate_limited > 50
    at_limit = np.abs(np.array(expected)) >= robot.to_command(tau_max) - 1e-9
    assert at_limit.any(axis=1).sum() > 10, "the sequence must exercise the effort clamp"
    assert node.output.dropped["duplicate"] == 1 and node.payload_updates == 1
    assert_close(np.array(recorder.data), np.array(expected), rtol=1e-10, what="commands")


def _estimator_with_backlog(bringup, decimation):
    """An estimator whose ``take_pending`` reads a fake joint-state queue with the keep-last depth of the
    real subscription (qos.SENSOR_INPUT_QOS; no wrenches waiting), and whose estimator records the stamps
    it estimates from (``OnlineEstimator.step``)."""
    node, _ = bringup("estimator", decimation=decimation, base_parameters=False, input_poll_rate=0.0)
    queue = deque(maxlen=qos.SENSOR_INPUT_QOS.depth)
    node.take_pending = lambda sub, limit: \
        [queue.popleft() for _ in range(min(limit, len(queue)))] if sub is node.state_sub else []
    used = []
    step = node.estimator.step
    node.estimator.step = lambda t, q, v, tau: (used.append(t), step(t, q, v, tau))[1]
    return node, queue, used


def _stamp(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


@pytest.mark.parametrize("decimation", [1, 3])
@pytest.mark.parametrize("budget", [float("inf"), 0.0])
def test_estimator_burst_keeps_backlog_bounded_and_uses_newest_sample(bringup, decimation, budget, monkeypatch):
    """20 000 joint states arrive in chunks of 50 per wake-up (50 times faster than the node wakes up;
    the subscription keeps the newest 10). A wake-up whose delivered sample is skipped costs one sample;
    one whose sample is due takes everything waiting and estimates from every due sample in arrival order
    while its time budget lasts (``CALLBACK_BUDGET``), and from the newest due one once it is spent."""
    monkeypatch.setattr(estimator_node, "CALLBACK_BUDGET", budget)
    node, queue, used = _estimator_with_backlog(bringup, decimation)
    names = list(node.robot.joints)
    q, v, tau = node.robot.home, np.zeros(7), np.zeros(7)
    chunk, wakeups, admitted, last_admitted, due_wakeups, due_total = 50, 400, 0, None, 0, 0
    for w in range(wakeups):
        for t in 1.0 + (w * chunk + np.arange(chunk)) * 1e-3:
            queue.append(make_joint_state(float(t), names, q, v, tau))
        delivered = queue.popleft()                   # the executor delivers the oldest waiting message
        before = len(used)
        if admitted % decimation == 0:                # due: the node must take all that is waiting
            waiting = [_stamp(delivered)] + [_stamp(m) for m in queue]
            due = [t for i, t in enumerate(waiting) if (admitted + i) % decimation == 0]
            node._on_state(delivered)
            assert len(queue) == 0, f"wake-up {w}: {len(queue)} messages left waiting"
            if budget > 0:
                assert used[before:] == pytest.approx(due, abs=1e-9), "every due sample, in arrival order"
            else:
                assert len(used) - before == 1 and used[-1] == pytest.approx(due[-1], abs=1e-9)
            admitted += len(waiting)
            last_admitted = waiting[-1]
            due_wakeups += 1
            due_total += len(due)
        else:                                         # skipped: nothing estimated, nothing taken
            node._on_state(delivered)
            assert len(used) == before and len(queue) == qos.SENSOR_INPUT_QOS.depth - 1
            admitted += 1
            last_admitted = _stamp(delivered)
    assert node.estimator.samples == admitted
    assert node.estimator.updates == len(used) == (due_total if budget > 0 else due_wakeups)
    assert decimation == 1 or due_wakeups < wakeups, "the skipped-wake-up branch must be exercised"
    assert node.skipped_overload == -(-admitted // decimation) - len(used)
    assert node.skipped_overload == (0 if budget > 0 else due_total - due_wakeups) and due_total > due_wakeups
    assert node.estimator.last_t == pytest.approx(last_admitted, abs=1e-9)
    assert PENDING_LIMIT >= qos.SENSOR_INPUT_QOS.depth


@pytest.mark.parametrize("poll_rate,budget", [(0.0, 0.0), (0.0, float("inf")), (200.0, 0.0)])
def test_estimator_takes_waiting_messages_over_dds(bringup, poll_rate, budget, monkeypatch):
    """A burst of 300 joint states published while the estimator is not spinning. Callbacks
    (``input_poll_rate`` 0): the subscription keeps the newest 10; the first wake-up takes them all
    (take_pending on the real rclpy subscription) and estimates from each in order (an unlimited
    ``CALLBACK_BUDGET``) or, its budget spent (0), once from the newest; the executor's remaining events
    find nothing to take. Polled: the queue (1000 deep) keeps all 300, polls take them, estimate in order
    while their time budget lasts and then from the newest, and count none lost."""
    monkeypatch.setattr(estimator_node, "CALLBACK_BUDGET", budget)
    node, up = bringup("estimator", decimation=1, base_parameters=False, input_poll_rate=poll_rate)
    from rclpy.node import Node
    talker = Node("burst_talker", context=up.context)
    up.add_node(talker)
    pub = talker.create_publisher(JointState, node.config["joint_states_topic"], qos.JOINT_STATE_OUTPUT_QOS)
    assert up.spin_until(lambda: pub.get_subscription_count() > 0, timeout=10.0)
    up.spin_until(lambda: False, timeout=0.3)
    names = list(node.robot.joints)
    stamps = 1.0 + np.arange(300) * 1e-3
    for t in stamps:
        pub.publish(make_joint_state(float(t), names, node.robot.home, np.zeros(7), np.zeros(7)))
    assert up.spin_until(lambda: node.estimator.last_update_t is not None
                         and node.estimator.last_update_t >= stamps[-1] - 1e-9, timeout=30.0)
    up.spin_until(lambda: False, timeout=0.2)     # the executor's remaining events: nothing left to take
    assert node.estimator.last_t == pytest.approx(stamps[-1], abs=1e-9), "the newest sample must be used"
    assert node.estimator.last_update_t == pytest.approx(stamps[-1], abs=1e-9), "the newest sample must be estimated from"
    if poll_rate:
        assert node.estimator.samples == len(stamps) <= qos.POLLED_SENSOR_INPUT_QOS.depth
        assert node.lost["joint_states"].lost == 0 and node.lost["joint_states"].taken == len(stamps)
    else:
        assert 2 <= node.estimator.samples <= qos.SENSOR_INPUT_QOS.depth + PENDING_LIMIT
        if budget > 0:
            assert node.estimator.updates == node.estimator.samples, "every waiting message, in order"
        else:
            assert node.estimator.updates < node.estimator.samples, "one wake-up must have taken several waiting messages"
    assert node.skipped_overload == node.estimator.samples - node.estimator.updates
    talker.destroy_node()
