"""Time derivatives of the dynamic matrices, Garofalo et al. Prop. 6, and of the body Jacobians
(eqs. 28-29): ``J̇_k``, ``J̈_k``, ``Ṁ``, ``Ċ``, ``ġ`` along a motion with velocity ``v`` and
acceleration ``a``, all in body coordinates (``Ẋ_{k,λ} = -crm(S q̇_k) X_{k,λ}``)."""
from __future__ import annotations

from ..model import spatial
from ..model.backend import ops_for
from .dynamic_matrices import coriolis_body_term
from .kinematics import forward_kinematics, joint_slices, parent_placements
from .rnea import body_inertia


def body_jacobian_derivatives(model, q, v, a):
    """``(J, J̇, J̈)``: lists of (6, nv) body Jacobians and their first and second time derivatives,
    by the outward recursion with ``P = X J_λ``: ``J̇_k = X J̇_λ - crm(v_J) P`` (eq. 28) and
    ``J̈_k = X J̈_λ - crm(v_J) X J̇_λ - crm(a_J) P - crm(v_J) J̇_k`` (eq. 29), ``v_J = S q̇_k``,
    ``a_J = S q̈_k``."""
    ops = ops_for(q, v, a)
    J, Jd, Jdd = [], [], []
    for i, (R, p) in enumerate(parent_placements(ops, model, q)):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        S = model.joints[i].S
        if lam < 0:
            Ji, Jdi, Jddi = ops.zeros(6, model.nv), ops.zeros(6, model.nv), ops.zeros(6, model.nv)
        else:
            X = spatial.inv_motion_matrix(ops, R, p)
            cv = spatial.cross_motion_matrix(ops, ops.mtimes(S, v[sv]))
            ca_ = spatial.cross_motion_matrix(ops, ops.mtimes(S, a[sv]))
            P, XJd = ops.mtimes(X, J[lam]), ops.mtimes(X, Jd[lam])
            Ji = P
            Jdi = XJd - ops.mtimes(cv, P)
            Jddi = ops.mtimes(X, Jdd[lam]) - ops.mtimes(cv, XJd) - ops.mtimes(ca_, P) - ops.mtimes(cv, Jdi)
        Ji[:, sv] = S
        J.append(Ji), Jd.append(Jdi), Jdd.append(Jddi)
    return J, Jd, Jdd


def mass_matrix_time_derivative(model, q, v):
    """``Ṁ = Σ_k J̇_k^T Λ_k J_k + J_k^T Λ_k J̇_k`` (nv, nv) (Prop. 6); equals ``C + C^T``."""
    ops = ops_for(q, v)
    J, Jd, _ = body_jacobian_derivatives(model, q, v, ops.zeros(model.nv))
    Md = ops.zeros(model.nv, model.nv)
    for k in range(model.nbodies):
        LJ = ops.mtimes(spatial.inertia_matrix(ops, body_inertia(ops, model, k)), J[k])
        Md = Md + ops.mtimes(ops.T(Jd[k]), LJ) + ops.T(ops.mtimes(ops.T(Jd[k]), LJ))
    return Md


def coriolis_matrix_time_derivative(model, q, v, a):
    """``Ċ`` (nv, nv) of the Christoffel ``C = Σ J^T (B(Λ, ν) J + Λ J̇)`` (Prop. 6):
    ``Ċ = Σ J̇^T (B J + Λ J̇) + J^T (B(Λ, ν̇) J + B J̇ + Λ J̈)`` with ``ν̇ = J̇ v + J a``."""
    ops = ops_for(q, v, a)
    J, Jd, Jdd = body_jacobian_derivatives(model, q, v, a)
    Cd = ops.zeros(model.nv, model.nv)
    for k in range(model.nbodies):
        Lam = spatial.inertia_matrix(ops, body_inertia(ops, model, k))
        nu, nud = ops.mtimes(J[k], v), ops.mtimes(Jd[k], v) + ops.mtimes(J[k], a)
        B, Bd = coriolis_body_term(ops, Lam, nu), coriolis_body_term(ops, Lam, nud)
        Cd = Cd + ops.mtimes(ops.T(Jd[k]), ops.mtimes(B, J[k]) + ops.mtimes(Lam, Jd[k])) \
            + ops.mtimes(ops.T(J[k]), ops.mtimes(Bd, J[k]) + ops.mtimes(B, Jd[k]) + ops.mtimes(Lam, Jdd[k]))
    return Cd


def gravity_torque_time_derivative(model, q, v):
    """``ġ`` (nv,) of ``g = Σ J_k^T Λ_k γ_k`` with the body-frame gravity acceleration
    ``γ_k = X_{k,0} [-g; 0]`` (eq. 6c) and ``γ̇_k = -ν_k x γ_k``."""
    ops = ops_for(q, v)
    J, Jd, _ = body_jacobian_derivatives(model, q, v, ops.zeros(model.nv))
    g0 = ops.vcat([ops.const(-model.gravity), ops.zeros(3)])
    gd = ops.zeros(model.nv)
    for k, (R, p) in enumerate(forward_kinematics(model, q)):
        Lam = spatial.inertia_matrix(ops, body_inertia(ops, model, k))
        gam = spatial.inv_act_motion(ops, R, p, g0)
        gam_dot = -spatial.cross_motion(ops, ops.mtimes(J[k], v), gam)
        gd = gd + ops.mtimes(ops.T(Jd[k]), ops.mtimes(Lam, gam)) + ops.mtimes(ops.T(J[k]), ops.mtimes(Lam, gam_dot))
    return gd
