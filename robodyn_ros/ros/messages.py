"""Message <-> array conversion and validation for the nodes: nodes convert, call the library, publish.

Every ``*_to_*`` reader returns NumPy float64 arrays or raises :class:`MessageRejected` whose reason names
the field (``"JointState.position has 6 entries for 7 names"``), so a node logs the reason and drops the
message instead of feeding garbage to a controller. Every ``make_*`` builder takes arrays and returns a
message; a builder given bad arrays raises a plain ``ValueError`` (a programming error, not input).

Conventions: joint order in ``/joint_states`` is not guaranteed, so joints are always mapped
BY NAME; joint_state_broadcaster sends NaN for an interface a joint does not have; wrenches are
``[fx, fy, fz, tx, ty, tz]``.
"""
from array import array

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from robodyn_ros.bags import cdr
from robodyn_ros.bags.cdr import encode_float64_multiarray
from robodyn_ros.control.trajectory_interpolation import TrajectoryReference, trajectory_coefficients
from robodyn_ros.model.model import MAX_MAGNITUDE
from robodyn_ros.model.spatial import numpy_inertia_split


_NOT_USABLE = f"(NaN, inf or |x| > {MAX_MAGNITUDE:g})"


def _usable(x):
    """True where ``x`` is finite and within the library's accepted magnitude (model.MAX_MAGNITUDE): the
    numbers a converter lets through are safe for every later computation (no overflow to inf/NaN)."""
    return np.abs(x) <= MAX_MAGNITUDE


def _all_usable(x):
    """``_usable(x).all()`` in two NumPy calls (the 1 kHz readers' check): NaN propagates through ``max``
    and fails the comparison."""
    return x.size == 0 or bool(np.abs(x).max() <= MAX_MAGNITUDE)


class MessageRejected(ValueError):
    """An incoming message that cannot be used; ``reason`` names the offending field."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


# ----------------------------------------------------------------------------------------------- stamps
_NS = 1_000_000_000


def time_to_seconds(stamp):
    """``builtin_interfaces/Time`` (or ``Duration``) -> float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9


def seconds_to_time(seconds):
    """Float seconds -> ``builtin_interfaces/Time`` (``nanosec`` in [0, 1e9), negative times floor)."""
    sec, nanosec = _split_seconds(seconds)
    return Time(sec=sec, nanosec=nanosec)


def seconds_to_duration(seconds):
    """Float seconds -> ``builtin_interfaces/Duration``."""
    sec, nanosec = _split_seconds(seconds)
    return Duration(sec=sec, nanosec=nanosec)


duration_to_seconds = time_to_seconds


def _split_seconds(seconds):
    total_ns = int(round(float(seconds) * _NS))
    return total_ns // _NS, total_ns % _NS


# ------------------------------------------------------------------------------------------ joint state
def joint_names_permutation(msg_names, joint_names, what="JointState"):
    """Indices ``idx`` (n,) such that ``msg_field[idx]`` is in ``joint_names`` order.

    Raises MessageRejected on duplicate names in the message or a required joint missing from it; names
    the message has beyond ``joint_names`` (grippers, other arms) are ignored.
    """
    position_of = {}
    for i, name in enumerate(msg_names):
        if name in position_of:
            raise MessageRejected(f"{what}.name has '{name}' twice (entries {position_of[name]} and {i})")
        position_of[name] = i
    missing = [name for name in joint_names if name not in position_of]
    if missing:
        raise MessageRejected(f"{what}.name lacks required joint(s) {missing}")
    return np.array([position_of[name] for name in joint_names], dtype=np.intp)


_CACHE_LIMIT = 32  # distinct name orders remembered; a flood of hostile orders cannot grow memory


def joint_state_to_arrays(msg, joint_names, index_cache=None):
    """``sensor_msgs/JointState`` -> ``(stamp_seconds, q (n,), v (n,) or None, tau (n,) or None)``.

    Mapping is by name, in ``joint_names`` order (n = len(joint_names)). ``index_cache`` (a dict the
    caller keeps, keyed by the tuple of message names) holds the validated permutation so that the 1 kHz
    path builds no dict per message; keep one cache per ``joint_names`` list (the key does not include it).

    Rejected (MessageRejected): duplicate or missing names, ``position`` not one entry per name,
    ``velocity``/``effort`` neither empty nor one entry per name, a non-finite position of a required
    joint, a non-finite velocity or effort of a required joint unless ALL required joints have NaN there.
    That exception is joint_state_broadcaster's way of saying "this interface does not exist": an empty
    field and an all-NaN field both give None.
    """
    key = tuple(msg.name)
    idx = None if index_cache is None else index_cache.get(key)
    if idx is None:
        idx = joint_names_permutation(key, joint_names)
        if index_cache is not None:
            if len(index_cache) >= _CACHE_LIMIT:
                index_cache.clear()
            index_cache[key] = idx
    n_msg = len(key)
    if len(msg.position) != n_msg:
        raise MessageRejected(f"JointState.position has {len(msg.position)} entries for {n_msg} names")
    q = np.frombuffer(msg.position, dtype=np.float64)[idx] if n_msg else np.zeros(0)
    if not _all_usable(q):
        raise MessageRejected(f"JointState.position is not finite for {_bad_names(q, idx, key)} {_NOT_USABLE}")
    v = _optional_joint_field(msg.velocity, "velocity", idx, key)
    tau = _optional_joint_field(msg.effort, "effort", idx, key)
    stamp = msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9, q, v, tau


class _RawHeader:
    __slots__ = ("stamp",)


class RawJointState:
    """A CDR-encoded ``sensor_msgs/JointState`` (the bytes a raw subscription takes) read as the message:
    ``name`` (tuple), ``position``, ``velocity``, ``effort`` (float64 arrays, views of the bytes when little
    endian) and ``header.stamp``, which is what :func:`joint_state_to_arrays` reads. Taking the bytes and
    reading them so costs two thirds of taking and reading rclpy's message (benchmarks/bench_message_io.py).

    ``layouts``: a dict the caller keeps (one per subscription) remembering the byte layout of the last
    message (:func:`robodyn_ros.bags.cdr.joint_state_layout`), so names are parsed again only when the
    frame_id, the names or the array lengths change. Raises :class:`MessageRejected` on bytes that are no
    JointState."""

    __slots__ = ("name", "position", "velocity", "effort", "header")

    def __init__(self, raw, layouts):
        layout = layouts.get("layout")
        if layout is None or not _same_layout(raw, layout, layouts["key"]):
            try:
                layout = cdr.joint_state_layout(raw)
            except cdr.CORRUPT as exc:
                raise MessageRejected(f"JointState is not a valid CDR message ({exc})") from None
            layouts["layout"], layouts["key"] = layout, bytes(raw[cdr.HEADER_SIZE + 8:layout.key_end])
        view = memoryview(raw)
        if layout.endian == "<":   # float64 sequences as memoryviews of the bytes: what np.frombuffer reads fastest
            self.position, self.velocity, self.effort = (
                view[offset:offset + 8 * count].cast("d") for offset, count in zip(layout.data_offsets, layout.counts))
        else:
            self.position, self.velocity, self.effort = (
                np.frombuffer(raw, dtype=">f8", count=count, offset=offset).astype(np.float64)
                for offset, count in zip(layout.data_offsets, layout.counts))
        self.name = layout.names
        sec, nanosec = cdr.TIME[layout.endian].unpack_from(raw, cdr.HEADER_SIZE)
        self.header = _RawHeader()
        self.header.stamp = Time(sec=sec, nanosec=nanosec)


def _same_layout(raw, layout, key):
    """Whether ``raw`` has ``layout``: the same encapsulation, frame_id, names (bytes ``key``) and array
    lengths, and no fewer bytes."""
    if len(raw) < layout.size or raw[:2] != (b"\x00\x01" if layout.endian == "<" else b"\x00\x00"):
        return False
    if raw[cdr.HEADER_SIZE + 8:layout.key_end] != key:
        return False
    read = cdr.U32[layout.endian].unpack_from
    return all(read(raw, offset)[0] == count for offset, count in zip(layout.count_offsets, layout.counts))


def _optional_joint_field(values, field, idx, names):
    if len(values) == 0:
        return None
    if len(values) != len(names):
        raise MessageRejected(f"JointState.{field} has {len(values)} entries for {len(names)} names")
    x = np.frombuffer(values, dtype=np.float64)[idx]
    if _all_usable(x):
        return x
    if np.isnan(x).all():
        return None
    raise MessageRejected(f"JointState.{field} is not finite for {_bad_names(x, idx, names)} {_NOT_USABLE}")


def _bad_names(x, idx, names):
    return [names[idx[i]] for i in np.flatnonzero(~_usable(x))]


def make_joint_state(stamp, names, q, v=None, tau=None):
    """``sensor_msgs/JointState`` from ``q``, ``v``, ``tau`` (n,) each (None -> empty field)."""
    n = len(names)
    msg = JointState()
    msg.header.stamp = stamp if isinstance(stamp, Time) else seconds_to_time(stamp)
    msg.name = list(names)
    msg.position = _float_array(q, n, "q")
    if v is not None:
        msg.velocity = _float_array(v, n, "v")
    if tau is not None:
        msg.effort = _float_array(tau, n, "tau")
    return msg


def _float_array(x, n, what):
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.shape != (n,):
        raise ValueError(f"{what} has shape {x.shape}, expected ({n},)")
    return array("d", x.tobytes())


# --------------------------------------------------------------------------------------------- wrench
def wrench_stamped_to_array(msg):
    """``geometry_msgs/WrenchStamped`` -> ``(stamp_seconds, frame_id, w (6,) = [fx fy fz tx ty tz])``."""
    f, t = msg.wrench.force, msg.wrench.torque
    return _checked_wrench(time_to_seconds(msg.header.stamp), msg.header.frame_id,
                           np.array([f.x, f.y, f.z, t.x, t.y, t.z]))


def raw_wrench_stamped_to_array(raw):
    """:func:`wrench_stamped_to_array` of a CDR-encoded ``geometry_msgs/WrenchStamped`` (the bytes a raw
    subscription takes)."""
    try:
        stamp_ns, frame_id, w = cdr.decode_wrench_stamped(raw)
    except cdr.CORRUPT as exc:
        raise MessageRejected(f"WrenchStamped is not a valid CDR message ({exc})") from None
    return _checked_wrench(stamp_ns // _NS + (stamp_ns % _NS) * 1e-9, frame_id, np.array(w))


def _checked_wrench(t, frame_id, w):
    if not _all_usable(w):
        labels = ("force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z")
        bad = [labels[i] for i in np.flatnonzero(~_usable(w))]
        raise MessageRejected(f"WrenchStamped.wrench is not finite in {bad} {_NOT_USABLE}")
    return t, frame_id, w


def array_to_wrench_stamped(stamp, frame_id, w):
    """``[fx fy fz tx ty tz]`` (6,) -> ``geometry_msgs/WrenchStamped``."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (6,):
        raise ValueError(f"wrench has shape {w.shape}, expected (6,)")
    msg = WrenchStamped()
    msg.header.stamp = stamp if isinstance(stamp, Time) else seconds_to_time(stamp)
    msg.header.frame_id = frame_id
    f, t = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z, t.x, t.y, t.z = (float(c) for c in w)
    return msg


# ----------------------------------------------------------------------------------------- trajectory
def joint_trajectory_to_reference(msg, joint_names):
    """``trajectory_msgs/JointTrajectory`` -> :class:`~robodyn_ros.control.trajectory_interpolation.TrajectoryReference`
    in ``joint_names`` order: the points checked and mapped by name here, their segment polynomials
    (:func:`~robodyn_ros.control.trajectory_interpolation.trajectory_coefficients`) in the library.

    Rejected: no points, duplicate names, a required joint missing, a joint the controller does not
    command (a trajectory for other joints is not half-executed), a point whose positions are not one per
    name, velocities/accelerations given for some points only or with the wrong length, accelerations
    without velocities, non-finite values, ``time_from_start`` not strictly increasing.
    """
    names = tuple(msg.joint_names)
    idx = joint_names_permutation(names, joint_names, what="JointTrajectory.joint_names")
    commanded = set(joint_names)
    extra = [name for name in names if name not in commanded]
    if extra:
        raise MessageRejected(f"JointTrajectory.joint_names has joint(s) {extra} this controller does not command")
    points = msg.points
    if len(points) == 0:
        raise MessageRejected("JointTrajectory.points is empty")
    times = np.array([time_to_seconds(p.time_from_start) for p in points])
    decreasing = np.flatnonzero(np.diff(times) <= 0.0)
    if decreasing.size:
        k = int(decreasing[0]) + 1
        raise MessageRejected(f"JointTrajectory.points[{k}].time_from_start {times[k]:.9g} s is not after "
                              f"points[{k - 1}] ({times[k - 1]:.9g} s)")
    q = _trajectory_field(points, "positions", idx, len(names), required=True)
    v = _trajectory_field(points, "velocities", idx, len(names), required=False)
    a = _trajectory_field(points, "accelerations", idx, len(names), required=False)
    if a is not None and v is None:
        raise MessageRejected("JointTrajectory.points[*].accelerations given without velocities")
    coefficients = trajectory_coefficients(times, q, v, a)
    if not np.isfinite(coefficients).all():   # e.g. a large change over a 1 ns segment
        k = int(np.argwhere(~np.isfinite(coefficients))[0, 0])
        raise MessageRejected(f"JointTrajectory.points[{k}] -> points[{k + 1}]: the segment polynomial "
                              "overflows (too large a change for its duration)")
    return TrajectoryReference(tuple(joint_names), times, q, v, a, coefficients,
                               time_to_seconds(msg.header.stamp))


def _trajectory_field(points, field, idx, n_names, required):
    lengths = [len(getattr(p, field)) for p in points]
    if not required and all(length == 0 for length in lengths):
        return None
    for k, length in enumerate(lengths):
        if length != n_names:
            raise MessageRejected(f"JointTrajectory.points[{k}].{field} has {length} entries for {n_names} "
                                  "names" + ("" if required else " (give it for every point or none)"))
    x = np.array([np.frombuffer(getattr(p, field), dtype=np.float64)[idx] for p in points])
    bad = np.argwhere(~_usable(x))
    if bad.size:
        raise MessageRejected(f"JointTrajectory.points[{bad[0, 0]}].{field} is not finite {_NOT_USABLE}")
    return x


# ------------------------------------------------------------------------------------------ multiarray
def _multiarray_dims(n, labels, dim_label):
    """``(label, size, stride)`` of each dimension of the layout :func:`make_float64_multiarray` writes."""
    if labels is None:
        return [(dim_label, n, n)]
    labels = list(labels)
    if len(labels) != n:
        raise ValueError(f"{len(labels)} labels for {n} values")
    return [(str(label), 1, 1) for label in labels]


def make_float64_multiarray(values, labels=None, dim_label=""):
    """``std_msgs/Float64MultiArray`` of ``values`` (n,).

    Without ``labels`` the layout has one dimension (``dim_label``, size n, stride n), what
    JointGroupEffortController and ``ros2 topic echo`` expect. With ``labels`` (n names, e.g. inertial
    parameter names) the layout has one dimension per label, each of size 1 and stride 1: the names
    travel with the numbers for humans and bag readers; ``data`` is still the flat (n,) vector.
    """
    x = np.ascontiguousarray(values, dtype=np.float64).ravel()
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride)
                      for label, size, stride in _multiarray_dims(x.size, labels, dim_label)]
    msg.data = array("d", x.tobytes())
    return msg


class SerializedFloat64MultiArray:
    """A ``std_msgs/Float64MultiArray`` with a fixed layout (e.g. one labelled dimension per value), kept
    serialized: :meth:`serialize` writes new values into the stored CDR bytes, for
    ``Publisher.publish(bytes)``. The layout with its labels is encoded once
    (:func:`robodyn_ros.bags.cdr.encode_float64_multiarray`); only ``data`` changes. In CDR the message
    ends with its float64 sequence, so the values are the last ``8 n`` bytes.
    (Its cost against rclpy's ``serialize_message``: docs/PERFORMANCE.md.)"""

    def __init__(self, values, labels=None, dim_label=""):
        x = np.ascontiguousarray(values, dtype=np.float64).ravel()
        self.size = x.size
        self._bytes = bytearray(encode_float64_multiarray(_multiarray_dims(x.size, labels, dim_label), x))

    def serialize(self, values):
        """CDR bytes (``bytes``) of the message with ``data`` = ``values`` (n,)."""
        x = np.ascontiguousarray(values, dtype="<f8").ravel()
        if x.size != self.size:
            raise ValueError(f"{x.size} values for a message of {self.size}")
        if self.size:
            self._bytes[-8 * self.size:] = x.tobytes()
        return bytes(self._bytes)


class SerializedJointState:
    """A ``sensor_msgs/JointState`` of the joints ``names`` (position, velocity and effort), kept serialized
    for ``Publisher.publish(bytes)``: the names are encoded once; ``values`` are the position, velocity and
    effort (n,) each, writable views of the stored bytes, and :meth:`serialize` writes the stamp. About two
    thirds of the cost of a typed publish (docs/PERFORMANCE.md)."""

    def __init__(self, names, frame_id=""):
        n = len(names)
        self._bytes = bytearray(cdr.encode_joint_state(0, frame_id, list(names), [np.zeros(n)] * 3))
        layout = cdr.joint_state_layout(self._bytes)
        self.values = tuple(np.frombuffer(self._bytes, dtype="<f8", count=n, offset=offset)
                            for offset in layout.data_offsets)

    def serialize(self, stamp):
        """CDR bytes of the message with ``stamp`` (``builtin_interfaces/Time``) and the current ``values``."""
        cdr.TIME["<"].pack_into(self._bytes, cdr.HEADER_SIZE, stamp.sec, stamp.nanosec)
        return bytes(self._bytes)


class SerializedWrenchStamped:
    """A ``geometry_msgs/WrenchStamped`` in ``frame_id`` kept serialized (as :class:`SerializedJointState`)."""

    def __init__(self, frame_id):
        self._bytes = bytearray(cdr.encode_wrench_stamped(0, frame_id, np.zeros(6)))

    def serialize(self, stamp, w):
        """CDR bytes of the message with ``stamp`` and the wrench ``w`` = ``[fx fy fz tx ty tz]`` (6,)."""
        cdr.TIME["<"].pack_into(self._bytes, cdr.HEADER_SIZE, stamp.sec, stamp.nanosec)
        self._bytes[-48:] = np.ascontiguousarray(w, dtype="<f8").tobytes()
        return bytes(self._bytes)


def float64_multiarray_labels(msg):
    """Per-value labels written by :func:`make_float64_multiarray` (None if the layout has none)."""
    dims = msg.layout.dim
    if len(dims) == len(msg.data) and all(d.size == 1 for d in dims):
        return [d.label for d in dims]
    return None


def float64_multiarray_to_array(msg, expected_len):
    """``std_msgs/Float64MultiArray`` -> (expected_len,) copy of ``data``.

    Rejected: a length other than ``expected_len`` (the controller would drop it silently), a nonzero
    ``layout.data_offset``, non-finite entries.
    """
    return _checked_multiarray(msg.layout.data_offset, msg.data, expected_len)


def _checked_multiarray(data_offset, data, expected_len):
    """A (expected_len,) float64 copy of ``data`` after the checks of :func:`float64_multiarray_to_array`."""
    if data_offset != 0:
        raise MessageRejected(f"Float64MultiArray.layout.data_offset is {data_offset}; only 0 is supported")
    if len(data) != expected_len:
        raise MessageRejected(f"Float64MultiArray.data has {len(data)} entries, expected {expected_len}")
    x = np.array(data, dtype=np.float64)
    if not _all_usable(x):
        raise MessageRejected(f"Float64MultiArray.data is not finite at {np.flatnonzero(~_usable(x)).tolist()} "
                              f"{_NOT_USABLE}")
    return x


def raw_float64_multiarray_to_array(raw, expected_len):
    """:func:`float64_multiarray_to_array` of a CDR-encoded ``std_msgs/Float64MultiArray`` (the bytes a raw
    subscription takes), with the same rejections."""
    try:
        _, data_offset, data = cdr.read_float64_multiarray(raw)
    except cdr.CORRUPT as exc:
        raise MessageRejected(f"Float64MultiArray is not a valid CDR message ({exc})") from None
    return _checked_multiarray(data_offset, data, expected_len)


# --------------------------------------------------------------------------------------------- inertia
def make_inertia_stamped(stamp, frame_id, mass, com, inertia_com):
    """``geometry_msgs/InertiaStamped``: ``mass``, ``com`` (3,) in ``frame_id``, ``inertia_com`` (3, 3)
    about the centre of mass in ``frame_id``'s axes (the URDF/SDF convention the message follows)."""
    com = np.asarray(com, dtype=np.float64)
    inertia = np.asarray(inertia_com, dtype=np.float64)
    if com.shape != (3,) or inertia.shape != (3, 3):
        raise ValueError(f"com has shape {com.shape} (expected (3,)), inertia {inertia.shape} (expected (3, 3))")
    if np.abs(inertia - inertia.T).max() > 1e-12 + 1e-9 * np.abs(inertia).max():   # allclose costs 150 us
        raise ValueError("inertia_com is not symmetric")
    msg = InertiaStamped()
    msg.header.stamp = stamp if isinstance(stamp, Time) else seconds_to_time(stamp)
    msg.header.frame_id = frame_id
    body = msg.inertia
    body.m = float(mass)
    body.com.x, body.com.y, body.com.z = (float(c) for c in com)
    body.ixx, body.ixy, body.ixz = float(inertia[0, 0]), float(inertia[0, 1]), float(inertia[0, 2])
    body.iyy, body.iyz, body.izz = float(inertia[1, 1]), float(inertia[1, 2]), float(inertia[2, 2])
    return msg


def inertial_parameters_to_inertia_stamped(stamp, frame_id, pi):
    """``InertiaStamped`` from one body's 10 inertial parameters ``pi = [m, mc, Ixx, Ixy, Iyy, Ixz, Iyz,
    Izz]`` about the frame origin (Pinocchio order), moved to the COM by the parallel-axis theorem."""
    pi = np.asarray(pi, dtype=np.float64)
    if pi.shape != (10,):
        raise ValueError(f"pi has shape {pi.shape}, expected (10,)")
    mass, com, inertia_com = numpy_inertia_split(pi)
    return make_inertia_stamped(stamp, frame_id, mass, com, inertia_com)


def inertia_stamped_to_arrays(msg):
    """``(link, m, com (3,), I_c (3, 3))`` of a payload message (inertia about the centre of mass, in the
    link's axes); MessageRejected if not finite."""
    i = msg.inertia
    values = np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz])
    if not np.isfinite(values).all():
        raise MessageRejected("InertiaStamped.inertia is not finite")
    I_c = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    return msg.header.frame_id, float(i.m), values[1:4], I_c


def inertia_stamped_to_body_parameters(msg, model):
    """``(body index, pi (10,) about the body frame)`` of a payload message; MessageRejected if unusable."""
    from robodyn_ros.control.payload_update import payload_body_parameters
    link, m, com, I_c = inertia_stamped_to_arrays(msg)
    try:
        return payload_body_parameters(model, link, m, com, I_c)
    except ValueError as exc:
        raise MessageRejected(f"InertiaStamped.header.frame_id: {exc}") from None


# ------------------------------------------------------------------------------------------------- mpc
def mpc_solution_from_message(msg, nv, tau_max):
    """:class:`MPCSolution` from the mpc node's Float64MultiArray ``[t0, N, dt, tau_ff (N nv), x_pred
    ((N+1) 2nv), K (N nv 2nv), omitted]`` (``omitted``: the terms left out of ``tau_ff``, 0 to 3; a message
    without it, of an older mpc node, has the whole torque); returns ``(t0, solution)``."""
    data = np.asarray(msg.data, dtype=float)
    if len(data) < 3 or not np.isfinite(data).all():
        raise MessageRejected("MPC solution is empty or not finite")
    t0, N, dt = data[0], int(data[1]), data[2]
    nx = 2 * nv
    sizes = (N * nv, (N + 1) * nx, N * nv * nx)
    if N < 1 or len(data) not in (3 + sum(sizes), 4 + sum(sizes)) or dt <= 0:
        raise MessageRejected(f"MPC solution has {len(data)} numbers, not 4 + {sum(sizes)} for N = {N}")
    omitted = data[3 + sum(sizes)] if len(data) == 4 + sum(sizes) else 0.0
    if omitted not in (0.0, 1.0, 2.0, 3.0):
        raise MessageRejected(f"MPC solution's last number (the omitted terms) is {omitted:g}, not 0, 1, 2 or 3")
    tau_ff, x_pred, K = np.split(data[3:3 + sum(sizes)], np.cumsum(sizes)[:2])
    from robodyn_ros.control.mpc import MPCSolution
    return t0, MPCSolution(tau_ff.reshape(N, nv), x_pred.reshape(N + 1, nx), K.reshape(N, nv, nx), "mpc",
                           dt=dt, tau_max=tau_max, omitted=int(omitted))


# ------------------------------------------------------------------------------------------ diagnostics
_LEVELS = {"OK": DiagnosticStatus.OK, "WARN": DiagnosticStatus.WARN, "ERROR": DiagnosticStatus.ERROR,
           "STALE": DiagnosticStatus.STALE}


def make_diagnostic_array(stamp, name, level, message, key_values, hardware_id=""):
    """``diagnostic_msgs/DiagnosticArray`` with one status.

    ``level``: "OK"/"WARN"/"ERROR"/"STALE", an int 0..3 or the message's byte constant. ``key_values``:
    a dict; floats are written with 9 significant digits, everything else with ``str``.
    """
    status = DiagnosticStatus(name=name, message=message, hardware_id=hardware_id, level=_level_byte(level))
    status.values = [KeyValue(key=str(k), value=(f"{v:.9g}" if isinstance(v, float) else str(v)))
                     for k, v in key_values.items()]
    msg = DiagnosticArray(status=[status])
    msg.header.stamp = stamp if isinstance(stamp, Time) else seconds_to_time(stamp)
    return msg


def _level_byte(level):
    if isinstance(level, bytes):
        return level
    if isinstance(level, str):
        if level.upper() not in _LEVELS:
            raise ValueError(f"diagnostic level {level!r} is not one of {sorted(_LEVELS)}")
        return _LEVELS[level.upper()]
    if not 0 <= int(level) <= 3:
        raise ValueError(f"diagnostic level {level} is not in 0..3")
    return bytes([int(level)])
