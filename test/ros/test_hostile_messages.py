"""Hostile messages (issue 9): any JointState, WrenchStamped, JointTrajectory or Float64MultiArray,
built as a real ROS 2 message object, goes through the converters of robodyn_ros/ros/messages.py and
either gives finite arrays of the right shape or raises MessageRejected -- never another exception.

Property-based (hypothesis), derandomized so that every run checks the same examples.
"""
import math

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="the ROS 2 Python client library (rclpy) is not installed")
pytest.importorskip("sensor_msgs.msg", reason="sensor_msgs is not installed")
pytest.importorskip("trajectory_msgs.msg", reason="trajectory_msgs is not installed")

from builtin_interfaces.msg import Duration, Time  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from hypothesis import HealthCheck, event, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from robodyn_ros.ros.messages import (  # noqa: E402
    MessageRejected, float64_multiarray_to_array, joint_state_to_arrays, joint_trajectory_to_reference,
    wrench_stamped_to_array)

JOINTS = ("shoulder", "elbow", "wrist")
N = len(JOINTS)
SETTINGS = dict(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------ strategies
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-10.0, 10.0),
                   st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, np.nan, np.inf]))
NAMES = st.one_of(st.sampled_from(JOINTS), st.sampled_from(["gripper", "", " shoulder", "SHOULDER", "名前"]),
                  st.text(max_size=6))
INT32 = st.integers(-2**31, 2**31 - 1)
UINT32 = st.integers(0, 2**32 - 1)


def float_lists(n_names):
    """Mostly one value per name (so the checks after the length check run), sometimes other lengths."""
    return st.one_of(st.lists(FLOATS, min_size=n_names, max_size=n_names),
                     st.lists(FLOATS, max_size=n_names + 2), st.just([]),
                     st.lists(st.just(np.nan), min_size=n_names, max_size=n_names))


def clean_lists(n_names):
    """One value per name, plausible or at the edge of what converters accept (MAX_MAGNITUDE)."""
    return st.lists(st.one_of(st.floats(-1e3, 1e3), st.sampled_from([1e100, -1e100, 9.9e99])),
                    min_size=n_names, max_size=n_names)


@st.composite
def joint_states(draw):
    names = draw(st.one_of(st.permutations(JOINTS).map(list),
                           st.permutations(JOINTS + ("gripper",)).map(list),
                           st.lists(NAMES, max_size=6)), label="names")
    msg = JointState()
    msg.header.stamp = Time(sec=draw(INT32, label="sec"), nanosec=draw(UINT32, label="nanosec"))
    msg.header.frame_id = draw(st.text(max_size=4), label="frame_id")
    msg.name = names
    msg.position = draw(float_lists(len(names)), label="position")
    msg.velocity = draw(float_lists(len(names)), label="velocity")
    msg.effort = draw(float_lists(len(names)), label="effort")
    return msg


@st.composite
def wrenches(draw):
    msg = WrenchStamped()
    msg.header.stamp = Time(sec=draw(INT32), nanosec=draw(UINT32))
    msg.header.frame_id = draw(st.text(max_size=8))
    f, t = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z, t.x, t.y, t.z = draw(st.lists(FLOATS, min_size=6, max_size=6))
    return msg


@st.composite
def trajectories(draw):
    names = draw(st.one_of(st.permutations(JOINTS).map(list), st.permutations(JOINTS).map(list),
                           st.lists(NAMES, max_size=5)), label="names")
    msg = JointTrajectory()
    msg.header.stamp = Time(sec=draw(INT32), nanosec=draw(UINT32))
    msg.joint_names = names
    n_points = draw(st.integers(0, 5), label="points")
    # half the trajectories have plausible or just-accepted values (so conversion and sampling run)
    values = draw(st.sampled_from([float_lists, clean_lists]), label="values")
    increasing = draw(st.sampled_from([True, True, True, False]), label="increasing times")
    t = 0
    points = []
    with_v, with_a = draw(st.booleans(), label="velocities"), draw(st.booleans(), label="accelerations")
    for _ in range(n_points):
        p = JointTrajectoryPoint()
        p.positions = draw(values(len(names)))
        if with_v:
            p.velocities = draw(values(len(names)))
        if with_a:
            p.accelerations = draw(values(len(names)))
        if increasing:   # increasing times, down to 1 ns steps, so that the segment polynomials are exercised
            t += draw(st.one_of(st.just(1), st.integers(1, 10**10), st.integers(1, 2**40)))
            sec, nanosec = divmod(t, 10**9)
            p.time_from_start = Duration(sec=min(sec, 2**31 - 1), nanosec=nanosec)
        else:
            p.time_from_start = Duration(sec=draw(INT32), nanosec=draw(UINT32))
        points.append(p)
    msg.points = points
    return msg


@st.composite
def multiarrays(draw):
    msg = Float64MultiArray()
    msg.data = draw(float_lists(N))
    msg.layout.data_offset = draw(st.one_of(st.just(0), UINT32))
    msg.layout.dim = [MultiArrayDimension(label=draw(st.text(max_size=3)), size=draw(UINT32), stride=draw(UINT32))
                      for _ in range(draw(st.integers(0, 3)))]
    return msg


# -------------------------------------------------------------------------------------------- checks
def finite(x, shape):
    x = np.asarray(x)
    assert x.dtype == np.float64 and x.shape == shape and np.isfinite(x).all(), (x, shape)


def check_joint_state(msg, cache=None):
    try:
        stamp, q, v, tau = joint_state_to_arrays(msg, JOINTS, index_cache=cache)
    except MessageRejected as exc:
        assert exc.reason
        return "rejected"
    assert math.isfinite(stamp)
    finite(q, (N,))
    for x in (v, tau):
        assert x is None or finite(x, (N,)) is None
    return "accepted"


def check_trajectory(msg):
    try:
        ref = joint_trajectory_to_reference(msg, JOINTS)
    except MessageRejected as exc:
        assert exc.reason
        return "rejected"
    k = len(msg.points)
    finite(ref.times, (k,))
    assert (np.diff(ref.times) > 0).all()
    finite(ref.q, (k, N))
    for x in (ref.v, ref.a):
        assert x is None or finite(x, (k, N)) is None
    finite(ref.coefficients, (k - 1, 6, N))
    assert math.isfinite(ref.start_stamp)
    ts = np.concatenate([ref.times, (ref.times[:-1] + ref.times[1:]) / 2, [ref.times[0] - 1, ref.times[-1] + 1]])
    with np.errstate(over="raise", invalid="raise"):   # an overflow while sampling is a failure too
        for t in ts:
            for x in ref.sample(t):
                finite(x, (N,))
    return "accepted"


# ---------------------------------------------------------------------------------------------- tests
_CACHE = {}   # one cache across examples: a flood of hostile name orders must not break or grow it


@settings(max_examples=200, **SETTINGS)
@given(msg=joint_states())
def test_joint_state_is_converted_or_rejected(msg):
    verdict = check_joint_state(msg)
    assert check_joint_state(msg, _CACHE) == verdict   # the cached path gives the same verdict
    event(verdict)
    assert len(_CACHE) <= 32


@settings(max_examples=100, **SETTINGS)
@given(msg=wrenches())
def test_wrench_is_converted_or_rejected(msg):
    try:
        stamp, frame_id, w = wrench_stamped_to_array(msg)
    except MessageRejected as exc:
        assert exc.reason
        return
    assert math.isfinite(stamp) and isinstance(frame_id, str)
    finite(w, (6,))


def _trajectory(times_ns, positions, velocities=None, names=JOINTS):
    msg = JointTrajectory()
    msg.joint_names = list(names)
    for k, (t, q) in enumerate(zip(times_ns, positions)):
        p = JointTrajectoryPoint(positions=[float(x) for x in q])
        if velocities is not None:
            p.velocities = [float(x) for x in velocities[k]]
        p.time_from_start = Duration(sec=t // 10**9, nanosec=t % 10**9)
        msg.points.append(p)
    return msg


@example(msg=_trajectory([0, 1], [[0.0] * 3, [1e308, 0.0, 0.0]]))
@example(msg=_trajectory([0, 1], [[-1e308] * 3, [1e308] * 3]))
@settings(max_examples=150, **SETTINGS)
@given(msg=trajectories())
def test_trajectory_is_converted_or_rejected(msg):
    event(check_trajectory(msg))


@settings(max_examples=100, **SETTINGS)
@given(msg=multiarrays())
def test_float64_multiarray_is_converted_or_rejected(msg):
    try:
        x = float64_multiarray_to_array(msg, N)
    except MessageRejected as exc:
        assert exc.reason
        return
    finite(x, (N,))


def test_well_formed_messages_are_accepted():
    """The properties' 'accepted' branches are reachable."""
    js = JointState(name=["wrist", "shoulder", "elbow"], position=[1.0, 2.0, 3.0])
    assert check_joint_state(js) == "accepted"
    assert check_trajectory(_trajectory([0, 10**9], [[0.0] * 3, [1.0] * 3], [[0.0] * 3, [0.0] * 3])) == "accepted"
