"""Batch identification of the base parameters: weighted least squares over many samples, and a
physically consistent fit of the full parameters.

Weighted least squares (Gautier & Poignet 2001, "Extended Kalman filtering and weighted least squares
dynamic identification of robot"): the samples of joint j have their own noise variance ``σ_j²``, so

    beta_hat = argmin  Σ_j ||Y_j beta - tau_j||² / σ_j²,      σ_j² = ||Y_j beta_hat - tau_j||² / (N - r / nv)

iterated from equal weights; ``cov(beta_hat) = (Σ_j Y_j^T Y_j / σ_j²)^-1``. The N samples are never
stacked: each joint keeps the R factor of ``[Y_j, tau_j]`` (r + 1 columns), updated chunk by chunk by QR
of ``[R_j; chunk]`` (a "tall-skinny QR"), which is as accurate as a QR of the whole stack and needs
``nv (r + 1)²`` numbers whatever N. Every weighted problem is then one QR of the stacked
``sqrt(w_j) R_j``.

Physically consistent fit (Wensing, Kim & Slotine 2017; log-Cholesky parametrisation of Rucker &
Wensing 2022, "Smooth parameterization of rigid-body inertia"): per body the pseudo-inertia
``J = [[Σ, h], [h^T, m]] = U U^T`` with ``U`` upper triangular with positive (exponential) diagonal, so
``J ≻ 0`` (positive mass, triangle inequalities) holds by construction; armature, viscous and Coulomb
coefficients are bounded below by zero. The fit minimises

    ||R_w (K pi(θ) - beta_hat)||² + λ Σ_i ((pi_i(θ) - pi_urdf,i) / s_i)²

with ``R_w`` the weighted R factor (so the first term is the increase of the noise-normalised residual
sum of squares over the least-squares optimum, a chi-square) and ``λ = 1``: a deviation from the URDF of
one scale unit ``s_i`` (the body's mass, mass x 0.1 m, mass x (0.1 m)²) costs as much as one standard
deviation of misfit, so the directions the data determine (thousands of samples) follow the data and the
directions the data say nothing about (the null space of K) stay at the URDF. On the real Panda data
(Gaz et al.) λ from 1e-4 to 1 changes the held-out torque error by less than 0.01 % but keeps the
unidentifiable masses plausible (link 2: 24 kg at 1e-4, 1.3 kg at 1; URDF 0.65 kg). Solved with CasADi
+ IPOPT.

Strict feasibility (margin). ``J ≻ 0`` alone lets the optimum sit on the boundary of the feasible set:
on the real Panda data every link came out singular, 6 of 7 as line masses (principal moments
``[0, I, I]``). The fit therefore keeps every body inside the set by a margin ε on the length-scaled
pseudo-inertia ``J̃ = D J D``, ``D = diag(1/ℓ, 1/ℓ, 1/ℓ, 1)``, ``ℓ = 0.1 m`` (a kilogram-valued matrix):

    λ_min(J̃) >= ε tr(J̃),    ε = INERTIA_MARGIN = 1e-3,

built into the variables, ``J̃ = U Uᵀ + ε / (1 - 4ε) ‖U‖_F² 1`` (every U satisfies it, and every J̃
satisfying it is reached by ``U Uᵀ = J̃ - ε tr(J̃) 1``). Since ``J̃ ⪰ δ 1`` implies that the Schur
complement ``Σ_c = Σ - h hᵀ / m ⪰ δ ℓ² 1`` with ``δ >= ε m``, every body's second moment about its
COM along any axis is at least ``ε m ℓ²``: an rms thickness of at least ``ℓ √ε = 3.2 mm``, and every
principal moment at the COM at least ``2 ε m ℓ² = 2e-5 m`` kg m². Why 1e-3: no real link (a tube or
shell of several centimetres) is thinner than that, so the margin never binds a plausible body, while it
excludes the line and plane masses; on the real Panda (fit on the first 70 %, validated on the last
30 %) it costs 0.001 percentage points of held-out torque error (ε = 1e-2, an rms thickness of 1 cm,
costs 0.009). ``margin=0`` gives the plain log-Cholesky fit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..model.errors import ModelError
from .base_parameters import full_parameters

INERTIA_MARGIN = 1e-3
"""ε of the strict-feasibility margin ``λ_min(D J D) >= ε tr(D J D)`` (module docstring)."""
MARGIN_LENGTH = 0.1
"""ℓ (m) of ``D = diag(1/ℓ, 1/ℓ, 1/ℓ, 1)``."""


class InsufficientExcitation(ModelError):
    """The regressor of the data is (numerically) rank deficient: some base parameters are not excited."""


class RegressorAccumulator:
    """Per-joint R factors of ``[Y_j, tau_j]`` (module docstring), fed chunk by chunk.

    nv: joints; r: base parameters. ``add(Y (N, nv, r), tau (N, nv))``.
    """

    def __init__(self, nv, r):
        self.nv, self.r = int(nv), int(r)
        self.R = [np.zeros((0, r + 1)) for _ in range(nv)]
        self.samples = 0

    def add(self, Y, tau):
        Y, tau = np.asarray(Y, dtype=float), np.asarray(tau, dtype=float)
        if Y.ndim != 3 or Y.shape[1:] != (self.nv, self.r) or tau.shape != Y.shape[:2]:
            raise ValueError(f"Y {Y.shape} and tau {tau.shape} do not match (N, {self.nv}, {self.r}) and (N, {self.nv})")
        for j in range(self.nv):
            block = np.vstack([self.R[j], np.column_stack([Y[:, j, :], tau[:, j]])])
            self.R[j] = np.linalg.qr(block, mode="r")
        self.samples += Y.shape[0]

    def joint_residuals(self, beta):
        """``||Y_j beta - tau_j||²`` per joint (nv,)."""
        x = np.append(beta, -1.0)
        return np.array([float(np.sum((Rj @ x) ** 2)) for Rj in self.R])

    def joint_torque_norms(self):
        """``||tau_j||²`` per joint (nv,)."""
        return self.joint_residuals(np.zeros(self.r))

    def weighted_factor(self, weights):
        """Upper-triangular ``R_w`` (r + 1, r + 1) of ``[Y, tau]`` stacked with row weights sqrt(w_j)."""
        stacked = np.vstack([np.sqrt(w) * Rj for w, Rj in zip(weights, self.R)])
        R = np.linalg.qr(stacked, mode="r")
        if R.shape[0] < self.r + 1:
            R = np.vstack([R, np.zeros((self.r + 1 - R.shape[0], self.r + 1))])
        return R


@dataclass(frozen=True)
class LeastSquaresFit:
    """Result of :func:`weighted_least_squares`.

    beta: (r,) base parameters; std: (r,) standard deviations; cov: (r, r); weights: (nv,) 1/σ_j²;
    sigma: (nv,) per-joint residual standard deviations (N·m); R_w: (r, r) weighted R factor
    (``cov = (R_w^T R_w)^-1``); condition_number: of the unweighted stacked base regressor;
    relative_error: ||tau - Y beta|| / ||tau|| over all samples; samples: N.
    """

    beta: np.ndarray
    std: np.ndarray
    cov: np.ndarray
    weights: np.ndarray
    sigma: np.ndarray
    R_w: np.ndarray
    condition_number: float
    relative_error: float
    samples: int


def _short(name, width=48):
    return name if len(name) <= width else name[:width - 4] + " ..."


def _check_excitation(R, names, threshold):
    """Raise InsufficientExcitation when the column-scaled R (r, r) has a singular value below
    ``threshold`` times its largest, naming the base parameters of the least excited direction."""
    norms = np.linalg.norm(R, axis=0)
    dead = np.flatnonzero(norms <= 1e-300)
    if dead.size:
        listed = "; ".join(_short(names[i]) for i in dead[:3]) if names else str(dead[:3].tolist())
        listed += "; ..." if dead.size > 3 else ""
        raise InsufficientExcitation(f"too little excitation: the data never excite {dead.size} base parameter(s) "
                                     f"({listed}); the regressor is rank deficient. Record a richer (exciting) "
                                     f"trajectory: every joint moving in both directions with varying acceleration")
    _, s, Vt = np.linalg.svd(R / norms)
    if s[-1] < threshold * s[0]:
        worst = np.argsort(-np.abs(Vt[-1]))[:4]
        listed = "; ".join(_short(names[i]) for i in worst) if names else str(worst.tolist())
        raise InsufficientExcitation(
            f"too little excitation: the regressor is rank deficient (scaled condition number {s[0] / s[-1]:.3g}); "
            f"the data cannot separate {listed}. Record a richer (exciting) trajectory")


def weighted_least_squares(acc, iterations=3, names=None, rank_threshold=1e-9):
    """Iteratively reweighted LS over the accumulated samples (module docstring). Returns
    :class:`LeastSquaresFit`; raises :class:`InsufficientExcitation` when the data do not excite all
    base parameters."""
    r, nv, N = acc.r, acc.nv, acc.samples
    if N * nv <= r:
        raise InsufficientExcitation(f"too little data: {N} samples of {nv} joints for {r} base parameters")
    weights = np.ones(nv)
    R1 = acc.weighted_factor(weights)
    _check_excitation(R1[:r, :r], names, rank_threshold)
    condition = float(np.linalg.cond(R1[:r, :r]))
    for _ in range(iterations):
        R = acc.weighted_factor(weights)
        beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r])
        sigma2 = np.maximum(acc.joint_residuals(beta) / max(N - r / nv, 1.0), 1e-300)
        weights = 1.0 / sigma2
    R = acc.weighted_factor(weights)
    beta = scipy.linalg.solve_triangular(R[:r, :r], R[:r, r])
    Rinv = scipy.linalg.solve_triangular(R[:r, :r], np.eye(r))
    cov = Rinv @ Rinv.T
    residual = acc.joint_residuals(beta)
    relative = float(np.sqrt(residual.sum() / max(acc.joint_torque_norms().sum(), 1e-300)))
    return LeastSquaresFit(beta=beta, std=np.sqrt(np.diag(cov)), cov=cov, weights=weights,
                           sigma=np.sqrt(residual / max(N - r / nv, 1.0)), R_w=R[:r, :r],
                           condition_number=condition, relative_error=relative, samples=N)


# ---------------------------------------------------------------------------------- consistent fit
def pseudo_inertia_upper_factor(J):
    """Upper-triangular U (4, 4) with ``U U^T = J`` for a positive definite J (4, 4)."""
    P = np.eye(4)[::-1]
    L = np.linalg.cholesky(P @ J @ P)
    return P @ L @ P


def _log_cholesky_start(pi_b, margin=0.0, length=0.1, eps=1e-6):
    """θ (10,) of the parametrisation of :func:`_body_parameters_symbolic` closest to body parameters
    pi_b (10,): ``P = J̃ - δ 1`` clipped to eigenvalues ``>= eps m`` and factored ``P = U Uᵀ``."""
    from .physical_consistency import pseudo_inertia
    m_scale = max(abs(pi_b[0]), 1e-2)
    d = np.array([1.0 / length] * 3 + [1.0])
    Jt = d[:, None] * pseudo_inertia(pi_b) * d[None, :]
    P = Jt - margin * np.trace(Jt) * np.eye(4)
    lam, V = np.linalg.eigh(P)
    U = pseudo_inertia_upper_factor((V * np.maximum(lam, eps * m_scale)) @ V.T)
    return np.array([np.log(U[0, 0]), U[0, 1], U[0, 2], U[0, 3], np.log(U[1, 1]), U[1, 2], U[1, 3],
                     np.log(U[2, 2]), U[2, 3], np.log(U[3, 3])])


def _body_parameters_symbolic(ca, theta, margin=0.0, length=0.1):
    """Body parameters (10,) of the variables θ (10,) as CasADi SX:
    ``U = [[e^θ0, θ1, θ2, θ3], [0, e^θ4, θ5, θ6], [0, 0, e^θ7, θ8], [0, 0, 0, e^θ9]]``,
    ``J̃ = U Uᵀ + ε / (1 - 4ε) ‖U‖_F² 1`` (the length-scaled pseudo-inertia ``D J D``,
    ``D = diag(1/ℓ, 1/ℓ, 1/ℓ, 1)``), ``m = J̃_33, h = ℓ J̃_0:3,3, Σ = ℓ² J̃_0:3,0:3, I = tr(Σ) 1 - Σ``.

    Every θ gives ``λ_min(J̃) >= ε tr(J̃)`` and every J̃ with that margin has such a θ (module
    docstring), so the margin is a change of variables, not a constraint; ε = 0 is the log-Cholesky
    parametrisation of Rucker and Wensing (2022)."""
    U = ca.SX.zeros(4, 4)
    U[0, 0], U[0, 1], U[0, 2], U[0, 3] = ca.exp(theta[0]), theta[1], theta[2], theta[3]
    U[1, 1], U[1, 2], U[1, 3] = ca.exp(theta[4]), theta[5], theta[6]
    U[2, 2], U[2, 3] = ca.exp(theta[7]), theta[8]
    U[3, 3] = ca.exp(theta[9])
    J = ca.mtimes(U, U.T)
    if margin > 0.0:
        J = J + (margin / (1.0 - 4.0 * margin)) * ca.sumsqr(U) * ca.SX.eye(4)
    S = J[0:3, 0:3] * length ** 2
    h = J[0:3, 3] * length
    tr = S[0, 0] + S[1, 1] + S[2, 2]
    return ca.vertcat(J[3, 3], h[0], h[1], h[2], tr - S[0, 0], -S[0, 1], tr - S[1, 1], -S[0, 2],
                      -S[1, 2], tr - S[2, 2])


def parameter_scales(model, length=0.1):
    """Scales s (10 nb + 4 nv,) of the full parameters for the regulariser: mass m_s = max(m, 0.1 kg),
    first moments m_s l, inertias m_s l², armature 0.01 kg m², friction 1 (N·m, N·m·s)."""
    s = []
    for pi_b in model.inertias:
        ms = max(pi_b[0], 0.1)
        s += [ms] + [ms * length] * 3 + [ms * length ** 2] * 6
    return np.array(s + [0.01, 1.0, 1.0, 1.0] * model.nv)


@dataclass(frozen=True)
class ConsistentFit:
    """pi_full: (10 nb + 4 nv,) physically consistent parameters; beta: K pi_full; chi2_increase: the data
    term at the optimum (0 when the least-squares estimate is itself consistent); solver: IPOPT status;
    margin, length: ε and ℓ of the pseudo-inertia margin the bodies satisfy."""

    pi_full: np.ndarray
    beta: np.ndarray
    chi2_increase: float
    solver: str
    margin: float = 0.0
    length: float = MARGIN_LENGTH


def consistent_fit(model, base, fit, regularization=1.0, length=MARGIN_LENGTH, max_iter=300, margin=INERTIA_MARGIN):
    """Physically consistent full parameters whose base parameters match ``fit.beta``, every body's
    pseudo-inertia positive definite with the margin ``λ_min(D J D) >= margin tr(D J D)`` (module docstring).

    model: gives the URDF prior and the parameter count; base: :class:`BaseParameters`;
    fit: :class:`LeastSquaresFit`. Returns :class:`ConsistentFit`.
    """
    import casadi as ca
    nb, nv = model.nbodies, model.nv
    prior = full_parameters(model)
    scales = parameter_scales(model, length)
    theta = ca.SX.sym("theta", 10 * nb)
    joint = ca.SX.sym("joint", 4 * nv)
    pi = ca.vertcat(*[_body_parameters_symbolic(ca, theta[10 * b:10 * b + 10], margin, length) for b in range(nb)], joint)
    residual = ca.mtimes(ca.DM(fit.R_w), ca.mtimes(ca.DM(base.K), pi) - ca.DM(fit.beta))
    deviation = (pi - ca.DM(prior)) / ca.DM(scales)
    objective = ca.sumsqr(residual) + regularization * ca.sumsqr(deviation)
    x = ca.vertcat(theta, joint)
    lower = np.full(10 * nb + 4 * nv, -np.inf)
    nonnegative = 10 * nb + np.concatenate([4 * np.arange(nv), 4 * np.arange(nv) + 1, 4 * np.arange(nv) + 2])
    lower[nonnegative] = 0.0
    start_joint = prior[10 * nb:].copy()
    start_joint[nonnegative - 10 * nb] = np.maximum(start_joint[nonnegative - 10 * nb], 0.0)
    x0 = np.concatenate([np.concatenate([_log_cholesky_start(model.inertias[b], margin, length) for b in range(nb)]),
                         start_joint])
    solver = ca.nlpsol("consistent_fit", "ipopt", {"x": x, "f": objective},
                       {"ipopt.print_level": 0, "print_time": False, "ipopt.max_iter": max_iter,
                        "ipopt.tol": 1e-12, "ipopt.acceptable_tol": 1e-9, "ipopt.sb": "yes",
                        "show_eval_warnings": False, "calc_lam_p": False})
    sol = solver(x0=x0, lbx=lower, ubx=np.full_like(lower, np.inf))
    pi_of_x = ca.Function("pi_of_x", [x], [pi, ca.sumsqr(residual)])
    pi_opt, chi2 = pi_of_x(sol["x"])
    pi_opt = np.asarray(pi_opt, dtype=float).reshape(-1)
    pi_opt[nonnegative] = np.maximum(pi_opt[nonnegative], 0.0)  # IPOPT relaxes bounds by ~1e-8
    return ConsistentFit(pi_full=pi_opt, beta=base.from_full(pi_opt), chi2_increase=float(chi2),
                         solver=str(solver.stats()["return_status"]), margin=float(margin), length=float(length))


