"""Joint states streamed from a bag a block at a time (memory bounded by one block): a scan that counts what
:func:`~robodyn_ros.bags.reader.read_joint_states` would repair, and a sample source for the chunked
identification filter over a bag that needs no repair."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .cdr import JOINT_STATE_TYPE
from .reader import decode_joint_state_columns
from .repair import unset_stamps
from .storage import raw_message_blocks


def iter_joint_state_blocks(bag_path, topic: str, joint_names: Sequence[str], block: int = 65536,
                            progress: Callable[[int, int], None] | None = None):
    """Yield the messages of a JointState topic in bag order, ``block`` at a time, as
    ``(stamps_ns (m,) int64, q, v, tau (m, n))`` with columns in ``joint_names`` order (NaN where a
    message lacks a value) and unset (zero) header stamps replaced by the receive time (a zero first stamp
    followed by set ones is simulated time's origin and kept). Nothing is repaired.
    Raises BagError as :func:`~robodyn_ros.bags.reader.read_joint_states` does (bag, topic, joints, corrupt,
    truncated)."""
    done = 0
    for raws, received in raw_message_blocks(bag_path, topic, JOINT_STATE_TYPE, block, progress):
        _, stamps, (q, v, tau) = decode_joint_state_columns(raws, joint_names, bag_path, topic, done)
        stamps = np.where(unset_stamps(stamps, first_block=done == 0), received, stamps)
        done += len(raws)
        yield stamps, q, v, tau


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


def _first_huge(arrays, joint_names, first_sample: int, magnitude: float):
    """``(field, joint, sample, value)`` of the first |value| above ``magnitude`` in q, v, tau, or None."""
    for label, x in zip(("position", "velocity", "effort"), arrays):
        bad = np.argwhere(np.abs(x) > magnitude)
        if len(bad):
            k, j = bad[0]
            return label, joint_names[j], first_sample + int(k), float(x[k, j])
    return None


def scan_joint_states(bag_path, topic: str, joint_names: Sequence[str], magnitude: float = 1e50,
                      block: int = 65536, progress=None) -> JointStateScan:
    """One pass over the topic counting what :func:`~robodyn_ros.bags.reader.read_joint_states` would
    repair (bounded memory)."""
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
            huge = _first_huge((q, v, tau), joint_names, messages, magnitude)
        messages += len(stamps)
    partial = lambda c: int(c[(c > 0) & (c < messages)].sum())  # noqa: E731
    return JointStateScan(messages=messages, t0_ns=int(t0), nan_values=nan_q + partial(nan_v) + partial(nan_tau),
                          reordered=reordered, duplicates=duplicates, velocity_complete=bool(np.all(nan_v == 0)),
                          effort_absent=tuple(joint_names[j] for j in np.flatnonzero(nan_tau == messages)), huge=huge)


class BagJointStates:
    """A sample source (``count``, ``has_velocity``, ``blocks(start, stop)``, see
    :mod:`robodyn_ros.identification.chunked_filter`) over a JointState topic whose scan is clean:
    t = (stamp - t0_ns) * 1e-9 s as :func:`~robodyn_ros.bags.reader.read_joint_states` gives it, columns
    ``joint_names``."""

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
