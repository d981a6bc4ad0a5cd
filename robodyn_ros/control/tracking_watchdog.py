"""Whether a controller tracks its reference: the RMS tracking error of every joint over consecutive windows
of joint-state time, and a warning naming the joints above a threshold. No ROS: the controller nodes publish
:meth:`TrackingWatchdog.note` in their /diagnostics.

Over a window ``[t_0, t_0 + T)`` of joint states k = 1..K with errors ``e_k = q_k - q_d,k`` (nv,),

    rms_j = sqrt( Σ_k e_kj² / K ),

and the window closes at the first state at or after ``t_0 + T``. The last closed window is what is
reported: a one-off spike (a payload attached) shows for one window, a robot that does not follow (a wrist
joint off by a radian) for as long as it lasts.
"""
from __future__ import annotations

import numpy as np


class TrackingWatchdog:
    """RMS tracking error per joint (module docstring). ``joint_names``: the joints in the order of the errors;
    ``threshold`` (rad, 0: off) and ``window`` (s) may be changed at any time."""

    def __init__(self, joint_names, threshold=0.1, window=1.0):
        self.joint_names = tuple(joint_names)
        self.threshold, self.window = float(threshold), float(window)
        n = len(self.joint_names)
        self._sum, self._square = np.zeros(n), np.empty(n)
        self._count, self._start = 0, None
        self.rms = None          # (nv,) of the last closed window, None before the first

    def restart(self):
        """Forget the windows (a new activation)."""
        self._sum[:] = 0.0
        self._count, self._start, self.rms = 0, None, None

    def update(self, t, e):
        """One tracking error ``e`` (nv,) at joint-state time ``t``; a time going back starts a new window."""
        if self._start is None or t < self._start:
            self._sum[:] = 0.0
            self._count, self._start = 0, t
        np.multiply(e, e, out=self._square)
        self._sum += self._square
        self._count += 1
        if t - self._start >= self.window:
            self.rms = np.sqrt(self._sum / self._count)
            self._sum[:] = 0.0
            self._count, self._start = 0, t

    def values(self):
        """``tracking_rms_max`` (rad, NaN before the first window) and ``tracking_rms_worst_joint``."""
        if self.rms is None:
            return {"tracking_rms_max": float("nan"), "tracking_rms_worst_joint": ""}
        worst = int(np.argmax(self.rms))
        return {"tracking_rms_max": float(self.rms[worst]), "tracking_rms_worst_joint": self.joint_names[worst]}

    def note(self):
        """A line naming the joints whose RMS error of the last window exceeds ``threshold`` (worst first), or
        None."""
        if self.rms is None or self.threshold <= 0.0:
            return None
        above = np.flatnonzero(self.rms > self.threshold)
        if above.size == 0:
            return None
        above = above[np.argsort(-self.rms[above])]
        joints = ", ".join(f"{self.joint_names[j]} {self.rms[j]:.3g} rad" for j in above)
        return f"tracking error above {self.threshold:g} rad RMS over the last {self.window:g} s: {joints}"
