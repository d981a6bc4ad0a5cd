"""The torque scale of each joint: what "a large torque" means for that joint, for choices that must hold on
any arm (the prior of an estimator, the size of a plant's friction or noise) without per-robot numbers."""
from __future__ import annotations

import numpy as np


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
