"""Opening rosbag2 bags and taking the raw (CDR) messages of one topic out of them, with `rosbags` (pure
Python) as the storage layer.

A bag is a rosbag2 directory (``metadata.yaml`` plus ``.db3`` or ``.mcap``) or a bare ``.db3`` / ``.mcap``
storage file. Every failure is a :class:`~robodyn_ros.bags.errors.BagError` naming the bag and topic.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np

from .errors import BagError

_PROGRESS_EVERY = 4096


@lru_cache(maxsize=1)
def ros2_typestore():
    """The ROS 2 message definitions used to describe connections (Kilted if known, else the newest)."""
    from rosbags.typesys import Stores, get_typestore

    ros2 = [s for s in Stores if s.name.startswith("ROS2_")]
    preferred = getattr(Stores, "ROS2_KILTED", None)
    return get_typestore(preferred if preferred is not None else ros2[-1])


def storage_path(bag_path: Path) -> Path:
    """The path handed to rosbags: the bag directory, or its only storage file when metadata is lost."""
    if not bag_path.exists():
        raise BagError(bag_path, "does not exist")
    if bag_path.is_dir():
        if (bag_path / "metadata.yaml").exists():
            return bag_path
        files = sorted(bag_path.glob("*.db3")) + sorted(bag_path.glob("*.mcap"))
        if len(files) == 1:
            warnings.warn(
                f"{bag_path} has no metadata.yaml (recording interrupted?); reading {files[0].name}",
                stacklevel=4,
            )
            return files[0]
        raise BagError(bag_path, "is not a rosbag2 directory: no metadata.yaml"
                       + (f" and {len(files)} storage files" if files else " and no .db3/.mcap file"))
    if bag_path.suffix in (".db3", ".mcap"):
        return bag_path
    if bag_path.suffix == ".bag":
        raise BagError(bag_path, "looks like a ROS 1 bag; convert it with `rosbags-convert` first")
    raise BagError(bag_path, "is not a bag: expected a rosbag2 directory, a .db3 or a .mcap file")


def open_reader(bag_path):
    """An open ``rosbags.rosbag2.Reader`` on ``bag_path`` (close it when done)."""
    from rosbags.rosbag2 import Reader

    path = storage_path(Path(bag_path))
    try:
        reader = Reader(path)
        reader.open()
    except Exception as err:  # rosbags, sqlite3, mcap and yaml errors alike
        raise BagError(bag_path, f"cannot open bag: {err} (is it truncated or corrupt?)") from err
    return reader


def topic_connections(reader, bag_path, topic: str, msgtype: str):
    """The connections of ``topic``, checked to carry ``msgtype``."""
    connections = [c for c in reader.connections if c.topic == topic]
    if not connections:
        available = sorted({(c.topic, c.msgtype) for c in reader.connections})
        listing = ", ".join(f"{name} [{kind}]" for name, kind in available) or "none"
        raise BagError(bag_path, f"topic {topic!r} not found; topics: {listing}")
    wrong = sorted({c.msgtype for c in connections if c.msgtype != msgtype})
    if wrong:
        raise BagError(bag_path, f"has type {wrong[0]}, expected {msgtype}", topic)
    return connections


def raw_message_blocks(bag_path, topic: str, msgtype: str, block: int,
                       progress: Callable[[int, int], None] | None = None) -> Iterator[tuple[list, np.ndarray]]:
    """Yield the raw CDR messages of ``topic`` in bag order, ``block`` at a time, as ``(raws, received)``
    with ``received`` (m,) int64 the bag's receive times in ns. ``progress(done, total)`` is called every
    few thousand messages and after the last. Raises BagError when the bag ends early, when fewer
    messages than its index lists could be read, or when the topic has none."""
    reader = open_reader(bag_path)
    done = 0
    try:
        connections = topic_connections(reader, bag_path, topic, msgtype)
        total = sum(c.msgcount for c in connections)
        raws: list[bytes] = []
        received: list[int] = []
        messages = reader.messages(connections=connections)
        while True:
            try:
                item = next(messages, None)
            except Exception as err:
                raise BagError(bag_path, f"is truncated or corrupt: reading failed after {done + len(raws)} "
                               f"messages: {err}", topic) from err
            if item is not None:
                raws.append(item[2])
                received.append(item[1])
                if progress is not None and (done + len(raws)) % _PROGRESS_EVERY == 0:
                    progress(done + len(raws), max(total, done + len(raws)))
            if raws and (item is None or len(raws) == block):
                out = raws, np.asarray(received, dtype=np.int64)
                done += len(raws)
                raws, received = [], []
                yield out
            if item is None:
                break
    finally:
        reader.close()
    if progress is not None:
        progress(done, max(total, done))
    if total and done != total:  # e.g. an mcap chunk lost to damage: the reader skips it silently
        raise BagError(bag_path, f"is truncated or corrupt: the bag's index lists {total} messages but {done} "
                       "could be read", topic)
    if not done:
        raise BagError(bag_path, "has no messages", topic)


def read_raw_messages(bag_path, topic: str, msgtype: str,
                      progress: Callable[[int, int], None] | None = None) -> tuple[list, np.ndarray]:
    """All raw CDR messages of ``topic`` with their receive times (ns), in bag order."""
    raws: list = []
    received = []
    for block_raws, block_received in raw_message_blocks(bag_path, topic, msgtype, 1 << 62, progress):
        raws += block_raws
        received.append(block_received)
    return raws, np.concatenate(received)
