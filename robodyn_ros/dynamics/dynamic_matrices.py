"""The terms of ``M(q) a + C(q, v) v + g(q) = tau``: nonlinear effects, gravity torque and the Coriolis
matrix of Garofalo et al. (eq. 6b), which makes ``Ṁ - 2C`` skew-symmetric."""
from __future__ import annotations

from ..model import spatial
from ..model.backend import ops_for
from .kinematics import body_jacobians
from .rnea import body_inertia, rnea


def nonlinear_effects(model, q, v, pi=None):
    """``nle = C(q, v) v + g(q)`` (nv,), by RNEA with zero acceleration."""
    ops = ops_for(q, v, pi)
    return rnea(model, q, v, ops.zeros(model.nv), pi=pi)


def gravity_torque(model, q, pi=None):
    """``g(q)`` (nv,), by RNEA with zero velocity and acceleration (Garofalo eq. 6c)."""
    ops = ops_for(q, pi)
    return rnea(model, q, ops.zeros(model.nv), ops.zeros(model.nv), pi=pi)


def garofalo_body_term(ops, Lam, nu):
    """Garofalo's skew body term ``Ψ(Λ, ν) = Λ ad(ν) - ad(ν)^T Λ`` (6, 6) (eq. 3), ``ad(ν)^T = -crf(ν)``."""
    return ops.mtimes(Lam, spatial.cross_motion_matrix(ops, nu)) + ops.mtimes(spatial.cross_force_matrix(ops, nu), Lam)


def coriolis_body_term(ops, Lam, nu):
    """Christoffel-consistent body term ``B(Λ, ν) = ½ (Ψ(Λ, ν) + G(Λ ν))`` (6, 6), where
    ``G(f) v = v x* f``: Garofalo's skew ``Ψ`` symmetrised in the two velocity arguments (Echeandia and
    Wensing 2021), so that ``B(ν) w = B(w) ν`` up to the skew part and ``C`` is the Christoffel matrix."""
    return 0.5 * (garofalo_body_term(ops, Lam, nu) + spatial.force_cross_operand_matrix(ops, ops.mtimes(Lam, nu)))


def coriolis_from_body_terms(model, q, v, pi, body_term):
    """``C = sum_k J_k^T [body_term(Λ_k, ν_k) J_k + Λ_k J̇_k]`` (Garofalo eq. 6b) for a body term."""
    ops = ops_for(q, v, pi)
    if ops.name == "numpy":
        q, v = model.check_vector("q", q, model.nq), model.check_vector("v", v, model.nv)
        pi = model.check_parameters(pi)
    J, Jd = body_jacobians(model, q, v)
    C = ops.zeros(model.nv, model.nv)
    for k in range(model.nbodies):
        Lam = spatial.inertia_matrix(ops, body_inertia(ops, model, k, pi))
        B = body_term(ops, Lam, ops.mtimes(J[k], v))
        C = C + ops.mtimes(ops.T(J[k]), ops.mtimes(B, J[k]) + ops.mtimes(Lam, Jd[k]))
    return C


def coriolis_matrix(model, q, v, pi=None):
    """Coriolis matrix ``C(q, v)`` (nv, nv) built of Christoffel symbols (equal to Pinocchio's
    computeCoriolisMatrix), in the form of Garofalo eq. (6b) with :func:`coriolis_body_term`.
    ``C v = nle - g`` and ``Ṁ = C + C^T`` (so ``Ṁ - 2C`` is skew-symmetric)."""
    return coriolis_from_body_terms(model, q, v, pi, coriolis_body_term)


def coriolis_matrix_garofalo(model, q, v, pi=None):
    """``C(q, v)`` (nv, nv) of Garofalo eq. (6b) with the skew body term :func:`garofalo_body_term`
    (another valid factorisation: ``C v = nle - g`` and ``Ṁ = C + C^T``, but not Christoffel's)."""
    return coriolis_from_body_terms(model, q, v, pi, garofalo_body_term)
