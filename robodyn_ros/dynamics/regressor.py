"""Inertial-parameter regressors: ``Y(q, v, a) pi = tau`` (Garofalo Prop. 2 and Remark 4; Cărmizaru
eqs. 4.11-4.15), the Slotine-Li regressor ``Y(q, v, v_r, a_r)`` (Garofalo eqs. 15-16) and the 6x10
wrench regressor of one body."""
from __future__ import annotations

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements
from .rnea import base_acceleration


def body_wrench_regressor(ops, v, a):
    """``Y_b`` (6, 10) with ``I a + v x* (I v) = Y_b pi_b`` for the body twist ``v`` and acceleration
    ``a`` (``[lin; ang]`` in the body frame, gravity included in ``a``): the wrench a body needs, linear in
    its 10 parameters. This is the regressor of a payload seen by a wrist force/torque sensor."""
    return slotine_li_body_regressor(ops, v, v, a)


def regressor(model, q, v, a):
    """Joint-torque regressor ``Y`` (nv, 10 nbodies) with ``Y @ model.inertial_parameters() == rnea(...)``
    minus the armature term. Column block ``k`` holds ``S_j^T X_{j,k}^* Y_b,k`` for the ancestors ``j`` of
    body ``k`` (the torque that body k's inertia causes at joint j)."""
    if ops_for(q, v, a).name == "numpy":   # checked here so that errors name a, not a_r
        q = model.check_vector("q", q, model.nq)
        v, a = model.check_vector("v", v, model.nv), model.check_vector("a", a, model.nv)
    return slotine_li_regressor(model, q, v, v, a)


def slotine_li_regressor(model, q, v, v_r, a_r):
    """Slotine-Li regressor ``Y(q, v, v_r, a_r)`` (nv, 10 nbodies) with
    ``Y pi = M(q) a_r + C(q, v) v_r + g(q)`` for the Coriolis matrix of Garofalo eq. (6b)
    (Garofalo eqs. 15-16). With ``v_r = v``, ``a_r = a`` it is the classic regressor."""
    ops = ops_for(q, v, v_r, a_r)
    if ops.name == "numpy":
        q = model.check_vector("q", q, model.nq)
        v, v_r, a_r = (model.check_vector(n, x, model.nv) for n, x in (("v", v), ("v_r", v_r), ("a_r", a_r)))
    liMi = parent_placements(ops, model, q)
    a0 = base_acceleration(ops, model)
    vel, vel_r, acc_r, Yb = [], [], [], []
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        joint = model.joints[i]
        vJ, vJr = joint.motion(ops, v[sv]), joint.motion(ops, v_r[sv])
        vi = vJ if lam < 0 else spatial.inv_act_motion(ops, R, p, vel[lam]) + vJ
        vri = vJr if lam < 0 else spatial.inv_act_motion(ops, R, p, vel_r[lam]) + vJr
        # α_k = J_k a_r + J̇_k v_r, with J̇_k from Garofalo eq. (28): X α_λ + S a_r - vJ x (v_r,k - S v_r)
        ari = spatial.inv_act_motion(ops, R, p, a0 if lam < 0 else acc_r[lam]) + joint.motion(ops, a_r[sv]) \
            + spatial.cross_motion(ops, vri, vJ) + spatial.cross_motion(ops, vJ, vJr)
        vel.append(vi), vel_r.append(vri), acc_r.append(ari)
        Yb.append(slotine_li_body_regressor(ops, vi, vri, ari))
    Y = ops.zeros(model.nv, 10 * model.nbodies)
    for k in range(model.nbodies):
        F, j = Yb[k], k
        while True:
            _, sj = joint_slices(model, j)
            Y[sj, 10 * k:10 * k + 10] = ops.mtimes(model.joints[j].S.T, F)
            if model.parents[j] < 0:
                break
            F = ops.mtimes(spatial.force_matrix(ops, *liMi[j]), F)
            j = model.parents[j]
    return Y


def slotine_li_body_regressor(ops, v, v_r, a_r):
    """``Y_b`` (6, 10) with ``Λ a_r + B(Λ, v) v_r = Y_b pi_b`` for the Christoffel body term ``B`` of
    :func:`robodyn_ros.dynamics.dynamic_matrices.coriolis_body_term`:
    ``B(Λ, v) v_r = ½ (Λ (v x v_r) + v x* Λ v_r + v_r x* Λ v)`` (Garofalo eqs. 15-16 with this ``C``).
    Linear in ``pi_b``, so built column by column from unit inertias; for ``v_r = v`` it is the classic
    Newton-Euler wrench :func:`body_wrench_regressor`."""
    cols = []
    for j in range(10):
        e = [0.0] * 10
        e[j] = 1.0
        inertia = spatial.inertia_from_params(ops, e)
        f = spatial.inertia_apply(ops, inertia, a_r + 0.5 * spatial.cross_motion(ops, v, v_r)) \
            + 0.5 * spatial.cross_force(ops, v, spatial.inertia_apply(ops, inertia, v_r)) \
            + 0.5 * spatial.cross_force(ops, v_r, spatial.inertia_apply(ops, inertia, v))
        cols.append(f)
    return ops.hcat(cols)
