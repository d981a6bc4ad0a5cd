"""The last stage before a torque command leaves a controller: joint-state stamp checks, the stale-state
watchdog and the :class:`~robodyn_ros.control.command_guard.CommandGuard` (clamp to the effort limits, rate
limit ``max_torque_rate``, hold the last safe command on a non-finite torque). No ROS: the node converts
messages, asks :meth:`TorqueOutput.accept_state` about each joint state, hands its torques to
:meth:`TorqueOutput.publish` and calls :meth:`TorqueOutput.on_watchdog` from a steady timer; the command
leaves through the ``publish`` callback it gave. A controller that stops commanding (deactivated, shut down,
Ctrl-C) sends :meth:`TorqueOutput.final_command` last: an effort controller holds the last command it
received, so that one must be the ``stale_action``, not a torque that accelerated the arm.

Stamps (:class:`StampGate`): a duplicated stamp or one older than the newest accepted (out of order, by less
than ``state_timeout``) is dropped; a jump backwards by ``state_timeout`` or more (bag loop, simulator
reset), or any older stamp once the watchdog has fired, is a time reset: the caller re-bases its reference
time so that the reference continues where it was.
"""
from __future__ import annotations

import time

import numpy as np

from .command_guard import CommandGuard, torque_rate_bounds


class StampGate:
    """Classifies joint-state stamps against the newest accepted one (module docstring):
    :meth:`classify` returns ``"first"``, ``"new"`` (later than the newest), ``"duplicate"`` (equal: drop),
    ``"older"`` (earlier by less than ``reset_gap`` s while not stale: drop) or ``"reset"`` (earlier by
    ``reset_gap`` or more, or earlier at all while ``stale``); only first, new and reset are accepted."""

    def __init__(self):
        self.newest = None

    def classify(self, t, reset_gap, stale):
        if self.newest is None:
            verdict = "first"
        elif t > self.newest:
            verdict = "new"
        elif t == self.newest:
            return "duplicate"
        elif stale or self.newest - t >= reset_gap:
            verdict = "reset"
        else:
            return "older"
        self.newest = t
        return verdict


class TorqueOutput:
    """Stamp checks, the stale-state watchdog and the command guard of one controller (module docstring).

    tau_max (nv,): effort limits; gravity(q) -> (nv,): the gravity-hold torque (None: hold zeros);
    config: a mapping read at every call (so live parameter changes apply) with ``state_timeout`` (s),
    ``stale_action`` (``"gravity_hold"`` or ``"zero"``) and ``max_torque_rate`` (see
    :func:`~robodyn_ros.control.command_guard.torque_rate_bounds`); publish(command): sends the guarded
    torque in command order (``command_order`` (nv,) model indices; None: model order); report(kind, text):
    optional, called on events (``stamp_duplicate``, ``stamp_older``: dropped states; ``time_reset``;
    ``stale``; ``resumed``). The rate limiter's Δt is the stamp difference to the previous state-driven
    command when it lies in (0, state_timeout], else (first command after a gap, a reset, a watchdog
    command) the steady wall time since the previous command.
    """

    def __init__(self, tau_max, gravity, config, publish, command_order=None, report=None):
        self.gravity = gravity
        self.config = config
        self.guard = CommandGuard(tau_max, max_rate=torque_rate_bounds(tau_max, config["max_torque_rate"]))
        self._publish = publish
        self._order = np.arange(len(self.guard.tau_max)) if command_order is None else np.asarray(command_order)
        self.report = report or (lambda kind, text: None)
        self.gate = StampGate()
        self.commands = self.non_finite = self.rate_limited = self.saturated = 0
        self.dropped = {"duplicate": 0, "older": 0}
        self.time_resets = 0
        self.start()

    def start(self):
        """Forget everything of the previous activation (no previous command, no state yet)."""
        self.guard.reset()
        self.gate.newest = None
        self.stale = False
        self.last_state_wall = None
        self.q_last = None
        self._command_stamp = None
        self._command_wall = None

    def set_max_torque_rate(self, value):
        self.guard.max_rate = torque_rate_bounds(self.guard.tau_max, value)

    def accept_state(self, t, q):
        """The stamp verdict of a valid joint state at ``t`` with positions ``q`` (nv,): ``None`` when it is
        dropped (duplicate or out of order: counted, reported), else ``"first"``, ``"new"`` or ``"reset"``
        (the caller re-bases its time). An accepted state feeds the watchdog."""
        newest = self.gate.newest
        verdict = self.gate.classify(t, self.config["state_timeout"], self.stale)
        if verdict in ("duplicate", "older"):
            self.dropped[verdict] += 1
            self.report(f"stamp_{verdict}", f"dropped joint state with {verdict} stamp {t:.6f} s (newest "
                                            f"{newest:.6f} s; {self.dropped[verdict]} so far)")
            return None
        if verdict == "reset":
            self.time_resets += 1
            self._command_stamp = None
            self.report("time_reset", f"joint-state time jumped back from {newest:.6f} s to {t:.6f} s (reset "
                                      f"#{self.time_resets}, bag loop or simulator reset?): re-basing time")
        self.last_state_wall = time.monotonic()
        self.q_last = q
        if self.stale:
            self.report("resumed", "joint states are back: resuming control")
            self.stale = False
        return verdict

    def publish(self, tau, stamp=None):
        """Guard and publish the model-order torque ``tau`` (nv,) answering the state at ``stamp`` (None:
        a watchdog command); returns the published torque (model order)."""
        now = time.monotonic()
        dt = None
        if stamp is not None and self._command_stamp is not None \
                and 0.0 < stamp - self._command_stamp <= self.config["state_timeout"]:
            dt = stamp - self._command_stamp
        elif self._command_wall is not None:
            dt = now - self._command_wall
        guard = self.guard
        tau = np.asarray(tau, dtype=float)
        if np.isfinite(tau).all():
            tau, saturated, limited = guard.clamp_and_limit(tau, dt)
        else:  # counted; the last safe command is held
            self.non_finite += 1
            tau, saturated, limited = guard.hold(), False, False
        self.saturated += bool(np.any(saturated))
        self.rate_limited += bool(np.any(limited))
        if stamp is not None:   # the answer to a state: the watchdog's clock restarts (a slow first
            self._command_stamp = stamp      # computation, e.g. compiling, is not a stale input)
            self.last_state_wall = now
        self._command_wall = now
        self.commands += 1
        self._publish(tau[self._order])
        return tau

    def on_watchdog(self):
        """Steady-timer callback: once no state was accepted for ``state_timeout`` wall seconds, publish the
        ``stale_action`` torque (gravity at the last measured q, or zeros) through the guard."""
        if self.last_state_wall is None:
            return
        age = time.monotonic() - self.last_state_wall
        if age < self.config["state_timeout"]:
            return
        if not self.stale:
            self.report("stale", f"no valid joint state for {age * 1e3:.0f} ms (timeout "
                                 f"{self.config['state_timeout'] * 1e3:.0f} ms): "
                                 f"{self.config['stale_action']} until they come back")
            self.stale = True
        self.publish(self.stale_torque())

    def stale_torque(self):
        """The ``stale_action`` torque (nv,), model order: gravity at the last accepted q (``gravity_hold``,
        when there is one and a gravity model), else zeros."""
        if self.config["stale_action"] == "gravity_hold" and self.q_last is not None and self.gravity is not None:
            return self.gravity(self.q_last)
        return np.zeros(len(self.guard.tau_max))

    def final_command(self):
        """Publish the ``stale_action`` torque once when the controller stops commanding (module docstring),
        clamped to the effort limits but not rate limited: no later command could finish a ramp, and the
        downstream controller holds whatever comes last. Only after a command of this activation (a controller
        that never commanded leaves the robot's command alone); returns the published torque or None."""
        if not self.guard.has_previous:
            return None
        tau, saturated, _ = self.guard.clamp_and_limit(np.asarray(self.stale_torque(), dtype=float), None)
        self.saturated += bool(np.any(saturated))
        self.commands += 1
        self._publish(tau[self._order])
        self.guard.reset()
        return tau

    def diagnostic_values(self):
        return {"commands": self.commands, "stale": self.stale, "non_finite_commands": self.non_finite,
                "saturated_commands": self.saturated, "rate_limited_commands": self.rate_limited,
                "dropped_duplicate_stamps": self.dropped["duplicate"], "dropped_older_stamps": self.dropped["older"],
                "time_resets": self.time_resets}
