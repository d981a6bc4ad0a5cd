"""robodyn_ros.ros.messages, qos and testing: hostile messages are rejected with a reason naming the field,
joints map by name, trajectories interpolate polynomials exactly, and one real DDS round trip."""
import math
import os

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) is not installed: pip install '.[ros]'")

from builtin_interfaces.msg import Duration  # noqa: E402
from conftest import assert_close  # noqa: E402
from diagnostic_msgs.msg import DiagnosticStatus  # noqa: E402
from rclpy.qos import QoSCompatibility, qos_check_compatible  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robodyn_ros.ros import messages as rm  # noqa: E402
from robodyn_ros.ros import qos  # noqa: E402
from robodyn_ros.ros.testing import isolated_ros_domain, ros_session, spin_until  # noqa: E402
from robodyn_ros.model.spatial import numpy_inertia_params  # noqa: E402

ARM = ["j1", "j2", "j3"]


def joint_state(names, position, velocity=(), effort=(), stamp=(12, 500_000_000)):
    msg = JointState(name=list(names), position=list(position), velocity=list(velocity), effort=list(effort))
    msg.header.stamp.sec, msg.header.stamp.nanosec = stamp
    return msg


# ------------------------------------------------------------------------------------------------ stamps
@pytest.mark.parametrize("seconds", [0.0, 1.5, 12.000000001, -0.25, 0.9999999999, 1e9 + 0.123456789])
def test_stamp_round_trip(seconds):
    t = rm.seconds_to_time(seconds)
    assert 0 <= t.nanosec < 1_000_000_000
    assert abs(rm.time_to_seconds(t) - seconds) <= 1e-9 * max(1.0, abs(seconds)) * 1.01
    assert rm.duration_to_seconds(rm.seconds_to_duration(seconds)) == pytest.approx(seconds, abs=1e-9, rel=1e-15)


def test_negative_stamp_floors():
    t = rm.seconds_to_time(-0.25)
    assert (t.sec, t.nanosec) == (-1, 750_000_000)


# ----------------------------------------------------------------------------------------- joint states
def test_joint_state_maps_by_name_and_ignores_extra_joints():
    msg = joint_state(["gripper", "j3", "j1", "j2"], [9.0, 3.0, 1.0, 2.0], [90, 30, 10, 20], [-9, -3, -1, -2])
    stamp, q, v, tau = rm.joint_state_to_arrays(msg, ARM)
    assert stamp == pytest.approx(12.5)
    assert q.tolist() == [1.0, 2.0, 3.0]
    assert v.tolist() == [10.0, 20.0, 30.0]
    assert tau.tolist() == [-1.0, -2.0, -3.0]


def test_joint_state_cache_holds_one_permutation_per_name_order_and_never_a_rejected_one():
    cache = {}
    a = joint_state(["j2", "j1", "j3"], [2, 1, 3])
    b = joint_state(["j1", "j2", "j3"], [1, 2, 3])
    for msg in (a, b, a, b):
        assert rm.joint_state_to_arrays(msg, ARM, cache)[1].tolist() == [1, 2, 3]
    assert set(cache) == {("j2", "j1", "j3"), ("j1", "j2", "j3")}
    with pytest.raises(rm.MessageRejected):
        rm.joint_state_to_arrays(joint_state(["j1", "j2"], [1, 2]), ARM, cache)
    assert len(cache) == 2
    # the cached path still checks lengths and values
    with pytest.raises(rm.MessageRejected, match="position has 2 entries for 3 names"):
        rm.joint_state_to_arrays(joint_state(["j2", "j1", "j3"], [2, 1]), ARM, cache)


def test_joint_state_cache_is_bounded():
    cache = {}
    names = [f"extra{i}" for i in range(40)]
    for i in range(40):
        rm.joint_state_to_arrays(joint_state(ARM + names[: i + 1], range(3 + i + 1)), ARM, cache)
    assert len(cache) <= 32


def test_empty_and_all_nan_velocity_effort_mean_absent_interfaces():
    nan = math.nan
    _, q, v, tau = rm.joint_state_to_arrays(joint_state(ARM, [1, 2, 3]), ARM)
    assert v is None and tau is None
    # joint_state_broadcaster fills NaN for an interface the joints do not have; an extra joint's NaN
    # does not matter either
    msg = joint_state(ARM + ["gripper"], [1, 2, 3, 0], [1, 1, 1, nan], [nan, nan, nan, 5.0])
    _, q, v, tau = rm.joint_state_to_arrays(msg, ARM)
    assert v.tolist() == [1, 1, 1] and tau is None


@pytest.mark.parametrize("msg, reason", [
    (joint_state(["j1", "j2", "j3"], [1, 2]), "JointState.position has 2 entries for 3 names"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3, 4]), "JointState.position has 4 entries for 3 names"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3], [1, 2]), "JointState.velocity has 2 entries for 3 names"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3], [], [1]), "JointState.effort has 1 entries for 3 names"),
    (joint_state(["j1", "j2"], [1, 2]), r"JointState.name lacks required joint\(s\) \['j3'\]"),
    (joint_state(["j1", "j2", "j1", "j3"], [1, 2, 1, 3]), "JointState.name has 'j1' twice"),
    (joint_state(["j1", "j2", "j3"], [1, math.nan, 3]), r"JointState.position is not finite for \['j2'\]"),
    (joint_state(["j3", "j2", "j1"], [math.inf, 2, 1]), r"JointState.position is not finite for \['j3'\]"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3], [0, math.nan, 0]), r"JointState.velocity is not finite for \['j2'\]"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3], [0, 0, math.inf]), r"JointState.velocity is not finite for \['j3'\]"),
    (joint_state(["j1", "j2", "j3"], [1, 2, 3], [], [0, -math.inf, 0]), r"JointState.effort is not finite"),
    (joint_state([], []), "lacks required joint"),
])
def test_hostile_joint_states_are_rejected_with_the_field_named(msg, reason):
    with pytest.raises(rm.MessageRejected, match=reason) as info:
        rm.joint_state_to_arrays(msg, ARM, {})
    assert isinstance(info.value, ValueError) and info.value.reason == str(info.value)


def test_make_joint_state_round_trip_and_shape_check():
    msg = rm.make_joint_state(3.25, ARM, [1, 2, 3], v=np.array([4.0, 5, 6]))
    stamp, q, v, tau = rm.joint_state_to_arrays(msg, list(reversed(ARM)))
    assert stamp == 3.25 and q.tolist() == [3, 2, 1] and v.tolist() == [6, 5, 4] and tau is None
    with pytest.raises(ValueError, match=r"tau has shape \(2,\), expected \(3,\)"):
        rm.make_joint_state(0.0, ARM, [1, 2, 3], tau=[1, 2])


# ---------------------------------------------------------------------------------------------- wrench
def test_wrench_round_trip_and_nan_rejected():
    w = np.array([1.0, -2.0, 3.0, 0.1, -0.2, 0.3])
    msg = rm.array_to_wrench_stamped(4.5, "panda_hand", w)
    stamp, frame, w2 = rm.wrench_stamped_to_array(msg)
    assert (stamp, frame) == (4.5, "panda_hand") and w2.tolist() == w.tolist()
    msg.wrench.torque.y = math.nan
    with pytest.raises(rm.MessageRejected, match=r"WrenchStamped.wrench is not finite in \['torque.y'\]"):
        rm.wrench_stamped_to_array(msg)
    with pytest.raises(ValueError, match="expected"):
        rm.array_to_wrench_stamped(0.0, "x", w[:5])


# ------------------------------------------------------------------------------------------ trajectories
def polynomial(coeffs, t):
    """q, v, a of q(t) = sum_j coeffs[j] t^j; coeffs (d+1, n)."""
    powers = np.arange(len(coeffs))
    q = sum(coeffs[j] * t**j for j in powers)
    v = sum(j * coeffs[j] * t ** (j - 1) for j in powers if j >= 1)
    a = sum(j * (j - 1) * coeffs[j] * t ** (j - 2) for j in powers if j >= 2)
    return q, v, a


def trajectory_msg(names, times, q, v=None, a=None):
    msg = JointTrajectory(joint_names=list(names))
    for k, t in enumerate(times):
        point = JointTrajectoryPoint(positions=list(q[k]))
        if v is not None:
            point.velocities = list(v[k])
        if a is not None:
            point.accelerations = list(a[k])
        point.time_from_start = rm.seconds_to_duration(t)
        msg.points.append(point)
    return msg


@pytest.mark.parametrize("degree, given", [(1, "q"), (3, "qv"), (5, "qva")])
def test_trajectory_reproduces_a_polynomial_of_its_interpolation_degree(degree, given):
    rng = np.random.default_rng(degree)
    coeffs = rng.normal(size=(degree + 1, 3))
    times = [0.0, 0.3, 0.75, 1.25]
    samples = [polynomial(coeffs, t) for t in times]
    # the message lists the joints in another order: columns permuted accordingly
    order = [2, 0, 1]
    names = [ARM[i] for i in order]
    q = np.array([s[0][order] for s in samples])
    v = np.array([s[1][order] for s in samples]) if "v" in given else None
    a = np.array([s[2][order] for s in samples]) if "a" in given else None
    ref = rm.joint_trajectory_to_reference(trajectory_msg(names, times, q, v, a), ARM)
    for t in np.linspace(0.0, 1.25, 23):
        expected = polynomial(coeffs, t)
        got = ref.sample(t)
        assert_close(got[0], expected[0], rtol=1e-12, what=f"q({t})")
        if degree > 1:
            assert_close(got[1], expected[1], rtol=1e-11, what=f"v({t})")
            assert_close(got[2], expected[2], rtol=1e-9, what=f"a({t})")
        else:
            assert_close(got[1], expected[1], rtol=1e-12, what=f"v({t})")


def test_trajectory_holds_first_and_last_points_at_rest():
    q = np.array([[0.0, 1, 2], [1.0, 2, 3]])
    ref = rm.joint_trajectory_to_reference(trajectory_msg(ARM, [0.5, 1.0], q, v=np.ones((2, 3))), ARM)
    for t, k in [(-1.0, 0), (0.2, 0), (1.0 + 1e-9, 1), (7.0, 1)]:
        qs, vs, as_ = ref.sample(t)
        assert qs.tolist() == q[k].tolist() and not vs.any() and not as_.any()
    single = rm.joint_trajectory_to_reference(trajectory_msg(ARM, [0.0], q[:1]), ARM)
    assert single.sample(3.0)[0].tolist() == q[0].tolist()


def _trajectory_cases():
    q2 = np.zeros((2, 3))
    ok_times = [0.1, 0.2]
    cases = [
        (trajectory_msg(ARM, [0.1, 0.1], q2), r"points\[1\].time_from_start 0.1 s is not after points\[0\]"),
        (trajectory_msg(ARM, [0.2, 0.1], q2), r"points\[1\].time_from_start"),
        (trajectory_msg(ARM[:2], ok_times, q2[:, :2]), r"lacks required joint\(s\) \['j3'\]"),
        (trajectory_msg(ARM + ["j9"], ok_times, np.zeros((2, 4))), r"\['j9'\] this controller does not command"),
        (trajectory_msg(["j1", "j1", "j3"], ok_times, q2), "has 'j1' twice"),
        (trajectory_msg(ARM, [], np.zeros((0, 3))), "JointTrajectory.points is empty"),
        (trajectory_msg(ARM, ok_times, q2, a=q2), "accelerations given without velocities"),
        (trajectory_msg(ARM, ok_times, np.array([[0, 0, 0], [0, math.nan, 0]])),
         r"points\[1\].positions is not finite"),
    ]
    short = trajectory_msg(ARM, ok_times, q2)
    short.points[1].positions = [0.0, 0.0]
    cases.append((short, r"points\[1\].positions has 2 entries for 3 names"))
    partial = trajectory_msg(ARM, ok_times, q2, v=q2)
    partial.points[1].velocities = []
    cases.append((partial, r"points\[1\].velocities has 0 entries for 3 names \(give it for every point or none\)"))
    return cases


@pytest.mark.parametrize("msg, reason", _trajectory_cases())
def test_hostile_trajectories_are_rejected_with_the_field_named(msg, reason):
    with pytest.raises(rm.MessageRejected, match=reason):
        rm.joint_trajectory_to_reference(msg, ARM)


def test_trajectory_start_stamp_and_duration_nanoseconds():
    msg = trajectory_msg(ARM, [0.0, 1.0], np.zeros((2, 3)))
    msg.points[1].time_from_start = Duration(sec=0, nanosec=1)
    msg.header.stamp = rm.seconds_to_time(100.25)
    ref = rm.joint_trajectory_to_reference(msg, ARM)
    assert ref.times.tolist() == [0.0, 1e-9] and ref.start_stamp == 100.25


# ------------------------------------------------------------------------------------------ multiarrays
def test_float64_multiarray_labels_and_length_check():
    labels = ["m", "mcx", "mcy"]
    msg = rm.make_float64_multiarray(np.array([1.0, 2.0, 3.0]), labels)
    assert rm.float64_multiarray_labels(msg) == labels
    assert rm.float64_multiarray_to_array(msg, 3).tolist() == [1, 2, 3]
    plain = rm.make_float64_multiarray([1.0, 2.0], dim_label="joints")
    assert [(d.label, d.size, d.stride) for d in plain.layout.dim] == [("joints", 2, 2)]
    assert rm.float64_multiarray_labels(plain) is None
    with pytest.raises(rm.MessageRejected, match="Float64MultiArray.data has 2 entries, expected 7"):
        rm.float64_multiarray_to_array(plain, 7)
    with pytest.raises(rm.MessageRejected, match=r"not finite at \[1\]"):
        rm.float64_multiarray_to_array(Float64MultiArray(data=[0.0, math.inf]), 2)
    offset = Float64MultiArray(data=[0.0, 1.0])
    offset.layout.data_offset = 1
    with pytest.raises(rm.MessageRejected, match="data_offset is 1"):
        rm.float64_multiarray_to_array(offset, 2)
    with pytest.raises(ValueError, match="2 labels for 3 values"):
        rm.make_float64_multiarray([1.0, 2, 3], ["a", "b"])


@pytest.mark.parametrize("labels", [None, [], ["m"], ["m", "mcx", "a_longer_label"], [f"p{i}" for i in range(69)]])
def test_serialized_float64_multiarray_is_the_typed_message(labels):
    """The patched CDR bytes deserialise to the typed message with the new values (label strings of every
    padding length, one dimension or 69, no values), for repeated calls on the same template."""
    from rclpy.serialization import deserialize_message
    n = 3 if labels is None else len(labels)
    rng = np.random.default_rng(n)
    template = rm.SerializedFloat64MultiArray(np.zeros(n), labels, dim_label="params")
    for values in (rng.normal(size=n), np.full(n, -0.0), np.full(n, np.inf), rng.normal(size=n)):
        got = deserialize_message(template.serialize(values), Float64MultiArray)
        want = rm.make_float64_multiarray(values, labels, dim_label="params")
        assert got == want
        assert np.array_equal(np.frombuffer(got.data), values) and np.signbit(got.data).tolist() == np.signbit(values).tolist()
    with pytest.raises(ValueError, match=f"{n + 1} values for a message of {n}"):
        template.serialize(np.zeros(n + 1))


# -------------------------------------------------------------------------------- inertia, diagnostics
def test_inertia_stamped_from_parameters_moves_inertia_to_the_com():
    # a point mass about the frame origin has zero inertia about its COM
    m, c = 2.0, np.array([0.1, -0.2, 0.3])
    pi_point = np.concatenate([[m], m * c, [m * (c @ c - c[0] ** 2), -m * c[0] * c[1], m * (c @ c - c[1] ** 2),
                                            -m * c[0] * c[2], -m * c[1] * c[2], m * (c @ c - c[2] ** 2)]])
    msg = rm.inertial_parameters_to_inertia_stamped(1.0, "tool", pi_point)
    body = msg.inertia
    assert msg.header.frame_id == "tool" and body.m == m
    assert_close([body.com.x, body.com.y, body.com.z], c, rtol=1e-14)
    assert_close([body.ixx, body.ixy, body.ixz, body.iyy, body.iyz, body.izz], np.zeros(6), atol=1e-15)
    inertia_com = np.array([[0.3, 0.01, -0.02], [0.01, 0.2, 0.03], [-0.02, 0.03, 0.1]])
    body = rm.inertial_parameters_to_inertia_stamped(0.0, "tool", numpy_inertia_params(m, c, inertia_com)).inertia
    assert_close([body.ixx, body.ixy, body.ixz, body.iyy, body.iyz, body.izz],
                 inertia_com[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]], rtol=1e-14)
    with pytest.raises(ValueError, match="not symmetric"):
        rm.make_inertia_stamped(0.0, "tool", 1.0, c, inertia_com + np.triu(np.ones((3, 3)), 1))


def test_diagnostic_array_levels_and_values():
    msg = rm.make_diagnostic_array(2.0, "estimator", "WARN", "slow", {"solve_ms": 1.25, "iterations": 7})
    status = msg.status[0]
    assert status.level == DiagnosticStatus.WARN and status.name == "estimator" and status.message == "slow"
    assert [(kv.key, kv.value) for kv in status.values] == [("solve_ms", "1.25"), ("iterations", "7")]
    assert rm.make_diagnostic_array(0.0, "x", 2, "", {}).status[0].level == DiagnosticStatus.ERROR
    with pytest.raises(ValueError, match="not one of"):
        rm.make_diagnostic_array(0.0, "x", "FATAL", "", {})


# ------------------------------------------------------------------------------------- QoS and real DDS
def test_qos_compatibility_as_ros_notes_require():
    compatible = QoSCompatibility.OK
    # best-effort sensor input connects to reliable broadcasters
    assert qos_check_compatible(qos.JOINT_STATE_OUTPUT_QOS, qos.SENSOR_INPUT_QOS)[0] == compatible
    # the command publisher is reliable, so the reliable effort controller connects; a best-effort one would not
    assert qos_check_compatible(qos.COMMAND_QOS, qos.COMMAND_QOS)[0] == compatible
    assert qos_check_compatible(qos.SENSOR_INPUT_QOS, qos.COMMAND_QOS)[0] == QoSCompatibility.ERROR
    assert qos_check_compatible(qos.LATCHED_QOS, qos.ESTIMATE_QOS)[0] == compatible


def test_isolated_domains_differ_and_environment_is_restored():
    before = os.environ.get("ROS_DOMAIN_ID")
    with isolated_ros_domain() as a, isolated_ros_domain() as b:
        assert a != b and 1 <= a <= 101 and 1 <= b <= 101
        assert os.environ["ROS_DOMAIN_ID"] == str(b)
        assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert os.environ.get("ROS_DOMAIN_ID") == before


def test_nodes_in_different_isolated_domains_do_not_connect():
    from rclpy.node import Node
    from std_msgs.msg import String

    from robodyn_ros.ros.testing import make_executor, ros_context

    with ros_context() as a, ros_context() as b:
        assert a.get_domain_id() != b.get_domain_id()
        talker, listener = Node("talker", context=a), Node("listener", context=b)
        executor = make_executor("single", a)
        executor.add_node(talker)
        try:
            pub = talker.create_publisher(String, "chatter", qos.COMMAND_QOS)
            listener.create_subscription(String, "chatter", lambda msg: None, qos.COMMAND_QOS)
            assert not spin_until(executor, lambda: pub.get_subscription_count() > 0, timeout=1.0)
        finally:
            executor.shutdown()
            talker.destroy_node()
            listener.destroy_node()


@pytest.mark.parametrize("executor", ["single", "events"])
def test_dds_round_trip_joint_state_in_then_command_out(executor):
    """A talker publishes JointState (reliable, like joint_state_broadcaster); a controller node reads it
    best-effort by name and answers with a reliable Float64MultiArray, as the nodes will."""
    commands = []
    with ros_session(executor) as ros:
        robot, controller = ros.node("robot"), ros.node("controller")
        state_pub = robot.create_publisher(JointState, "joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        robot.create_subscription(Float64MultiArray, "effort_controller/commands", commands.append, qos.COMMAND_QOS)
        command_pub = controller.create_publisher(Float64MultiArray, "effort_controller/commands", qos.COMMAND_QOS)
        cache = {}

        def on_state(msg):
            _, q, v, _ = rm.joint_state_to_arrays(msg, ARM, cache)
            command_pub.publish(rm.make_float64_multiarray(-10.0 * q - v))

        controller.create_subscription(JointState, "joint_states", on_state, qos.SENSOR_INPUT_QOS)
        assert spin_until(ros.executor, lambda: state_pub.get_subscription_count() == 1
                          and command_pub.get_subscription_count() == 1, timeout=10.0), "discovery failed"
        state_pub.publish(rm.make_joint_state(1.0, ["j3", "j1", "j2"], [0.3, 0.1, 0.2], [3.0, 1.0, 2.0]))
        assert spin_until(ros.executor, lambda: commands, timeout=10.0), "no command came back"
    assert_close(rm.float64_multiarray_to_array(commands[0], 3), [-2.0, -4.0, -6.0], rtol=1e-15)


# --- the nodes' 1 kHz paths on CDR bytes, against rclpy's own serialisation

def _big_endian_joint_state(stamp_ns, names, arrays):
    """A big-endian CDR JointState built by hand (rclpy writes little endian only): the same field rules."""
    import struct

    body = bytearray()

    def align(n):
        body.extend(b"\0" * (-len(body) % n))

    def string(text):
        align(4)
        body.extend(struct.pack(">I", len(text) + 1) + text.encode() + b"\0")

    body.extend(struct.pack(">iI", *divmod(stamp_ns, 1_000_000_000)))
    string("")
    align(4)
    body.extend(struct.pack(">I", len(names)))
    for name in names:
        string(name)
    for values in arrays:
        align(4)
        body.extend(struct.pack(">I", len(values)))
        if len(values):
            align(8)
            body.extend(np.asarray(values, dtype=">f8").tobytes())
    return b"\x00\x00\x00\x00" + bytes(body)


def test_raw_joint_state_reads_as_the_deserialised_message():
    from rclpy.serialization import serialize_message

    names = ["j2", "j0", "gripper", "j1"]
    rng = np.random.default_rng(3)
    layouts, cache = {}, {}
    for k, (velocity, effort) in enumerate([(True, True), (True, False), (False, True), (True, True)]):
        q, v, tau = rng.normal(size=(3, 4))
        msg = rm.make_joint_state(1.25 + k, names, q, v if velocity else None, tau if effort else None)
        raw = serialize_message(msg)
        want = rm.joint_state_to_arrays(msg, ["j0", "j1", "j2"])
        got = rm.joint_state_to_arrays(rm.RawJointState(raw, layouts), ["j0", "j1", "j2"], cache)
        assert got[0] == want[0]
        for a, b in zip(got[1:], want[1:]):
            assert (a is None and b is None) or np.array_equal(a, b)
    # the same layout again reads the new values; another name order is parsed anew
    msg = rm.make_joint_state(7.5, names[::-1], np.arange(4.0), np.ones(4), np.zeros(4))
    got = rm.joint_state_to_arrays(rm.RawJointState(serialize_message(msg), layouts), ["j0", "j1", "j2"], cache)
    assert got[0] == 7.5 and got[1].tolist() == [2.0, 0.0, 3.0]
    # big endian (the other CDR byte order)
    raw = _big_endian_joint_state(3_500_000_000, ["j0", "j1"], [[1.0, -2.0], [0.5, 0.25], []])
    t, q, v, tau = rm.joint_state_to_arrays(rm.RawJointState(raw, {}), ["j1", "j0"])
    assert t == 3.5 and q.tolist() == [-2.0, 1.0] and v.tolist() == [0.25, 0.5] and tau is None


@pytest.mark.parametrize("cut", [3, 10, 30, -9])
def test_raw_joint_state_refuses_bytes_that_are_no_joint_state_in_one_line(cut):
    from rclpy.serialization import serialize_message

    raw = serialize_message(rm.make_joint_state(1.0, ["a", "b"], np.ones(2), np.ones(2), np.ones(2)))
    rm.RawJointState(raw, layouts := {})                  # a layout remembered from a good message
    with pytest.raises(rm.MessageRejected, match="^JointState is not a valid CDR message") as info:
        rm.RawJointState(raw[:cut], layouts)
    assert "\n" not in str(info.value)


def test_raw_wrench_and_command_read_as_the_deserialised_messages():
    from rclpy.serialization import serialize_message

    w = np.array([1.5, -2.0, 3.25, 0.1, -0.2, 0.3])
    msg = rm.array_to_wrench_stamped(12.345, "tool0", w)
    assert rm.raw_wrench_stamped_to_array(serialize_message(msg))[:2] == rm.wrench_stamped_to_array(msg)[:2]
    assert np.array_equal(rm.raw_wrench_stamped_to_array(serialize_message(msg))[2], w)
    bad = rm.array_to_wrench_stamped(1.0, "tool0", w)
    bad.wrench.torque.y = float("nan")
    with pytest.raises(rm.MessageRejected, match=r"WrenchStamped.wrench is not finite in \['torque.y'\]"):
        rm.raw_wrench_stamped_to_array(serialize_message(bad))
    command = rm.make_float64_multiarray(np.arange(7.0))
    assert rm.raw_float64_multiarray_to_array(serialize_message(command), 7).tolist() == list(range(7))
    for values, expected, match in [(np.arange(6.0), 7, "data has 6 entries, expected 7"),
                                    (np.array([0.0, np.inf]), 2, r"not finite at \[1\]")]:
        raw = serialize_message(rm.make_float64_multiarray(values))
        for convert, arg in ((rm.raw_float64_multiarray_to_array, raw),
                             (rm.float64_multiarray_to_array, rm.make_float64_multiarray(values))):
            with pytest.raises(rm.MessageRejected, match=match):
                convert(arg, expected)
    with pytest.raises(rm.MessageRejected, match="^Float64MultiArray is not a valid CDR message"):
        rm.raw_float64_multiarray_to_array(serialize_message(command)[:9], 7)


def test_serialized_joint_state_and_wrench_deserialise_to_the_typed_messages():
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import WrenchStamped
    from rclpy.serialization import deserialize_message

    names = [f"panda_joint{i}" for i in range(1, 8)]
    joint = rm.SerializedJointState(names)
    wrench = rm.SerializedWrenchStamped("panda_link8")
    rng = np.random.default_rng(5)
    for k in range(3):
        q, v, tau = rng.normal(size=(3, 7))
        for view, values in zip(joint.values, (q, v, tau)):
            view[:] = values
        stamp = Time(sec=100 + k, nanosec=123_456_789 * k)
        msg = deserialize_message(joint.serialize(stamp), JointState)
        assert list(msg.name) == names and msg.header.stamp == stamp and msg.header.frame_id == ""
        assert np.array_equal(msg.position, q) and np.array_equal(msg.velocity, v) and np.array_equal(msg.effort, tau)
        w = rng.normal(size=6)
        got = rm.wrench_stamped_to_array(deserialize_message(wrench.serialize(stamp, w), WrenchStamped))
        assert got[0] == rm.time_to_seconds(stamp) and got[1] == "panda_link8" and np.array_equal(got[2], w)
