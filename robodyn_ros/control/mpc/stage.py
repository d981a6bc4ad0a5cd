"""Stage functions of the MPC's optimal control problem (Cărmizaru 2022, eqs. 5.1-5.2), CasADi SX.

State ``x = (q, v)`` (nx = 2 nv,), input ``u = τ`` (nu = nv,), parameters ``θ = [π, f_v, f_c, f_o]``.
The continuous dynamics ``ẋ = (v, aba(q, v, τ - τ_f(v); π))`` are the core's ABA traced in SX, with the
joint friction ``τ_f = f_v v + f_c tanh(v / ε) + f_o`` (the friction law of
:mod:`robodyn_ros.dynamics.friction` with the Coulomb sign smoothed, so that the NLP is differentiable).
One interval is ``substeps`` classic RK4 steps. Its Jacobians ``A = ∂x+/∂x``, ``B = ∂x+/∂u`` are RK4 of
the variational equations: each stage's ``∂ẋ/∂(x, u)`` from the core's analytical ABA derivatives
(Carpentier and Mansard 2018), carried through the RK4 stages by the chain rule, with common
subexpressions merged; this costs fewer operations than differentiating RK4 + ABA by AD.

A joint whose viscous friction over its inertia ``λ_i = f_v,i / M_ii`` is too stiff for the RK4 step ``h``
(``h λ_i >= 1``; the classical RK4 is unstable beyond ``h λ = 2.785``) is predicted with its damping
linearly implicit, as the simulator integrates it (:mod:`robodyn_ros.simulation.simulator`): the step solves
``(M + h B) a = τ - C v - g - τ_f(v)``, i.e. the ABA with the armature ``armature + h B`` on those joints
(:func:`implicit_damping_model`). Its damping mode ``-B / (M + h B)`` has ``|h λ| < 1`` for any ``B``, and the
quasi-static velocity it relaxes to within a step is the damped joint's. A vendor URDF's joint damping on a
light wrist (the xArm7: 2 N m s/rad on 1.4e-4 kg m², ``λ`` 14 000 1/s; the Unitree Z1: 3 100 1/s) otherwise
makes the 10-ms prediction diverge. Joints with ``h λ < 1`` (every joint of the bundled robots) keep the
explicit law.
"""
from __future__ import annotations

from typing import NamedTuple

import casadi as ca
import numpy as np

from ...dynamics.aba import aba
from ...dynamics.aba_derivatives import aba_derivatives
from ...dynamics.rnea import rnea
from .config import split_parameters

# called, not inlined, by the RK4 steps (SX call nodes): the generated C holds one copy of ABA and of its
# derivatives instead of one per RK4 stage
CALLED = {"never_inline": True}


class StageFunctions(NamedTuple):
    """``dynamics(x, u, θ) -> ẋ``; ``step(x, u, θ) -> x+`` (RK4); ``step_linearized(x, u, θ) -> (x+, A, B)``;
    ``step_adjoint(x, u, θ, λ) -> (Aᵀλ, Bᵀλ)`` by one reverse sweep through RK4 + ABA;
    ``inverse_dynamics(x_ref, a_ref, θ) -> τ`` with friction; ``gravity(x, θ) -> g(q; π) + f_o``."""

    dynamics: ca.Function
    step: ca.Function
    step_linearized: ca.Function
    step_adjoint: ca.Function
    inverse_dynamics: ca.Function
    gravity: ca.Function


IMPLICIT_DAMPING = 1.0
"""``h f_v / M_ii`` from which a joint's viscous damping is predicted linearly implicit (module docstring)."""


def implicit_damping_model(model, h, configurations=16, seed=0):
    """``model`` with the armature ``armature_i + h f_v,i`` on each joint whose ``h f_v,i / M_ii(q) >=``
    :data:`IMPLICIT_DAMPING` at one of ``configurations`` seeded random configurations or the neutral one (the
    lightest ``M_ii`` found), ``h`` the RK4 step, s; ``model`` itself when no joint is that stiff."""
    from ...dynamics.crba import crba
    viscous = np.maximum(np.asarray(model.viscous, dtype=float), 0.0)
    if not np.any(viscous > 0.0):
        return model
    rng = np.random.default_rng(seed)
    qs = [model.neutral_configuration()] + [model.random_configuration(rng) for _ in range(configurations)]
    m_min = np.min([np.diag(crba(model, q)) for q in qs], axis=0)
    stiff = h * viscous >= IMPLICIT_DAMPING * m_min
    if not np.any(stiff):
        return model
    return model.with_armature(np.asarray(model.armature, dtype=float) + np.where(stiff, h * viscous, 0.0))


def prediction_model(model, config):
    """The model the MPC of ``config`` (:class:`~.config.MPCConfig`) predicts with: ``model`` with the stiff
    joints' damping implicit at its RK4 step ``dt / substeps`` (:func:`implicit_damping_model`)."""
    return implicit_damping_model(model, config.dt / config.substeps)


def friction(v, p, eps):
    """``τ_f = f_v v + f_c tanh(v / ε) + f_o`` (nv,) of the :class:`~.config.ModelParameters` ``p``."""
    return p.viscous * v + p.coulomb * ca.tanh(v / eps) + p.offset


def friction_slope(v, p, eps):
    """``∂τ_f/∂v`` (nv,), the diagonal of the friction's Jacobian."""
    return p.viscous + p.coulomb * (1 - ca.tanh(v / eps) ** 2) / eps


def rk4(f, state, h, steps):
    """``steps`` classic RK4 steps of length ``h`` of ``ṡ = f(s)``, for a state ``s`` that is a tuple of
    arrays (``f`` returns the tuple of their derivatives)."""
    def add(s, c, k):
        return tuple(si + c * ki for si, ki in zip(s, k))
    for _ in range(steps):
        k1 = f(state)
        k2 = f(add(state, h / 2, k1))
        k3 = f(add(state, h / 2, k2))
        k4 = f(add(state, h, k3))
        state = tuple(s + h / 6 * (a + 2 * b + 2 * c + d) for s, a, b, c, d in zip(state, k1, k2, k3, k4))
    return state


def _stage_jacobian(model, x, u, th, eps):
    """``(ẋ, A_c, B_c)`` of the continuous dynamics, ``∂a/∂v`` including the friction through ``τ - τ_f(v)``:
    ``∂a/∂v -= ∂a/∂τ diag(τ_f'(v))``."""
    n = model.nv
    q, v = x[:n], x[n:]
    p = split_parameters(th, model.nbodies, n)
    tau = u - friction(v, p, eps)
    a = aba(model, q, v, tau, pi=p.pi)
    da_dq, da_dv, da_dtau = aba_derivatives(model, q, v, tau, pi=p.pi)
    da_dv = da_dv - da_dtau * ca.repmat(friction_slope(v, p, eps).T, n, 1)
    A_c = ca.vertcat(ca.horzcat(ca.SX.zeros(n, n), ca.SX.eye(n)), ca.horzcat(da_dq, da_dv))
    B_c = ca.vertcat(ca.SX.zeros(n, n), da_dtau)
    return ca.Function("mpc_stage_jac", [x, u, th], ca.cse([ca.vertcat(v, a), A_c, B_c]), CALLED)


def _linearized_rk4(stage_jac, x, u, th, h, steps):
    """``(x+, A, B)``: RK4 of the state and of its sensitivities ``(D_x, D_u) = ∂x/∂(x_k, u_k)``, whose
    derivative is ``(A_c D_x, A_c D_u + B_c)`` (the chain rule through each stage)."""
    nx, nu = x.numel(), u.numel()
    Ac, Bc = ca.SX.sym("A", stage_jac.sparsity_out(1)), ca.SX.sym("B", stage_jac.sparsity_out(2))
    Dx, Du = ca.SX.sym("D_x", nx, nx), ca.SX.sym("D_u", nx, nu)
    chain = ca.Function("mpc_rk4_chain", [Ac, Dx, Du, Bc], [ca.mtimes(Ac, Dx), ca.mtimes(Ac, Du) + Bc], CALLED)
    identity = ca.SX.eye(nx)

    def variational(state):
        xk, D_x, D_u = state
        k, A, B = stage_jac(xk, u, th)
        if D_x is identity:                       # x_k itself: D = (I, 0), the chain rule gives (A, B)
            return k, A, B
        return (k, *chain(A, D_x, D_u, B))
    return rk4(variational, (x, identity, ca.SX.zeros(nx, nu)), h, steps)


def inverse_dynamics_function(model, eps):
    """``inverse_dynamics(x_ref, a_ref, θ) -> τ = rnea(q, v, a; π) + τ_f(v)`` (SX: the problem level
    differentiates through it)."""
    n = model.nv
    x, a_in, th = ca.SX.sym("x", 2 * n), ca.SX.sym("a_ref", n), ca.SX.sym("theta", 10 * model.nbodies + 3 * n)
    q, v = x[:n], x[n:]
    p = split_parameters(th, model.nbodies, n)
    return ca.Function("mpc_inverse_dynamics", [x, a_in, th], [rnea(model, q, v, a_in, pi=p.pi) + friction(v, p, eps)])


def stage_functions(model, config):
    """The :class:`StageFunctions` of ``model`` for the intervals and friction smoothing of ``config``."""
    n, eps = model.nv, config.coulomb_smoothing
    x, u, th = ca.SX.sym("x", 2 * n), ca.SX.sym("u", n), ca.SX.sym("theta", 10 * model.nbodies + 3 * n)
    q, v = x[:n], x[n:]
    p = split_parameters(th, model.nbodies, n)
    a = aba(model, q, v, u - friction(v, p, eps), pi=p.pi)
    dynamics = ca.Function("mpc_dynamics", [x, u, th], [ca.vertcat(v, a)], CALLED)
    h = config.dt / config.substeps
    xn, = rk4(lambda s: (dynamics(s[0], u, th),), (x,), h, config.substeps)
    linearized = _linearized_rk4(_stage_jacobian(model, x, u, th, eps), x, u, th, h, config.substeps)
    lam = ca.SX.sym("lam", 2 * n)
    adj = ca.jtimes(xn, ca.vertcat(x, u), lam, True)
    gravity = rnea(model, q, ca.SX.zeros(n), ca.SX.zeros(n), pi=p.pi) + p.offset
    return StageFunctions(
        dynamics=dynamics,
        step=ca.Function("mpc_step", [x, u, th], [xn]),
        step_linearized=ca.Function("mpc_step_lin", [x, u, th], list(linearized)),
        step_adjoint=ca.Function("mpc_step_adj", [x, u, th, lam], [adj[:2 * n], adj[2 * n:]]),
        inverse_dynamics=inverse_dynamics_function(model, eps),
        gravity=ca.Function("mpc_gravity", [x, th], [gravity]))
