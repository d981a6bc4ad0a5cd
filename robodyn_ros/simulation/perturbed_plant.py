"""Plausible real robots around any URDF: seeded random plants that differ from the nominal model the way
real arms differ from their descriptions, to test that adaptation learns the robot it is pointed at rather
than one plant it was tuned on.

``perturbed_plant(model, seed)`` returns a :class:`~robodyn_ros.simulation.plant.Plant` (same joints) whose
every body's inertia, every joint's rotor inertia and friction, and the joint-torque noise are drawn from
:class:`PerturbationRanges`. Each range and where it comes from:

* **Link inertias.** Mass ×U(0.75, 1.3); centre of mass moved by up to 25 % of the body's radius of
  gyration ``sqrt(tr(I_c) / m)`` (at most 3 cm) in a random direction; principal moments of ``I_c``
  ×U(0.7, 1.4) each and its principal axes turned by up to 10°, then the triangle inequality enforced
  strictly (the smallest moment raised to at least ``I_max - I_mid + 0.02 I_max``): every body stays
  physically consistent (mass > 0, a positive definite pseudo-inertia, ``I_1 < I_2 + I_3``).
  Source: the real Panda. The bundled Panda URDF predicts the torques measured on a real Panda (Gaz et al.
  2019, the log the Panda twin is identified from) with 18.2 % relative error; these ranges give plants that
  the nominal model predicts with 10-35 % error on a moderate trajectory (``plant_prediction_error``).
* **Rotor inertia (armature)**, ``k_r² I_m`` of geared joints: U(1e-4, 1e-3) kg m² per N m of the joint's
  effort limit (a UR5-class arm: 0.015-0.15 kg m² at the 150 N m joints, 0.003-0.03 at the 28 N m
  wrists); URDFs almost never carry it.
* **Friction** ``τ_f = f_v v + f_c tanh(v / w) + f_o``: Coulomb f_c U(0.3 %, 3 %) of the effort limit,
  viscous f_v U(0.05 %, 1 %) of the effort limit per rad/s, offset f_o U(-0.5 %, 0.5 %) of the limit,
  smoothing width w U(0.01, 0.05) rad/s. Source: the Panda twin identified from the real log, Coulomb
  0.16-0.52 N m (0.3 % of the 87 N m limit on joints 1-4, 2.3 % of the 12 N m limit on the wrist), viscous
  0-0.064 N m s/rad, offsets up to 0.23 N m (0.3 %); harmonic-drive arms (UR, iiwa) carry several
  percent of their rated torque as Coulomb friction, which the upper end covers.
* **Joint-torque noise** σ_j: U(0.25 %, 1 %) of the effort limit. Source: the real Panda's link-side torque
  sensors, 0.04-0.41 N m above 5 Hz (0.35-0.8 % of the limits, ``panda_twin.yaml`` ``sensor_noise``); arms
  that estimate torque from motor currents are at the noisier end.

Joints without a finite positive effort limit take as their torque scale the largest gravity torque over
random configurations (at least 1 N m). Everything is drawn from ``numpy.random.default_rng(seed)`` in a
fixed order: the same seed and model give the same plant.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dynamics.torque_scale import joint_torque_scale
from ..model import spatial
from ..model.errors import ModelError
from .plant_parameters import Plant


@dataclass(frozen=True)
class PerturbationRanges:
    """The ranges of :func:`perturbed_plant` (module docstring); ``(lo, hi)`` uniform intervals."""

    mass: tuple = (0.75, 1.3)
    com_shift: float = 0.25            # fraction of the body's radius of gyration
    com_shift_max: float = 0.03        # m
    principal_moments: tuple = (0.7, 1.4)
    axes_rotation: float = np.deg2rad(10.0)
    armature_per_effort: tuple = (1e-4, 1e-3)     # kg m² per N m
    coulomb: tuple = (0.003, 0.03)                # fraction of the effort limit
    viscous: tuple = (0.0005, 0.01)               # fraction of the effort limit per rad/s
    offset: tuple = (-0.005, 0.005)               # fraction of the effort limit
    coulomb_width: tuple = (0.01, 0.05)           # rad/s
    effort_noise: tuple = (0.0025, 0.01)          # fraction of the effort limit


def _random_rotation(rng, max_angle):
    """A rotation matrix about a random axis by an angle uniform in [0, max_angle]."""
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = rng.uniform(0.0, max_angle)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1.0 - np.cos(angle)) * K @ K


def perturbed_body(pi, rng, ranges):
    """One body's inertial parameters (10,) perturbed (module docstring), physically consistent; a body
    without mass is returned unchanged (the same random draws are consumed)."""
    m, c, Ic = spatial.numpy_inertia_split(np.asarray(pi, dtype=float))
    f_mass = rng.uniform(*ranges.mass)
    direction = rng.normal(size=3)
    shift_fraction = rng.uniform(0.0, 1.0)
    factors = rng.uniform(*ranges.principal_moments, size=3)
    R = _random_rotation(rng, ranges.axes_rotation)
    if m <= 0:
        return np.array(pi, dtype=float)
    lam, V = np.linalg.eigh(0.5 * (Ic + Ic.T))
    lam = np.maximum(lam, 1e-9 * max(lam.max(), 1e-12))
    gyration = np.sqrt(lam.sum() / m)
    shift = min(ranges.com_shift * gyration, ranges.com_shift_max) * shift_fraction
    c = c + shift * direction / np.linalg.norm(direction)
    lam = lam * factors * f_mass
    # strict triangle inequality I_i < I_j + I_k (a mass distribution of volume): the smallest moment raised
    order = np.argsort(lam)
    a, b, c_max = lam[order]
    lam[order[0]] = max(a, c_max - b + 0.02 * c_max)
    axes = R @ V
    return spatial.numpy_inertia_params(m * f_mass, c, axes @ np.diag(lam) @ axes.T)


def perturbed_plant(model, seed, ranges=None):
    """A :class:`~robodyn_ros.simulation.plant.Plant` around ``model`` drawn with ``seed`` (module
    docstring): perturbed inertias, armature, viscous/Coulomb/offset friction, Coulomb smoothing width and
    per-joint torque noise; ``source`` is ``perturbed:SEED``."""
    if model.nq != model.nv:
        raise ModelError("perturbed plants are for fixed-base arms (nq == nv)")
    ranges = ranges or PerturbationRanges()
    rng = np.random.default_rng(int(seed))
    pi = np.concatenate([perturbed_body(model.inertias[i], rng, ranges) for i in range(model.nbodies)])
    scale = joint_torque_scale(model)
    nv = model.nv
    armature = rng.uniform(*ranges.armature_per_effort, size=nv) * scale
    coulomb = rng.uniform(*ranges.coulomb, size=nv) * scale
    viscous = rng.uniform(*ranges.viscous, size=nv) * scale
    offset = rng.uniform(*ranges.offset, size=nv) * scale
    width = float(rng.uniform(*ranges.coulomb_width))
    noise = rng.uniform(*ranges.effort_noise, size=nv) * scale
    plant_model = (model.with_inertial_parameters(pi).with_armature(model.armature + armature)
                   .with_friction(viscous=model.viscous + viscous, coulomb=model.coulomb + coulomb,
                                  offset=model.friction_offset + offset))
    return Plant(plant_model, coulomb_width=width, effort_noise=noise, source=f"perturbed:{int(seed)}")


def plant_prediction_error(model, plant, reference, duration=4.0, dt=1e-3):
    """Relative torque error ``||τ_plant - τ_model|| / ||τ_plant||`` of ``model`` (rigid body, armature and
    friction) predicting the torques ``plant`` needs to follow ``reference`` (``evaluate(t) -> (q, v, a)``)
    exactly over ``duration`` s: how far the plant is from the model, in the measure the real Panda's
    18.2 % is given in."""
    from ..dynamics.rnea import rnea
    width = plant.coulomb_width or 1e-3

    def friction(m, v):
        return m.viscous * v + m.coulomb * np.tanh(v / width) + m.friction_offset

    num = den = 0.0
    for t in np.arange(0.0, duration, 10 * dt):
        q, v, a = (np.asarray(x, dtype=float) for x in reference.evaluate(t))
        tau_p = rnea(plant.model, q, v, a) + friction(plant.model, v)
        tau_m = rnea(model, q, v, a) + friction(model, v)
        num += float(np.sum((tau_p - tau_m) ** 2))
        den += float(np.sum(tau_p ** 2))
    return float(np.sqrt(num / den))
