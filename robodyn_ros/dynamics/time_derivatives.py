"""First and second time derivatives of inverse dynamics, ``τ̇`` and ``τ̈`` (Müller and Kumar 2021), by
an O(n) recursion: the RNEA differentiated along the motion ``q(t)`` in body coordinates.

Each body quantity is carried with its time derivatives (a *jet*) and products are expanded with the
Leibniz rule. The only time-varying operator is the parent-to-child motion transform ``X_i(q_i)``; with
``v_J = S q̇_i`` it obeys ``Ẋ_i = -crm(v_J) X_i`` (the body-frame form of Müller and Kumar's
``J̇ = -A a J``, eq. 10), so ``X_i^(k+1) = -Σ_j C(k, j) crm(S q_i^(j+1)) X_i^(k-j)``.

Recursion (order K = 1 or 2), for k = 0..K+1 (velocities) and k = 0..K (forces):
  ``ν_i^(k) = Σ_j C(k,j) X^(j) ν_λ^(k-j) + S q_i^(k+1)``                       body twist
  ``γ_i^(k) = Σ_j C(k,j) X^(j) γ_λ^(k-j)``, ``γ_0 = [-g; 0]``                     gravity in body frame
  ``f_i^(k) = I (ν_i^(k+1) + γ_i^(k)) + Σ_j C(k,j) ν_i^(j) x* I ν_i^(k-j) - f_ext_i^(k)``
  ``F_λ^(k) += Σ_j C(k,j) (X^(j))^T F_i^(k-j)``,  ``τ_i^(k) = S^T F_i^(k) + armature q_i^(k+2)``
"""
from __future__ import annotations

from math import comb

import numpy as np

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements
from .rnea import body_inertia


def _leibniz(ops, A, b, k):
    """k-th derivative of the product ``A(t) b(t)`` from the jets ``A[0..k]``, ``b[0..k]``."""
    out = ops.mtimes(A[0], b[k])
    for j in range(1, k + 1):
        out = out + comb(k, j) * ops.mtimes(A[j], b[k - j])
    return out


def transform_jet(ops, X, qjets, S, order):
    """``[X, Ẋ, ..., X^(order)]`` of a joint's motion transform ``X`` (6, 6) from ``Ẋ = -crm(S q̇) X``.
    ``qjets[m]`` is the joint's m-th coordinate derivative slice (``qjets[1]`` = q̇)."""
    jet = [X]
    crm = [spatial.cross_motion_matrix(ops, ops.mtimes(S, qjets[m + 1])) for m in range(order)]
    for k in range(order):
        nxt = -ops.mtimes(crm[0], jet[k])
        for j in range(1, k + 1):
            nxt = nxt - comb(k, j) * ops.mtimes(crm[j], jet[k - j])
        jet.append(nxt)
    return jet


def rnea_time_derivatives(model, q, v, a, jerk, snap=None, f_ext=None, f_ext_dot=None, f_ext_ddot=None):
    """``τ̇`` (nv,) — or ``(τ̇, τ̈)`` when ``snap`` is given — of ``τ(t) = rnea(q(t), q̇(t), q̈(t))``.

    q (nq,), v, a, jerk, snap (nv,): the trajectory's derivatives at the instant; ``f_ext`` (nbodies, 6)
    body wrenches and their rates ``f_ext_dot``, ``f_ext_ddot`` (default zero). Fixed-base models with
    1-DoF joints (revolute, prismatic), as in the paper."""
    ops = ops_for(q, v, a, jerk, snap)
    K = 1 if snap is None else 2
    if ops.name == "numpy":
        q = model.check_vector("q", q, model.nq)
        v, a, jerk = (model.check_vector(n, x, model.nv) for n, x in (("v", v), ("a", a), ("jerk", jerk)))
        snap = None if snap is None else model.check_vector("snap", snap, model.nv)
    if any(j.nq != 1 for j in model.joints):
        raise ValueError("rnea_time_derivatives supports 1-DoF joints (fixed-base arms) only")
    derivs = [None, v, a, jerk, snap if snap is not None else ops.zeros(model.nv)]  # q^(m), m >= 1
    fe = [f_ext, f_ext_dot, f_ext_ddot]
    liMi = parent_placements(ops, model, q)
    nu, gam, F, Xj = [], [], [], []
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        S = model.joints[i].S
        qj = [None] + [d[sv] for d in derivs[1:]]
        X = transform_jet(ops, spatial.inv_motion_matrix(ops, R, p), qj, S, K + 1)
        nu_par = [ops.zeros(6)] * (K + 2) if lam < 0 else nu[lam]
        gam_par = [ops.vcat([ops.const(-model.gravity), ops.zeros(3)])] + [ops.zeros(6)] * K if lam < 0 else gam[lam]
        nu_i = [_leibniz(ops, X, nu_par, k) + ops.mtimes(S, qj[k + 1]) for k in range(K + 2)]
        gam_i = [_leibniz(ops, X, gam_par, k) for k in range(K + 1)]
        inertia = body_inertia(ops, model, i)
        Inu = [spatial.inertia_apply(ops, inertia, x) for x in nu_i]
        f_i = []
        for k in range(K + 1):
            fk = spatial.inertia_apply(ops, inertia, nu_i[k + 1] + gam_i[k])
            for j in range(k + 1):
                fk = fk + comb(k, j) * spatial.cross_force(ops, nu_i[j], Inu[k - j])
            if fe[k] is not None:
                fk = fk - (ops.T(fe[k][i, :]) if ops.is_symbolic() else np.asarray(fe[k], dtype=float)[i])
            f_i.append(fk)
        nu.append(nu_i), gam.append(gam_i), F.append(f_i), Xj.append(X)
    out = [ops.zeros(model.nv) for _ in range(K)]
    for i in reversed(range(model.nbodies)):
        _, sv = joint_slices(model, i)
        S = model.joints[i].S
        for k in range(1, K + 1):
            out[k - 1][sv] = ops.mtimes(S.T, F[i][k]) + ops.mtimes(np.diag(model.armature[sv]), derivs[k + 2][sv])
        lam = model.parents[i]
        if lam >= 0:
            XT = [ops.T(x) for x in Xj[i]]
            F[lam] = [F[lam][k] + _leibniz(ops, XT, F[i], k) for k in range(K + 1)]
    return out[0] if K == 1 else (out[0], out[1])
