"""What every controller does around its control law: check the measured state, clamp the torque to the
effort limits, and on a non-finite state or result hold the last safe command and report a fault.

The status is a plain record a ROS node can turn into diagnostics.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ControlStatus:
    """Outcome of one control step.

    ``ok``: the command came from the control law; ``fault``: a short code (``""``, ``"nonfinite_state"``,
    ``"nonfinite_reference"``, ``"nonfinite_command"``) when the last safe command was held instead;
    ``message``: human-readable detail; ``reference_clipped``: (nv,) joints whose reference was clipped to
    the limits; ``saturated``: (nv,) joints whose torque was clamped to the effort limit."""

    ok: bool = True
    fault: str = ""
    message: str = ""
    reference_clipped: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    saturated: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def effort_bounds(model):
    """The symmetric torque bound (nv,) of the model: URDF effort limits, inf where absent (0 or inf)."""
    lim = np.asarray(model.effort_limit, dtype=float)
    return np.where((lim > 0) & np.isfinite(lim), lim, np.inf)


class CommandGuard:
    """Holds the last safe command of a controller with ``nv`` joints and the torque bounds ``tau_max``
    (nv,). Initially the last safe command is ``initial`` (zeros by default)."""

    def __init__(self, tau_max, initial=None):
        self.tau_max = np.asarray(tau_max, dtype=float)
        self.last_safe = np.zeros_like(self.tau_max) if initial is None else np.asarray(initial, dtype=float).copy()

    def check_finite(self, status, fault, **arrays):
        """``False`` (and the fault written into ``status``) when any of ``arrays`` is not finite."""
        for name, x in arrays.items():
            x = np.asarray(x, dtype=float)
            if not np.all(np.isfinite(x)):
                bad = np.flatnonzero(~np.isfinite(x.reshape(-1)))
                status.ok, status.fault = False, fault
                status.message = f"{name} has non-finite entries at {bad.tolist()}: holding the last safe command"
                return False
        return True

    def hold(self):
        """The last safe command (a copy)."""
        return self.last_safe.copy()

    def accept(self, tau, status):
        """Clamp ``tau`` (nv,) to the effort bounds and remember it as the last safe command; a non-finite
        ``tau`` is refused (fault ``nonfinite_command``) and the last safe command returned."""
        tau = np.asarray(tau, dtype=float)
        if not self.check_finite(status, "nonfinite_command", tau=tau):
            return self.hold()
        status.saturated = np.abs(tau) > self.tau_max
        tau = np.clip(tau, -self.tau_max, self.tau_max)
        self.last_safe = tau.copy()
        return tau
