"""The period at which joint states arrive, for a law that predicts over the time its command is held.

A node computes a command on each joint state and the command is held until the next one: the hold is the
next interval between states, estimated by the median of the last :data:`WINDOW` intervals (robust to the
jitter of a loop that runs on wall time and to a single late message). Intervals outside ``(0, max_hold]``
(a gap, a time reset) are not periods and are left out.
"""
from __future__ import annotations

import statistics
from collections import deque

WINDOW = 8
"""Intervals in the median (even: the mean of the middle two)."""


class SamplePeriod:
    """``update(t)`` with each state's time (s) returns the estimated hold (s): the median of the last
    :data:`WINDOW` intervals in ``(0, max_hold]``, 0.0 until there is one. :meth:`reset` forgets the time
    line (a new activation, a time reset)."""

    def __init__(self, max_hold=0.01):
        self.max_hold = float(max_hold)
        self._intervals = deque(maxlen=WINDOW)
        self._t = None

    def reset(self):
        self._intervals.clear()
        self._t = None

    def update(self, t):
        if self._t is not None and 0.0 < t - self._t <= self.max_hold:
            self._intervals.append(t - self._t)
        self._t = t
        return statistics.median(self._intervals) if self._intervals else 0.0
