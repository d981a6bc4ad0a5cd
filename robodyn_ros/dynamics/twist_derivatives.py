"""Differential dynamics with respect to joint twists (Kwon, Algorithm 1) for kinematic calibration.

A joint's twist ``A_i`` (6,) ``[v; w]`` in its child frame at reference is re-parametrised around the
current estimate ``Ā_i`` as ``A_i = Ad_{exp(η_i)} Ā_i`` (eq. 6), so ``δA_i = -ad_{Ā_i} δη_i`` (eq. 8) and
the joint constraints (``|w| = 1``, ``w·v = 0``) hold by construction. Derivatives are taken at η = 0 with
respect to ``λ = [η (6n), θ (n), θ̇ (n), θ̈ (n)]``.

In body coordinates (our conventions: twists ``[lin; ang]``, ``X_i`` the parent-to-child motion
transform, ``E_i = Ad_{exp(-A_i θ_i)}``):
  ``δX_i = crm((1 - E_i) δη_i) X_i - crm(A_i δθ_i) X_i``,
  ``P_i = ∂V_i/∂λ = X_i P_λ + P̄_i`` (Kwon lines 3-7, 11, 17),
  ``Q_i = ∂V̇_i/∂λ = X_i Q_λ - crm(A_i θ̇_i) P_i + Q̄_i`` (lines 8, 12, 15, 19),
  ``R_i = ∂F_i/∂λ = G_i Q_i + (crf(V_i) G_i + G(G_i V_i)) P_i + Σ_c (X_c^T R_c + R̄_c)`` (lines 21-30),
  ``∂τ_i/∂λ = A_i^T R_i + (A_i x* F_i)^T`` on the ``η_i`` block.
"""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import NUMPY as ops
from ..model.errors import ModelError
from ..model.joints import ScrewJoint
from .kinematics import parent_placements
from .rnea import base_acceleration


def joint_twists(model):
    """``A`` (nbodies, 6): every joint's twist ``[v; w]`` in its child frame (1-DoF joints only)."""
    if any(j.nv != 1 for j in model.joints):
        raise ModelError("joint twists are defined for 1-DoF joints only")
    return np.array([j.S[:, 0] for j in model.joints])


def se3_exp_matrix(eta):
    """``Ad_{exp(η)}`` (6, 6) for a twist ``η = [v; w]``."""
    from ..model.joints import _se3_exp
    R, p = _se3_exp(np.asarray(eta, dtype=float))
    return spatial.motion_matrix(ops, R, p)


def with_twist_corrections(model, eta):
    """A model whose joint twists are ``A_i = Ad_{exp(η_i)} Ā_i`` (eq. 6), ``eta`` (nbodies, 6).
    Joint frames at reference (``M_i``) and inertias are unchanged; the joints become :class:`ScrewJoint`."""
    from dataclasses import replace
    eta = np.asarray(eta, dtype=float).reshape(model.nbodies, 6)
    A = joint_twists(model)
    joints = tuple(ScrewJoint(se3_exp_matrix(e) @ a) for e, a in zip(eta, A))
    return replace(model, joints=joints)


def twist_derivatives(model, q, v, a):
    """``(dtau_deta, dtau_dq, dtau_dv, dtau_da)`` of inverse dynamics at ``q`` (nq,), ``v``, ``a`` (nv,)
    for a model of 1-DoF joints: ``dtau_deta`` (nv, 6 nbodies) with block i the derivative w.r.t. the
    twist correction ``η_i`` of joint i (eq. 6), and the usual (nv, nv) state partials, all by the one
    forward/backward recursion of Kwon's Algorithm 1 (armature included in ``dtau_da``)."""
    q, v, a = (model.check_vector(n, x, k) for n, x, k in (("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)))
    n = model.nbodies
    A = joint_twists(model)
    m = 6 * n + 3 * n
    cq, cv, ca = 6 * n, 7 * n, 8 * n          # first column of the θ, θ̇, θ̈ blocks
    liMi = parent_placements(ops, model, q)
    X = [spatial.inv_motion_matrix(ops, R, p) for R, p in liMi]
    E = [spatial.inv_motion_matrix(ops, *model.joints[i].placement(ops, q[i:i + 1])) for i in range(n)]
    V, Vd, P, Q = [], [], [], []
    a0 = base_acceleration(ops, model)
    for i in range(n):
        lam = model.parents[i]
        Vl, Vdl = (np.zeros(6), a0) if lam < 0 else (V[lam], Vd[lam])
        Pl, Ql = (np.zeros((6, m)), np.zeros((6, m))) if lam < 0 else (P[lam], Q[lam])
        XV, XVd = X[i] @ Vl, X[i] @ Vdl
        Vi = A[i] * v[i] + XV
        Vdi = A[i] * a[i] + XVd + spatial.cross_motion(ops, Vi, A[i] * v[i])
        crmA = spatial.cross_motion_matrix(ops, A[i])
        Pi = X[i] @ Pl
        Pi[:, 6 * i:6 * i + 6] += -spatial.cross_motion_matrix(ops, XV) @ (np.eye(6) - E[i]) - crmA * v[i]
        Pi[:, cq + i] += spatial.cross_motion(ops, XV, A[i])
        Pi[:, cv + i] += A[i]
        Qi = X[i] @ Ql - spatial.cross_motion_matrix(ops, A[i] * v[i]) @ Pi
        crmV = spatial.cross_motion_matrix(ops, Vi)
        Qi[:, 6 * i:6 * i + 6] += -spatial.cross_motion_matrix(ops, XVd) @ (np.eye(6) - E[i]) - crmA * a[i] \
            - crmV @ crmA * v[i]
        Qi[:, cq + i] += spatial.cross_motion(ops, XVd, A[i])
        Qi[:, cv + i] += crmV @ A[i]
        Qi[:, ca + i] += A[i]
        V.append(Vi), Vd.append(Vdi), P.append(Pi), Q.append(Qi)
    F, R = [None] * n, [None] * n
    dtau = np.zeros((n, m))
    for i in reversed(range(n)):
        G = spatial.inertia_matrix(ops, spatial.inertia_from_params(ops, model.inertias[i]))
        GV = G @ V[i]
        Fi = G @ Vd[i] + spatial.cross_force(ops, V[i], GV)
        Ri = G @ Q[i] + (spatial.cross_force_matrix(ops, V[i]) @ G + spatial.force_cross_operand_matrix(ops, GV)) @ P[i]
        for c in model.children[i]:
            Fi = Fi + X[c].T @ F[c]
            Ri = Ri + X[c].T @ R[c]
            GF = spatial.force_cross_operand_matrix(ops, F[c])
            Ri[:, 6 * c:6 * c + 6] += -X[c].T @ GF @ (np.eye(6) - E[c])
            Ri[:, cq + c] += X[c].T @ GF @ A[c]
        F[i], R[i] = Fi, Ri
        dtau[i] = A[i] @ Ri
        dtau[i, 6 * i:6 * i + 6] += spatial.cross_force(ops, A[i], Fi)
        dtau[i, ca + i] += model.armature[i]
    return dtau[:, :6 * n], dtau[:, cq:cv], dtau[:, cv:ca], dtau[:, ca:]
