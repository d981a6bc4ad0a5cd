"""Recursive Newton-Euler inverse dynamics (Featherstone RBDA Table 5.1; Cărmizaru eqs. 2.37-2.41) in
body coordinates with Pinocchio's conventions. Gravity enters as the base acceleration ``a_0 = -g``."""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements


def base_acceleration(ops, model):
    """``a_0 = [-g; 0]``: the fictitious base acceleration that accounts for gravity."""
    return ops.vcat([ops.const(-model.gravity), ops.zeros(3)])


def body_inertia(ops, model, i, pi=None):
    """``(m, h, I)`` of body ``i``: the model's parameter row, or rows of ``pi`` (10 nbodies,) when given
    (symbolic parameters allowed)."""
    return spatial.inertia_from_params(ops, model.inertias[i] if pi is None else pi[10 * i:10 * i + 10])


def external_wrench(ops, f_ext, i):
    """Row ``i`` of ``f_ext`` (nbodies, 6) as a spatial force, or None."""
    if f_ext is None:
        return None
    row = f_ext[i, :]
    return ops.T(row) if ops.is_symbolic() else row


def body_motions(ops, model, liMi, v, a):
    """Forward pass of the RNEA: body twists ``v_i`` and accelerations ``a_i`` (gravity included as
    ``a_0 = -g``), each (6,) in its body frame, from the joint placements ``liMi``."""
    a0 = base_acceleration(ops, model)
    vel, acc = [], []
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        joint = model.joints[i]
        vJ = joint.motion(ops, v[sv])
        vi = vJ if lam < 0 else spatial.inv_act_motion(ops, R, p, vel[lam]) + vJ
        ai = spatial.inv_act_motion(ops, R, p, a0 if lam < 0 else acc[lam]) + joint.motion(ops, a[sv]) \
            + spatial.cross_motion(ops, vi, vJ)
        vel.append(vi), acc.append(ai)
    return vel, acc


def rnea(model, q, v, a, f_ext=None, pi=None):
    """Inverse dynamics ``tau = M(q) a + C(q, v) v + g(q) - sum_k J_k^T f_ext_k`` (+ armature ``a``).

    q (nq,), v (nv,), a (nv,), f_ext (nbodies, 6) wrenches on each body in its frame; ``pi``
    (10 nbodies,) optional inertial parameters overriding the model's (symbolic allowed).
    Returns tau (nv,).
    """
    ops = ops_for(q, v, a, f_ext, pi)
    if ops.name == "numpy":
        q, v, a = (model.check_vector(n, x, k) for n, x, k in (("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)))
        f_ext, pi = model.check_f_ext(f_ext), model.check_parameters(pi)
    liMi = parent_placements(ops, model, q)
    vel, acc = body_motions(ops, model, liMi, v, a)
    force = []
    for i in range(model.nbodies):
        inertia = body_inertia(ops, model, i, pi)
        fi = spatial.inertia_apply(ops, inertia, acc[i]) + spatial.cross_force(ops, vel[i], spatial.inertia_apply(ops, inertia, vel[i]))
        fe = external_wrench(ops, f_ext, i)
        force.append(fi if fe is None else fi - fe)
    tau = ops.zeros(model.nv)
    for i in reversed(range(model.nbodies)):
        _, sv = joint_slices(model, i)
        tau[sv] = model.joints[i].project(ops, force[i]) + ops.mtimes(np.diag(model.armature[sv]), a[sv])
        lam = model.parents[i]
        if lam >= 0:
            force[lam] = force[lam] + spatial.act_force(ops, *liMi[i], force[i])
    return tau
