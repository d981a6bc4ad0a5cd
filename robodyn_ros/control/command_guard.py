"""What every controller does around its control law: check the measured state, clamp the torque to the
effort limits, limit the torque rate, and on a non-finite state or result hold the last safe command and
report a fault.

Order of the safety steps in :meth:`CommandGuard.accept`: refuse non-finite torques, clamp to the effort
bounds ``|τ_i| <= τ_max,i``, then limit the change from the previous command to
``|τ_i - τ_prev,i| <= τ̇_max,i Δt`` (Δt the time since the previous command; the same per-joint rule as
libfranka's ``limitRate`` with its 1000 N m/s ``kMaxTorqueRate``). The rate step comes last so that a
clamped step is also ramped; both keep ``|τ| <= τ_max`` because the previous command was within the bounds.
The first command after :meth:`CommandGuard.reset` has no previous command to be limited against.

The status is a plain record a ROS node can turn into diagnostics.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import math

import numpy as np


@dataclass
class ControlStatus:
    """Outcome of one control step.

    ``ok``: the command came from the control law; ``fault``: a short code (``""``, ``"nonfinite_state"``,
    ``"nonfinite_reference"``, ``"nonfinite_command"``) when the last safe command was held instead;
    ``message``: human-readable detail; ``reference_clipped``: (nv,) joints whose reference was clipped to
    the limits; ``saturated``: (nv,) joints whose torque was clamped to the effort limit; ``rate_limited``:
    (nv,) joints whose torque change was cut to the rate limit."""

    ok: bool = True
    fault: str = ""
    message: str = ""
    reference_clipped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    saturated: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    rate_limited: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def effort_bounds(model):
    """The symmetric torque bound (nv,) of the model: URDF effort limits, inf where absent (0 or inf)."""
    lim = np.asarray(model.effort_limit, dtype=float)
    return np.where((lim > 0) & np.isfinite(lim), lim, np.inf)


AUTOMATIC_RISE_TIME = 0.01  # s: the automatic rate limit lets a joint go from 0 to its effort limit in 10 ms


def torque_rate_bounds(tau_max, max_torque_rate):
    """Per-joint torque rate bound τ̇_max (nv,), N m/s, from the parameter ``max_torque_rate``: > 0 the
    same for every joint; 0 or inf: no limit (inf); < 0: automatic, ``τ_max / AUTOMATIC_RISE_TIME``
    (inf where the effort is unbounded)."""
    tau_max = np.asarray(tau_max, dtype=float)
    rate = float(max_torque_rate)
    if rate < 0:
        return tau_max / AUTOMATIC_RISE_TIME
    if rate == 0 or not np.isfinite(rate):
        return np.full_like(tau_max, np.inf)
    return np.full_like(tau_max, rate)


class CommandGuard:
    """Holds the last safe command of a controller with ``nv`` joints, the torque bounds ``tau_max`` (nv,)
    and the torque rate bounds ``max_rate`` (nv, N m/s; inf, the default: no rate limit). Initially the
    last safe command is ``initial`` (zeros by default)."""

    def __init__(self, tau_max, initial=None, max_rate=np.inf):
        self.tau_max = np.asarray(tau_max, dtype=float)
        self.max_rate = np.broadcast_to(np.asarray(max_rate, dtype=float), self.tau_max.shape).copy()
        if np.any(np.isnan(self.max_rate)) or np.any(self.max_rate <= 0):
            raise ValueError(f"CommandGuard max_rate must be > 0 (inf: no limit), got {self.max_rate}")
        self.last_safe = np.zeros_like(self.tau_max) if initial is None else np.asarray(initial, dtype=float).copy()
        self.has_previous = initial is not None

    def reset(self, initial=None):
        """Forget the previous command: the next accepted command is not rate limited; the held command is
        ``initial`` (zeros by default)."""
        self.last_safe = np.zeros_like(self.tau_max) if initial is None else np.asarray(initial, dtype=float).copy()
        self.has_previous = False

    def checked_inputs(self, status, model, limit_margin, q, v, q_d, v_d, a_d):
        """The control law's inputs as float arrays ``(q, v, q_d, v_d, a_d)`` (nv,) each, the reference clipped
        into the joint limits less ``limit_margin`` (:func:`~robodyn_ros.control.reference.clip_reference`,
        ``status.reference_clipped``); None after a non-finite state or reference, recorded in ``status``
        (the caller holds :meth:`hold`)."""
        from .reference import clip_reference
        if not self.check_finite(status, "nonfinite_state", q=q, v=v):
            return None
        if not self.check_finite(status, "nonfinite_reference", q_d=q_d, v_d=v_d, a_d=a_d):
            return None
        q_d, v_d, a_d, status.reference_clipped = clip_reference(model, q_d, v_d, a_d, limit_margin, stacklevel=4)
        return np.asarray(q, dtype=float), np.asarray(v, dtype=float), q_d, v_d, a_d

    def check_finite(self, status, fault, **arrays):
        """``False`` (and the fault written into ``status``) when any of ``arrays`` is not finite."""
        for name, x in arrays.items():
            x = np.asarray(x, dtype=float)
            if not np.isfinite(x).all():
                bad = np.flatnonzero(~np.isfinite(x.reshape(-1)))
                status.ok, status.fault = False, fault
                status.message = f"{name} has non-finite entries at {bad.tolist()}: holding the last safe command"
                return False
        return True

    def hold(self):
        """The last safe command (a copy)."""
        return self.last_safe.copy()

    def clamp_and_limit(self, tau, dt):
        """The guard on a finite ``tau`` (nv,): clamp to ``±tau_max``, then limit the change since the last
        safe command to ``τ_prev + clip(τ - τ_prev, -τ̇_max Δt, τ̇_max Δt)`` for the ``dt`` seconds since the
        previous command (no previous command, or ``dt`` None or not finite: no rate limit; ``dt < 0`` counts
        as 0, i.e. hold), and remember the result as the last safe command. Returns ``(tau, saturated,
        rate_limited)``, the two masks (nv,) bool marking the joints that were cut."""
        saturated = np.abs(tau) > self.tau_max
        tau = np.clip(tau, -self.tau_max, self.tau_max)
        if self.has_previous and dt is not None and math.isfinite(dt):
            step = self.max_rate * max(float(dt), 0.0)
            delta = tau - self.last_safe
            rate_limited = np.abs(delta) > step
            tau = self.last_safe + np.clip(delta, -step, step)
        else:
            rate_limited = np.zeros(tau.shape, dtype=bool)
        self.last_safe = tau.copy()
        self.has_previous = True
        return tau, saturated, rate_limited

    def accept(self, tau, status, dt=None):
        """:meth:`clamp_and_limit` with its masks written into ``status`` (``saturated``, ``rate_limited``;
        ``dt`` None: no rate limit); a non-finite ``tau`` is refused (fault ``nonfinite_command``) and the
        last safe command returned."""
        tau = np.asarray(tau, dtype=float)
        if not self.check_finite(status, "nonfinite_command", tau=tau):
            return self.hold()
        tau, status.saturated, status.rate_limited = self.clamp_and_limit(tau, dt)
        return tau
