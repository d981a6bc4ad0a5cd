"""A push on the simulated robot: the joint torques ``τ_ext`` (nv,) of an external force held on the links from
``start`` for ``duration`` simulated seconds (the ``simulator`` node's ``push.*`` parameters). They move the
plant, ``M(q) q̈ + h(q, q̇) = τ + τ_ext``, and are not in the effort its driver reports (the motors' torque,
what a controller and an estimator see): the disturbance a controller has to reject without being told."""
from __future__ import annotations

import numpy as np

from ..model.errors import ModelError


class TorquePulse:
    """``torque`` (nv,) model order, N m (N for a prismatic joint), from ``start`` for ``duration`` s."""

    def __init__(self, torque, start, duration):
        self.torque = np.asarray(torque, dtype=float)
        self.start, self.duration = float(start), float(duration)

    @classmethod
    def from_config(cls, config, command_order):
        """The pulse of the ``push.*`` parameters (``push.torque`` in joint order: ``command_order`` maps it to
        the model's), or None when there is none (``push.time`` < 0 or no torque). ModelError naming the
        parameter when ``push.torque`` does not have one value per joint."""
        torque = np.asarray(config["push.torque"], dtype=float)
        if config["push.time"] < 0.0 or torque.size == 0 or not np.any(torque):
            return None
        nv = len(command_order)
        if torque.shape != (nv,):
            raise ModelError(f"push.torque: one value (N m) per joint, {nv}; got {torque.size}")
        model_order = np.empty(nv)
        model_order[command_order] = torque
        return cls(model_order, config["push.time"], config["push.duration"])

    def at(self, t):
        """``τ_ext`` (nv,) at simulated time ``t`` (the step starting then), None outside the pulse."""
        return self.torque if self.start - 1e-12 <= t < self.start + self.duration - 1e-12 else None
