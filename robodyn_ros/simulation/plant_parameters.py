"""The simulated robot as the simulator takes it (:class:`Plant`): its model, Coulomb smoothing width,
joint-torque noise and where it came from; :mod:`.plant` loads one, :mod:`.perturbed_plant` draws one."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from ..model.model import Model


@dataclass(frozen=True)
class Plant:
    """The simulated robot: ``model`` (same joints as the controllers' model), the Coulomb smoothing width
    its friction was identified with (rad/s; None: the simulator's), its joint-torque noise (nv,) std N m
    (None: the simulator's) and where it came from (``source``)."""

    model: Model
    coulomb_width: float | None = None
    effort_noise: np.ndarray | None = None
    source: str = "model"

    def check_matches(self, model):
        """ModelError unless the plant moves the same joints, in the same order, as ``model``."""
        if tuple(self.model.joint_names) != tuple(model.joint_names):
            raise ModelError(f"plant {self.source}: joints {', '.join(self.model.joint_names)} differ from the "
                             f"controllers' model's {', '.join(model.joint_names)}")

    def sensor_noise(self, noise):
        """``noise`` (a SensorNoise) with the plant's joint-torque noise, when it has one."""
        if self.effort_noise is None:
            return noise
        return dataclasses.replace(noise, effort=tuple(float(x) for x in self.effort_noise))
