"""The torque scale of each joint: what "a large torque" means for that joint, for choices that must hold on
any arm (the prior of an estimator, the size of a plant's friction or noise) without per-robot numbers."""
from __future__ import annotations

import numpy as np

FRICTION_BOUND = 0.03
"""Coulomb friction of a joint, at most, as a fraction of its torque scale (the estimator's prior near rest,
:mod:`robodyn_ros.estimation.torque_regressor`; the perturbed plants draw up to it,
:mod:`robodyn_ros.simulation.perturbed_plant`, whose docstring gives the sources)."""
STIFFNESS_ERROR = 0.05
"""rad: the tracking error at which a joint's feedback is to overcome the largest Coulomb friction of a joint of
its torque scale (:func:`feedback_stiffness_floor`)."""


def joint_torque_scale(model, samples=64, seed=0):
    """Per joint (nv,), N m (or N): the URDF effort limit where it is finite and positive, else the largest
    |gravity torque| over ``samples`` random configurations within the limits (at least 1)."""
    limit = np.asarray(model.effort_limit, dtype=float)
    scale = np.where(np.isfinite(limit) & (limit > 0), limit, np.nan)
    if np.any(np.isnan(scale)):
        from .rnea import rnea
        rng = np.random.default_rng(seed)
        g = np.zeros(model.nv)
        zero = np.zeros(model.nv)
        for _ in range(samples):
            g = np.maximum(g, np.abs(rnea(model, model.random_configuration(rng), zero, zero)))
        scale = np.where(np.isnan(scale), np.maximum(g, 1.0), scale)
    return scale


def feedback_stiffness_floor(model, error=STIFFNESS_ERROR):
    """Per joint (nv,), N m/rad (N/m): ``FRICTION_BOUND τ_scale / error``, the position feedback that overcomes
    the largest Coulomb friction of a joint of that torque scale at a tracking error of ``error``. A
    controller whose gains scale with the model's inertia (computed torque ``K_P M̂``) can fall far below it
    on a light wrist whose URDF has no armature (example-robot-data's UR10, wrist_3: ``K_P M = 0.2`` N m/rad
    against up to 1.6 N m of friction): the joint sticks, neither tracks nor tells an estimator its inertia and
    friction. ``error = 0``: no floor (zeros)."""
    if not error > 0:
        return np.zeros(model.nv)
    return FRICTION_BOUND * joint_torque_scale(model) / float(error)
