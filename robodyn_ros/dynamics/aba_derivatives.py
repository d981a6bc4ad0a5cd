"""Partial derivatives of forward dynamics from those of inverse dynamics (Singh, Russell, Wensing 2022,
Sec. IV-E; docs/REFERENCES.md).

Differentiating ``τ = ID(q, q̇, FD(q, q̇, τ))`` gives eq. 5: ``∂q̈/∂u = -M^-1 ∂τ/∂u`` for ``u = q, q̇``, and
``∂q̈/∂τ = M^-1``, with the ID partials evaluated at ``q̈ = FD(q, q̇, τ)``. Ways to apply ``M^-1``:

* DMM (direct matrix multiplication): form ``M^-1`` explicitly by the recursion of Carpentier
  (:func:`inverse_inertia_matrix`) and multiply, O(n^3);
* AZA (ABA with zero inputs, eqs. 33-34): ``ABA(q, 0, x)`` with gravity and external forces removed is
  ``M^-1 x``; the kinematics and articulated inertias are computed once and the ``x`` columns swept
  through the second and third passes together, O(n^2);
* ``'solve'``: a dense factorisation of ``M = ∂τ/∂q̈`` (which IDSVA returns anyway) through
  ``ops.solve`` -- LAPACK on NumPy, where the recursions above cost Python overhead per body.

``method='auto'``: ``'solve'`` for numeric inputs; for CasADi inputs DMM below
:data:`AZA_CROSSOVER_NV` dofs and AZA from there on (the size of the generated code decides).
"""
from __future__ import annotations

import numpy as np

from ..model import spatial
from .aba import aba, articulated_inverse, inertia_scale
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements
from .rnea import body_inertia
from .rnea_derivatives import rnea_derivatives

#: For CasADi inputs ``method='auto'`` uses DMM below this many degrees of freedom and AZA from it on.
#: Measured with ``benchmarks/bench_derivatives.py --crossover`` on random revolute chains: instructions
#: of the SX function (what the compiled kernels run) are DMM 1.68e6 / AZA 1.84e6 at nv = 64 and
#: DMM 2.97e6 / AZA 2.82e6 at nv = 80 (interpolated crossing at 72; DMM is 33-37 % smaller at 16-32).
AZA_CROSSOVER_NV = 72


def articulated_inertias(ops, model, liMi, pi=None):
    """Second pass of the ABA without bias terms: ``U_i = I^A_i S_i`` (6, n_i) and ``D_i^-1`` (n_i, n_i)
    (armature added to ``D_i``), the articulated inertias of the bodies in their own frames; ``pi``
    optional inertial parameters (10 nbodies,)."""
    n = model.nbodies
    IA = [spatial.inertia_matrix(ops, body_inertia(ops, model, i, pi)) for i in range(n)]
    U, Dinv = [None] * n, [None] * n
    scale = inertia_scale(model, pi) if ops.name == "numpy" else None
    for i in reversed(range(n)):
        _, sv = joint_slices(model, i)
        S = model.joints[i].S
        U[i] = ops.mtimes(IA[i], S)
        Dinv[i] = articulated_inverse(ops, model, i, ops.mtimes(S.T, U[i]) + np.diag(model.armature[sv]), scale)
        lam = model.parents[i]
        if lam >= 0:
            Ia = IA[i] - ops.mtimes(ops.mtimes(U[i], Dinv[i]), ops.T(U[i]))
            X = spatial.inv_motion_matrix(ops, *liMi[i])
            IA[lam] = IA[lam] + ops.mtimes(ops.T(X), ops.mtimes(Ia, X))
    return U, Dinv


def aba_zero_inputs(ops, model, liMi, U, Dinv, T):
    """``M^-1 T`` (nv, m) by the ABA with ``q̇ = 0``, no gravity and no external force (eqs. 33-34),
    all ``m`` columns of ``T`` (nv, m) at once: the bias forces ``p^A_i`` and accelerations ``a_i`` are
    (6, m) blocks."""
    n, m = model.nbodies, T.shape[1]
    pA = [ops.zeros(6, m) for _ in range(n)]
    u = [None] * n
    for i in reversed(range(n)):                            # pass 2: bias forces of the inputs
        _, sv = joint_slices(model, i)
        u[i] = T[sv, :] - ops.mtimes(model.joints[i].S.T, pA[i])
        lam = model.parents[i]
        if lam >= 0:
            pa = pA[i] + ops.mtimes(ops.mtimes(U[i], Dinv[i]), u[i])
            pA[lam] = pA[lam] + ops.mtimes(spatial.force_matrix(ops, *liMi[i]), pa)
    out = ops.zeros(model.nv, m)
    acc = [None] * n
    for i in range(n):                                      # pass 3: accelerations
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        ai = ops.zeros(6, m) if lam < 0 else ops.mtimes(spatial.inv_motion_matrix(ops, *liMi[i]), acc[lam])
        out[sv, :] = ops.mtimes(Dinv[i], u[i] - ops.mtimes(ops.T(U[i]), ai))
        acc[i] = ai + ops.mtimes(model.joints[i].S, out[sv, :])
    return out


def inverse_inertia_matrix(ops, model, liMi, U, Dinv):
    """``M^-1`` (nv, nv) by the recursion of Carpentier 2018 ("Analytical inverse of the joint space
    inertia matrix"): pass 2 of the ABA on the identity inputs (the bias forces ``p^A_i`` are non-zero
    only in the columns of subtree(i), which the symbolic backend keeps as exact zeros), then pass 3 on
    the columns from joint ``i`` on only (``a_i`` (6, nv - idx_v(i))), the rest filled by symmetry."""
    n, nv = model.nbodies, model.nv
    pA = [ops.zeros(6, nv) for _ in range(n)]
    u = [None] * n
    for i in reversed(range(n)):                            # pass 2: bias forces of the unit inputs
        _, sv = joint_slices(model, i)
        u[i] = ops.const(np.eye(nv)[sv, :]) - ops.mtimes(model.joints[i].S.T, pA[i])
        lam = model.parents[i]
        if lam >= 0:
            pa = pA[i] + ops.mtimes(ops.mtimes(U[i], Dinv[i]), u[i])
            pA[lam] = pA[lam] + ops.mtimes(spatial.force_matrix(ops, *liMi[i]), pa)
    Minv = ops.zeros(nv, nv)
    acc = [None] * n
    for i in range(n):                                      # pass 3: upper triangle, rows of joint i
        lam, c0 = model.parents[i], model.idx_v[i]
        _, sv = joint_slices(model, i)
        ai = ops.zeros(6, nv - c0) if lam < 0 else \
            ops.mtimes(spatial.inv_motion_matrix(ops, *liMi[i]), acc[lam][:, c0 - model.idx_v[lam]:])
        Minv[sv, c0:] = ops.mtimes(Dinv[i], u[i][:, c0:] - ops.mtimes(ops.T(U[i]), ai))
        Minv[c0:, sv] = ops.T(Minv[sv, c0:])
        acc[i] = ai + ops.mtimes(model.joints[i].S, Minv[sv, c0:])
    return Minv


def minv(model, q, pi=None):
    """``M(q)^-1`` (nv, nv), armature included, without forming ``M`` (:func:`inverse_inertia_matrix`,
    O(n^2)). q (nq,), ``pi`` optional parameters (10 nbodies,); NumPy or CasADi SX."""
    ops = ops_for(q, pi)
    if ops.name == "numpy":
        q, pi = model.check_vector("q", q, model.nq), model.check_parameters(pi)
    liMi = parent_placements(ops, model, q)
    U, Dinv = articulated_inertias(ops, model, liMi, pi)
    return inverse_inertia_matrix(ops, model, liMi, U, Dinv)


def aba_derivatives(model, q, v, tau, f_ext=None, method="auto", pi=None):
    """Partial derivatives of :func:`robodyn_ros.dynamics.aba.aba` (eq. 5 with the IDSVA partials).

    q (nq,), v (nv,), tau (nv,), f_ext (nbodies, 6) body-frame wrenches. ``method``: ``'dmm'``
    (explicit ``M^-1`` times the ID partials), ``'aza'`` (ABA with zero inputs on the columns),
    ``'solve'`` (dense factorisation of ``M``) or ``'auto'`` (see the module docstring); ``pi``
    (10 nbodies,) optional inertial parameters (symbolic allowed). Returns ``(da_dq, da_dv,
    da_dtau)``, each (nv, nv); ``da_dq`` in the tangent space, ``da_dtau = M^-1``. NumPy or CasADi SX.
    """
    ops = ops_for(q, v, tau, f_ext, pi)
    if method == "auto":
        method = "solve" if not ops.is_symbolic() else "dmm" if model.nv < AZA_CROSSOVER_NV else "aza"
    if method not in ("dmm", "aza", "solve"):
        raise ValueError(f"method must be 'auto', 'dmm', 'aza' or 'solve', got {method!r}")
    a = aba(model, q, v, tau, f_ext, pi)
    dtau_dq, dtau_dv, M = rnea_derivatives(model, q, v, a, f_ext, pi)
    nv = model.nv
    if method == "solve":
        X = ops.solve(M, ops.hcat([-dtau_dq, -dtau_dv, ops.const(np.eye(nv))]))
        return X[:, 0:nv], X[:, nv:2 * nv], X[:, 2 * nv:3 * nv]
    liMi = parent_placements(ops, model, q)
    U, Dinv = articulated_inertias(ops, model, liMi, pi)
    if method == "dmm":
        Minv = inverse_inertia_matrix(ops, model, liMi, U, Dinv)
        return -ops.mtimes(Minv, dtau_dq), -ops.mtimes(Minv, dtau_dv), Minv
    T = ops.hcat([-dtau_dq, -dtau_dv, ops.const(np.eye(nv))])
    X = aba_zero_inputs(ops, model, liMi, U, Dinv, T)
    return X[:, 0:nv], X[:, nv:2 * nv], X[:, 2 * nv:3 * nv]
