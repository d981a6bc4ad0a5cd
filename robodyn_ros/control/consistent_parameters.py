"""A physically consistent full parameter set for a base-parameter estimate, online.

An online estimate ``β̂`` (r,) with covariance ``P`` knows the directions the motion has excited and
little about the others; those can drift to values no rigid body has (an indefinite mass matrix, which
turns a computed-torque loop into positive feedback in that direction). Here ``β̂`` is mapped to the full
parameters ``π_full`` (10 nb + 4 nv,) closest to the nominal ones among physically consistent sets that
reproduce ``β̂`` where the data determines it (Wensing, Kim and Slotine 2017; log-Cholesky parametrisation
of each body's pseudo-inertia, Rucker and Wensing 2022, as in
:func:`robodyn_ros.identification.least_squares.consistent_fit`):

    min_θ  (K π(θ) - β̂)ᵀ P⁻¹ (K π(θ) - β̂) + λ ‖(π(θ) - π_nom) / s‖²,
    π(θ) = [π_body(θ_1), ..., π_body(θ_nb), armature, viscous, Coulomb, offset],  armature, viscous, Coulomb >= 0

(``s``: :func:`~robodyn_ros.identification.least_squares.parameter_scales`). IPOPT solves it with the base
parameters ``z`` as variables of their own:

    min_{θ, z}  (z - β̂)ᵀ P⁻¹ (z - β̂) + λ ‖(π(θ) - π_nom) / s‖²   s.t.  z = K π(θ),

the same minimiser. The Hessian of its Lagrangian is ``2 P⁻¹`` in ``z`` (the NLP parameter itself, the lower
triangle of ``P⁻¹``) and the bodies' 10 x 10 blocks in θ; written as one term of θ, ``‖Lᵀ(K π(θ) - β̂)‖²`` with
``L Lᵀ = P⁻¹`` (as the batch fit of :mod:`robodyn_ros.identification.least_squares` does), each Hessian would
carry ``L`` through ``K`` and the parametrisation's Jacobian, and IPOPT takes more iterations to a worse point
(docs/PERFORMANCE.md, "The consistent-parameter fit"). The NLP is built once with ``β̂`` and ``P⁻¹`` as NLP
parameters and warm-started from the previous solution: a new estimate is one IPOPT solve, nothing rebuilt. The
result serves every controller: ``K π`` (a consistent β) for the base-parameter laws, ``π`` and the friction as
the MPC's NLP parameters (:func:`robodyn_ros.control.mpc.parameter_vector` order ``[π, f_v, f_c, f_o]``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..identification.base_parameters import full_parameters, split_full_parameters
from ..identification.least_squares import _body_parameters_symbolic, _log_cholesky_start, parameter_scales


@dataclass(frozen=True)
class ConsistentEstimate:
    """``pi_full`` (10 nb + 4 nv,): consistent full parameters; ``beta`` (r,) = K pi_full; ``theta``: the MPC's
    NLP parameters ``[π, f_v, f_c, f_o]`` (10 nb + 3 nv,); ``solver``: IPOPT's status; ``success``."""

    pi_full: np.ndarray
    beta: np.ndarray
    theta: np.ndarray
    solver: str
    success: bool


class ConsistentParameters:
    """Consistent full parameters for base-parameter estimates (module docstring) of ``model`` (the nominal
    model: prior and structure) and its ``base``; ``regularization``: λ; ``max_iter``: IPOPT iterations."""

    def __init__(self, model, base, regularization=1.0, length=0.1, max_iter=100):
        import casadi as ca
        self.model, self.base = model, base
        nb, nv, r = model.nbodies, model.nv, base.count
        self.prior = full_parameters(model)
        theta = ca.SX.sym("theta", 10 * nb)
        joint = ca.SX.sym("joint", 4 * nv)
        z = ca.SX.sym("z", r)
        pi = ca.vertcat(*[_body_parameters_symbolic(ca, theta[10 * b:10 * b + 10]) for b in range(nb)], joint)
        beta_hat, w_lower = ca.SX.sym("beta_hat", r), ca.SX.sym("P_inv", r * (r + 1) // 2)
        W = ca.SX(ca.Sparsity.lower(r), w_lower)                   # P⁻¹'s lower triangle, column by column
        e = z - beta_hat
        data = 2.0 * ca.dot(e, ca.mtimes(W, e)) - ca.dot(e, ca.diag(W) * e)     # eᵀ P⁻¹ e
        deviation = (pi - ca.DM(self.prior)) / ca.DM(parameter_scales(model, length))
        x = ca.vertcat(theta, joint, z)
        self._solver = ca.nlpsol("consistent_parameters", "ipopt",
                                 {"x": x, "p": ca.vertcat(beta_hat, w_lower),
                                  "f": data + regularization * ca.sumsqr(deviation),
                                  "g": z - ca.mtimes(ca.DM(base.K), pi)},
                                 {"ipopt.print_level": 0, "print_time": False, "ipopt.max_iter": max_iter,
                                  "ipopt.tol": 1e-10, "ipopt.acceptable_tol": 1e-7, "ipopt.sb": "yes",
                                  # a failed solve (Inf, NaN) is IPOPT's status, not lines on stderr
                                  "show_eval_warnings": False, "calc_lam_p": False})
        self._pi_of_x = ca.Function("pi_of_x", [x], [pi])
        self._upper = np.triu_indices(r)          # P⁻¹[upper] = its lower triangle column by column (symmetric)
        n = 10 * nb + 4 * nv
        self._lower = np.full(n + r, -np.inf)
        self._nonnegative = 10 * nb + np.concatenate([4 * np.arange(nv), 4 * np.arange(nv) + 1, 4 * np.arange(nv) + 2])
        self._lower[self._nonnegative] = 0.0
        start_joint = self.prior[10 * nb:].copy()
        start_joint[self._nonnegative - 10 * nb] = np.maximum(start_joint[self._nonnegative - 10 * nb], 0.0)
        start = np.concatenate([np.concatenate([_log_cholesky_start(model.inertias[b]) for b in range(nb)]),
                                start_joint, np.zeros(r)])
        start[n:] = base.K @ np.asarray(self._pi_of_x(start), dtype=float).reshape(-1)
        self._x0 = self._start = start
        self.solves = 0

    def fit(self, beta_hat, P):
        """:class:`ConsistentEstimate` for the estimate ``beta_hat`` (r,) with covariance ``P`` (r, r): IPOPT from
        the previous solution, and once more from the nominal parameters when that fails (a start at the minimiser
        of a very precise estimate can leave IPOPT's step computation nothing to work with)."""
        P = 0.5 * (np.asarray(P, dtype=float) + np.asarray(P, dtype=float).T)
        w, V = np.linalg.eigh(P)
        P_inv = (V / np.maximum(w, 1e-12 * max(w.max(), 1e-300))) @ V.T
        p = np.concatenate([np.asarray(beta_hat, dtype=float), P_inv[self._upper]])
        status, x, pi_full = self._solve(self._x0, p)
        if not self._succeeded(status, pi_full) and self._x0 is not self._start:
            status, x, pi_full = self._solve(self._start, p)
        success = self._succeeded(status, pi_full)
        if success:
            self._x0 = x                # warm start of the next solve
        self.solves += 1
        pi, _, viscous, coulomb, offset = split_full_parameters(self.model, pi_full)
        return ConsistentEstimate(pi_full=pi_full, beta=self.base.from_full(pi_full),
                                  theta=np.concatenate([pi, viscous, coulomb, offset]), solver=status,
                                  success=success)

    def _solve(self, x0, p):
        """IPOPT from ``x0`` with the NLP parameters ``p``: its status, the solution and its full parameters."""
        sol = self._solver(x0=x0, p=p, lbx=self._lower, ubx=np.full_like(self._lower, np.inf), lbg=0.0, ubg=0.0)
        x = np.asarray(sol["x"], dtype=float).reshape(-1)
        pi_full = np.asarray(self._pi_of_x(x), dtype=float).reshape(-1)
        pi_full[self._nonnegative] = np.maximum(pi_full[self._nonnegative], 0.0)
        return str(self._solver.stats()["return_status"]), x, pi_full

    @staticmethod
    def _succeeded(status, pi_full):
        return (status in ("Solve_Succeeded", "Solved_To_Acceptable_Level", "Maximum_Iterations_Exceeded")
                and bool(np.all(np.isfinite(pi_full))))
