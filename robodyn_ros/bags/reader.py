"""Read the joint states and wrenches of a ROS 2 bag into arrays, without ROS.

Messages are decoded by :mod:`robodyn_ros.bags.cdr`: all messages of one topic that share a byte layout
(same joint names in the same order, same array lengths) are decoded together as one strided NumPy view,
whatever the number of distinct joint orders. The test suite checks the codec against `rosbags`' own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np

from . import cdr
from .errors import BagError
from .repair import column_names, kept_samples, present_or_none, scatter_by_name
from .series import JointStateSeries, WrenchSeries
from .storage import read_raw_messages

JOINT_STATE_TYPE, WRENCH_STAMPED_TYPE = cdr.JOINT_STATE_TYPE, cdr.WRENCH_STAMPED_TYPE


def decode_joint_state_columns(raws: list, joint_names: Sequence[str] | None, bag, topic: str,
                               first_index: int = 0):
    """``(names, stamps (m,) ns, [q, v, tau] (m, n) each)`` of raw JointState messages, columns by name (NaN
    where a message lacks a value), stamps as in the messages. ``first_index``: the topic index of
    ``raws[0]``. Raises BagError naming the message that is corrupt or inconsistent."""
    try:
        groups = cdr.decode_joint_states(raws)
    except cdr.MessageCorrupt as err:
        raise BagError(bag, f"is corrupt: {err.reason}", topic, first_index + err.index) from err
    names = column_names(groups, joint_names, bag, topic, first_index)
    stamps, channels = scatter_by_name(groups, names, len(raws), bag, topic, first_index)
    return names, stamps, channels


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

    Repairs (:mod:`robodyn_ros.bags.repair`), counted in ``series.report`` and warned about: samples whose
    positions, or a present velocity/effort channel, are NaN are dropped; samples are sorted by time;
    repeated stamps keep the first sample. A velocity/effort channel NaN or empty throughout is "missing"
    (NaN column); when all joints miss it the array is None.

    Raises BagError: not a bag, corrupt or truncated bag, topic absent (the message lists the topics)
    or of another type, requested joints absent, or no valid sample.
    """
    raws, received = read_raw_messages(bag_path, topic, JOINT_STATE_TYPE, progress)
    names, stamps, (q, v, tau) = decode_joint_state_columns(raws, joint_names, bag_path, topic)
    v, missing_v, bad_v = present_or_none(v, "velocity", names)
    tau, missing_tau, bad_tau = present_or_none(tau, "effort", names)
    nan_sample = np.isnan(q).any(axis=1) | bad_v | bad_tau
    stamps, keep, report = kept_samples(stamps, received, nan_sample, missing_v + missing_tau)
    if keep.size == 0:
        raise BagError(bag_path, "has no sample without NaN positions", topic)
    if report.repaired:
        warnings.warn(f"{topic}: {report.summary()}", stacklevel=2)
    t0_ns = int(stamps[keep[0]])
    return JointStateSeries(
        t=(stamps[keep] - t0_ns) * 1e-9,
        names=names,
        q=q[keep],
        v=None if v is None else v[keep],
        tau=None if tau is None else tau[keep],
        t0_ns=t0_ns,
        report=report,
    )


def read_wrenches(bag_path, topic: str, t0_ns: int | None = None) -> WrenchSeries:
    """Read a geometry_msgs/WrenchStamped topic: w (N, 6) = [fx, fy, fz, tx, ty, tz].

    t0_ns: time origin of ``t`` (pass a JointStateSeries' ``t0_ns`` to share its clock); default the
    first sample's stamp. Zero stamps fall back to receive time; NaN samples are dropped, samples
    sorted and repeated stamps dropped, as for joint states. Several frame_ids on one topic raise.
    """
    raws, received = read_raw_messages(bag_path, topic, WRENCH_STAMPED_TYPE)
    try:
        stamps, frames, w = cdr.decode_wrench_stamped_batch(raws)
    except cdr.MessageCorrupt as err:
        raise BagError(bag_path, f"is corrupt: {err.reason}", topic, err.index) from err
    if len(set(frames)) > 1:
        raise BagError(bag_path, f"mixes frames {sorted(set(frames))}; expected one frame_id", topic)
    stamps, keep, report = kept_samples(stamps, received, np.isnan(w).any(axis=1))
    if keep.size == 0:
        raise BagError(bag_path, "has no sample without NaN", topic)
    if report.repaired:
        warnings.warn(f"{topic}: {report.summary()}", stacklevel=2)
    origin = int(stamps[keep[0]]) if t0_ns is None else int(t0_ns)
    return WrenchSeries(t=(stamps[keep] - origin) * 1e-9, frame_id=frames[0], w=w[keep], t0_ns=origin,
                        report=report)
