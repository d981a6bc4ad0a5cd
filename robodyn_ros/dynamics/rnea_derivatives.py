"""Analytical first-order partial derivatives of inverse dynamics by the IDSVA recursion (Singh, Russell,
Wensing 2022, Algorithm 1, eqs. 30-32; docs/REFERENCES.md), one forward and one backward pass with every
spatial quantity expressed in GROUND coordinates, multi-DoF joints and a floating base included.

Derivation used here (ground frame, Pinocchio's ``[lin; ang]`` order, ``×`` = :func:`spatial.cross_motion`,
``×*`` = :func:`spatial.cross_force`). For a joint ``k`` the columns ``S_k`` (6, n_k) are its motion subspace
in ground coordinates; perturbing ``q_k`` along its tangent (``q_k ⊕ δ``, Pinocchio's definition for
spherical and free-flyer joints) moves every quantity rigidly attached to the subtree of ``k`` by the
twist ``S_k δ`` (identity J1: ``∂S_j/∂q_k = S_k × S_j`` for ``k ⪯ j``). With

    v_i = Σ_{j⪯i} S_j q̇_j,   a_i = a_0 + Σ_{j⪯i} (S_j q̈_j + v_j × S_j q̇_j),   a_0 = [-g; 0],
    f_i = I_i a_i + v_i ×* I_i v_i - f_ext_i,   F_i = Σ_{b ∈ subtree(i)} f_b,   τ_i = S_i^T F_i,

and the joint quantities of eq. 31 (named as in Pinocchio's ground-frame recursion)

    Ψ_k = v_λ(k) × S_k   (∂v/∂q),    Ψ̇_k = (v_k + v_λ(k)) × S_k   (∂a/∂q̇),
    A_k = a_λ(k) × S_k + v_λ(k) × Ψ_k   (∂a/∂q),

one gets for a body ``b`` in the subtree of ``k``:  ``∂f_b/∂q_k = S_k ×* f_b + I_b A_k + B_b Ψ_k`` and
``∂f_b/∂q̇_k = B_b S_k + I_b Ψ̇_k`` where ``B_b = (v_b ×*) I_b - I_b (v_b ×) + ((I_b v_b) ×̄*)`` is twice the
body-level Coriolis matrix of eq. 28. Summing over subtrees (composites ``I^C``, ``B^C``, ``F``) gives
eqs. 30 and 32:

    k ⪯ i:  ∂τ_i/∂q_k = (B^C_i^T S_i)^T Ψ_k + (I^C_i S_i)^T A_k,   ∂τ_i/∂q̇_k = (B^C_i^T S_i)^T S_k + (I^C_i S_i)^T Ψ̇_k
    k ≻ i:  ∂τ_i/∂q_k = S_i^T (S_k ×* F_k + I^C_k A_k + B^C_k Ψ_k),   ∂τ_i/∂q̇_k = S_i^T (B^C_k S_k + I^C_k Ψ̇_k)

In the ``k ⪯ i`` rows the term ``S_k ×* F_i`` cancels against ``∂S_i/∂q_k``; the diagonal block of a
multi-DoF joint (``k = i``) must take that first form, since ``∂S_i/∂q_i = S_i × S_i`` is not zero there.
The inner loops over ancestors are written as matrix products with the stacked ground-frame columns
(the restructuring of lines 17-20 of Algorithm 1).
"""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import joint_slices, parent_placements
from .rnea import base_acceleration, body_inertia, external_wrench


def _dof_indices(model, bodies):
    """Tangent indices (list) of the joints of ``bodies``, in the given order."""
    return [model.idx_v[b] + c for b in bodies for c in range(model.joints[b].nv)]


def _ground_kinematics(ops, model, q, v, a):
    """Forward pass of Algorithm 1: ground-frame placements, joint columns ``S`` (6, nv) and the eq. 31
    columns ``Ψ``, ``Ψ̇``, ``A`` (6, nv), body twists ``v_i`` and accelerations ``a_i`` (6,)."""
    liMi = parent_placements(ops, model, q)
    oMi, vel, acc = [], [], []
    S, Psi, Psid, A = (ops.zeros(6, model.nv) for _ in range(4))
    a0 = base_acceleration(ops, model)
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        oMi.append((R, p) if lam < 0 else spatial.compose(ops, *oMi[lam], R, p))
        Si = ops.mtimes(spatial.motion_matrix(ops, *oMi[i]), model.joints[i].S)
        v_lam, a_lam = (ops.zeros(6), a0) if lam < 0 else (vel[lam], acc[lam])
        vJ = ops.mtimes(Si, v[sv])
        vi = v_lam + vJ
        crm_lam = spatial.cross_motion_matrix(ops, v_lam)
        S[:, sv] = Si
        Psi[:, sv] = ops.mtimes(crm_lam, Si)
        Psid[:, sv] = ops.mtimes(spatial.cross_motion_matrix(ops, vi), Si) + Psi[:, sv]
        A[:, sv] = ops.mtimes(spatial.cross_motion_matrix(ops, a_lam), Si) + ops.mtimes(crm_lam, Psi[:, sv])
        vel.append(vi)
        acc.append(a_lam + ops.mtimes(Si, a[sv]) + spatial.cross_motion(ops, vi, vJ))
    return oMi, vel, acc, S, Psi, Psid, A


def body_coriolis_matrix(ops, inertia6, v):
    """``B = (v ×*) I - I (v ×) + ((I v) ×̄*)`` (6, 6), twice the body-level Coriolis matrix of eq. 28
    (Niemeyer-Slotine), so that ``B v = v ×* I v`` and ``∂(I a + v ×* I v)/∂q̇ = B S + I ∂a/∂q̇``."""
    crm = spatial.cross_motion_matrix(ops, v)
    return (ops.mtimes(spatial.cross_force_matrix(ops, v), inertia6) - ops.mtimes(inertia6, crm)
            + spatial.force_cross_operand_matrix(ops, ops.mtimes(inertia6, v)))


def rnea_derivatives(model, q, v, a, f_ext=None, pi=None):
    """Partial derivatives of :func:`robodyn_ros.dynamics.rnea.rnea` (IDSVA, Singh-Russell-Wensing 2022, Alg. 1).

    q (nq,), v (nv,), a (nv,), f_ext (nbodies, 6) body-frame wrenches (held fixed in the body frames),
    ``pi`` (10 nbodies,) optional inertial parameters overriding the model's (symbolic allowed).
    Returns ``(dtau_dq, dtau_dv, dtau_da)``, each (nv, nv); ``dtau_dq`` is with respect to the tangent
    space (``q ⊕ δ``, as Pinocchio's computeRNEADerivatives) and ``dtau_da = M`` with the armature.
    NumPy or CasADi SX inputs (the result is then SX).
    """
    ops = ops_for(q, v, a, f_ext, pi)
    if ops.name == "numpy":
        q, v, a = (model.check_vector(n, x, k) for n, x, k in (("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)))
        f_ext, pi = model.check_f_ext(f_ext), model.check_parameters(pi)
    oMi, vel, acc, S, Psi, Psid, A = _ground_kinematics(ops, model, q, v, a)
    Ic, Bc, F = [], [], []
    for i, (R, p) in enumerate(oMi):                       # ground-frame inertias, body forces
        I6 = spatial.inertia_matrix(ops, spatial.inertia_act(ops, R, p, body_inertia(ops, model, i, pi)))
        fi = ops.mtimes(I6, acc[i]) + spatial.cross_force(ops, vel[i], ops.mtimes(I6, vel[i]))
        fe = external_wrench(ops, f_ext, i)
        Ic.append(I6), Bc.append(body_coriolis_matrix(ops, I6, vel[i]))
        F.append(fi if fe is None else fi - spatial.act_force(ops, R, p, fe))
    dq, dv, M = (ops.zeros(model.nv, model.nv) for _ in range(3))
    for i in reversed(range(model.nbodies)):              # backward pass over subtrees
        _, si = joint_slices(model, i)
        anc = _dof_indices(model, model.ancestors(i))      # joint i first, then up to the root
        up = anc[model.joints[i].nv:]
        Si = S[:, si]
        P, Q = ops.mtimes(ops.T(Bc[i]), Si), ops.mtimes(Ic[i], Si)
        dq[si, anc] = ops.mtimes(ops.T(P), Psi[:, anc]) + ops.mtimes(ops.T(Q), A[:, anc])
        dv[si, anc] = ops.mtimes(ops.T(P), S[:, anc]) + ops.mtimes(ops.T(Q), Psid[:, anc])
        M[si, anc] = ops.mtimes(ops.T(Q), S[:, anc])
        M[si, si] = M[si, si] + np.diag(model.armature[si])
        if up:
            Sup_T = ops.T(S[:, up])
            E = (ops.mtimes(spatial.force_cross_operand_matrix(ops, F[i]), Si) + ops.mtimes(Ic[i], A[:, si])
                 + ops.mtimes(Bc[i], Psi[:, si]))
            dq[up, si] = ops.mtimes(Sup_T, E)
            dv[up, si] = ops.mtimes(Sup_T, ops.mtimes(Bc[i], Si) + ops.mtimes(Ic[i], Psid[:, si]))
            M[up, si] = ops.mtimes(Sup_T, Q)
        lam = model.parents[i]
        if lam >= 0:
            Ic[lam], Bc[lam], F[lam] = Ic[lam] + Ic[i], Bc[lam] + Bc[i], F[lam] + F[i]
    return dq, dv, M
