"""The estimator's polled input (``input_poll_rate``, issue #9): its joint states and wrenches wait in
keep-last queues of subscriptions that no executor serves, and a timer takes them.

* Same numbers: a poll that takes a run's messages in chunks gives bit for bit the estimates of the
  per-message callbacks fed the same messages (payload and base-parameter RLS, with a payload change,
  a backward clock jump and decimation 3).
* Falling behind: a poll out of time budget estimates from its newest due joint state only and counts the
  others as ``skipped_overload``.
* Over DDS: the inputs are not executor subscriptions of the node (no executor event per message) but
  are the node's own in the graph (no second node), the timer estimates from what arrives, and cleanup
  destroys them; a 1 kHz stream loses nothing while the node stalls for 200 ms, and what an overflowing
  queue loses is counted (``lost_joint_states``).
"""
import numpy as np
import pytest
import rclpy
from geometry_msgs.msg import WrenchStamped
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from robodyn_ros.identification.payload import point_mass_parameters
from robodyn_ros.ros import estimator_node, qos
from robodyn_ros.ros.messages import array_to_wrench_stamped, make_joint_state
from robodyn_ros.ros.testing import spin_until

from estimator_feeds import PAYLOAD, exciting_trajectory, measured_wrenches, segment


def _messages(node, t, Q, V, W, tau_scale=5.0):
    """(wrench, joint state) pairs with the same stamps; efforts from a fixed random draw."""
    names, link = list(node.robot.joints), node.robot.wrist_link
    rng = np.random.default_rng(7)
    tau = tau_scale * rng.normal(size=Q.shape)
    return [(array_to_wrench_stamped(float(t[k]), link, W[k]), make_joint_state(float(t[k]), names, Q[k], V[k], tau[k]))
            for k in range(len(t))]


def _run(node, pairs, polled, chunk=7):
    """Feed ``pairs`` through the callbacks, or through :meth:`_poll_inputs` ``chunk`` pairs per poll."""
    if not polled:
        for wrench, state in pairs:
            node._on_wrench(wrench)
            node._on_state(state)
        return
    for start in range(0, len(pairs), chunk):
        part = pairs[start:start + chunk]
        queues = {id(node.wrench_sub): [serialize_message(w) for w, _ in part],   # polled: CDR bytes
                  id(node.state_sub): [serialize_message(s) for _, s in part]}
        node.take_pending = lambda sub, limit, sequences=None, queues=queues: queues.pop(id(sub), [])
        node._poll_inputs()


def test_polled_input_gives_the_callback_estimates_bit_for_bit(estimator_factory, monkeypatch):
    monkeypatch.setattr(estimator_node, "POLL_BUDGET", float("inf"))
    params = {"base_parameters": True, "decimation": 3, "input_poll_rate": 200.0}
    polled, direct = estimator_factory(**params), estimator_factory(**params)
    segments = [segment(polled, 0.0, 1.0, np.zeros(10), seed=1), segment(polled, 1.0, 1.0, PAYLOAD.pi, seed=2),
                segment(polled, 0.2, 1.0, PAYLOAD.pi, seed=3)]        # the clock jumps back by 1.8 s
    pairs = [p for s in segments for p in _messages(polled, *s)]
    _run(direct, pairs, polled=False)
    _run(polled, pairs, polled=True)
    assert direct.estimator.updates == polled.estimator.updates > 200
    assert direct.estimator.time_jumps == polled.estimator.time_jumps == 1
    assert polled.skipped_overload == 0
    np.testing.assert_array_equal(polled.estimator.wrench_rls.beta, direct.estimator.wrench_rls.beta)
    np.testing.assert_array_equal(polled.estimator.base_estimator.beta, direct.estimator.base_estimator.beta)
    np.testing.assert_array_equal(polled.estimator.wrench_rls.P, direct.estimator.wrench_rls.P)
    assert abs(polled.estimator.payload_parameters()[0] - PAYLOAD.pi[0]) < 0.1


def test_a_poll_out_of_time_estimates_from_its_newest_due_state(estimator_factory, monkeypatch):
    monkeypatch.setattr(estimator_node, "POLL_BUDGET", 0.0)
    node = estimator_factory(base_parameters=False, decimation=1)
    pairs = _messages(node, *segment(node, 0.0, 0.2, np.zeros(10), seed=1))   # 50 samples
    _run(node, pairs, polled=True, chunk=10)
    assert node.estimator.updates == 5 and node.skipped_overload == 45
    assert node.estimator.last_update_t == pytest.approx(float(pairs[-1][1].header.stamp.nanosec) * 1e-9)


def _talker(node):
    """A node publishing joint states and wrenches as the broadcasters do, once the estimator hears it."""
    talker = rclpy.create_node("talker", context=node.context)
    states = talker.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
    wrenches = talker.create_publisher(WrenchStamped, "/force_torque_sensor_broadcaster/wrench",
                                       qos.WRENCH_OUTPUT_QOS)
    assert spin_until(node.executor, lambda: states.get_subscription_count() and wrenches.get_subscription_count(),
                      30.0)
    return talker, states, wrenches


def test_polled_inputs_arrive_over_dds_without_executor_subscriptions(estimator_factory):
    """Every joint state of a 1 kHz stream is taken although the node does not spin for 200 ms at a time (a
    process waiting for a core): the talker is in this process (no transport that could lose one), so nothing
    may be lost; the waits are for conditions, with deadlines that only a broken intake reaches."""
    node = estimator_factory(base_parameters=False, decimation=2, input_poll_rate=100.0)
    topics = {s.topic_name for s in node.subscriptions}
    assert "/joint_states" not in topics and "/force_torque_sensor_broadcaster/wrench" not in topics
    # yet they are the node's own: the graph lists them under its name, and no second node of that name is there
    # (a companion node would be one; other tests' nodes may still be in the graph a moment after they left)
    assert dict(node.get_subscriber_names_and_types_by_node(node.get_name(), node.get_namespace())).keys() >= {
        "/joint_states", "/force_torque_sensor_broadcaster/wrench"}
    names = [name for name, _ in node.get_node_names_and_namespaces()]
    assert names.count(node.get_name()) == 1 and not [n for n in names if n.startswith(node.get_name() + "_")], names
    assert {node.state_sub.topic_name, node.wrench_sub.topic_name} == {
        "/joint_states", "/force_torque_sensor_broadcaster/wrench"}
    talker, states, wrenches = _talker(node)
    executor = node.executor
    t = np.arange(800) / 1000.0                  # 0.8 s at 1 kHz
    Q, V, A = exciting_trajectory(node.robot.home, t)
    pairs = _messages(node, t, Q, V, measured_wrenches(node.robot.model, node.robot.wrist_link, Q, V, A,
                                                       np.zeros(10), seed=4))
    sent = 0
    for burst in range(0, len(pairs), 200):      # 200 ms of the stream each, published while the node stalls
        for wrench, state in pairs[burst:burst + 200]:
            wrenches.publish(wrench)
            states.publish(state)
            sent += 1
        assert spin_until(executor, lambda: node.estimator.samples >= sent, 30.0), \
            f"{node.estimator.samples} of {sent} joint states taken, {node.lost['joint_states'].lost} lost"
    assert node.lost["joint_states"].lost == node.lost["wrenches"].lost == 0
    assert node.lost["joint_states"].taken == node.lost["wrenches"].taken == sent
    assert node.diagnostic_status(node.estimator.last_t)[2]["lost_joint_states"] == 0
    # every due joint state (every second one) is estimated from, or superseded within a poll out of time
    assert node.estimator.updates + node.skipped_overload == sent // 2 and node.estimator.latest_wrench is not None
    assert not node.rejected
    node.trigger_deactivate()
    node.trigger_cleanup()
    assert not node._entities
    assert spin_until(executor, lambda: "/joint_states" not in dict(node.get_subscriber_names_and_types_by_node(
        node.get_name(), node.get_namespace())), 30.0)
    talker.destroy_node()


def test_joint_states_lost_in_an_overflowing_queue_are_counted(estimator_factory, monkeypatch):
    """A queue of 5 that 12 joint states overflow before a poll: what is not taken is counted as lost, in
    the node and in its /diagnostics values (``lost_joint_states``), from the publisher's sequence numbers."""
    monkeypatch.setattr(qos, "POLLED_SENSOR_INPUT_QOS", qos.with_depth(qos.POLLED_SENSOR_INPUT_QOS, 5))
    node = estimator_factory(base_parameters=False, decimation=1, input_poll_rate=100.0)
    talker, states, _ = _talker(node)
    names, home = list(node.robot.joints), node.robot.home
    publish = lambda k: states.publish(make_joint_state(1.0 + 1e-3 * k, names, home, np.zeros(7), np.zeros(7)))
    publish(0)                                    # the first one taken: the count starts there
    assert spin_until(node.executor, lambda: node.estimator.samples == 1, 30.0)
    for k in range(1, 13):                        # 12 more while the node does not spin
        publish(k)
    gaps = node.lost["joint_states"]
    assert spin_until(node.executor, lambda: node.estimator.samples + gaps.lost == 13, 30.0), \
        (node.estimator.samples, gaps.lost)
    assert node.estimator.samples <= 6 and gaps.lost >= 7 and gaps.unnumbered == 0
    assert node.estimator.last_t == pytest.approx(1.012, abs=1e-9)   # the newest is kept
    assert node.diagnostic_status(node.estimator.last_t)[2]["lost_joint_states"] == gaps.lost
    talker.destroy_node()


@pytest.mark.parametrize("gated", [True, False])
def test_published_payload_never_carries_the_transient_after_a_change(estimator_factory, gated):
    """0 kg, then the 2 kg test payload: right after the detected change the live RLS estimate sweeps through
    rotational inertias far from the load's (more than 0.3 kg m^2 off, Panda's wrist link is ~0.01). What
    would be published (``converged_payload``) stays within 0.05 kg m^2 of the truth, gives the mass within
    5 % from 0.1 s after the change, and the full estimate within 0.002 kg m^2 by the end. With the bounds
    at 0 (no gate) the published payload is the live one, transient included."""
    bounds = {} if gated else {"payload_publish_std.mass": 0.0, "payload_publish_std.first_moment": 0.0,
                               "payload_publish_std.inertia": 0.0}
    node = estimator_factory(base_parameters=False, decimation=1, **bounds)
    pairs = [p for s in (segment(node, 0.0, 2.0, np.zeros(10), seed=1), segment(node, 2.0, 2.0, PAYLOAD.pi, seed=2))
             for p in _messages(node, *s)]
    live_error, published_error, late_mass = 0.0, 0.0, []
    for wrench, state in pairs:
        node._on_wrench(wrench)
        node._on_state(state)
        t = node.estimator.last_t
        if t < 2.0:
            continue
        published = node.estimator.converged_payload()
        live_error = max(live_error, np.abs(node.estimator.payload_parameters()[4:] - PAYLOAD.pi[4:]).max())
        published_error = max(published_error, np.abs(published[4:] - PAYLOAD.pi[4:]).max())
        if t >= 2.1:
            late_mass.append(published[0])
    assert len(node.estimator.payload_events) == 1 and live_error > 0.3
    if gated:
        assert published_error < 0.05
        assert np.abs(np.array(late_mass) - PAYLOAD.pi[0]).max() < 0.05 * PAYLOAD.pi[0]
        assert node.estimator.unconverged_publishes > 0
    else:
        assert published_error == live_error
    assert np.abs(node.estimator.converged_payload() - PAYLOAD.pi).max() < 0.002


def test_point_mass_parameters_have_no_inertia_about_their_centre_of_mass():
    from robodyn_ros.model.spatial import numpy_inertia_split
    pi = point_mass_parameters(2.0, np.array([0.02, -0.04, 0.12]))
    m, c, I_c = numpy_inertia_split(pi)
    assert m == 2.0 and np.allclose(c, [0.01, -0.02, 0.06]) and np.abs(I_c).max() < 1e-15
    assert not point_mass_parameters(0.0, np.zeros(3)).any()
