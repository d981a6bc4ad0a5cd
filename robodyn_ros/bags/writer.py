"""Write joint states (and wrenches) as a ROS 2 bag, without ROS: the messages encoded by
:mod:`robodyn_ros.bags.cdr`, the storage written by `rosbags`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .cdr import JOINT_STATE_TYPE, WRENCH_STAMPED_TYPE, encode_joint_states, encode_wrench_stamped
from .errors import BagError
from .series import WrenchSeries
from .storage import ros2_typestore

DEFAULT_T0_NS = 1_700_000_000_000_000_000


def _as_stamps(t, t0_ns: int, path) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if t.ndim != 1 or not np.isfinite(t).all():
        raise BagError(path, "t must be a finite (N,) array of seconds")
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
    Raises BagError on an unknown storage, an existing path or arrays that do not match.
    """
    from rosbags.rosbag2 import Writer
    from rosbags.rosbag2.enums import StoragePlugin

    plugins = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
    if storage not in plugins:
        raise BagError(path, f"storage {storage!r} unknown; use 'sqlite3' or 'mcap'")
    path = Path(path)
    if path.exists():
        raise BagError(path, "exists already; bags are never overwritten")
    stamps = _as_stamps(t, t0_ns, path) if stamp_ns is None else np.asarray(stamp_ns, dtype=np.int64)
    received = _as_stamps(t if receive_t is None else receive_t, t0_ns, path)
    per_message_names = len(names) > 0 and not isinstance(names[0], str)
    q = np.asarray(q, dtype=np.float64)
    rows = [np.asarray(x, dtype=np.float64) if x is not None else None for x in (q, v, tau)]
    if len(stamps) != len(q) or len(received) != len(q):
        raise BagError(path, f"t has {len(stamps)} samples but q has {len(q)}", topic)
    if per_message_names and len(names) != len(q):
        raise BagError(path, f"{len(names)} name lists for {len(q)} samples", topic)

    names_of = [tuple(m) for m in names] if per_message_names else [tuple(names)] * len(q)
    messages = encode_joint_states(stamps, frame_id, names_of, rows)
    typestore = ros2_typestore()
    with Writer(path, version=9, storage_plugin=plugins[storage]) as writer:
        connection = writer.add_connection(topic, JOINT_STATE_TYPE, typestore=typestore)
        for timestamp, message in zip(received.tolist(), messages):
            writer.write(connection, timestamp, message)
        if wrench is not None:
            wrench_connection = writer.add_connection(wrench_topic, WRENCH_STAMPED_TYPE, typestore=typestore)
            for stamp, w in zip(_as_stamps(wrench.t, t0_ns, path), np.asarray(wrench.w, dtype=np.float64)):
                writer.write(wrench_connection, int(stamp), encode_wrench_stamped(stamp, wrench.frame_id, w))
    return path
