"""Composite-rigid-body algorithm for the joint-space inertia matrix (Featherstone RBDA Table 6.2), with
composite inertias kept in the 10-parameter rigid form and the armature on the diagonal."""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements
from .rnea import body_inertia


def crba(model, q, pi=None):
    """Joint-space inertia ``M(q)`` (nv, nv), full and symmetric, armature included.

    q (nq,); ``pi`` (10 nbodies,) optional inertial parameters (symbolic allowed)."""
    ops = ops_for(q, pi)
    if ops.name == "numpy":
        q, pi = model.check_vector("q", q, model.nq), model.check_parameters(pi)
    liMi = parent_placements(ops, model, q)
    Ic = [body_inertia(ops, model, i, pi) for i in range(model.nbodies)]
    M = ops.zeros(model.nv, model.nv)
    for i in reversed(range(model.nbodies)):
        _, si = joint_slices(model, i)
        F = ops.mtimes(spatial.inertia_matrix(ops, Ic[i]), model.joints[i].S)
        M[si, si] = ops.mtimes(model.joints[i].S.T, F) + np.diag(model.armature[si])
        j = i
        while model.parents[j] >= 0:
            F = ops.mtimes(spatial.force_matrix(ops, *liMi[j]), F)
            j = model.parents[j]
            _, sj = joint_slices(model, j)
            M[sj, si] = ops.mtimes(model.joints[j].S.T, F)
            M[si, sj] = ops.T(M[sj, si])
        lam = model.parents[i]
        if lam >= 0:
            Ic[lam] = spatial.inertia_add(Ic[lam], spatial.inertia_act(ops, *liMi[i], Ic[i]))
    return M
