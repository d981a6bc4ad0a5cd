"""Nonlinear model-predictive control with CasADi, torque inputs (Cărmizaru, ch. 5, Alg. 4 and
eqs. 5.1-5.5, done for real time).

Optimal control problem, multiple shooting over ``N`` intervals of ``dt`` (Cărmizaru eq. 5.2):

    min  Σ_k ‖x_k - x_ref,k‖²_Q + ‖u_k - u_ref,k‖²_R + ‖x_N - x_ref,N‖²_{Q_N}
    s.t. x_0 = x̂ (measured),  x_{k+1} = F(x_k, u_k; θ),  x_lo <= x_k <= x_hi (k >= 1),  u_lo <= u_k <= u_hi

with ``x = (q, v)``, ``u = τ``, ``F`` one (or ``substeps``) classic RK4 step of
``q̇ = v, v̇ = aba(q, v, τ - τ_f(v); π)`` — the core's ABA written once, traced in CasADi SX —
and the friction ``τ_f = f_v v + f_c tanh(v / ε) + f_o`` (Coulomb smoothed). ``u_ref,k`` is the inverse
dynamics of the reference, so ``R`` penalises deviation from the torque the reference needs.
``θ = [π (10 nb), f_v, f_c, f_o (nv each)]`` are NLP PARAMETERS, like the initial state and the
reference: a new estimate changes the next solve, nothing is rebuilt.

Real-time measures:
- Jacobians of ``F`` by the chain rule through the RK4 stages, each stage's ``∂a/∂(q, v, τ)`` from the
  core's analytical ABA derivatives (Carpentier and Mansard 2018) with common subexpressions merged —
  about 30 % fewer operations than differentiating RK4 + ABA by AD; the solvers differentiate the NLP
  only through this Jacobian (custom Jacobian), and the Hessian is the Gauss-Newton one of the
  least-squares cost (constant, positive definite).
- The shooting constraints go to fatrop/ipopt as ONE function of all stages (``F_N(X, U; θ)``) whose
  derivatives are supplied: the constraint Jacobian from the chain-rule stage Jacobians, the gradient of
  the Lagrangian ``Jᵀλ`` from a reverse sweep through RK4 + ABA (about 0.6 of the Jacobian's operations;
  fatrop's Hessian function also returns this gradient), and second derivatives that are identically
  zero (Gauss-Newton), so the Hessian function never evaluates a stage Jacobian
  (``nlp_derivatives='adjoint'``; ``'jacobian'`` keeps the former per-stage formulation, in which the
  Hessian function evaluated the stage Jacobians twice, for reference).
- Variables ordered ``x_0, u_0, x_1, ..., x_N`` and constraints stage by stage so fatrop detects the
  OCP structure (``structure_detection='auto'``) and hpipm gets it from ``N, nx, nu, ng``.
- Solvers: ``fatrop`` (default), ``ipopt``, and ``rti``: a real-time iteration (Diehl et al. 2005),
  one Gauss-Newton SQP step per control period, in two phases (Diehl et al. 2005, sec. 4):
  *preparation* (:meth:`ModelPredictiveController.prepare`, before the measurement arrives): shift the
  previous solution, sample the reference, linearise all stages in one compiled call (the stage
  Jacobians mapped over the horizon) and factorise the QP without its bounds by the backward Riccati
  recursion (:meth:`OCPFunctions._riccati_functions`); *feedback* (``solve`` with the measured state):
  the forward rollout ``Δu_k = K_k Δx_k + k_k`` from ``Δx_0 = x̂ - x̄_0`` — a few matrix-vector
  products, the delay of the command. When that rollout leaves a bound, the bounded QP is solved by
  hpipm on the same linearisation (exact: without an active bound the unbounded minimiser is the
  bounded one). ``qp_solver`` 'hpipm' | 'qrqp' | 'osqp' solves the bounded QP every period;
  ``sqp_iterations > 1`` relinearises and iterates to convergence. With ``compiled=True`` both phases
  are C called through their entry points with buffers allocated once (:class:`DirectCall`).
- Warm start by shifting the previous solution by one interval.
- All problem functions can be generated as C and compiled (``compiled=True``), cached on disk by the
  model fingerprint and the problem options (:func:`compile_casadi_library`; translation units compiled
  in parallel, progress on stderr).
- A time limit: a solve that fails, is infeasible, exceeds the limit or returns non-finite numbers is
  replaced by the previous solution shifted (status ``fallback_shifted``), else gravity compensation
  (``fallback_gravity``); ``solver_status`` says why. Never NaN. ipopt is interrupted at the limit
  (``max_wall_time``); fatrop and the QP cannot be, their result is discarded when late.
- Each solution carries ``τ_ff`` and a time-varying LQR gain ``K_k`` (the Riccati recursion with ``Q,
  R, Q_N`` on the linearisation: at the solution for fatrop/ipopt, the QP's own factorisation for RTI),
  so a 1 kHz loop applies ``τ = τ_ff,k + K_k (x - x_plan(t))`` between solves, ``x_plan`` the
  Hermite-interpolated predicted trajectory (:meth:`MPCSolution.torque`).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from ..dynamics.aba import aba
from ..dynamics.aba_derivatives import aba_derivatives
from ..dynamics.rnea import rnea
from .command_guard import effort_bounds
from ..kernels.compiled_functions import DirectCall, compile_casadi_library, compile_solver_dependencies
from .reference import ReferenceClippedWarning


@dataclass
class MPCConfig:
    """Problem and solver options.

    ``horizon`` N, ``dt`` (s) interval, ``substeps`` RK4 steps per interval; weights: ``q_weight``,
    ``v_weight``, ``r_weight`` (scalars or (nv,)), ``terminal_factor`` (Q_N = factor Q);
    ``position_margin`` (rad) inside the joint limits, ``velocity_fraction`` of the velocity limits;
    ``coulomb_smoothing`` ε (rad/s); ``solver``: 'fatrop' | 'ipopt' | 'rti'; ``qp_solver`` for RTI:
    'riccati' (the QP without bounds by the Riccati recursion, the bounded QP by hpipm only when that
    solution leaves a bound) | 'hpipm' | 'qrqp' | 'osqp' (the bounded QP every time); ``time_limit`` (s)
    per solve; ``max_iter`` and ``tol`` for fatrop/ipopt;
    ``sqp_iterations``: Gauss-Newton steps per 'rti' solve (1: real-time iteration; more: a full SQP);
    ``compiled``: generate and compile C for the problem functions; ``nlp_derivatives`` for fatrop/ipopt:
    'adjoint' (Lagrangian gradient by a reverse sweep, Hessian without stage Jacobians) or 'jacobian'
    (the former formulation: every derivative through the stage Jacobians; same iterates);
    ``stage_threads``: threads evaluating the stage Jacobians of the horizon (RTI preparation, fatrop and
    ipopt constraint Jacobians); 1 evaluates them in the calling thread; ``mu_init``: fatrop's initial
    barrier parameter (small: the solves are warm-started by the shifted previous solution; on the bench's
    closed loop 1e-5 converged in 3 iterations where 1e-3 took 4)."""

    horizon: int = 20
    dt: float = 0.01
    substeps: int = 1
    q_weight: object = 1000.0
    v_weight: object = 1.0
    r_weight: object = 1e-3
    terminal_factor: float = 10.0
    position_margin: float = 0.0
    velocity_fraction: float = 1.0
    coulomb_smoothing: float = 0.01
    solver: str = "fatrop"
    qp_solver: str = "riccati"
    time_limit: float = 0.05
    max_iter: int = 100
    tol: float = 1e-6
    sqp_iterations: int = 1
    compiled: bool = False
    nlp_derivatives: str = "adjoint"
    stage_threads: int = 1
    mu_init: float = 1e-5


@dataclass
class MPCSolution:
    """One MPC solve: ``tau_ff`` (N, nu), predicted states ``x_pred`` (N+1, nx), gains ``K`` (N, nu, nx),
    ``status`` ('solved', 'rti', 'fallback_shifted', 'fallback_gravity'), the solver's own
    ``solver_status`` string, ``solve_time`` (s: for RTI the preparation and the feedback phase of this
    iteration), ``feedback_time`` (s: the part of ``solve_time`` spent after the measurement arrived, the
    delay of the command; all of it for fatrop, ipopt and the fallbacks), ``iterations``, ``dt``, ``tau_max`` (nu,)."""

    tau_ff: np.ndarray
    x_pred: np.ndarray
    K: np.ndarray
    status: str
    solver_status: str = ""
    solve_time: float = 0.0
    iterations: int = 0
    dt: float = 0.01
    tau_max: np.ndarray = field(default_factory=lambda: np.zeros(0))
    feedback_time: float = 0.0

    def state_reference(self, elapsed):
        """The planned state (nx,) ``elapsed`` s after the solve: cubic Hermite interpolation of the
        planned positions and velocities between the nodes (so that ``q̇_ref = v_ref``), held after the
        last node."""
        N = self.tau_ff.shape[0]
        k = min(int(max(elapsed, 0.0) / self.dt + 1e-9), N - 1)
        s = min(max(elapsed / self.dt - k, 0.0), 1.0)
        n = self.x_pred.shape[1] // 2
        q0, v0 = self.x_pred[k, :n], self.x_pred[k, n:]
        q1, v1 = self.x_pred[k + 1, :n], self.x_pred[k + 1, n:]
        h = self.dt
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        q = h00 * q0 + h10 * h * v0 + h01 * q1 + h11 * h * v1
        v = (d00 * q0 + d01 * q1) / h + d10 * v0 + d11 * v1
        return np.concatenate([q, v])

    def torque(self, x, elapsed):
        """``τ = τ_ff,k + K_k (x - x_ref(elapsed))`` (nu,) for the state ``x`` (nx,) ``elapsed`` seconds
        after the solve (``k = floor(elapsed / dt)``, the last interval beyond the horizon; ``x_ref`` of
        :meth:`state_reference`), clamped to the effort limits; the feedforward alone when ``x`` is not
        finite."""
        k = min(int(max(elapsed, 0.0) / self.dt + 1e-9), self.tau_ff.shape[0] - 1)
        tau = self.tau_ff[k]
        dx = np.asarray(x, dtype=float) - self.state_reference(elapsed)
        if np.all(np.isfinite(dx)):
            tau = tau + self.K[k] @ dx
        return np.clip(tau, -self.tau_max, self.tau_max)


def parameter_vector(model):
    """``θ = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) of a model (its inertial and friction parameters)."""
    return np.concatenate([model.inertial_parameters(), model.viscous, model.coulomb, model.friction_offset])


def _per_dof(value, n):
    return np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()


class OCPFunctions:
    """The CasADi functions of the OCP for one model and :class:`MPCConfig` (module docstring).

    Stage level (SX): ``dynamics(x, u, θ) -> ẋ``, ``step(x, u, θ) -> x+`` (RK4),
    ``step_linearized(x, u, θ) -> (x+, A, B)``, ``step_adjoint(x, u, θ, λ) -> (Aᵀλ, Bᵀλ)``,
    ``inverse_dynamics(x_ref, a_ref, θ) -> τ`` (with
    friction), ``gravity(x, θ) -> g``. Problem level (MX over all stages, stage functions mapped): the
    NLP dict ``nlp`` (``x = w``, ``p``, ``f``, ``g``); ``rti_qp(w, p) -> (H, ∇f, J, gaps, A, B)``: the QP
    in the step Δw (rows ``[A_k B_k -I]``, hpipm's layout) and the stacked stage Jacobians ``A``
    (nx, nx N), ``B`` (nx, nu N); ``linearize(w, p) -> (A, B)``; ``lqr_gains(A, B) -> K`` (nu, nx N);
    ``rti_prepare(w, p) -> (H, ∇f, J, gaps, A, B, b, K, k)``: the RTI's preparation phase (the QP, its
    stage matrices, ``b = F(x_k, u_k) - x_{k+1}`` (nx N,) and the Riccati factorisation, ``K`` (nu, nx N),
    ``k`` (nu, N)); ``riccati_factor`` and ``riccati_feedback`` (:meth:`_riccati_functions`).
    ``p = [x̂ (nx), X_ref (nx (N+1)), A_ref (nv N), θ]``."""

    def __init__(self, model, config):
        n, N = model.nv, config.horizon
        if model.nq != model.nv:
            raise ValueError("the MPC handles fixed-base models with nq == nv")
        self.n, self.nx, self.nu, self.N = n, 2 * n, n, N
        self.ntheta = 10 * model.nbodies + 3 * n
        self.nw = (N + 1) * self.nx + N * self.nu
        self.np = self.nx + (N + 1) * self.nx + N * n + self.ntheta
        self.model, self.config = model, config
        self.library = None                 # path of the compiled functions (compile())
        if config.compiled:
            self.compile()
        else:
            self._stage_functions()
            self._problem_functions()

    # -------------------------------------------------------------------------------------- stage level
    def _split_theta(self, theta):
        nb10, n = 10 * self.model.nbodies, self.n
        return theta[:nb10], theta[nb10:nb10 + n], theta[nb10 + n:nb10 + 2 * n], theta[nb10 + 2 * n:]

    def _stage_functions(self):
        model, n, cfg = self.model, self.n, self.config
        x, u, th = ca.SX.sym("x", self.nx), ca.SX.sym("u", self.nu), ca.SX.sym("theta", self.ntheta)
        q, v = x[:n], x[n:]
        pi, fv, fc, fo = self._split_theta(th)
        eps = cfg.coulomb_smoothing
        tau_f = fv * v + fc * ca.tanh(v / eps) + fo
        a = aba(model, q, v, u - tau_f, pi=pi)
        # called, not inlined, by the RK4 steps below (SX call nodes): the generated C holds one copy of
        # ABA and of its derivatives instead of one per RK4 stage (a quarter of the code for gcc)
        called = {"never_inline": True}
        self.dynamics = ca.Function("mpc_dynamics", [x, u, th], [ca.vertcat(v, a)], called)
        # ∂a/∂(q, v, τ) from the core's analytical ABA derivatives (Carpentier and Mansard 2018), the
        # friction entering through τ - τ_f(v): ∂a/∂v -= ∂a/∂τ diag(τ_f'(v))
        da_dq, da_dv, da_dtau = aba_derivatives(model, q, v, u - tau_f, pi=pi)
        dtf_dv = fv + fc * (1 - ca.tanh(v / eps) ** 2) / eps
        da_dv = da_dv - da_dtau * ca.repmat(dtf_dv.T, n, 1)
        A_c = ca.vertcat(ca.horzcat(ca.SX.zeros(n, n), ca.SX.eye(n)), ca.horzcat(da_dq, da_dv))
        B_c = ca.vertcat(ca.SX.zeros(n, n), da_dtau)
        stage_jac = ca.Function("mpc_stage_jac", [x, u, th], ca.cse([ca.vertcat(v, a), A_c, B_c]), called)

        h = cfg.dt / cfg.substeps
        xk, Ax, Bu = x, ca.SX.eye(self.nx), ca.SX.zeros(self.nx, self.nu)
        xs = x
        # the chain rule's products (∂k_i/∂(x, u) = A_i D_x, A_i D_u + B_i), also called rather than inlined
        Ac, Bc = ca.SX.sym("A", stage_jac.sparsity_out(1)), ca.SX.sym("B", stage_jac.sparsity_out(2))
        Dx, Du = ca.SX.sym("D_x", self.nx, self.nx), ca.SX.sym("D_u", self.nx, self.nu)
        chain = ca.Function("mpc_rk4_chain", [Ac, Dx, Du, Bc], [ca.mtimes(Ac, Dx), ca.mtimes(Ac, Du) + Bc], called)
        for i in range(cfg.substeps):
            k1, A1, B1 = stage_jac(xk, u, th)
            d1x, d1u = (A1, B1) if i == 0 else chain(A1, Ax, Bu, B1)        # x_k itself: D = (I, 0)
            k2, A2, B2 = stage_jac(xk + h / 2 * k1, u, th)
            d2x, d2u = chain(A2, Ax + h / 2 * d1x, Bu + h / 2 * d1u, B2)
            k3, A3, B3 = stage_jac(xk + h / 2 * k2, u, th)
            d3x, d3u = chain(A3, Ax + h / 2 * d2x, Bu + h / 2 * d2u, B3)
            k4, A4, B4 = stage_jac(xk + h * k3, u, th)
            d4x, d4u = chain(A4, Ax + h * d3x, Bu + h * d3u, B4)
            xk = xk + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            Ax = Ax + h / 6 * (d1x + 2 * d2x + 2 * d3x + d4x)
            Bu = Bu + h / 6 * (d1u + 2 * d2u + 2 * d3u + d4u)
            f = self.dynamics
            s1 = f(xs, u, th)
            s2 = f(xs + h / 2 * s1, u, th)
            s3 = f(xs + h / 2 * s2, u, th)
            s4 = f(xs + h * s3, u, th)
            xs = xs + h / 6 * (s1 + 2 * s2 + 2 * s3 + s4)
        self.step = ca.Function("mpc_step", [x, u, th], [xs])
        self.step_linearized = ca.Function("mpc_step_lin", [x, u, th], [xk, Ax, Bu])
        # vector-Jacobian product [A B]ᵀλ by one reverse sweep through RK4 + ABA (one sweep for x and u
        # together: 39 k operations for the Panda against 65 k for step_linearized's A and B)
        lam = ca.SX.sym("lam", self.nx)
        adj = ca.jtimes(xs, ca.vertcat(x, u), lam, True)
        self.step_adjoint = ca.Function("mpc_step_adj", [x, u, th, lam], [adj[:self.nx], adj[self.nx:]])
        self.inverse_dynamics = self._inverse_dynamics_function()
        self.gravity = ca.Function("mpc_gravity", [x, th], [rnea(model, q, ca.SX.zeros(n), ca.SX.zeros(n), pi=pi) + fo])

    def _inverse_dynamics_function(self):
        """``inverse_dynamics(x_ref, a_ref, θ) -> τ = rnea(q, v, a; π) + τ_f(v)`` (SX: the problem level
        differentiates through it)."""
        n = self.n
        x, a_in, th = ca.SX.sym("x", self.nx), ca.SX.sym("a_ref", n), ca.SX.sym("theta", self.ntheta)
        q, v = x[:n], x[n:]
        pi, fv, fc, fo = self._split_theta(th)
        tau_f = fv * v + fc * ca.tanh(v / self.config.coulomb_smoothing) + fo
        return ca.Function("mpc_inverse_dynamics", [x, a_in, th], [rnea(self.model, q, v, a_in, pi=pi) + tau_f])

    # ------------------------------------------------------------------------------------ problem level
    def unpack_w(self, w):
        """``(X (nx, N+1), U (nu, N))`` from the stacked decision vector ``w`` (MX or numeric)."""
        nx, nu, N = self.nx, self.nu, self.N
        body = ca.reshape(w[:N * (nx + nu)], nx + nu, N)
        X = ca.horzcat(body[:nx, :], w[N * (nx + nu):])
        return X, body[nx:, :]

    def unpack_numeric(self, w):
        """``(X (N+1, nx), U (N, nu))`` from a numeric ``w`` (nw,) (NumPy only, no CasADi types)."""
        nx, nu, N = self.nx, self.nu, self.N
        body = np.asarray(w, dtype=float)[:N * (nx + nu)].reshape(N, nx + nu)
        return np.vstack([body[:, :nx], w[N * (nx + nu):][None, :]]), body[:, nx:].copy()

    def pack_w(self, X, U):
        """Inverse of :meth:`unpack_w` for numeric ``X`` (N+1, nx) and ``U`` (N, nu)."""
        return np.concatenate([np.hstack([X[:-1], U]).reshape(-1), X[-1]])

    def split_p(self, p):
        nx, n, N = self.nx, self.n, self.N
        x0 = p[:nx]
        Xr = ca.reshape(p[nx:nx + (N + 1) * nx], nx, N + 1)
        o = nx + (N + 1) * nx
        Ar = ca.reshape(p[o:o + N * n], n, N)
        return x0, Xr, Ar, p[o + N * n:]

    def _weights(self):
        cfg, n = self.config, self.n
        Qd = np.concatenate([_per_dof(cfg.q_weight, n), _per_dof(cfg.v_weight, n)])
        Rd = _per_dof(cfg.r_weight, n)
        return Qd, Rd, cfg.terminal_factor * Qd

    def _gauss_newton_step(self):
        """``step`` whose Jacobian is the chain-rule one of :attr:`step_linearized` (custom Jacobian)
        and whose second derivatives are zero: differentiating the NLP through it gives the cheap
        constraint Jacobian and the Gauss-Newton Hessian of the least-squares cost. Derivatives with
        respect to θ are not provided (zero): θ is a parameter, never differentiated by the solvers.
        The former formulation (``nlp_derivatives='jacobian'``), mapped over the stages: the Lagrangian
        gradient ``Jᵀλ`` and its derivative go through the stage Jacobians, so the Hessian function
        evaluates them (twice); kept as the reference for :meth:`_gauss_newton_shooting`."""
        x, u, th = ca.SX.sym("x", self.nx), ca.SX.sym("u", self.nu), ca.SX.sym("theta", self.ntheta)
        xn = self.step(x, u, th)
        in_names, sizes = ["x", "u", "theta"], [self.nx, self.nu, self.ntheta]
        # CasADi's naming of Jacobian functions: inputs, then the nominal outputs as out_<name>
        # MX, so that code generation emits step_linearized once instead of inlining it here
        jin = [ca.MX.sym(n, k) for n, k in zip(in_names, sizes)] + [ca.MX.sym("out_xn", ca.Sparsity(self.nx, 1))]
        jin_names = in_names + ["out_xn"]
        _, A, B = self.step_linearized(jin[0], jin[1], jin[2])
        jout, jout_names = [A, B, ca.MX(self.nx, self.ntheta)], [f"jac_xn_{n}" for n in in_names]
        hin = [ca.MX.sym(n, k) for n, k in zip(in_names, sizes)] + [ca.MX.sym("out_xn", ca.Sparsity(self.nx, 1))] \
            + [ca.MX.sym("out_" + n, ca.Sparsity(self.nx, k)) for n, k in zip(jout_names, sizes)]
        hin_names = jin_names + ["out_" + n for n in jout_names]
        hout_names = [f"jac_{o}_{i}" for o in jout_names for i in jin_names]
        hout = [ca.MX(self.nx * k, (sizes + [self.nx])[j]) for k in sizes for j in range(len(jin_names))]
        zero = ca.Function("jac_jac_mpc_step_gn", hin, hout, hin_names, hout_names)
        # directional derivatives (forward/reverse AD) disabled: CasADi then derives every product with
        # the Jacobian (gradient of the Lagrangian Jᵀλ included) from the custom Jacobian, instead of
        # differentiating RK4 + ABA symbolically (tens of MB of C and minutes of gcc)
        only_jacobian = {"jac_penalty": 0, "never_inline": True, "enable_forward": False, "enable_reverse": False,
                         "enable_fd": False}
        jac = ca.Function("jac_mpc_step_gn", jin, jout, jin_names, jout_names,
                          {"custom_jacobian": zero, **only_jacobian})
        return ca.Function("mpc_step_gn", [x, u, th], [xn], in_names, ["xn"], {"custom_jacobian": jac, **only_jacobian})

    @staticmethod
    def _zero_derivative(name, in_names, in_sizes, out_names, out_sizes):
        """A function with the inputs of CasADi's derivative of a function with ``in_names`` (shapes
        ``in_sizes``) and outputs ``out_names`` (``out_sizes``): the inputs, then the nominal outputs as
        ``out_<name>`` (structurally empty: never needed, so never evaluated), returning structurally
        zero blocks ``jac_<out>_<in>``: second derivatives that are identically zero (Gauss-Newton)."""
        ins = [ca.MX.sym(n, *k) for n, k in zip(in_names, in_sizes)] \
            + [ca.MX.sym("out_" + n, ca.Sparsity(*k)) for n, k in zip(out_names, out_sizes)]
        outs = [ca.MX(ko[0] * ko[1], ki[0] * ki[1]) for ko in out_sizes for ki in in_sizes]
        return ca.Function(name, ins, outs, in_names + ["out_" + n for n in out_names],
                           [f"jac_{o}_{i}" for o in out_names for i in in_names])

    def _gauss_newton_shooting(self):
        """``F_N(X (nx, N), U (nu, N), θ) -> X+ (nx, N)``: :attr:`step` of every stage, with its
        derivatives supplied for the NLP solvers (Gauss-Newton, module docstring):

        - Jacobian (custom): block diagonal ``∂X+/∂X = diag(A_k)``, ``∂X+/∂U = diag(B_k)`` from the mapped
          :attr:`step_linearized`, whose own derivatives are zero;
        - reverse mode (``adj1_<name>`` in the function cache): ``(diag(A_k)ᵀ Λ, diag(B_k)ᵀ Λ)`` for the
          multipliers ``Λ`` (nx, N) from the mapped :attr:`step_adjoint` (one reverse sweep, no Jacobian),
          whose Jacobian is zero with respect to ``X, U, θ`` (the Gauss-Newton approximation: the term
          ``Σ λ_kᵀ ∇²F`` of the Hessian of the Lagrangian is dropped) and ``diag(A_k)ᵀ, diag(B_k)ᵀ`` with
          respect to ``Λ``.

        The Hessian of the Lagrangian, the Jacobian of its gradient ``∇f + Jᵀλ``, thus contains no
        derivative of the dynamics: ``2 λ_f diag(Q, R, ..., Q_N)``, the Gauss-Newton Hessian of the
        least-squares cost (Cărmizaru eq. 5.2), evaluated without any stage Jacobian. Derivatives with
        respect to θ are zero: θ is a parameter, never differentiated by the solvers."""
        nx, nu, nth, N = self.nx, self.nu, self.ntheta, self.N
        name, names, sizes = "mpc_shooting", ["X", "U", "theta"], [(nx, N), (nu, N), (nth, 1)]
        nin = [nx * N, nu * N, nth]

        def symbols(extra=()):
            return [ca.MX.sym(n, *k) for n, k in zip(names, sizes)] + list(extra)

        def block_diagonal(M, width, transpose=False):
            return ca.diagcat(*[(M[:, k * width:(k + 1) * width].T if transpose else M[:, k * width:(k + 1) * width])
                                for k in range(N)])

        def thetas(th):
            return ca.repmat(th, 1, N)

        only_custom = {"never_inline": True, "enable_forward": False, "enable_reverse": False, "enable_fd": False}
        # Jacobian: CasADi's naming, inputs then the nominal output out_Xn (empty: not needed)
        jin = symbols([ca.MX.sym("out_Xn", ca.Sparsity(nx, N))])
        _, A, B = self._stage_jacobians()(jin[0], jin[1], thetas(jin[2]))
        jout_names = [f"jac_Xn_{n}" for n in names]
        jac_jac = self._zero_derivative(f"jac_jac_{name}", names + ["out_Xn"], sizes + [(nx, N)], jout_names,
                                        [(nx * N, k) for k in nin])
        jac = ca.Function(f"jac_{name}", jin, [block_diagonal(A, nx), block_diagonal(B, nu), ca.MX(nx * N, nth)],
                          names + ["out_Xn"], jout_names, {"custom_jacobian": jac_jac, "jac_penalty": 0, **only_custom})
        # reverse mode: inputs, nominal output, adjoint seed Λ; outputs the adjoint sensitivities
        ain_names, aout_names = names + ["out_Xn", "adj_Xn"], ["adj_X", "adj_U", "adj_theta"]
        ain = symbols([ca.MX.sym("out_Xn", ca.Sparsity(nx, N)), ca.MX.sym("adj_Xn", nx, N)])
        adj_X, adj_U = self.step_adjoint.map(N)(ain[0], ain[1], thetas(ain[2]), ain[4])
        # its Jacobian: zero but for the (linear) dependence on Λ, evaluated only if Λ is differentiated
        jain = symbols([ca.MX.sym("out_Xn", ca.Sparsity(nx, N)), ca.MX.sym("adj_Xn", nx, N)]
                       + [ca.MX.sym("out_" + n, ca.Sparsity(*k)) for n, k in zip(aout_names, sizes)])
        _, A2, B2 = self.step_linearized.map(N)(jain[0], jain[1], thetas(jain[2]))
        by_seed = {"adj_X": block_diagonal(A2, nx, True), "adj_U": block_diagonal(B2, nu, True),
                   "adj_theta": ca.MX(nth, nx * N)}
        ja_names, ja_out = [], []
        for o, ko in zip(aout_names, nin):
            for i, ki in zip(ain_names, nin + [nx * N, nx * N]):
                ja_names.append(f"jac_{o}_{i}")
                ja_out.append(by_seed[o] if i == "adj_Xn" else ca.MX(ko, ki))
        jac_adj = ca.Function(f"jac_adj1_{name}", jain, ja_out, ain_names + ["out_" + n for n in aout_names],
                              ja_names, {"jac_penalty": 0, **only_custom})
        adj = ca.Function(f"adj1_{name}", ain, [adj_X, adj_U, ca.MX(nth, 1)], ain_names, aout_names,
                          {"custom_jacobian": jac_adj, "jac_penalty": 0, **only_custom})
        X, U, th = symbols()
        return ca.Function(name, [X, U, th], [self.step.map(N)(X, U, thetas(th))], names, ["Xn"],
                           {"custom_jacobian": jac, "cache": {f"adj1_{name}": adj}, "never_inline": True,
                            "enable_forward": False, "enable_fd": False})

    def _stage_jacobians(self):
        """:attr:`step_linearized` mapped over the N stages, on ``stage_threads`` threads when above 1
        (pthreads in the generated C, stages split evenly)."""
        threads = max(1, int(self.config.stage_threads))
        if threads > 1:
            return self.step_linearized.map(self.N, "thread", min(threads, self.N))
        return self.step_linearized.map(self.N)

    def _problem_functions(self):
        N = self.N
        w, p = ca.MX.sym("w", self.nw), ca.MX.sym("p", self.np)
        X, U = self.unpack_w(w)
        x0, Xr, Ar, th = self.split_p(p)
        Qd, Rd, QNd = self._weights()
        Ur = self.inverse_dynamics.map(N)(Xr[:, :N], Ar, ca.repmat(th, 1, N))
        ex, eu, eN = X[:, :N] - Xr[:, :N], U - Ur, X[:, N] - Xr[:, N]
        cost = ca.sum2(ca.sum1(ca.DM(Qd) * ex ** 2)) + ca.sum2(ca.sum1(ca.DM(Rd) * eu ** 2)) \
            + ca.sum1(ca.DM(QNd) * eN ** 2)
        if self.config.nlp_derivatives == "jacobian":              # the former formulation (reference)
            shooting = self._gauss_newton_step().map(N)(X[:, :N], U, ca.repmat(th, 1, N))
        else:
            shooting = self._gauss_newton_shooting()(X[:, :N], U, th)
        gaps = X[:, 1:] - shooting                                  # fatrop's x_{k+1} - F form
        g = ca.vertcat(X[:, 0] - x0, ca.reshape(gaps, -1, 1))      # stage by stage: x_0 = x̂, then gaps
        hdiag = np.concatenate([np.concatenate([2 * Qd, 2 * Rd])] * N + [2 * QNd])
        self.nlp = {"x": w, "p": p, "f": cost, "g": g}
        # RTI QP in the step Δw: ½ Δwᵀ H Δw + ∇fᵀ Δw  s.t. rows [A_k B_k -I] Δw = x_{k+1} - F(x_k, u_k)
        # (hpipm's layout; x_0 is fixed through the bounds), from one mapped linearisation
        H_gn = ca.DM(ca.Sparsity.diag(self.nw), hdiag)
        nx, nu = self.nx, self.nu
        Xn, A, B = self._stage_jacobians()(X[:, :N], U, ca.repmat(th, 1, N))
        I = ca.MX.eye(nx)
        rows = []
        for k in range(N):
            left, right = ca.MX(nx, k * (nx + nu)), ca.MX(nx, self.nw - (k + 1) * (nx + nu) - nx)
            rows.append(ca.horzcat(left, A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu], -I, right))
        self.rti_qp = ca.Function("mpc_rti_qp", [w, p], [ca.MX(H_gn), ca.gradient(cost, w), ca.vertcat(*rows),
                                                        ca.reshape(X[:, 1:] - Xn, -1, 1), A, B])
        self.linearize = ca.Function("mpc_linearize", [w, p], [A, B])
        A_s, B_s = ca.MX.sym("A", nx, nx * N), ca.MX.sym("B", nx, nu * N)
        self.lqr_gains = ca.Function("mpc_lqr", [A_s, B_s], [self._riccati(A_s, B_s, Qd, Rd, QNd)])
        # structured (Riccati) solution of the equality-constrained QP: factorisation (preparation) and
        # the rollout from the measured state (feedback)
        self._riccati_functions(Qd, Rd, QNd)
        b = ca.reshape(Xn - X[:, 1:], -1, 1)                       # x_{k+1} = A Δx + B Δu + b_k + x̄_{k+1}
        grad = ca.gradient(cost, w)
        K, kff = self.riccati_factor(A, B, b, grad)
        self.rti_prepare = ca.Function("mpc_rti_prepare", [w, p], [ca.MX(H_gn), grad, ca.vertcat(*rows), -b, A, B,
                                                                 b, K, kff])

    def _riccati(self, A, B, Qd, Rd, QNd):
        """Time-varying LQR gains ``K_k`` (nu, nx N), stacked by columns, from the backward Riccati
        recursion ``K = -(R + BᵀPB)⁻¹ BᵀPA``, ``P = Q + Aᵀ P (A + B K)`` along the linearisation."""
        nx, nu, N = self.nx, self.nu, self.N
        Pn, Ak, Bk = ca.SX.sym("P", nx, nx), ca.SX.sym("A", nx, nx), ca.SX.sym("B", nx, nu)
        BtP = ca.mtimes(Bk.T, Pn)
        Kk = -ca.solve(ca.DM(np.diag(Rd)) + ca.mtimes(BtP, Bk), ca.mtimes(BtP, Ak))
        Pk = ca.DM(np.diag(Qd)) + ca.mtimes(Ak.T, ca.mtimes(Pn, Ak + ca.mtimes(Bk, Kk)))
        stage = ca.Function("mpc_riccati_stage", [Pn, Ak, Bk], [0.5 * (Pk + Pk.T), Kk])
        P = ca.MX(ca.DM(np.diag(QNd)))
        Ks = [None] * N
        for k in reversed(range(N)):
            P, Ks[k] = stage(P, A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu])
        return ca.horzcat(*Ks)

    def _riccati_functions(self, Qd, Rd, QNd):
        """``riccati_factor(A, B, b, ∇f) -> (K, k)`` and ``riccati_feedback(x̂, w̄, A, B, b, K, k, w_lo, w_hi)
        -> (w, violation)``: the QP of the RTI step without its bounds,

            min_Δw  ½ Δwᵀ H Δw + ∇fᵀ Δw
            s.t.  Δx_0 = x̂ - x̄_0,  Δx_{k+1} = A_k Δx_k + B_k Δu_k + b_k,

        ``H = 2 diag(Q, R, ..., Q_N)``, solved by the backward Riccati recursion (Rawlings, Mayne and Diehl
        2017, sec. 1.3.3, with the affine terms of the linearised dynamics and the cost gradient)

            P_N = 2 Q_N,  p_N = ∇_{x_N} f;   for k = N-1 .. 0:  G = 2R + BᵀPB,  h = BᵀPA,
            g = ∇_{u_k} f + Bᵀ(P b_k + p),  K_k = -G⁻¹h,  k_k = -G⁻¹g,
            P ← 2Q + AᵀPA + hᵀK_k,  p ← ∇_{x_k} f + Aᵀ(P b_k + p) + hᵀk_k,

        and the forward rollout ``Δu_k = K_k Δx_k + k_k``. ``A`` (nx, nx N), ``B`` (nx, nu N), ``b`` (nx N,),
        ``∇f`` (nw,) in the layout of ``w``; ``K`` (nu, nx N) (the LQR gains of :meth:`_riccati`: the same
        recursion), ``k`` (nu, N). The factorisation needs neither the measured state nor the bounds: it is
        the preparation phase; the rollout is the feedback phase. ``violation`` is the largest amount by
        which ``w = w̄ + Δw`` leaves ``[w_lo, w_hi]`` outside ``x_0`` (<= 0: the bounds are inactive and
        ``w`` is also the solution of the bounded QP)."""
        nx, nu, N = self.nx, self.nu, self.N
        P, pv = ca.SX.sym("P", nx, nx), ca.SX.sym("p", nx)
        Ak, Bk, bk = ca.SX.sym("A", nx, nx), ca.SX.sym("B", nx, nu), ca.SX.sym("b", nx)
        qk, rk = ca.SX.sym("q", nx), ca.SX.sym("r", nu)
        Pb = ca.mtimes(P, bk) + pv
        BtP = ca.mtimes(Bk.T, P)
        G = ca.DM(np.diag(2 * Rd)) + ca.mtimes(BtP, Bk)
        h = ca.mtimes(BtP, Ak)
        Kk_k = -_cholesky_solve(G, ca.horzcat(h, rk + ca.mtimes(Bk.T, Pb)))
        Kk, kk = Kk_k[:, :nx], Kk_k[:, nx]
        Pn = ca.DM(np.diag(2 * Qd)) + ca.mtimes(Ak.T, ca.mtimes(P, Ak)) + ca.mtimes(h.T, Kk)
        pn = qk + ca.mtimes(Ak.T, Pb) + ca.mtimes(h.T, kk)
        stage = ca.Function("mpc_riccati_factor_stage", [P, pv, Ak, Bk, bk, qk, rk],
                            ca.cse([0.5 * (Pn + Pn.T), pn, Kk, kk]))
        A, B = ca.MX.sym("A", nx, nx * N), ca.MX.sym("B", nx, nu * N)
        b, grad = ca.MX.sym("b", nx * N), ca.MX.sym("grad", self.nw)
        gq = ca.reshape(grad[:N * (nx + nu)], nx + nu, N)
        Pm, pm = ca.MX(ca.DM(np.diag(2 * QNd))), grad[N * (nx + nu):]
        Ks, ks = [None] * N, [None] * N
        for k in reversed(range(N)):
            Pm, pm, Ks[k], ks[k] = stage(Pm, pm, A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu],
                                         b[k * nx:(k + 1) * nx], gq[:nx, k], gq[nx:, k])
        self.riccati_factor = ca.Function("mpc_riccati_factor", [A, B, b, grad], [ca.horzcat(*Ks), ca.horzcat(*ks)],
                                          ["A", "B", "b", "grad"], ["K", "k"])
        dx, Kk, kk = ca.SX.sym("dx", nx), ca.SX.sym("K", nu, nx), ca.SX.sym("k", nu)
        du = ca.mtimes(Kk, dx) + kk
        roll = ca.Function("mpc_riccati_rollout_stage", [dx, Kk, kk, Ak, Bk, bk],
                           [du, ca.mtimes(Ak, dx) + ca.mtimes(Bk, du) + bk])
        x0, w = ca.MX.sym("x0", nx), ca.MX.sym("w", self.nw)
        K, kf = ca.MX.sym("K", nu, nx * N), ca.MX.sym("k", nu, N)
        lo, hi = ca.MX.sym("w_lo", self.nw), ca.MX.sym("w_hi", self.nw)
        d = x0 - w[:nx]
        parts = [d]
        for k in range(N):
            du, d = roll(d, K[:, k * nx:(k + 1) * nx], kf[:, k], A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu],
                         b[k * nx:(k + 1) * nx])
            parts += [du, d]
        w_new = w + ca.vertcat(*parts)
        w_new = ca.vertcat(x0, w_new[nx:])                           # exactly the measurement
        violation = ca.mmax(ca.fmax(lo - w_new, w_new - hi)[nx:])
        self.riccati_feedback = ca.Function("mpc_riccati_feedback", [x0, w, A, B, b, K, kf, lo, hi],
                                            [w_new, violation],
                                            ["x0", "w_bar", "A", "B", "b", "K", "k", "w_lo", "w_hi"],
                                            ["w", "violation"])

    # the compiled functions by attribute: C name; the stage functions first (the problem level calls them)
    _COMPILED = {"dynamics": "mpc_dynamics", "step": "mpc_step", "step_linearized": "mpc_step_lin",
                 "step_adjoint": "mpc_step_adj", "inverse_dynamics": "mpc_inverse_dynamics", "gravity": "mpc_gravity",
                 "rti_prepare": "mpc_rti_prepare", "riccati_feedback": "mpc_riccati_feedback"}

    def compile(self):
        """Build the functions as compiled C (cached; module docstring): two translation units compiled in
        parallel, the preparation phase (linearisation and factorisation) and the rest. From the cache
        nothing is traced: the stage functions are loaded from the library and the problem level is built
        on them. The NLP of fatrop/ipopt, built on the compiled stage functions, calls them in this library
        instead of holding (and compiling) its own copy; its oracle is compiled when the solver is built
        (:meth:`ModelPredictiveController`)."""
        units = (("rti_prepare", "step_linearized"),
                 ("riccati_feedback", "step", "step_adjoint", "dynamics", "inverse_dynamics", "gravity"))
        key = "|".join(["mpc", self.model.fingerprint(), problem_key(self.config, nlp=False)])

        def traced():
            self._stage_functions()
            self._problem_functions()
            return [[getattr(self, n) for n in unit] for unit in units]
        self.library = compile_casadi_library(traced, key, label="MPC functions")
        names = list(self._COMPILED)
        for n in names[:6]:
            setattr(self, n, ca.external(self._COMPILED[n], self.library))
        self.inverse_dynamics = self._inverse_dynamics_function()    # differentiated by the problem level
        self._problem_functions()
        for n in names[4:]:
            setattr(self, n, ca.external(self._COMPILED[n], self.library))


def _cholesky_solve(G, R):
    """``G⁻¹ R`` for a symmetric positive definite SX ``G`` (n, n) by the Cholesky factor ``G = L Lᵀ``
    and two triangular substitutions, unrolled (n³/6 + n² m operations, against several times that for
    CasADi's symbolic QR of ``ca.solve``)."""
    n, m = G.shape[0], R.shape[1]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        d = G[j, j] - sum((L[j][k] ** 2 for k in range(j)), ca.SX(0))
        L[j][j] = ca.sqrt(d)
        for i in range(j + 1, n):
            L[i][j] = (G[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), ca.SX(0))) / L[j][j]
    Y = [None] * n
    for i in range(n):                                                # L Y = R
        Y[i] = (R[i, :] - sum((L[i][k] * Y[k] for k in range(i)), ca.SX.zeros(1, m))) / L[i][i]
    X = [None] * n
    for i in reversed(range(n)):                                      # Lᵀ X = Y
        X[i] = (Y[i] - sum((L[k][i] * X[k] for k in range(i + 1, n)), ca.SX.zeros(1, m))) / L[i][i]
    return ca.vertcat(*X)


_OCP_CACHE = {}


_PROBLEM_FIELDS = ("horizon", "dt", "substeps", "q_weight", "v_weight", "r_weight", "terminal_factor",
                   "coulomb_smoothing", "compiled", "nlp_derivatives", "stage_threads")


def problem_key(config, nlp=True):
    """The options of :class:`MPCConfig` that change the problem functions, as a string (bounds, solver
    and time limit enter at run time); without ``nlp_derivatives`` unless ``nlp``."""
    return repr([(f, getattr(config, f)) for f in _PROBLEM_FIELDS if nlp or f != "nlp_derivatives"])


def ocp_functions(model, config):
    """The :class:`OCPFunctions` of ``model`` and ``config`` (compiled when ``config.compiled``), shared
    between controllers of the same model and problem in this process (building them traces the
    dynamics and takes seconds; the functions are immutable and parameters enter through ``p``)."""
    key = (model.fingerprint(), problem_key(config))
    if key not in _OCP_CACHE:
        _OCP_CACHE[key] = OCPFunctions(model, config)
    return _OCP_CACHE[key]


class _RiccatiRTI:
    """The two RTI phases of :class:`OCPFunctions` for one controller: ``prepare(w̄, p)`` evaluates
    ``rti_prepare`` (linearisation, QP data, Riccati factorisation) and keeps its results;
    ``feedback(x̂, w_lo, w_hi) -> (w, violation)`` the Riccati rollout from them; ``qp()`` the bounded QP's
    data ``(H, ∇f, A_qp, rhs)`` (DM); ``gains()`` the Riccati gains (nu, nx N) (a copy). Through CasADi's
    call (functions in its virtual machine)."""

    def __init__(self, ocp):
        self.ocp = ocp
        self._out = None

    def prepare(self, w_bar, p):
        self._w_bar = w_bar
        self._out = self.ocp.rti_prepare(w_bar, p)

    def feedback(self, x0, lo, hi):
        H, grad, Aqp, rhs, A, B, b, K, kff = self._out
        w, violation = self.ocp.riccati_feedback(x0, self._w_bar, A, B, b, K, kff, lo, hi)
        return np.asarray(w).reshape(-1), float(violation)

    def qp(self):
        return self._out[:4]

    def gains(self):
        return np.array(self._out[7])


class _DirectRiccatiRTI(_RiccatiRTI):
    """:class:`_RiccatiRTI` on the compiled library through :class:`DirectCall`: buffers allocated once,
    the feedback reading the preparation's outputs in place (no copy, no CasADi dispatch)."""

    def __init__(self, ocp):
        super().__init__(ocp)
        self._prep = DirectCall(ocp.library, ocp.rti_prepare)
        self._fb = DirectCall(ocp.library, ocp.riccati_feedback)
        for i in range(5):                                      # A, B, b, K, k: the preparation's outputs
            self._fb.bind(2 + i, self._prep.outputs[4 + i])
        self._prep_in, self._fb_in = self._prep.inputs, self._fb.inputs
        self._bounds = None

    def prepare(self, w_bar, p):
        self._prep_in[0][:] = w_bar
        self._prep_in[1][:] = p
        self._fb_in[1][:] = w_bar
        self._prep.call()

    def feedback(self, x0, lo, hi):
        if self._bounds is None or self._bounds[0] is not lo or self._bounds[1] is not hi:
            self._fb_in[7][:], self._fb_in[8][:] = lo, hi                 # copied once per bounds object
            self._bounds = (lo, hi)
        self._fb_in[0][:] = x0
        self._fb.call()
        return self._fb.outputs[0].copy(), float(self._fb.outputs[1][0])

    def qp(self):
        f, out = self.ocp.rti_prepare, self._prep.outputs
        return tuple(ca.DM(f.sparsity_out(i), out[i]) for i in range(4))

    def gains(self):
        nu, nx, N = self.ocp.nu, self.ocp.nx, self.ocp.N
        return self._prep.outputs[7].reshape(nx * N, nu).T.copy()      # column-major (nu, nx N)


class ModelPredictiveController:
    """MPC of :class:`OCPFunctions` with warm start, time limit, fallbacks and feedback gains.

    ``solve(q, v, reference, t)`` returns an :class:`MPCSolution`; ``reference`` answers
    ``evaluate(t) -> (q, v, a)`` (joint references of :mod:`robodyn_ros.control.reference`), sampled at
    ``t + k dt``. ``set_parameters(theta)`` / ``set_inertial_parameters(pi)`` change the model used by
    the next solve."""

    def __init__(self, model, config=None, **options):
        self.model = model
        self.config = config or MPCConfig(**options)
        cfg = self.config
        if cfg.qp_solver not in ("riccati", "hpipm", "qrqp", "osqp"):
            raise ValueError(f"qp_solver must be 'riccati', 'hpipm', 'qrqp' or 'osqp', got {cfg.qp_solver!r}")
        if cfg.solver not in ("fatrop", "ipopt", "rti"):
            raise ValueError(f"solver must be 'fatrop', 'ipopt' or 'rti', got {cfg.solver!r}")
        if cfg.nlp_derivatives not in ("adjoint", "jacobian"):
            raise ValueError(f"nlp_derivatives must be 'adjoint' or 'jacobian', got {cfg.nlp_derivatives!r}")
        self.ocp = ocp_functions(model, cfg)
        self.theta = parameter_vector(model)
        self.tau_max = effort_bounds(model)
        self._bounds()
        self._w = None                      # last accepted primal solution
        self._lam_g = None
        self._solution = None
        self._qp_solvers = {}
        self._prepared = None               # the preparation phase of the next RTI solve
        self._nlp = None
        self.last_solver_stats = {}         # CasADi's stats of the last fatrop/ipopt solve (profiling)
        if cfg.solver == "rti":                                 # build the solvers now, not in the first solve
            self._rti = (_DirectRiccatiRTI if self.ocp.library is not None else _RiccatiRTI)(self.ocp)
            self._qp_solver(self._bounded_qp_name())
        else:
            self._build_nlp()

    # ------------------------------------------------------------------------------------- parameters
    def set_parameters(self, theta):
        """``θ = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) for the next solve (no rebuild)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.ocp.ntheta,) or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be a finite ({self.ocp.ntheta},) vector")
        self.theta = theta.copy()
        self._prepared = None                                   # prepared with the former parameters

    def set_inertial_parameters(self, pi):
        """Replace the inertial part ``π`` (10 nb,) of ``θ``."""
        theta = self.theta.copy()
        theta[:10 * self.model.nbodies] = pi
        self.set_parameters(theta)

    # ----------------------------------------------------------------------------------------- bounds
    def _bounds(self):
        m, cfg, ocp = self.model, self.config, self.ocp
        n, N = ocp.n, ocp.N
        vlim = np.where(np.isfinite(m.velocity_limit) & (m.velocity_limit > 0), m.velocity_limit, np.inf)
        vmax = vlim * cfg.velocity_fraction
        x_lo = np.concatenate([m.lower + cfg.position_margin, -vmax])
        x_hi = np.concatenate([m.upper - cfg.position_margin, vmax])
        free = np.full(ocp.nx, np.inf)
        X_lo = np.vstack([-free] + [x_lo] * N)                          # x_0 is fixed by x_0 = x̂
        X_hi = np.vstack([free] + [x_hi] * N)
        U_lim = np.tile(self.tau_max, (N, 1))
        self.lbw = ocp.pack_w(X_lo, -U_lim)
        self.ubw = ocp.pack_w(X_hi, U_lim)
        self.x_lo, self.x_hi = x_lo, x_hi

    # ----------------------------------------------------------------------------------------- solves
    def reference_parameters(self, q, v, reference, t):
        """``p`` (np,) for the measured state and the reference sampled at ``t + k dt``; reference
        positions outside the (margin-reduced) joint limits are clipped, with a
        :class:`ReferenceClippedWarning` naming the joints."""
        N, dt, n = self.ocp.N, self.config.dt, self.ocp.n
        samples = [reference.evaluate(t + k * dt) for k in range(N + 1)]
        Q = np.array([s[0] for s in samples])
        lo, hi = self.x_lo[:n], self.x_hi[:n]
        outside = np.any((Q < lo) | (Q > hi), axis=0)
        if np.any(outside):
            names = ", ".join(self.model.joint_names[i] for i in np.flatnonzero(outside))
            warnings.warn(f"MPC reference outside the joint limits clipped for {names}", ReferenceClippedWarning,
                          stacklevel=3)
        Xr = np.hstack([np.clip(Q, lo, hi), np.array([s[1] for s in samples])])
        Ar = np.array([s[2] for s in samples[:N]])
        return np.concatenate([q, v, Xr.reshape(-1), Ar.reshape(-1), self.theta]), Xr

    def _initial_guess(self, x0, predicted=False):
        """The previous solution shifted by one interval (last interval repeated), else the state ``x0``
        held with gravity-compensating torques; the first state is the measurement ``x0``, or with
        ``predicted`` (and a previous solution) the previous plan's state at this time."""
        ocp = self.ocp
        if self._w is not None:
            X, U = ocp.unpack_numeric(self._w)
            X = np.vstack([X[1:], X[-1:]])
            U = np.vstack([U[1:], U[-1:]])
            if predicted:
                return ocp.pack_w(X, U)
        else:
            X = np.tile(x0, (ocp.N + 1, 1))
            g = np.asarray(ocp.gravity(x0, self.theta)).reshape(-1)
            U = np.tile(np.clip(g, -self.tau_max, self.tau_max), (ocp.N, 1))
        X[0] = x0
        return ocp.pack_w(X, U)

    def solve(self, q, v, reference, t=0.0):
        """One MPC solve from the measured ``(q, v)`` (nv,) tracking ``reference`` from time ``t``.
        Returns an :class:`MPCSolution` (never non-finite: see the fallbacks in the module docstring)."""
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        x0 = np.concatenate([q, v])
        if not np.all(np.isfinite(x0)):
            return self._fallback(x0, "nonfinite_state", 0.0)
        if self.config.solver == "rti":
            return self._solve_rti(x0, reference, t)
        p, _ = self.reference_parameters(q, v, reference, t)
        if not np.all(np.isfinite(p)):
            return self._fallback(x0, "nonfinite_reference", 0.0)
        w0 = self._initial_guess(x0)
        start = time.perf_counter()
        try:
            w, solver_status, iters = self._nlp_solve(w0, p)
        except RuntimeError as err:                                       # solver crash: fall back
            w, solver_status, iters = None, f"error: {err}", 0
        elapsed = time.perf_counter() - start
        if w is None or not np.all(np.isfinite(w)) or elapsed > self.config.time_limit:
            failed = w is None or not np.all(np.isfinite(w))
            reason = solver_status if failed else f"time limit ({elapsed * 1e3:.1f} ms)"
            return self._fallback(x0, reason, elapsed)
        K = np.asarray(self.ocp.rti_prepare(w, p)[7])                     # Riccati gains at the solution
        if not np.all(np.isfinite(K)):
            return self._fallback(x0, "nonfinite gains", elapsed)
        self._w = w
        self._solution = self._make_solution(w, K, "solved", solver_status, elapsed, iters)
        return self._solution

    # ------------------------------------------------------------ real-time iteration: two phases
    def prepare(self, reference, t, x_guess=None):
        """Preparation phase of the RTI solve at time ``t`` (Diehl et al. 2005, sec. 4): shift the
        previous solution (its state at ``t`` stands for the measurement not yet known; without a
        previous solution ``x_guess`` (nx,), else nothing is prepared), sample ``reference`` at
        ``t + k dt``, linearise all stages in one call and factorise the QP without its bounds
        (:meth:`OCPFunctions._riccati_functions`): everything that does not depend on the measured state.
        ``solve(q, v, reference, t)`` with the same ``reference`` object and ``t`` then runs only the
        feedback phase. Returns the time it took (s); 0 for fatrop/ipopt, which have no such split."""
        if self.config.solver != "rti":
            return 0.0
        start = time.perf_counter()
        self._prepared = None
        if self._w is None and (x_guess is None or not np.all(np.isfinite(x_guess))):
            return 0.0
        n, nx = self.ocp.n, self.ocp.nx
        w_bar = self._initial_guess(None if self._w is not None else np.asarray(x_guess, dtype=float),
                                    predicted=True)
        p, _ = self.reference_parameters(w_bar[:n], w_bar[n:nx], reference, t)
        if not np.all(np.isfinite(p)):
            return time.perf_counter() - start
        self._rti.prepare(w_bar, p)
        elapsed = time.perf_counter() - start
        self._prepared = (reference, float(t), w_bar, p, elapsed)
        return elapsed

    def _solve_rti(self, x0, reference, t):
        """Feedback phase (after :meth:`prepare` for this ``reference`` and ``t``, else both phases now);
        the time limit applies to this call, the delay of the command."""
        start = time.perf_counter()
        prep, self._prepared = self._prepared, None
        if prep is None or prep[0] is not reference or abs(prep[1] - t) > 1e-9:
            self.prepare(reference, t, x0)
            prep, self._prepared = self._prepared, None
            if prep is None:
                return self._fallback(x0, "nonfinite_reference", time.perf_counter() - start)
            preparation = 0.0                                             # inside this call
        else:
            preparation = prep[4]
        try:
            w, K, solver_status, iters = self._rti_feedback(x0, prep)
        except RuntimeError as err:                                       # solver crash: fall back
            w, K, solver_status, iters = None, None, f"error: {err}", 0
        elapsed = time.perf_counter() - start
        if w is None or not np.all(np.isfinite(w)) or elapsed > self.config.time_limit:
            failed = w is None or not np.all(np.isfinite(w))
            reason = solver_status if failed else f"time limit ({elapsed * 1e3:.1f} ms)"
            return self._fallback(x0, reason, elapsed)
        if not np.all(np.isfinite(K)):
            return self._fallback(x0, "nonfinite gains", elapsed)
        self._w = w
        self._solution = self._make_solution(w, K, "rti", solver_status, preparation + elapsed, iters)
        self._solution.feedback_time = elapsed
        return self._solution

    def _make_solution(self, w, K, status, solver_status, elapsed, iters):
        X, U = self.ocp.unpack_numeric(w)
        N, nu, nx = self.ocp.N, self.ocp.nu, self.ocp.nx
        Ks = np.asarray(K).reshape(nu, N, nx).transpose(1, 0, 2) if K is not None else np.zeros((N, nu, nx))
        return MPCSolution(tau_ff=np.clip(U, -self.tau_max, self.tau_max), x_pred=X, K=Ks, status=status,
                           solver_status=solver_status, solve_time=elapsed, iterations=iters, dt=self.config.dt,
                           tau_max=self.tau_max, feedback_time=elapsed)

    def _fallback(self, x0, reason, elapsed):
        """The previous accepted solution shifted to now, else gravity compensation at the measured
        configuration (zero gains); never non-finite."""
        N, nu, nx = self.ocp.N, self.ocp.nu, self.ocp.nx
        prev = self._solution
        if prev is not None and prev.status in ("solved", "rti", "fallback_shifted"):
            sol = MPCSolution(tau_ff=np.vstack([prev.tau_ff[1:], prev.tau_ff[-1:]]),
                              x_pred=np.vstack([prev.x_pred[1:], prev.x_pred[-1:]]),
                              K=np.concatenate([prev.K[1:], prev.K[-1:]]), status="fallback_shifted",
                              solver_status=reason, solve_time=elapsed, dt=self.config.dt, tau_max=self.tau_max,
                              feedback_time=elapsed)
            self._w = self.ocp.pack_w(sol.x_pred, sol.tau_ff)
        else:
            xq = x0 if np.all(np.isfinite(x0)) else np.concatenate([
                np.nan_to_num(x0[:self.ocp.n], nan=0.0), np.zeros(self.ocp.n)])
            g = np.asarray(self.ocp.gravity(xq, self.theta)).reshape(-1)
            g = np.clip(np.nan_to_num(g, nan=0.0, posinf=0.0, neginf=0.0), -self.tau_max, self.tau_max)
            sol = MPCSolution(tau_ff=np.tile(g, (N, 1)), x_pred=np.tile(np.nan_to_num(xq), (N + 1, 1)),
                              K=np.zeros((N, nu, nx)), status="fallback_gravity", solver_status=reason,
                              solve_time=elapsed, dt=self.config.dt, tau_max=self.tau_max, feedback_time=elapsed)
            self._w = None
        self._solution = sol
        return sol

    # --------------------------------------------------------------------------------------- solvers
    def _build_nlp(self):
        ocp, cfg = self.ocp, self.config
        ng = ocp.nx * (ocp.N + 1)
        # a failed evaluation is a fallback with the solver's status (MPCSolution), not a line on stderr
        opts = {"print_time": False, "error_on_fail": False, "show_eval_warnings": False, "calc_lam_p": False,
                "equality": [True] * ng}
        if cfg.solver == "fatrop":
            opts.update({"structure_detection": "auto",
                         "fatrop": {"print_level": 0, "max_iter": cfg.max_iter, "tol": cfg.tol,
                                    "mu_init": cfg.mu_init}})
        else:
            opts.update({"ipopt": {"print_level": 0, "max_iter": cfg.max_iter, "tol": cfg.tol, "sb": "yes",
                                   "max_wall_time": cfg.time_limit, "hessian_constant": "yes"}})
        name = "mpc_" + cfg.solver
        if cfg.compiled:                          # generate the oracle's C, compile, load from the library
            key = "|".join(["mpc-nlp", cfg.solver, self.model.fingerprint(), problem_key(cfg)])
            path = compile_solver_dependencies(lambda: ca.nlpsol(name, cfg.solver, ocp.nlp, opts), key,
                                               label=f"{cfg.solver} NLP functions", link=(ocp.library,))
            solver = ca.nlpsol(name, cfg.solver, path, opts)
        else:
            solver = ca.nlpsol(name, cfg.solver, ocp.nlp, opts)
        self._nlp = solver

    def _nlp_solve(self, w0, p):
        ng = self.ocp.nx * (self.ocp.N + 1)
        args = dict(x0=w0, p=p, lbx=self.lbw, ubx=self.ubw, lbg=np.zeros(ng), ubg=np.zeros(ng))
        res = self._nlp(**args)
        stats = self.last_solver_stats = self._nlp.stats()
        if not stats.get("success", False):
            return None, str(stats.get("return_status", "failed")), int(stats.get("iter_count", 0))
        return np.asarray(res["x"]).reshape(-1), str(stats.get("return_status", "")), int(stats.get("iter_count", 0))

    def _bounded_qp_name(self):
        return "hpipm" if self.config.qp_solver == "riccati" else self.config.qp_solver

    def _qp_solver(self, name):
        """The conic solver ``name`` of the bounded RTI QP (built once)."""
        if name not in self._qp_solvers:
            ocp = self.ocp
            H_sparsity, A_sparsity = ocp.rti_prepare.sparsity_out(0), ocp.rti_prepare.sparsity_out(2)
            opts = {"error_on_fail": False, "print_time": False}
            if name == "hpipm":
                opts.update({"N": ocp.N, "nx": [ocp.nx] * (ocp.N + 1), "nu": [ocp.nu] * ocp.N + [0],
                             "ng": [0] * (ocp.N + 1), "hpipm": {"iter_max": 200}})
            elif name == "osqp":
                opts.update({"osqp": {"verbose": False, "eps_abs": 1e-6, "eps_rel": 1e-6, "max_iter": 4000}})
            elif name == "qrqp":
                opts.update({"print_iter": False, "print_header": False})
            self._qp_solvers[name] = ca.conic("mpc_qp", name, {"h": H_sparsity, "a": A_sparsity}, opts)
        return self._qp_solvers[name]

    def _rti_feedback(self, x0, prepared):
        """Gauss-Newton SQP steps (``sqp_iterations``, 1 for RTI) from the prepared linearisation: each a
        QP in Δw with the linearised shooting constraints and ``Δx_0 = x̂ - x̄_0``; full steps. With
        ``qp_solver='riccati'`` the rollout of the prepared Riccati factorisation, and the bounded QP
        (hpipm) only when that leaves a bound; else the bounded QP by ``qp_solver``. Further iterations
        relinearise at the new iterate. Returns ``(w, K, status, iterations)`` with ``w`` None when a QP
        failed; ``K`` (nu, nx N) the Riccati gains of the last linearisation."""
        ocp, cfg, rti = self.ocp, self.config, self._rti
        _, _, w_bar, p, _ = prepared
        status = ""
        for it in range(max(1, cfg.sqp_iterations)):
            if it > 0:
                w_bar = w
                rti.prepare(w_bar, p)
            if cfg.qp_solver == "riccati":
                w, violation = rti.feedback(x0, self.lbw, self.ubw)
                if violation <= 1e-9:
                    status = "riccati"
                    continue
            H, grad, Aqp, rhs = rti.qp()
            solver = self._qp_solver(self._bounded_qp_name())
            lbx, ubx = self.lbw - w_bar, self.ubw - w_bar
            lbx[:ocp.nx] = ubx[:ocp.nx] = x0 - w_bar[:ocp.nx]            # Δx_0 = x̂ - x̄_0
            res = solver(h=H, g=grad, a=Aqp, lba=rhs, uba=rhs, lbx=lbx, ubx=ubx)
            stats = solver.stats()
            status = str(stats.get("return_status", ""))
            if not stats.get("success", False):
                return None, None, status or "qp failed", it + 1
            w = w_bar + np.asarray(res["x"]).reshape(-1)
            w[:ocp.nx] = x0
        return w, rti.gains(), status, it + 1


class BackgroundController:
    """A :class:`ModelPredictiveController` built in a background thread (tracing, code generation and
    compilation take seconds from an empty cache), serving its safe fallback meanwhile: until
    :attr:`ready`, ``solve`` returns gravity compensation at the measured configuration with the current
    parameters (status ``fallback_gravity``, solver status ``building``; never non-finite). Parameters
    set before it is ready are applied when it is. A build that fails keeps the fallback and names the
    error in the solver status (:attr:`error`).

    ``solve``, ``prepare``, ``set_parameters``, ``set_inertial_parameters``, ``theta``, ``tau_max``,
    ``config`` and ``gravity(q)`` as the controller's."""

    def __init__(self, model, config=None, **options):
        import threading
        self.model = model
        self.config = config or MPCConfig(**options)
        self.tau_max = effort_bounds(model)
        self.theta = parameter_vector(model)
        self.controller = None
        self.error = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._build, name="mpc-build", daemon=True)
        self._thread.start()

    def _build(self):
        try:
            controller = ModelPredictiveController(self.model, self.config)
        except Exception as err:                                  # noqa: BLE001 - reported, fallback kept
            self.error = f"{type(err).__name__}: {err}"
            return
        with self._lock:
            controller.set_parameters(self.theta)
            self.controller = controller

    @property
    def ready(self):
        return self.controller is not None

    def wait(self, timeout=None):
        """Block until the build has finished (or ``timeout`` s); returns :attr:`ready`."""
        self._thread.join(timeout)
        return self.ready

    def set_parameters(self, theta):
        with self._lock:
            if self.controller is not None:
                self.controller.set_parameters(theta)
                self.theta = self.controller.theta
            else:
                theta = np.asarray(theta, dtype=float)
                if theta.shape != self.theta.shape or not np.all(np.isfinite(theta)):
                    raise ValueError(f"theta must be a finite ({self.theta.size},) vector")
                self.theta = theta.copy()

    def set_inertial_parameters(self, pi):
        theta = self.theta.copy()
        theta[:10 * self.model.nbodies] = pi
        self.set_parameters(theta)

    def gravity(self, q):
        """``g(q; π) + f_o`` (nv,) of the current parameters (the fallback torque)."""
        if self.controller is not None:
            x = np.concatenate([q, np.zeros_like(q)])
            return np.asarray(self.controller.ocp.gravity(x, self.controller.theta), dtype=float).reshape(-1)
        nb10, n = 10 * self.model.nbodies, self.model.nv
        zero = np.zeros(n)
        return np.asarray(rnea(self.model, np.asarray(q, dtype=float), zero, zero, pi=self.theta[:nb10]),
                          dtype=float).reshape(-1) + self.theta[nb10 + 2 * n:]

    def prepare(self, reference, t, x_guess=None):
        return self.controller.prepare(reference, t, x_guess) if self.controller is not None else 0.0

    def solve(self, q, v, reference, t=0.0):
        if self.controller is not None:
            return self.controller.solve(q, v, reference, t)
        N, n = self.config.horizon, self.model.nv
        q = np.nan_to_num(np.asarray(q, dtype=float))
        g = np.clip(np.nan_to_num(self.gravity(q), nan=0.0, posinf=0.0, neginf=0.0), -self.tau_max, self.tau_max)
        x = np.concatenate([q, np.zeros(n)])
        return MPCSolution(tau_ff=np.tile(g, (N, 1)), x_pred=np.tile(x, (N + 1, 1)), K=np.zeros((N, n, 2 * n)),
                           status="fallback_gravity", solver_status=f"build failed: {self.error}" if self.error
                           else "building", dt=self.config.dt, tau_max=self.tau_max)
