"""CDR, the byte encoding of ROS 2 messages on the wire and in bags, for the message types the package reads
and writes without ROS: ``sensor_msgs/msg/JointState``, ``geometry_msgs/msg/WrenchStamped`` and
``std_msgs/msg/Float64MultiArray``.

The encoding is OMG XCDR1 (the Common Data Representation of the OMG CORBA specification, Part 2, as DDS
and rmw_fastrtps use it):

- a 4-byte encapsulation header: ``0x00 0x01`` little endian or ``0x00 0x00`` big endian, then 2 option bytes;
- every primitive aligned to its size (8 at most) counted from the end of that header (:func:`align`);
- a string: uint32 length including the terminating NUL, the bytes, the NUL;
- a sequence: uint32 element count, then the elements (a float64 sequence aligned to 8 when not empty);
- a message: its fields in declaration order; ``std_msgs/Header`` is ``builtin_interfaces/Time`` (int32 sec,
  uint32 nanosec) then the ``frame_id`` string.

Offsets below are absolute byte positions in the message, header included. Decoders raise ``ValueError``
(or :class:`MessageCorrupt` for a batch, naming the message) on bytes that are not such a message; encoders
write little endian, what rmw_fastrtps writes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"
WRENCH_STAMPED_TYPE = "geometry_msgs/msg/WrenchStamped"
HEADER_SIZE = 4
LITTLE_ENDIAN_HEADER = b"\x00\x01\x00\x00"
_NS = 1_000_000_000
U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}
_U32_PAIR = {"<": struct.Struct("<II"), ">": struct.Struct(">II")}
TIME = {"<": struct.Struct("<iI"), ">": struct.Struct(">iI")}
FLOAT64 = {"<": np.dtype("<f8"), ">": np.dtype(">f8")}
CORRUPT = (ValueError, struct.error, UnicodeDecodeError)
"""What the decoders raise on bytes that are not a message of their type."""


class MessageCorrupt(ValueError):
    """Message ``index`` of a batch is not a valid CDR encoding of its type; ``reason`` says where it fails."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"message {index} is corrupt: {reason}")
        self.index, self.reason = index, reason


# --------------------------------------------------------------------------------------------- primitives
def endianness(raw, min_size: int = HEADER_SIZE) -> str:
    """``"<"`` or ``">"`` from the encapsulation header of ``raw`` (at least ``min_size`` bytes long)."""
    if len(raw) < min_size or raw[0] != 0 or raw[1] not in (0, 1):
        raise ValueError("not a plain CDR message")
    return "<" if raw[1] == 1 else ">"


def align(pos: int, size: int) -> int:
    """``pos`` rounded up so that ``pos - HEADER_SIZE`` is a multiple of ``size``."""
    return pos + (HEADER_SIZE - pos) % size


def read_uint32(raw, pos: int, endian: str) -> tuple[int, int]:
    """The uint32 at ``pos`` (aligned first) and the offset after it."""
    pos = align(pos, 4)
    return U32[endian].unpack_from(raw, pos)[0], pos + 4


def read_string(raw, pos: int, endian: str) -> tuple[str, int]:
    """The string at ``pos`` (aligned first) and the offset after it."""
    length, start = read_uint32(raw, pos, endian)
    if length == 0 or start + length > len(raw):
        raise ValueError("string runs past the end of the message")
    return bytes(raw[start:start + length - 1]).decode(), start + length


def read_stamp_ns(raw, endian: str) -> int:
    """``header.stamp`` in ns of a message that starts with ``std_msgs/Header``."""
    sec, nanosec = TIME[endian].unpack_from(raw, HEADER_SIZE)
    return sec * _NS + nanosec


def pad(buffer: bytearray, size: int) -> None:
    """Append zero bytes so that the next field is aligned to ``size``."""
    buffer.extend(bytes(align(len(buffer), size) - len(buffer)))


def put_uint32(buffer: bytearray, value: int) -> None:
    pad(buffer, 4)
    buffer.extend(U32["<"].pack(value))


def put_string(buffer: bytearray, text: str) -> None:
    data = text.encode() + b"\x00"
    put_uint32(buffer, len(data))
    buffer.extend(data)


def put_float64_sequence(buffer: bytearray, values) -> None:
    put_uint32(buffer, len(values))
    if len(values):
        pad(buffer, 8)
        buffer.extend(np.asarray(values, dtype="<f8").tobytes())


def put_header(buffer: bytearray, stamp_ns: int, frame_id: str) -> None:
    """``std_msgs/Header`` (stamp ``stamp_ns`` ns, ``frame_id``) right after the encapsulation header."""
    sec, nanosec = divmod(int(stamp_ns), _NS)
    buffer.extend(TIME["<"].pack(sec, nanosec))
    put_string(buffer, frame_id)


def header_stamp_ns(raw) -> int:
    """``header.stamp`` in ns of a serialized message starting with ``std_msgs/Header`` (e.g. a JointState)."""
    return read_stamp_ns(raw, endianness(raw, HEADER_SIZE + 8))


# ------------------------------------------------------------------------------------ Float64MultiArray
def read_float64_multiarray(raw, labels: bool = False):
    """A serialized ``std_msgs/Float64MultiArray``: ``(dims, data_offset, data)`` with ``dims`` a list of
    ``(label, size, stride)`` (``label`` None unless ``labels``) and ``data`` (n,) float64, a read-only view
    into ``raw``. Layout: uint32 dim count; per dim a string, uint32 size, uint32 stride; uint32
    data_offset; the float64 sequence."""
    e = endianness(raw, HEADER_SIZE + 4)
    u32, pair = U32[e], _U32_PAIR[e]
    (n_dims,) = u32.unpack_from(raw, HEADER_SIZE)
    pos = HEADER_SIZE + 4
    dims = []
    for _ in range(n_dims):
        (length,) = u32.unpack_from(raw, pos)                 # pos is 4-aligned here
        label = bytes(raw[pos + 4:pos + 3 + length]).decode() if labels else None
        pos = align(pos + 4 + length, 4)
        dims.append((label, *pair.unpack_from(raw, pos)))
        pos += 8
    data_offset, n = pair.unpack_from(raw, pos)
    pos += 8
    if n:
        pos = align(pos, 8)
    return dims, data_offset, np.frombuffer(raw, dtype=FLOAT64[e], count=n, offset=pos)


def encode_float64_multiarray(dims: Sequence[tuple[str, int, int]], values, data_offset: int = 0) -> bytes:
    """Little-endian CDR of a ``std_msgs/Float64MultiArray``: ``dims`` ``(label, size, stride)`` each, ``data``
    = ``values`` (n,). The float64 sequence ends the message: its values are the last ``8 n`` bytes."""
    buffer = bytearray(LITTLE_ENDIAN_HEADER)
    put_uint32(buffer, len(dims))
    for label, size, stride in dims:
        put_string(buffer, label)
        put_uint32(buffer, size)
        put_uint32(buffer, stride)
    put_uint32(buffer, data_offset)
    put_float64_sequence(buffer, np.ascontiguousarray(values, dtype=np.float64).ravel())
    return bytes(buffer)


# ------------------------------------------------------------------------------------------ WrenchStamped
def encode_wrench_stamped(stamp_ns: int, frame_id: str, wrench) -> bytes:
    """Little-endian CDR of a ``geometry_msgs/WrenchStamped``, ``wrench`` = [fx, fy, fz, tx, ty, tz]."""
    buffer = bytearray(LITTLE_ENDIAN_HEADER)
    put_header(buffer, stamp_ns, frame_id)
    pad(buffer, 8)
    buffer.extend(np.asarray(wrench, dtype="<f8").tobytes())
    return bytes(buffer)


def decode_wrench_stamped(raw) -> tuple[int, str, tuple[float, ...]]:
    """Stamp (ns), frame_id and [fx, fy, fz, tx, ty, tz] of one CDR ``geometry_msgs/WrenchStamped``."""
    endian = endianness(raw, HEADER_SIZE + 8)
    frame_id, pos = read_string(raw, HEADER_SIZE + 8, endian)
    return read_stamp_ns(raw, endian), frame_id, struct.unpack_from(endian + "6d", raw, align(pos, 8))


def decode_wrench_stamped_batch(raws: Sequence) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Stamps (N,) ns, frame_ids (N,) and wrenches (N, 6) of N CDR WrenchStamped messages."""
    stamps = np.empty(len(raws), dtype=np.int64)
    frames = []
    w = np.empty((len(raws), 6))
    for i, raw in enumerate(raws):
        try:
            stamps[i], frame_id, w[i] = decode_wrench_stamped(raw)
        except CORRUPT as err:
            raise MessageCorrupt(i, str(err)) from err
        frames.append(frame_id)
    return stamps, frames, w


# --------------------------------------------------------------------------------------------- JointState
@dataclass(frozen=True)
class JointStateLayout:
    """Where the fields of one JointState message lie, as absolute byte offsets in the message.

    ``key_end``: bytes [12, key_end) hold frame_id and names; ``count_offsets``, ``data_offsets`` and
    ``counts``: of the position, velocity and effort sequences; ``size``: bytes up to the end of effort.
    """

    endian: str
    frame_id: str
    names: tuple[str, ...]
    key_end: int
    count_offsets: tuple[int, int, int]
    data_offsets: tuple[int, int, int]
    counts: tuple[int, int, int]
    size: int

    def key_columns(self) -> np.ndarray:
        """Byte columns that, when equal to another message's, imply the same layout."""
        columns = [np.arange(0, HEADER_SIZE), np.arange(HEADER_SIZE + 8, self.key_end)]
        columns += [np.arange(o, o + 4) for o in self.count_offsets]
        return np.concatenate(columns)


def joint_state_layout(raw) -> JointStateLayout:
    """Parse the layout of one CDR-encoded ``sensor_msgs/JointState``."""
    endian = endianness(raw, HEADER_SIZE + 8)
    frame_id, pos = read_string(raw, HEADER_SIZE + 8, endian)
    n_names, pos = read_uint32(raw, pos, endian)
    if n_names > len(raw):
        raise ValueError("name count larger than the message")
    names = []
    for _ in range(n_names):
        name, pos = read_string(raw, pos, endian)
        names.append(name)
    key_end = pos
    count_offsets, data_offsets, counts = [], [], []
    for _ in range(3):
        pos = align(pos, 4)
        count, after = read_uint32(raw, pos, endian)
        count_offsets.append(pos)
        pos = align(after, 8) if count else after
        data_offsets.append(pos)
        counts.append(count)
        pos += 8 * count
        if pos > len(raw):
            raise ValueError("array runs past the end of the message")
    return JointStateLayout(endian, frame_id, tuple(names), key_end, tuple(count_offsets),
                            tuple(data_offsets), tuple(counts), pos)


def encode_joint_state(stamp_ns: int, frame_id: str, names: Sequence[str], arrays) -> bytes:
    """Little-endian CDR of a ``sensor_msgs/JointState``; ``arrays``: position, velocity, effort (each may be
    empty)."""
    buffer = bytearray(LITTLE_ENDIAN_HEADER)
    put_header(buffer, stamp_ns, frame_id)
    put_uint32(buffer, len(names))
    for name in names:
        put_string(buffer, name)
    for values in arrays:
        put_float64_sequence(buffer, values)
    return bytes(buffer)


def encode_joint_states(stamps_ns: np.ndarray, frame_id: str, names_of: list[tuple[str, ...]],
                        arrays: list[np.ndarray | None]) -> list[bytes]:
    """CDR of N JointState messages: ``stamps_ns`` (N,), ``names_of`` N name tuples, ``arrays`` [q, v, tau]
    each (N, n) in each message's name order or None (empty). Messages sharing names are encoded at once: one
    message from :func:`encode_joint_state` is the template whose stamp and array bytes are overwritten."""
    out: list[bytes] = [b""] * len(stamps_ns)
    sec, nsec = np.divmod(np.asarray(stamps_ns, dtype=np.int64), _NS)
    by_names: dict[tuple[str, ...], list[int]] = {}
    for i, message_names in enumerate(names_of):
        by_names.setdefault(message_names, []).append(i)
    for message_names, members in by_names.items():
        members = np.asarray(members)
        counts = [0 if x is None else len(message_names) for x in arrays]
        template = encode_joint_state(0, frame_id, message_names, [np.zeros(c) for c in counts])
        layout = joint_state_layout(template)
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


@dataclass
class JointStateGroup:
    """Messages (indices ``rows``) sharing one layout: ``stamps`` (m,) ns and ``arrays`` position,
    velocity, effort (m, count) each."""

    rows: np.ndarray
    names: tuple[str, ...]
    stamps: np.ndarray
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray]


def _decode_group(block: np.ndarray, rows: np.ndarray, layout: JointStateLayout) -> JointStateGroup:
    """Decode the rows of ``block`` (m, size) uint8 that all have ``layout``."""
    e = layout.endian
    sec = np.ascontiguousarray(block[:, 4:8]).view(e + "i4")[:, 0].astype(np.int64)
    nsec = np.ascontiguousarray(block[:, 8:12]).view(e + "u4")[:, 0].astype(np.int64)
    arrays = []
    for offset, count in zip(layout.data_offsets, layout.counts):
        raw = np.ascontiguousarray(block[:, offset:offset + 8 * count])
        arrays.append(raw.view(e + "f8").astype(np.float64).reshape(len(rows), count))
    return JointStateGroup(rows, layout.names, sec * _NS + nsec, tuple(arrays))


def _equal_row_labels(rows: np.ndarray) -> np.ndarray:
    """Label (m,) of each row of a (m, L) uint8 array; equal rows share a label (exact, byte-wise)."""
    as_bytes = np.ascontiguousarray(rows).view(f"V{rows.shape[1]}").ravel()
    return np.unique(as_bytes, return_inverse=True)[1].reshape(-1)


def _checked_layout(raws, index: int) -> JointStateLayout:
    try:
        return joint_state_layout(raws[index])
    except CORRUPT as err:
        raise MessageCorrupt(index, str(err)) from err


def decode_joint_states(raws: Sequence) -> list[JointStateGroup]:
    """Decode CDR JointState messages, grouping those of equal byte layout into strided views.

    Messages of one byte length are stacked into a (m, size) uint8 block. The first pending message's
    layout names the bytes that fix a layout (frame_id, names, array counts); rows are grouped by the
    values of those bytes, and each group whose own layout has the same key bytes is decoded at once. So
    joint orders that change between messages cost one parse per distinct order. Bytes after the last
    field (padding some middleware appends) are ignored. Raises :class:`MessageCorrupt`.
    """
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    groups = []
    for size in np.unique(lengths):
        rows = np.flatnonzero(lengths == size)
        block = np.frombuffer(b"".join(raws[i] for i in rows), dtype=np.uint8).reshape(len(rows), size)
        pending = np.arange(len(rows))
        while pending.size:
            key = _checked_layout(raws, rows[pending[0]]).key_columns()
            label = _equal_row_labels(block[np.ix_(pending, key)])
            done = np.zeros(pending.size, dtype=bool)
            for members in np.split(np.argsort(label, kind="stable"), np.cumsum(np.bincount(label))[:-1]):
                layout = _checked_layout(raws, rows[pending[members[0]]])
                if not np.array_equal(layout.key_columns(), key):
                    continue  # another layout: decoded in a later round, with its own key
                groups.append(_decode_group(block[pending[members]], rows[pending[members]], layout))
                done[members] = True
            pending = pending[~done]  # the first pending row's group is always done: this ends
    return groups
