"""The MPC's optimal control problem transcribed by multiple shooting (Cărmizaru 2022, eq. 5.2):

    min  Σ_k ‖x_k - x_ref,k‖²_Q + ‖u_k - u_ref,k‖²_R + ‖x_N - x_ref,N‖²_{Q_N}
    s.t. x_0 = x̂ (measured),  x_{k+1} = F(x_k, u_k; θ),  x_lo <= x_k <= x_hi (k >= 1),  u_lo <= u_k <= u_hi

``F`` the RK4 step of :mod:`.stage`; ``u_ref,k`` the inverse dynamics of the reference, so ``R`` penalises
deviation from the torque the reference needs. The initial state, the reference and ``θ`` are NLP
parameters ``p = [x̂ (nx), X_ref (nx (N+1)), A_ref (nv N), θ]``: a new estimate changes the next solve,
nothing is rebuilt. Variables are ordered ``w = (x_0, u_0, x_1, ..., x_N)`` and constraints stage by stage,
so fatrop detects the OCP structure and hpipm gets it from ``N, nx, nu``.
"""
from __future__ import annotations

from typing import NamedTuple

import casadi as ca
import numpy as np

from .config import cost_weights
from .gauss_newton import gauss_newton_shooting
from .riccati import riccati_factor_function, riccati_feedback_function
from .stage import stage_functions


class ProblemParameters(NamedTuple):
    """The parts of ``p``: ``x0`` (nx,), ``X_ref`` (nx, N+1), ``A_ref`` (nv, N), ``theta``."""

    x0: object
    X_ref: object
    A_ref: object
    theta: object


class Preparation(NamedTuple):
    """Outputs of ``rti_prepare(w̄, p)``: the QP in the step Δw, ``H`` (nw, nw), ``grad`` ∇f (nw,), ``J`` the
    constraint rows ``[A_k B_k -I]`` (hpipm's layout; x_0 is fixed through the bounds), ``rhs`` (nx N,)
    their right-hand side ``x̄_{k+1} - F(x̄_k, ū_k)``; the stacked stage Jacobians ``A`` (nx, nx N), ``B``
    (nx, nu N) and the gaps ``b = F(x̄_k, ū_k) - x̄_{k+1}`` (nx N,): the inputs of ``riccati_factor``
    (:mod:`.riccati`), the rest of the preparation, a function of its own (compiled beside it)."""

    H: object
    grad: object
    J: object
    rhs: object
    A: object
    B: object
    b: object


class OCPFunctions:
    """The CasADi functions of the OCP for one model and :class:`~.config.MPCConfig`.

    Stage level: the :class:`~.stage.StageFunctions` as attributes. Problem level (MX over all stages,
    stage functions mapped): the NLP dict ``nlp`` (``x = w``, ``p``, ``f``, ``g``; the shooting map of
    :mod:`.gauss_newton`); the RTI's preparation phase ``rti_prepare(w, p)`` (outputs :class:`Preparation`)
    then ``riccati_factor(A, B, b, grad) -> (K, k)``; its feedback phase ``riccati_feedback`` (:mod:`.riccati`).
    Built on ``stage`` (default: traced by :func:`~.stage.stage_functions`); ``library``: the path of the
    compiled library the functions come from, else None (:mod:`.compile_cache`)."""

    def __init__(self, model, config, stage=None, library=None):
        n, N = model.nv, config.horizon
        if model.nq != model.nv:
            raise ValueError("the MPC handles fixed-base models with nq == nv")
        self.n, self.nx, self.nu, self.N = n, 2 * n, n, N
        self.ntheta = 10 * model.nbodies + 3 * n
        self.nw = (N + 1) * self.nx + N * self.nu
        self.np = self.nx + (N + 1) * self.nx + N * n + self.ntheta
        self.model, self.config = model, config
        self.weights = cost_weights(config, n)
        self.library = library
        for name, function in (stage or stage_functions(model, config))._asdict().items():
            setattr(self, name, function)
        self._problem_functions()

    # ------------------------------------------------------------------------------------------ layout
    def unpack_w(self, w):
        """``(X (nx, N+1), U (nu, N))`` from the stacked decision vector ``w`` (MX or numeric)."""
        nx, nu, N = self.nx, self.nu, self.N
        body = ca.reshape(w[:N * (nx + nu)], nx + nu, N)
        return ca.horzcat(body[:nx, :], w[N * (nx + nu):]), body[nx:, :]

    def unpack_numeric(self, w):
        """``(X (N+1, nx), U (N, nu))`` from a numeric ``w`` (nw,) (NumPy only, no CasADi types)."""
        nx, nu, N = self.nx, self.nu, self.N
        body = np.asarray(w, dtype=float)[:N * (nx + nu)].reshape(N, nx + nu)
        return np.vstack([body[:, :nx], w[N * (nx + nu):][None, :]]), body[:, nx:].copy()

    def pack_w(self, X, U):
        """Inverse of :meth:`unpack_w` for numeric ``X`` (N+1, nx) and ``U`` (N, nu)."""
        return np.concatenate([np.hstack([X[:-1], U]).reshape(-1), X[-1]])

    def split_p(self, p):
        """:class:`ProblemParameters` of ``p`` (MX)."""
        nx, n, N = self.nx, self.n, self.N
        o = nx + (N + 1) * nx
        return ProblemParameters(p[:nx], ca.reshape(p[nx:o], nx, N + 1), ca.reshape(p[o:o + N * n], n, N),
                                 p[o + N * n:])

    # ---------------------------------------------------------------------------------- problem level
    def stage_jacobians(self):
        """``step_linearized`` mapped over the N stages, on ``stage_threads`` threads when above 1
        (pthreads in the generated C, stages split evenly)."""
        threads = max(1, int(self.config.stage_threads))
        if threads > 1:
            return self.step_linearized.map(self.N, "thread", min(threads, self.N))
        return self.step_linearized.map(self.N)

    def transcription(self, shooting):
        """The NLP dict ``{x: w, p, f, g}`` of the OCP with the shooting map ``shooting(X (nx, N), U (nu, N),
        θ) -> X+ (nx, N)``: ``g = (x_0 - x̂, x_{k+1} - F(x_k, u_k) stage by stage)`` (fatrop's form)."""
        N = self.N
        w, p = ca.MX.sym("w", self.nw), ca.MX.sym("p", self.np)
        X, U = self.unpack_w(w)
        par = self.split_p(p)
        Q, R, Q_N = (ca.DM(d) for d in self.weights)
        U_ref = self.inverse_dynamics.map(N)(par.X_ref[:, :N], par.A_ref, ca.repmat(par.theta, 1, N))
        ex, eu, eN = X[:, :N] - par.X_ref[:, :N], U - U_ref, X[:, N] - par.X_ref[:, N]
        cost = ca.sum2(ca.sum1(Q * ex ** 2)) + ca.sum2(ca.sum1(R * eu ** 2)) + ca.sum1(Q_N * eN ** 2)
        gaps = X[:, 1:] - shooting(X[:, :N], U, par.theta)
        g = ca.vertcat(X[:, 0] - par.x0, ca.reshape(gaps, -1, 1))
        return {"x": w, "p": p, "f": cost, "g": g}

    def gauss_newton_hessian(self):
        """The diagonal of ``H = 2 diag(Q, R, ..., Q_N)`` (nw,), the Gauss-Newton Hessian of the cost."""
        Q, R, Q_N = self.weights
        return np.concatenate([np.concatenate([2 * Q, 2 * R])] * self.N + [2 * Q_N])

    def _problem_functions(self):
        nx, nu, N = self.nx, self.nu, self.N
        self.nlp = self.transcription(gauss_newton_shooting(self, self.stage_jacobians(), nx, nu, self.ntheta, N))
        w, p, cost = self.nlp["x"], self.nlp["p"], self.nlp["f"]
        X, U = self.unpack_w(w)
        th = self.split_p(p).theta
        self.riccati_factor = riccati_factor_function(nx, nu, N, self.weights)
        self.riccati_feedback = riccati_feedback_function(nx, nu, N)
        Xn, A, B = self.stage_jacobians()(X[:, :N], U, ca.repmat(th, 1, N))
        I = ca.MX.eye(nx)
        rows = []
        for k in range(N):
            left, right = ca.MX(nx, k * (nx + nu)), ca.MX(nx, self.nw - (k + 1) * (nx + nu) - nx)
            rows.append(ca.horzcat(left, A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu], -I, right))
        b = ca.reshape(Xn - X[:, 1:], -1, 1)                       # x_{k+1} = A Δx + B Δu + b_k + x̄_{k+1}
        grad = ca.gradient(cost, w)
        H = ca.MX(ca.DM(ca.Sparsity.diag(self.nw), self.gauss_newton_hessian()))
        prepared = Preparation(H=H, grad=grad, J=ca.vertcat(*rows), rhs=-b, A=A, B=B, b=b)
        self.rti_prepare = ca.Function("mpc_rti_prepare", [w, p], list(prepared), ["w", "p"], list(Preparation._fields))
