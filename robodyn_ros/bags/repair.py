"""Joint states as ros2_control's joint_state_broadcaster publishes them, made into clean time series.

Conventions it follows:
- columns are mapped by joint NAME, never by position: the order may differ between messages;
- a missing interface is published as NaN (or as an empty array);
- time is the header stamp, or the bag's receive time when the stamp is zero.

Repairs, counted in a :class:`~robodyn_ros.bags.series.ReadReport`: samples with a NaN position (or a NaN
in a present velocity/effort channel) are dropped, samples are sorted by time, a repeated stamp keeps the
first sample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .cdr import JointStateGroup
from .errors import BagError
from .series import ReadReport

CHANNELS = ("position", "velocity", "effort")


def column_names(groups: list[JointStateGroup], joint_names: Sequence[str] | None, bag, topic: str,
                 first_index: int = 0) -> list[str]:
    """The columns: ``joint_names`` (checked to be on the topic) or, when None, every joint on the topic in
    first-seen order. ``first_index``: the topic index of the groups' row 0 (for the error message)."""
    seen: dict[str, None] = {}
    for g in sorted(groups, key=lambda g: g.rows[0]):
        if len(set(g.names)) != len(g.names):
            raise BagError(bag, f"lists a joint twice: {list(g.names)}", topic, first_index + int(g.rows[0]))
        seen.update(dict.fromkeys(g.names))
    if joint_names is None:
        return list(seen)
    missing = [name for name in joint_names if name not in seen]
    if missing:
        raise BagError(bag, f"joints {missing} not found on this topic; the bag has joints {list(seen)}", topic)
    return list(joint_names)


def scatter_by_name(groups: list[JointStateGroup], names: list[str], n_messages: int, bag, topic: str,
                    first_index: int = 0):
    """Stamps (N,) and [position, velocity, effort] (N, n) each in ``names`` column order, NaN where absent."""
    column = {name: j for j, name in enumerate(names)}
    stamps = np.zeros(n_messages, dtype=np.int64)
    channels = [np.full((n_messages, len(names)), np.nan) for _ in CHANNELS]
    for g in groups:
        stamps[g.rows] = g.stamps
        src = [k for k, name in enumerate(g.names) if name in column]
        dst = [column[g.names[k]] for k in src]
        for values, out, label in zip(g.arrays, channels, CHANNELS):
            if values.shape[1] == 0:
                continue
            if values.shape[1] != len(g.names):
                raise BagError(bag, f"has {len(g.names)} names but {values.shape[1]} {label} values", topic,
                               first_index + int(g.rows[0]))
            out[np.ix_(g.rows, dst)] = values[:, src]
    return stamps, channels


def present_or_none(values: np.ndarray, label: str, names: list[str]):
    """``(values or None, missing, bad)``: None when the channel is NaN throughout; ``missing`` the
    ``"label:joint"`` of its all-NaN joints; ``bad`` (N,) the samples with a NaN in a present joint."""
    absent = np.isnan(values).all(axis=0)
    if absent.all():
        return None, [], np.zeros(len(values), dtype=bool)
    missing = [f"{label}:{names[j]}" for j in np.flatnonzero(absent)]
    bad = np.isnan(values[:, ~absent]).any(axis=1)
    return values, missing, bad


def time_order(stamps_ns: np.ndarray):
    """Indices that sort the stamps and drop repeated ones; number of decreasing steps and repeats."""
    reordered = int(np.count_nonzero(np.diff(stamps_ns) < 0))
    order = np.argsort(stamps_ns, kind="stable")
    repeated = np.zeros(order.size, dtype=bool)   # (an empty input stays empty: no sample survived)
    repeated[1:] = np.diff(stamps_ns[order]) == 0
    return order[~repeated], reordered, int(np.count_nonzero(repeated))


def unset_stamps(stamps, first_block=True):
    """(m,) bool: the header stamps that are unset (zero), to be replaced by the receive time. A zero first
    stamp followed by a set one is not unset: it is the origin of a publisher on simulated time (the
    simulator's first state, stamped t = 0 from /clock); a publisher that never stamps leaves them all zero."""
    unset = stamps == 0
    if first_block and len(stamps) > 1 and unset[0] and not unset[1]:
        unset[0] = False
    return unset


def kept_samples(stamps: np.ndarray, received: np.ndarray, nan_sample: np.ndarray, missing=()):
    """``(stamps, keep, report)``: unset stamps replaced by the receive times, the indices of the samples kept
    in time order (no NaN sample, no repeated stamp) and the :class:`ReadReport` of the repairs."""
    zero_stamp = unset_stamps(stamps)
    stamps = np.where(zero_stamp, received, stamps)
    keep = np.flatnonzero(~nan_sample)
    order, reordered, duplicates = time_order(stamps[keep])
    keep = keep[order]
    report = ReadReport(
        messages=len(stamps), kept=int(keep.size), dropped_nan=int(np.count_nonzero(nan_sample)),
        reordered=reordered, duplicates=duplicates, stamp_fallbacks=int(np.count_nonzero(zero_stamp)),
        missing_interfaces=tuple(missing),
    )
    return stamps, keep, report
