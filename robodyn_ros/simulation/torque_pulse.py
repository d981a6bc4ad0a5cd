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
    def from_config(cls, config, robot):
        """The pulse of the ``push.*`` parameters (``push.torque`` in joint order, mapped to the model's by
        ``robot.from_command``), or None when there is none (``push.time`` < 0 or no torque). ModelError naming
        the parameter when ``push.torque`` does not have one value per joint."""
        torque = np.asarray(config["push.torque"], dtype=float)
        nv = len(robot.command_order)
        if torque.size and torque.shape != (nv,):
            raise ModelError(f"push.torque: one value (N m) per joint, {nv}; got {torque.size}")
        if config["push.time"] < 0.0 or not np.any(torque):
            return None
        return cls(robot.from_command(torque), config["push.time"], config["push.duration"])

    def at(self, t):
        """``τ_ext`` (nv,) at simulated time ``t`` (the step starting then), None outside the pulse."""
        return self.torque if self.start - 1e-12 <= t < self.start + self.duration - 1e-12 else None
