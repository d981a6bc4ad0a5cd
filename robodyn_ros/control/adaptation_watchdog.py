"""Whether adaptation that is switched on adapts: a warning when a controller with ``use_base_parameters``
has applied no estimate ``timeout`` seconds (joint-state time) after its first joint state, with the reason
its parameter gate gives. No ROS: the controller nodes publish :meth:`AdaptationWatchdog.note` in their
/diagnostics.
"""
from __future__ import annotations


class AdaptationWatchdog:
    """``timeout`` (s, 0: off) may be changed at any time; :meth:`observe` every joint state, :meth:`applied`
    when an estimate is applied."""

    def __init__(self, timeout=30.0):
        self.timeout = float(timeout)
        self.started = self.applied_at = self.last_t = None

    def restart(self):
        """A new activation: waiting starts again at the next joint state (an estimate applied before stays
        applied, so a wait that had ended stays ended)."""
        self.started = self.last_t = None

    def observe(self, t):
        """A joint state at time ``t``; a time going back (a reset) restarts the wait."""
        if self.started is None or t < self.started:
            self.started = t
        self.last_t = t

    def applied(self):
        """An estimate was applied now."""
        if self.applied_at is None:
            self.applied_at = self.last_t

    def waiting(self):
        """Seconds of joint-state time waited without an applied estimate beyond ``timeout``, else None."""
        if self.timeout <= 0.0 or self.applied_at is not None or self.started is None:
            return None
        waited = self.last_t - self.started
        return waited if waited >= self.timeout else None

    def note(self, reason):
        """A line saying that nothing has been applied, and ``reason`` (why not: the gate's), or None."""
        waited = self.waiting()
        if waited is None:
            return None
        return f"adaptation on, but no estimate applied {waited:.3g} s after the first joint state: {reason}"
