"""The joint-torque regressor ``Y(q, v, a)`` for many samples at once, vectorised over samples with NumPy
(the per-sample :func:`robodyn_ros.dynamics.regressor.regressor` costs about a millisecond in Python; identifying
100 000 samples needs the whole batch in a few seconds).

Same algorithm as :mod:`robodyn_ros.dynamics.regressor` (Garofalo Prop. 2; Cărmizaru eqs. 4.11-4.15): an RNEA
forward pass gives every body's twist ``v_k`` and acceleration ``a_k`` (gravity as ``a_0 = -g``), the body
regressor ``Y_b(v_k, a_k)`` (6, 10) gives the wrench linear in its 10 parameters, and a backward pass
projects it on the joints of the body's ancestors, ``Y[j, 10k:10k+10] = S_j^T X*_{j,k} Y_b,k``.
Bodies whose joint is not revolute or prismatic (free flyer, spherical, screw) fall back on the
per-sample core functions.
"""
from __future__ import annotations

import numpy as np

from ..dynamics.regressor import regressor as single_regressor


def _skew_cross(a, b):
    """Row-wise cross products ``a x b`` of (N, 3) arrays (np.cross is slow on small rows)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _cross_columns(p, F):
    """``p x F[:, :, c]`` for every column c: p (N, 3), F (N, 3, k) -> (N, 3, k)."""
    p0, p1, p2 = p[:, 0, None], p[:, 1, None], p[:, 2, None]
    return np.stack([p1 * F[:, 2] - p2 * F[:, 1], p2 * F[:, 0] - p0 * F[:, 2], p0 * F[:, 1] - p1 * F[:, 0]], axis=1)


def _is_vectorisable(model):
    return all(j.kind in ("revolute", "prismatic") for j in model.joints)


def batch_parent_placements(model, Q):
    """``liMi`` of every body for every sample: lists of R (N, 3, 3) and p (N, 3) (parent-frame
    placement ``X_tree X_J(q)``, as :func:`robodyn_ros.dynamics.kinematics.parent_placements`)."""
    N = Q.shape[0]
    Rs, ps = [], []
    for i, joint in enumerate(model.joints):
        R0, p0 = model.placements[i]
        qi = Q[:, model.idx_q[i]]
        k = joint.axis
        if joint.kind == "revolute":
            K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
            RJ = np.eye(3) + np.sin(qi)[:, None, None] * K + (1.0 - np.cos(qi))[:, None, None] * (K @ K)
            Rs.append(R0 @ RJ)
            ps.append(np.broadcast_to(p0, (N, 3)))
        else:
            Rs.append(np.broadcast_to(R0, (N, 3, 3)))
            ps.append(p0 + qi[:, None] * (R0 @ k))
    return Rs, ps


def _inv_act_motion(R, p, m):
    """Batched ``[R^T (v - p x w); R^T w]`` for R (N, 3, 3), p (N, 3), m (N, 6)."""
    w = m[:, 3:]
    return np.concatenate([(m[:, None, :3] - _skew_cross(p, w)[:, None, :]) @ R,
                           w[:, None, :] @ R], axis=2)[:, 0, :]


def _cross_motion(v, m):
    """Batched motion cross product ``v x m`` (N, 6)."""
    return np.concatenate([_skew_cross(v[:, 3:], m[:, :3]) + _skew_cross(v[:, :3], m[:, 3:]),
                           _skew_cross(v[:, 3:], m[:, 3:])], axis=1)


def batch_body_motions(model, Q, V, A, placements=None):
    """RNEA forward pass for N samples: twists and accelerations (gravity included) of every body in its
    frame, each a list over bodies of (N, 6) arrays; also returns the placements ``(Rs, ps)``."""
    Rs, ps = placements if placements is not None else batch_parent_placements(model, Q)
    N = Q.shape[0]
    a0 = np.broadcast_to(np.concatenate([-model.gravity, np.zeros(3)]), (N, 6))
    vel, acc = [], []
    for i, joint in enumerate(model.joints):
        S = joint.S[:, 0]
        lam = model.parents[i]
        vJ = V[:, model.idx_v[i], None] * S
        vi = vJ if lam < 0 else _inv_act_motion(Rs[i], ps[i], vel[lam]) + vJ
        ai = _inv_act_motion(Rs[i], ps[i], a0 if lam < 0 else acc[lam]) + A[:, model.idx_v[i], None] * S \
            + _cross_motion(vi, vJ)
        vel.append(vi), acc.append(ai)
    return vel, acc, (Rs, ps)


def batch_body_wrench_regressor(v, a):
    """``Y_b`` (N, 6, 10) with ``I a + v x* (I v) = Y_b pi_b`` for twists v and accelerations a (N, 6),
    ``pi_b = [m, hx, hy, hz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` (batched :func:`robodyn_ros.dynamics.regressor.body_wrench_regressor`).

    Newton-Euler with ``(m, h, I)``: ``f = m (a_l + w x v_l) + α x h + w x (w x h)``,
    ``n = I α + w x (I w) + h x (a_l + w x v_l)``.
    """
    vl, w, al, al_ang = v[:, :3], v[:, 3:], a[:, :3], a[:, 3:]
    N = v.shape[0]
    Y = np.zeros((N, 6, 10))
    acc_origin = al + _skew_cross(w, vl)                     # classical acceleration of the origin
    Y[:, :3, 0] = acc_origin
    wx, wy, wz = w[:, 0], w[:, 1], w[:, 2]
    ax, ay, az = al_ang[:, 0], al_ang[:, 1], al_ang[:, 2]
    # force part, linear in h: (α x + w x w x) h
    Y[:, 0, 1], Y[:, 0, 2], Y[:, 0, 3] = -(wy * wy + wz * wz), wx * wy - az, wx * wz + ay
    Y[:, 1, 1], Y[:, 1, 2], Y[:, 1, 3] = wx * wy + az, -(wx * wx + wz * wz), wy * wz - ax
    Y[:, 2, 1], Y[:, 2, 2], Y[:, 2, 3] = wx * wz - ay, wy * wz + ax, -(wx * wx + wy * wy)
    # moment part, linear in h: h x acc_origin = -acc_origin x h
    gx, gy, gz = acc_origin[:, 0], acc_origin[:, 1], acc_origin[:, 2]
    Y[:, 3, 2], Y[:, 3, 3] = gz, -gy
    Y[:, 4, 1], Y[:, 4, 3] = -gz, gx
    Y[:, 5, 1], Y[:, 5, 2] = gy, -gx
    # moment part, linear in I: I α + w x (I w), columns Ixx, Ixy, Iyy, Ixz, Iyz, Izz (written out)
    Y[:, 3, 4], Y[:, 4, 4], Y[:, 5, 4] = ax, wx * wz, -wx * wy
    Y[:, 3, 5], Y[:, 4, 5], Y[:, 5, 5] = ay - wx * wz, ax + wy * wz, wx * wx - wy * wy
    Y[:, 3, 6], Y[:, 4, 6], Y[:, 5, 6] = -wy * wz, ay, wx * wy
    Y[:, 3, 7], Y[:, 4, 7], Y[:, 5, 7] = az + wx * wy, wz * wz - wx * wx, ax - wy * wz
    Y[:, 3, 8], Y[:, 4, 8], Y[:, 5, 8] = wy * wy - wz * wz, az - wx * wy, ay + wx * wz
    Y[:, 3, 9], Y[:, 4, 9], Y[:, 5, 9] = wy * wz, -wx * wz, az
    return Y


def batch_world_placements(model, Rs, ps):
    """``oMi`` of every body: lists of R (N, 3, 3), p (N, 3) from the parent placements."""
    Ro, po = [], []
    for i in range(model.nbodies):
        lam = model.parents[i]
        if lam < 0:
            Ro.append(Rs[i]), po.append(ps[i])
        else:
            Ro.append(Ro[lam] @ Rs[i]), po.append(po[lam] + (Ro[lam] @ ps[i][:, :, None])[:, :, 0])
    return Ro, po


def batch_world_joint_axes(model, Ro, po):
    """Joint motion subspaces ``S_j`` (N, 6) in the base frame, about the base origin."""
    axes = []
    for j, joint in enumerate(model.joints):
        d = Ro[j] @ joint.axis
        axes.append(np.concatenate([_skew_cross(po[j], d), d], axis=1) if joint.kind == "revolute"
                    else np.concatenate([d, np.zeros_like(d)], axis=1))
    return axes


def batch_regressor(model, Q, V, A):
    """Joint-torque regressors ``Y`` (N, nv, 10 nbodies) of N samples Q (N, nq), V, A (N, nv):
    ``Y[n] == robodyn_ros.dynamics.regressor(model, Q[n], V[n], A[n])``.

    The projection ``S_j^T X*_{j,k} Y_b,k`` is evaluated in the base frame (power is frame invariant):
    each body's wrench regressor is expressed once about the base origin, ``F_k = X*_{0,k} Y_b,k``,
    and joint j's entry is ``S_j^0 . F_k`` for every descendant k of j.
    """
    Q, V, A = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (Q, V, A))
    N = Q.shape[0]
    if not _is_vectorisable(model):
        return np.stack([single_regressor(model, Q[n], V[n], A[n]) for n in range(N)])
    vel, acc, (Rs, ps) = batch_body_motions(model, Q, V, A)
    Ro, po = batch_world_placements(model, Rs, ps)
    axes = batch_world_joint_axes(model, Ro, po)
    Y = np.zeros((N, model.nv, 10 * model.nbodies))
    for k in range(model.nbodies):
        Fb = batch_body_wrench_regressor(vel[k], acc[k])
        f = Ro[k] @ Fb[:, :3]
        F = np.concatenate([f, Ro[k] @ Fb[:, 3:] + _cross_columns(po[k], f)], axis=1)
        for j in model.ancestors(k):
            Y[:, model.idx_v[j], 10 * k:10 * k + 10] = (axes[j][:, None, :] @ F)[:, 0, :]
    return Y
