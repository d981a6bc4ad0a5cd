"""Read and write ROS 2 bags of joint states and wrenches, without ROS.

Bags are rosbag2 directories (``metadata.yaml`` plus ``.db3`` or ``.mcap``) or a bare ``.db3`` /
``.mcap`` storage file; the storage layer is `rosbags` (pure Python).

Messages are decoded by this module's own CDR (OMG XCDR1, as ROS 2 uses it) decoder for
``sensor_msgs/msg/JointState`` and ``geometry_msgs/msg/WrenchStamped``: all messages of one topic that
share a byte layout (same joint names in the same order, same array lengths) are decoded together as
one strided NumPy view, which reads 100 000 seven-joint messages in about half a second, whatever the
number of distinct joint orders. The test suite checks the decoder against `rosbags`' own.

Joint-state conventions (ros2_control's joint_state_broadcaster):
- columns are mapped by joint NAME, never by position: the order may differ between messages;
- a missing interface is published as NaN (or as an empty array);
- time is the header stamp, or the bag's receive time when the stamp is zero.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from robodyn_ros.model.errors import ModelError

JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
WRENCH_STAMPED_TYPE = "geometry_msgs/msg/WrenchStamped"
DEFAULT_T0_NS = 1_700_000_000_000_000_000
_PROGRESS_EVERY = 4096


@dataclass(frozen=True)
class ReadReport:
    """What reading a topic found and repaired.

    messages: messages on the topic; kept: samples returned.
    dropped_nan: samples dropped because a position (or a present velocity/effort channel) was NaN.
    reordered: messages whose stamp was earlier than the previous message's (samples were sorted).
    duplicates: samples dropped because their stamp equalled an earlier sample's (first one kept).
    stamp_fallbacks: messages with a zero header stamp, timed by the bag's receive time instead.
    missing_interfaces: "velocity:joint" / "effort:joint" channels that are NaN or absent throughout.
    """

    messages: int = 0
    kept: int = 0
    dropped_nan: int = 0
    reordered: int = 0
    duplicates: int = 0
    stamp_fallbacks: int = 0
    missing_interfaces: tuple[str, ...] = ()

    def summary(self) -> str:
        parts = [f"{self.kept}/{self.messages} samples kept"]
        for name in ("dropped_nan", "reordered", "duplicates", "stamp_fallbacks"):
            if getattr(self, name):
                parts.append(f"{name}={getattr(self, name)}")
        if self.missing_interfaces:
            parts.append("missing: " + ", ".join(self.missing_interfaces))
        return "; ".join(parts)


@dataclass
class JointStateSeries:
    """Joint states sampled at times ``t``, columns ordered like ``names``.

    t: (N,) seconds since ``t0_ns`` (strictly increasing).
    q: (N, n) positions; v: (N, n) velocities or None; tau: (N, n) efforts or None.
    A velocity/effort column of a joint without that interface is NaN throughout.
    t0_ns: absolute time (ns since the epoch) of ``t == 0``, the first sample's stamp.
    """

    t: np.ndarray
    names: list[str]
    q: np.ndarray
    v: np.ndarray | None
    tau: np.ndarray | None
    t0_ns: int = 0
    report: ReadReport = field(default_factory=ReadReport)


@dataclass
class WrenchSeries:
    """Wrenches ``w`` (N, 6) = [fx, fy, fz, tx, ty, tz] at times ``t`` (N,) s since ``t0_ns``,
    expressed in ``frame_id``."""

    t: np.ndarray
    frame_id: str
    w: np.ndarray
    t0_ns: int = 0
    report: ReadReport = field(default_factory=ReadReport)


# --------------------------------------------------------------------------------------------------
# Opening bags
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _typestore():
    """The ROS 2 message definitions used to describe connections (Kilted if known, else the newest)."""
    from rosbags.typesys import Stores, get_typestore

    ros2 = [s for s in Stores if s.name.startswith("ROS2_")]
    preferred = getattr(Stores, "ROS2_KILTED", None)
    return get_typestore(preferred if preferred is not None else ros2[-1])


def _storage_path(bag_path: Path) -> Path:
    """The path handed to rosbags: the bag directory, or its only storage file when metadata is lost."""
    if not bag_path.exists():
        raise ModelError(f"bag {str(bag_path)!r} does not exist")
    if bag_path.is_dir():
        if (bag_path / "metadata.yaml").exists():
            return bag_path
        files = sorted(bag_path.glob("*.db3")) + sorted(bag_path.glob("*.mcap"))
        if len(files) == 1:
            warnings.warn(
                f"{bag_path} has no metadata.yaml (recording interrupted?); reading {files[0].name}",
                stacklevel=3,
            )
            return files[0]
        raise ModelError(
            f"{str(bag_path)!r} is not a rosbag2 directory: no metadata.yaml"
            + (f" and {len(files)} storage files" if files else " and no .db3/.mcap file")
        )
    if bag_path.suffix in (".db3", ".mcap"):
        return bag_path
    if bag_path.suffix == ".bag":
        raise ModelError(
            f"{str(bag_path)!r} looks like a ROS 1 bag; convert it with `rosbags-convert` first"
        )
    raise ModelError(
        f"{str(bag_path)!r} is not a bag: expected a rosbag2 directory, a .db3 or a .mcap file"
    )


def _open_reader(bag_path):
    from rosbags.rosbag2 import Reader

    path = _storage_path(Path(bag_path))
    try:
        reader = Reader(path)
        reader.open()
    except Exception as err:  # rosbags, sqlite3, mcap and yaml errors alike
        raise ModelError(
            f"cannot open bag {str(bag_path)!r}: {err} (is it truncated or corrupt?)"
        ) from err
    return reader


def _topic_connections(reader, bag_path, topic: str, msgtype: str):
    connections = [c for c in reader.connections if c.topic == topic]
    if not connections:
        available = sorted({(c.topic, c.msgtype) for c in reader.connections})
        listing = ", ".join(f"{name} [{kind}]" for name, kind in available) or "none"
        raise ModelError(f"topic {topic!r} not found in bag {str(bag_path)!r}; topics: {listing}")
    wrong = sorted({c.msgtype for c in connections if c.msgtype != msgtype})
    if wrong:
        raise ModelError(f"topic {topic!r} in bag {str(bag_path)!r} has type {wrong[0]}, expected {msgtype}")
    return connections


def _read_raw(bag_path, topic: str, msgtype: str, progress: Callable[[int, int], None] | None):
    """All raw CDR messages of ``topic`` with their receive times (ns), in bag order."""
    reader = _open_reader(bag_path)
    try:
        connections = _topic_connections(reader, bag_path, topic, msgtype)
        total = sum(c.msgcount for c in connections)
        raws: list[bytes] = []
        received: list[int] = []
        try:
            for _, timestamp, raw in reader.messages(connections=connections):
                raws.append(raw)
                received.append(timestamp)
                if progress is not None and len(raws) % _PROGRESS_EVERY == 0:
                    progress(len(raws), max(total, len(raws)))
        except ModelError:
            raise
        except Exception as err:
            raise ModelError(
                f"bag {str(bag_path)!r} is truncated or corrupt: reading {topic!r} failed after "
                f"{len(raws)} messages: {err}"
            ) from err
    finally:
        reader.close()
    if progress is not None:
        progress(len(raws), max(total, len(raws)))
    if total and len(raws) != total:  # e.g. an mcap chunk lost to damage: the reader skips it silently
        raise ModelError(
            f"bag {str(bag_path)!r} is truncated or corrupt: {topic!r} has {total} messages according to "
            f"the bag's index but {len(raws)} could be read"
        )
    if not raws:
        raise ModelError(f"topic {topic!r} in bag {str(bag_path)!r} has no messages")
    return raws, np.asarray(received, dtype=np.int64)


# --------------------------------------------------------------------------------------------------
# CDR decoding (XCDR1: 4-byte encapsulation header, then fields aligned to their size relative to
# the byte after the header; strings are uint32 length incl. NUL + bytes; sequences uint32 count)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _JointStateLayout:
    """Where the fields of one JointState message lie, as absolute byte offsets in the message."""

    endian: str
    frame_id: str
    names: tuple[str, ...]
    key_end: int                      # bytes [12, key_end) hold frame_id and names
    count_offsets: tuple[int, int, int]
    data_offsets: tuple[int, int, int]
    counts: tuple[int, int, int]
    size: int


def _endianness(raw) -> str:
    if len(raw) < 12 or raw[0] != 0 or raw[1] not in (0, 1):
        raise ValueError("not a plain CDR message")
    return "<" if raw[1] == 1 else ">"


def _read_string(raw, pos: int, endian: str) -> tuple[str, int]:
    """Decode the CDR string at relative offset ``pos``; return it and the offset after it."""
    pos += -pos % 4
    (length,) = struct.unpack_from(endian + "I", raw, 4 + pos)
    start = 4 + pos + 4
    if length == 0 or start + length > len(raw):
        raise ValueError("string runs past the end of the message")
    return bytes(raw[start:start + length - 1]).decode(), pos + 4 + length


def _joint_state_layout(raw) -> _JointStateLayout:
    """Parse the layout of one CDR-encoded sensor_msgs/JointState."""
    endian = _endianness(raw)
    frame_id, pos = _read_string(raw, 8, endian)
    pos += -pos % 4
    (n_names,) = struct.unpack_from(endian + "I", raw, 4 + pos)
    pos += 4
    if n_names > len(raw):
        raise ValueError("name count larger than the message")
    names = []
    for _ in range(n_names):
        name, pos = _read_string(raw, pos, endian)
        names.append(name)
    key_end = 4 + pos
    count_offsets, data_offsets, counts = [], [], []
    for _ in range(3):
        pos += -pos % 4
        (count,) = struct.unpack_from(endian + "I", raw, 4 + pos)
        count_offsets.append(4 + pos)
        pos += 4
        if count:
            pos += -pos % 8
        data_offsets.append(4 + pos)
        counts.append(count)
        pos += 8 * count
        if 4 + pos > len(raw):
            raise ValueError("array runs past the end of the message")
    return _JointStateLayout(endian, frame_id, tuple(names), key_end, tuple(count_offsets),
                             tuple(data_offsets), tuple(counts), 4 + pos)


@dataclass
class _DecodedGroup:
    """Messages (indices ``rows``) sharing one layout: stamps (m,) ns and arrays (m, count)."""

    rows: np.ndarray
    names: tuple[str, ...]
    stamps: np.ndarray
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray]


def _decode_group(block: np.ndarray, rows: np.ndarray, layout: _JointStateLayout) -> _DecodedGroup:
    """Decode the rows of ``block`` (m, size) uint8 that all have ``layout``."""
    e = layout.endian
    sec = np.ascontiguousarray(block[:, 4:8]).view(e + "i4")[:, 0].astype(np.int64)
    nsec = np.ascontiguousarray(block[:, 8:12]).view(e + "u4")[:, 0].astype(np.int64)
    arrays = []
    for offset, count in zip(layout.data_offsets, layout.counts):
        raw = np.ascontiguousarray(block[:, offset:offset + 8 * count])
        arrays.append(raw.view(e + "f8").astype(np.float64).reshape(len(rows), count))
    return _DecodedGroup(rows, layout.names, sec * 1_000_000_000 + nsec, tuple(arrays))


def _layout_key_columns(layout: _JointStateLayout) -> np.ndarray:
    """Byte columns that, when equal to a reference message's, imply the same layout."""
    columns = [np.arange(0, 4), np.arange(12, layout.key_end)]
    columns += [np.arange(o, o + 4) for o in layout.count_offsets]
    return np.concatenate(columns)


def _equal_row_labels(rows: np.ndarray) -> np.ndarray:
    """Label (m,) of each row of a (m, L) uint8 array; equal rows share a label (exact, byte-wise)."""
    as_bytes = np.ascontiguousarray(rows).view(f"V{rows.shape[1]}").ravel()
    return np.unique(as_bytes, return_inverse=True)[1].reshape(-1)


def _decode_joint_states(raws: list) -> list[_DecodedGroup]:
    """Decode CDR JointState messages, grouping those of equal byte layout into strided views.

    Messages of one byte length are stacked into a (m, size) uint8 block. The first pending message's
    layout names the bytes that fix a layout (frame_id, names, array counts); rows are grouped by the
    values of those bytes, and each group whose own layout has the same key bytes is
    decoded at once. So joint orders that change between messages cost one parse per distinct order.
    Bytes after the last field (padding some middleware appends) are ignored.
    """
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    groups = []
    for size in np.unique(lengths):
        rows = np.flatnonzero(lengths == size)
        block = np.frombuffer(b"".join(raws[i] for i in rows), dtype=np.uint8).reshape(len(rows), size)
        pending = np.arange(len(rows))
        while pending.size:
            key = _layout_key_columns(_checked_layout(raws, rows[pending[0]]))
            label = _equal_row_labels(block[np.ix_(pending, key)])
            done = np.zeros(pending.size, dtype=bool)
            for members in np.split(np.argsort(label, kind="stable"), np.cumsum(np.bincount(label))[:-1]):
                layout = _checked_layout(raws, rows[pending[members[0]]])
                if not np.array_equal(_layout_key_columns(layout), key):
                    continue  # another layout: decoded in a later round, with its own key
                groups.append(_decode_group(block[pending[members]], rows[pending[members]], layout))
                done[members] = True
            pending = pending[~done]  # the first pending row's group is always done: this ends
    return groups


def _checked_layout(raws, index: int) -> _JointStateLayout:
    try:
        return _joint_state_layout(raws[index])
    except (ValueError, struct.error, UnicodeDecodeError) as err:
        raise ModelError(f"joint-state message {index} is corrupt: {err}") from err


# --------------------------------------------------------------------------------------------------
# Joint states
# --------------------------------------------------------------------------------------------------


def _select_names(groups: list[_DecodedGroup], joint_names, topic: str) -> list[str]:
    seen: dict[str, None] = {}
    for g in sorted(groups, key=lambda g: g.rows[0]):
        if len(set(g.names)) != len(g.names):
            raise ModelError(f"message {g.rows[0]} on {topic!r} lists a joint twice: {list(g.names)}")
        seen.update(dict.fromkeys(g.names))
    if joint_names is None:
        return list(seen)
    missing = [name for name in joint_names if name not in seen]
    if missing:
        raise ModelError(
            f"joints {missing} not found on {topic!r}; the bag has joints {list(seen)}"
        )
    return list(joint_names)


def _scatter_by_name(groups, names: list[str], n_messages: int, topic: str):
    """Stamps (N,) and position/velocity/effort (N, n) arrays in ``names`` column order, NaN where absent."""
    column = {name: j for j, name in enumerate(names)}
    stamps = np.zeros(n_messages, dtype=np.int64)
    channels = [np.full((n_messages, len(names)), np.nan) for _ in range(3)]
    for g in groups:
        stamps[g.rows] = g.stamps
        src = [k for k, name in enumerate(g.names) if name in column]
        dst = [column[g.names[k]] for k in src]
        for values, out, label in zip(g.arrays, channels, ("position", "velocity", "effort")):
            if values.shape[1] == 0:
                continue
            if values.shape[1] != len(g.names):
                raise ModelError(
                    f"message {g.rows[0]} on {topic!r} has {len(g.names)} names but "
                    f"{values.shape[1]} {label} values"
                )
            out[np.ix_(g.rows, dst)] = values[:, src]
    return stamps, channels


def _present_or_none(values: np.ndarray, label: str, names: list[str]):
    """None when the channel is NaN throughout; else the array and its all-NaN (missing) joints."""
    absent = np.isnan(values).all(axis=0)
    if absent.all():
        return None, [], np.zeros(len(values), dtype=bool)
    missing = [f"{label}:{names[j]}" for j in np.flatnonzero(absent)]
    bad = np.isnan(values[:, ~absent]).any(axis=1)
    return values, missing, bad


def _time_order(stamps_ns: np.ndarray):
    """Indices that sort the stamps and drop repeated ones; number of decreasing steps and repeats."""
    reordered = int(np.count_nonzero(np.diff(stamps_ns) < 0))
    order = np.argsort(stamps_ns, kind="stable")
    repeated = np.zeros(order.size, dtype=bool)   # (an empty input stays empty: no sample survived)
    repeated[1:] = np.diff(stamps_ns[order]) == 0
    return order[~repeated], reordered, int(np.count_nonzero(repeated))


def _unset_stamps(stamps, first_block=True):
    """(m,) bool: the header stamps that are unset (zero), to be replaced by the receive time. A zero first
    stamp followed by a set one is not unset: it is the origin of a publisher on simulated time (the
    simulator's first state, stamped t = 0 from /clock); a publisher that never stamps leaves them all zero."""
    unset = stamps == 0
    if first_block and len(stamps) > 1 and unset[0] and not unset[1]:
        unset[0] = False
    return unset


def read_joint_states(
    bag_path,
    topic: str = "/joint_states",
    joint_names: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> JointStateSeries:
    """Read a sensor_msgs/JointState topic into arrays mapped by joint name.

    bag_path: rosbag2 directory, ``.db3`` or ``.mcap``. joint_names: the columns wanted, in order
    (default: every joint on the topic in first-seen order). progress(done, total) is called while
    messages are read.

    Repairs, counted in ``series.report`` (and warned about): samples whose positions, or a present
    velocity/effort channel, are NaN are dropped; samples are sorted by time; repeated stamps keep the
    first sample. A velocity/effort channel NaN or empty throughout is "missing" (NaN column); when all
    joints miss it the array is None.

    Raises ModelError: not a bag, corrupt or truncated bag, topic absent (the message lists the topics)
    or of another type, requested joints absent, or no valid sample.
    """
    raws, received = _read_raw(bag_path, topic, JOINT_STATE_TYPE, progress)
    groups = _decode_joint_states(raws)
    names = _select_names(groups, joint_names, topic)
    stamps, (q, v, tau) = _scatter_by_name(groups, names, len(raws), topic)
    zero_stamp = _unset_stamps(stamps)
    stamps = np.where(zero_stamp, received, stamps)

    v, missing_v, bad_v = _present_or_none(v, "velocity", names)
    tau, missing_tau, bad_tau = _present_or_none(tau, "effort", names)
    nan_sample = np.isnan(q).any(axis=1) | bad_v | bad_tau
    keep = np.flatnonzero(~nan_sample)
    order, reordered, duplicates = _time_order(stamps[keep])
    keep = keep[order]
    if keep.size == 0:
        raise ModelError(f"topic {topic!r} in bag {str(bag_path)!r} has no sample without NaN positions")

    t0_ns = int(stamps[keep[0]])
    report = ReadReport(
        messages=len(raws), kept=int(keep.size), dropped_nan=int(np.count_nonzero(nan_sample)),
        reordered=reordered, duplicates=duplicates, stamp_fallbacks=int(np.count_nonzero(zero_stamp)),
        missing_interfaces=tuple(missing_v + missing_tau),
    )
    if report.dropped_nan or report.reordered or report.duplicates:
        warnings.warn(f"{topic}: {report.summary()}", stacklevel=2)
    return JointStateSeries(
        t=(stamps[keep] - t0_ns) * 1e-9,
        names=names,
        q=q[keep],
        v=None if v is None else v[keep],
        tau=None if tau is None else tau[keep],
        t0_ns=t0_ns,
        report=report,
    )


# --------------------------------------------------------------------------------------------------
# Wrenches
# --------------------------------------------------------------------------------------------------


def _decode_wrench_stamped(raw) -> tuple[int, str, tuple[float, ...]]:
    """Stamp (ns), frame_id and [fx, fy, fz, tx, ty, tz] of one CDR geometry_msgs/WrenchStamped."""
    endian = _endianness(raw)
    sec, nsec = struct.unpack_from(endian + "iI", raw, 4)
    frame_id, pos = _read_string(raw, 8, endian)
    pos += -pos % 8
    return sec * 1_000_000_000 + nsec, frame_id, struct.unpack_from(endian + "6d", raw, 4 + pos)


def read_wrenches(bag_path, topic: str, t0_ns: int | None = None) -> WrenchSeries:
    """Read a geometry_msgs/WrenchStamped topic: w (N, 6) = [fx, fy, fz, tx, ty, tz].

    t0_ns: time origin of ``t`` (pass a JointStateSeries' ``t0_ns`` to share its clock); default the
    first sample's stamp. Zero stamps fall back to receive time; NaN samples are dropped, samples
    sorted and repeated stamps dropped, as for joint states. Several frame_ids on one topic raise.
    """
    raws, received = _read_raw(bag_path, topic, WRENCH_STAMPED_TYPE, None)
    stamps = np.empty(len(raws), dtype=np.int64)
    w = np.empty((len(raws), 6))
    frames: set[str] = set()
    for i, raw in enumerate(raws):
        try:
            stamps[i], frame_id, w[i] = _decode_wrench_stamped(raw)
        except (ValueError, struct.error, UnicodeDecodeError) as err:
            raise ModelError(f"wrench message {i} on {topic!r} is corrupt: {err}") from err
        frames.add(frame_id)
    if len(frames) > 1:
        raise ModelError(f"topic {topic!r} mixes frames {sorted(frames)}; expected one frame_id")
    zero_stamp = _unset_stamps(stamps)
    stamps = np.where(zero_stamp, received, stamps)
    nan_sample = np.isnan(w).any(axis=1)
    keep = np.flatnonzero(~nan_sample)
    order, reordered, duplicates = _time_order(stamps[keep])
    keep = keep[order]
    if keep.size == 0:
        raise ModelError(f"topic {topic!r} in bag {str(bag_path)!r} has no sample without NaN")
    origin = int(stamps[keep[0]]) if t0_ns is None else int(t0_ns)
    report = ReadReport(
        messages=len(raws), kept=int(keep.size), dropped_nan=int(np.count_nonzero(nan_sample)),
        reordered=reordered, duplicates=duplicates, stamp_fallbacks=int(np.count_nonzero(zero_stamp)),
    )
    if report.dropped_nan or report.reordered or report.duplicates:
        warnings.warn(f"{topic}: {report.summary()}", stacklevel=2)
    return WrenchSeries(t=(stamps[keep] - origin) * 1e-9, frame_id=frames.pop(), w=w[keep],
                        t0_ns=origin, report=report)


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def _pad(buffer: bytearray, alignment: int) -> None:
    """Pad to ``alignment`` relative to the byte after the 4-byte encapsulation header."""
    buffer.extend(b"\x00" * (-(len(buffer) - 4) % alignment))


def _put_string(buffer: bytearray, text: str) -> None:
    data = text.encode() + b"\x00"
    _pad(buffer, 4)
    buffer.extend(struct.pack("<I", len(data)))
    buffer.extend(data)


def _encode_joint_state(stamp_ns: int, frame_id: str, names: Sequence[str], arrays) -> bytes:
    """Little-endian CDR of a sensor_msgs/JointState; arrays: position, velocity, effort (each may be empty)."""
    sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
    buffer = bytearray(b"\x00\x01\x00\x00")
    buffer.extend(struct.pack("<iI", sec, nsec))
    _put_string(buffer, frame_id)
    _pad(buffer, 4)
    buffer.extend(struct.pack("<I", len(names)))
    for name in names:
        _put_string(buffer, name)
    for values in arrays:
        _pad(buffer, 4)
        buffer.extend(struct.pack("<I", len(values)))
        if len(values):
            _pad(buffer, 8)
            buffer.extend(np.asarray(values, dtype="<f8").tobytes())
    return bytes(buffer)


def _encode_joint_states(stamps_ns: np.ndarray, frame_id: str, names_of: list[tuple[str, ...]],
                         arrays: list[np.ndarray | None]) -> list[bytes]:
    """CDR of N JointState messages: stamps (N,) ns, names_of N name tuples, arrays [q, v, tau] each
    (N, n) in each message's name order or None (empty). Messages sharing names are encoded at once:
    one message from `_encode_joint_state` is the template whose stamp and array bytes are overwritten."""
    out: list[bytes] = [b""] * len(stamps_ns)
    sec, nsec = np.divmod(np.asarray(stamps_ns, dtype=np.int64), 1_000_000_000)
    by_names: dict[tuple[str, ...], list[int]] = {}
    for i, message_names in enumerate(names_of):
        by_names.setdefault(message_names, []).append(i)
    for message_names, members in by_names.items():
        members = np.asarray(members)
        counts = [0 if x is None else len(message_names) for x in arrays]
        template = _encode_joint_state(0, frame_id, message_names, [np.zeros(c) for c in counts])
        layout = _joint_state_layout(template)
        block = np.tile(np.frombuffer(template, dtype=np.uint8), (len(members), 1))
        block[:, 4:8] = sec[members].astype("<i4")[:, None].view(np.uint8)
        block[:, 8:12] = nsec[members].astype("<u4")[:, None].view(np.uint8)
        for values, offset, count in zip(arrays, layout.data_offsets, counts):
            if count:
                data = np.ascontiguousarray(values[members], dtype="<f8").reshape(len(members), count)
                block[:, offset:offset + 8 * count] = data.view(np.uint8)
        for i, row in zip(members.tolist(), block):
            out[i] = row.tobytes()
    return out


def _encode_wrench_stamped(stamp_ns: int, frame_id: str, wrench) -> bytes:
    """Little-endian CDR of a geometry_msgs/WrenchStamped, wrench = [fx, fy, fz, tx, ty, tz]."""
    sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
    buffer = bytearray(b"\x00\x01\x00\x00")
    buffer.extend(struct.pack("<iI", sec, nsec))
    _put_string(buffer, frame_id)
    _pad(buffer, 8)
    buffer.extend(np.asarray(wrench, dtype="<f8").tobytes())
    return bytes(buffer)


def _as_stamps(t, t0_ns: int) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or not np.isfinite(t).all():
        raise ModelError("t must be a finite (N,) array of seconds")
    return t0_ns + np.round(t * 1e9).astype(np.int64)


def write_joint_states_bag(
    path,
    t,
    names,
    q,
    v=None,
    tau=None,
    *,
    storage: str = "sqlite3",
    topic: str = "/joint_states",
    wrench: WrenchSeries | None = None,
    wrench_topic: str = "/force_torque_sensor_broadcaster/wrench",
    t0_ns: int = DEFAULT_T0_NS,
    stamp_ns=None,
    receive_t=None,
    frame_id: str = "",
) -> Path:
    """Create a rosbag2 bag at ``path`` holding a sensor_msgs/JointState topic (and optionally wrenches).

    t: (N,) seconds; message i is stamped ``t0_ns + t[i]`` and received at ``t0_ns + receive_t[i]``
    (default t). stamp_ns: (N,) int header stamps overriding t (0 means "no stamp", as some drivers do).
    names: (n,) joint names, or N per-message name lists (each message's q/v/tau row in its own order).
    q, v, tau: (N, n); v/tau None writes empty arrays. wrench: a WrenchSeries written on
    ``wrench_topic`` with the same ``t0_ns``. storage: "sqlite3" or "mcap". Returns the bag path.
    """
    from rosbags.rosbag2 import Writer
    from rosbags.rosbag2.enums import StoragePlugin

    plugins = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
    if storage not in plugins:
        raise ModelError(f"storage {storage!r} unknown; use 'sqlite3' or 'mcap'")
    path = Path(path)
    if path.exists():
        raise ModelError(f"{str(path)!r} exists already; bags are never overwritten")
    stamps = _as_stamps(t, t0_ns) if stamp_ns is None else np.asarray(stamp_ns, dtype=np.int64)
    received = _as_stamps(t if receive_t is None else receive_t, t0_ns)
    per_message_names = len(names) > 0 and not isinstance(names[0], str)
    q = np.asarray(q, dtype=np.float64)
    rows = [np.asarray(x, dtype=np.float64) if x is not None else None for x in (q, v, tau)]
    if len(stamps) != len(q) or len(received) != len(q):
        raise ModelError(f"t has {len(stamps)} samples but q has {len(q)}")
    if per_message_names and len(names) != len(q):
        raise ModelError(f"{len(names)} name lists for {len(q)} samples")

    names_of = [tuple(m) for m in names] if per_message_names else [tuple(names)] * len(q)
    messages = _encode_joint_states(stamps, frame_id, names_of, rows)
    typestore = _typestore()
    with Writer(path, version=9, storage_plugin=plugins[storage]) as writer:
        connection = writer.add_connection(topic, JOINT_STATE_TYPE, typestore=typestore)
        for timestamp, message in zip(received.tolist(), messages):
            writer.write(connection, timestamp, message)
        if wrench is not None:
            wrench_connection = writer.add_connection(wrench_topic, WRENCH_STAMPED_TYPE, typestore=typestore)
            for stamp, w in zip(_as_stamps(wrench.t, t0_ns), np.asarray(wrench.w, dtype=np.float64)):
                writer.write(wrench_connection, int(stamp), _encode_wrench_stamped(stamp, wrench.frame_id, w))
    return path


# --------------------------------------------------------------------------------------------------
# Streaming joint states (memory bounded by one block)
# --------------------------------------------------------------------------------------------------


def iter_joint_state_blocks(bag_path, topic: str, joint_names: Sequence[str], block: int = 65536,
                            progress: Callable[[int, int], None] | None = None):
    """Yield the messages of a JointState topic in bag order, ``block`` at a time, as
    ``(stamps_ns (m,) int64, q, v, tau (m, n))`` with columns in ``joint_names`` order (NaN where a
    message lacks a value) and unset (zero) header stamps replaced by the receive time (a zero first stamp
followed by set ones is simulated time's origin and kept). Nothing is repaired.
    Raises ModelError as :func:`read_joint_states` does (bag, topic, joints, corrupt, truncated)."""
    reader = _open_reader(bag_path)
    done = 0
    try:
        connections = _topic_connections(reader, bag_path, topic, JOINT_STATE_TYPE)
        total = sum(c.msgcount for c in connections)
        raws: list[bytes] = []
        received: list[int] = []

        def decoded():
            groups = _decode_joint_states(raws)
            names = _select_names(groups, joint_names, topic)
            stamps, (q, v, tau) = _scatter_by_name(groups, names, len(raws), topic)
            stamps = np.where(_unset_stamps(stamps, first_block=done == 0), np.asarray(received, dtype=np.int64),
                              stamps)
            return stamps, q, v, tau

        messages = reader.messages(connections=connections)
        while True:
            try:
                item = next(messages, None)
            except Exception as err:
                raise ModelError(f"bag {str(bag_path)!r} is truncated or corrupt: reading {topic!r} failed after "
                                 f"{done + len(raws)} messages: {err}") from err
            if item is not None:
                raws.append(item[2])
                received.append(item[1])
            if raws and (item is None or len(raws) == block):
                out = decoded()
                done += len(raws)
                raws, received = [], []
                if progress is not None:
                    progress(done, max(total, done))
                yield out
            if item is None:
                break
    finally:
        reader.close()
    if total and done != total:
        raise ModelError(f"bag {str(bag_path)!r} is truncated or corrupt: {topic!r} has {total} messages according to "
                         f"the bag's index but {done} could be read")
    if not done:
        raise ModelError(f"topic {topic!r} in bag {str(bag_path)!r} has no messages")


@dataclass(frozen=True)
class JointStateScan:
    """What one streaming pass over a JointState topic found (:func:`scan_joint_states`).

    messages; t0_ns: first stamp; nan_values: NaN positions, or NaN velocities/efforts of joints that
    have that interface in some message; reordered: stamps earlier than the previous one; duplicates:
    stamps equal to the previous one; velocity_complete: every message has every velocity;
    effort_absent: joints without any effort value; huge: ``(field, joint, sample, value)`` of the
    first |value| above ``magnitude`` or None.
    """

    messages: int
    t0_ns: int
    nan_values: int
    reordered: int
    duplicates: int
    velocity_complete: bool
    effort_absent: tuple
    huge: tuple | None

    @property
    def clean(self) -> bool:
        return not (self.nan_values or self.reordered or self.duplicates)


def scan_joint_states(bag_path, topic: str, joint_names: Sequence[str], magnitude: float = 1e50,
                      block: int = 65536, progress=None) -> JointStateScan:
    """One pass over the topic counting what :func:`read_joint_states` would repair (bounded memory)."""
    n = len(joint_names)
    messages, t0, last = 0, None, None
    nan_q, reordered, duplicates = 0, 0, 0
    nan_v, nan_tau = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    huge = None
    for stamps, q, v, tau in iter_joint_state_blocks(bag_path, topic, joint_names, block, progress):
        if t0 is None:
            t0 = int(stamps[0])
        d = np.diff(stamps, prepend=stamps[0] if last is None else last)
        if last is None:
            d[0] = 1
        reordered += int(np.count_nonzero(d < 0))
        duplicates += int(np.count_nonzero(d == 0))
        last = int(stamps[-1])
        nan_q += int(np.count_nonzero(np.isnan(q)))
        nan_v += np.isnan(v).sum(axis=0)
        nan_tau += np.isnan(tau).sum(axis=0)
        if huge is None:
            for label, x in (("position", q), ("velocity", v), ("effort", tau)):
                bad = np.argwhere(np.abs(x) > magnitude)
                if len(bad):
                    k, j = bad[0]
                    huge = (label, joint_names[j], messages + int(k), float(x[k, j]))
                    break
        messages += len(stamps)
    partial = lambda c: int(c[(c > 0) & (c < messages)].sum())  # noqa: E731
    return JointStateScan(messages=messages, t0_ns=int(t0), nan_values=nan_q + partial(nan_v) + partial(nan_tau),
                          reordered=reordered, duplicates=duplicates, velocity_complete=bool(np.all(nan_v == 0)),
                          effort_absent=tuple(joint_names[j] for j in np.flatnonzero(nan_tau == messages)), huge=huge)


class BagJointStates:
    """A sample source (``count``, ``has_velocity``, ``blocks(start, stop)``, see
    :mod:`robodyn_ros.identification.chunked_filter`) over a JointState topic whose scan is clean:
    t = (stamp - t0_ns) * 1e-9 s as :func:`read_joint_states` gives it, columns ``joint_names``."""

    def __init__(self, bag_path, topic: str, joint_names: Sequence[str], scan: JointStateScan, block: int = 65536):
        self.bag_path, self.topic, self.joint_names, self.block = bag_path, topic, list(joint_names), int(block)
        self.t0_ns, self.count, self.has_velocity = scan.t0_ns, scan.messages, scan.velocity_complete

    def blocks(self, start=0, stop=None):
        stop = self.count if stop is None else stop
        first = 0
        for stamps, q, v, tau in iter_joint_state_blocks(self.bag_path, self.topic, self.joint_names, self.block):
            s, e = max(start - first, 0), min(stop - first, len(stamps))
            first += len(stamps)
            if e > s:
                yield ((stamps[s:e] - self.t0_ns) * 1e-9, q[s:e], v[s:e] if self.has_velocity else None, tau[s:e])
            if first >= stop:
                return
