"""State derivatives of the dynamic matrices ``M(q)``, ``C(q, v)``, ``g(q)`` (Garofalo et al., Prop. 5,
eqs. 24a-24d; docs/REFERENCES.md), for the Christoffel-consistent ``C`` of
:func:`robodyn_ros.dynamics.dynamic_matrices.coriolis_matrix`.

With body Jacobians ``J_k`` (6, nv) in body frames, body inertias ``Λ_k``, twists ``ν_k = J_k v`` and the
linear body term ``B(Λ, ν)`` of :func:`~robodyn_ros.dynamics.dynamic_matrices.coriolis_body_term`:

    M = Σ_k J_k^T Λ_k J_k,   C = Σ_k J_k^T [B(Λ_k, ν_k) J_k + Λ_k J̇_k],   g = Σ_k J_k^T Λ_k γ_k

(``γ_k`` the base acceleration ``[-g0; 0]`` in body ``k``'s frame). The derivative of a Jacobian column
``J_k^j`` along the tangent of dof ``h`` (eq. 18 with the column rule of Garofalo Sec. VI) is

    ∂J_k^j/∂q_h = J_k^j × J_k^h   when joint(j) is a strict ancestor of joint(h) and h moves body k, else 0,

so ``J̇_k = Σ_h ∂J_k/∂q_h v_h``, ``∂J̇_k/∂v_h = ∂J_k/∂q_h`` and, differentiating once more,

    ∂J̇_k^j/∂q_h = (J^j × J^h) × (ν_k - ν^{(j)}) + J^j × ((ν^{(λh)} - ν^{(j)}) × J^h)

where ``ν^{(j)}`` is the part of ``ν_k`` produced by joint(j) and its ancestors and ``ν^{(λh)}`` that by
the strict ancestors of joint(h). Derivatives in ``q`` are along the tangent space (``q ⊕ δ``), as in
:mod:`robodyn_ros.dynamics.rnea_derivatives`. NumPy only (they are rank-3 tensors; for symbolic use, differentiate
the CasADi functions of ``crba``/``coriolis_matrix`` instead).

Layout: every result ``T`` is (nv, nv, nv) with ``T[h] = ∂X/∂q_h`` (or ``∂X/∂v_h``) for the matrix X,
except ``dg_dq`` (nv, nv) with ``dg_dq[:, h] = ∂g/∂q_h``.
"""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import NUMPY
from .dynamic_matrices import coriolis_body_term
from .kinematics import body_jacobians, forward_kinematics
from .rnea import base_acceleration, body_inertia


def _cross_cols(a, b):
    """``a_j × b_h`` (6, n, m) for all motion columns ``a`` (6, n), ``b`` (6, m) (``[lin; ang]``)."""
    aw, av = a[3:6, :, None], a[0:3, :, None]
    bw, bv = b[3:6, None, :], b[0:3, None, :]
    return np.concatenate([np.cross(aw, bv, axis=0) + np.cross(av, bw, axis=0), np.cross(aw, bw, axis=0)])


def _cross_pairwise(a, b):
    """``a[:, j, h] × b[:, j, h]`` (6, n, m) elementwise over the column grid."""
    return np.concatenate([np.cross(a[3:6], b[0:3], axis=0) + np.cross(a[0:3], b[3:6], axis=0),
                           np.cross(a[3:6], b[3:6], axis=0)])


def dof_ancestry(model):
    """``(strict, inclusive)`` boolean (nv, nv) matrices: ``strict[j, h]`` when the joint of dof ``j`` is a
    strict ancestor of the joint of dof ``h``; ``inclusive`` also when they are the same joint."""
    joint_of = np.concatenate([[i] * j.nv for i, j in enumerate(model.joints)]).astype(int)
    strict = np.zeros((model.nbodies, model.nbodies), dtype=bool)
    for i in range(model.nbodies):
        strict[model.ancestors(i)[1:], i] = True
    inclusive = strict | np.eye(model.nbodies, dtype=bool)
    return strict[np.ix_(joint_of, joint_of)], inclusive[np.ix_(joint_of, joint_of)], joint_of


def _body_terms(model, q, v):
    """Per body ``k``: ``(Λ_k, J_k, ∂J_k/∂q (6, nv, nv_h), ∂J̇_k/∂q (6, nv, nv_h) or None, γ_k)``."""
    strict, inclusive, joint_of = dof_ancestry(model)
    J = body_jacobians(model, q)
    a0 = base_acceleration(NUMPY, model)
    out = []
    for k, (R, p) in enumerate(forward_kinematics(model, q)):
        Jk = J[k]
        moves_k = inclusive[:, model.idx_v[k]]                         # dofs h with joint(h) ⪯ k
        mask = strict & moves_k[None, :]                               # joint(j) ≺ joint(h) ⪯ k
        X = _cross_cols(Jk, Jk)                                        # J^j × J^h
        dJ = X * mask[None]
        dJd = None
        if v is not None:
            nu_k = Jk @ v
            P = (Jk * v) @ inclusive                                   # ν^{(j)}: columns j
            Plam = (Jk * v) @ strict                                   # ν^{(λh)}: columns h
            n = model.nv
            t1 = _cross_pairwise(X, np.broadcast_to((nu_k[:, None] - P)[:, :, None], (6, n, n)))
            inner = _cross_pairwise(np.broadcast_to(Plam[:, None, :] - P[:, :, None], (6, n, n)),
                                    np.broadcast_to(Jk[:, None, :], (6, n, n)))
            t2 = _cross_pairwise(np.broadcast_to(Jk[:, :, None], (6, n, n)), inner)
            dJd = (t1 + t2) * mask[None]
        Lam = spatial.inertia_matrix(NUMPY, body_inertia(NUMPY, model, k))
        out.append((Lam, Jk, dJ, dJd, spatial.inv_act_motion(NUMPY, R, p, a0)))
    return out


def dM_dq(model, q):
    """``∂M/∂q`` (nv, nv, nv) at ``q`` (nq,), ``[h] = ∂M/∂q_h`` (eq. 24a, first line):
    ``Σ_k ∂J_k^T Λ_k J_k + J_k^T Λ_k ∂J_k``."""
    q = model.check_vector("q", q, model.nq)
    T = np.zeros((model.nv,) * 3)
    for Lam, Jk, dJ, _, _ in _body_terms(model, q, None):
        half = np.einsum("ajh,ai->hji", dJ, Lam @ Jk)
        T += half + half.transpose(0, 2, 1)
    return T


def _body_term_basis(Lam):
    """``B(Λ, e_c)`` (6, 6, 6) for the unit twists ``e_c``: ``B`` is linear in its twist argument."""
    return np.array([coriolis_body_term(NUMPY, Lam, e) for e in np.eye(6)])


def dC_dq(model, q, v):
    """``∂C/∂q`` (nv, nv, nv) at ``q`` (nq,), ``v`` (nv,), ``[h] = ∂C/∂q_h`` (eq. 24b with the
    Christoffel body term): ``Σ_k ∂J_k^T (B J_k + Λ J̇_k) + J_k^T [B(∂ν_k) J_k + B(ν_k) ∂J_k + Λ ∂J̇_k]``,
    ``∂ν_k = ∂J_k v``."""
    q, v = model.check_vector("q", q, model.nq), model.check_vector("v", v, model.nv)
    T = np.zeros((model.nv,) * 3)
    for Lam, Jk, dJ, dJd, _ in _body_terms(model, q, v):
        Bb = _body_term_basis(Lam)
        B = np.einsum("c,cab->ab", Jk @ v, Bb)
        Jd = dJ @ v
        T += np.einsum("ajh,ai->hji", dJ, B @ Jk + Lam @ Jd)
        dnu = np.einsum("ajh,j->ah", dJ, v)
        T += np.einsum("aj,hab,bi->hji", Jk, np.einsum("ch,cab->hab", dnu, Bb), Jk, optimize=True)
        T += np.einsum("ja,aih->hji", Jk.T @ B, dJ) + np.einsum("ja,aih->hji", Jk.T @ Lam, dJd)
    return T


def dC_dv(model, q, v):
    """``∂C/∂v`` (nv, nv, nv) at ``q`` (nq,), ``v`` (nv,), ``[h] = ∂C/∂v_h`` (eq. 24c):
    ``Σ_k J_k^T [B(Λ_k, J_k^h) J_k + Λ_k ∂J̇_k/∂v_h]`` with ``∂J̇_k/∂v_h = ∂J_k/∂q_h``. ``C`` is linear in
    ``v``, so ``Σ_h T[h] v_h = C``."""
    q = model.check_vector("q", q, model.nq)
    model.check_vector("v", v, model.nv)
    T = np.zeros((model.nv,) * 3)
    for Lam, Jk, dJ, _, _ in _body_terms(model, q, None):
        Bb = _body_term_basis(Lam)
        T += np.einsum("aj,hab,bi->hji", Jk, np.einsum("ch,cab->hab", Jk, Bb), Jk, optimize=True)
        T += np.einsum("ja,aih->hji", Jk.T @ Lam, dJ)
    return T


def dg_dq(model, q):
    """``∂g/∂q`` (nv, nv) at ``q`` (nq,), column ``h`` = ``∂g/∂q_h`` (eq. 24d):
    ``Σ_k ∂J_k^T Λ_k γ_k - J_k^T Λ_k (J_k^h × γ_k)``."""
    q = model.check_vector("q", q, model.nq)
    out = np.zeros((model.nv, model.nv))
    for Lam, Jk, dJ, _, gam in _body_terms(model, q, None):
        f = Lam @ gam
        out += np.einsum("ajh,a->jh", dJ, f)
        cross = _cross_cols(Jk, gam[:, None])[:, :, 0]                # J^h × γ_k (zero where h ⋠ k)
        out -= Jk.T @ Lam @ cross
    return out
