"""Periodic exciting trajectories for identification: finite Fourier series (Swevers et al. 1997,
"Optimal robot excitation and identification", IEEE T-RA 13(5); Gautier & Khalil 1992).

Joint j follows (Swevers' eq. for q_i(t), with a fundamental pulsation w_f = 2 pi / T):

    q_j(t) = q0_j + sum_{k=1..K} a_jk / (w_f k) sin(w_f k t) - b_jk / (w_f k) cos(w_f k t)
    v_j(t) = sum_k a_jk cos(w_f k t) + b_jk sin(w_f k t)

so every derivative is analytic: d^r/dt^r sin(x) = sin(x + r pi/2). The trajectory is T-periodic
(q, v, a, jerk, snap all repeat), so a measurement can be averaged over periods, and its spectrum is
known: K lines at multiples of 1/T, which the low-pass filter's cutoff must keep.

`design_exciting_trajectory` chooses the coefficients x = [q0, a, b] (n + 2 n K numbers). Position,
velocity and acceleration are LINEAR in x, so their limits on a dense time grid are linear inequality
constraints; the optional torque limit is a nonlinear constraint through the caller's tau_check, and an
optional configuration constraint (clearance to the floor and between links,
:mod:`robodyn_ros.identification.collision_clearance`) is another, with its gradient. The problem is
solved with SLSQP from a seeded random start scaled into the feasible set, so the result is
deterministic given the seed. SLSQP's subproblem grows with the rows it is given, and most rows of a grid are far
from their bounds: it is given the working set of the rows (those near their bounds and the local minima of every
row's series in time), grown wherever an iterate breaks a row left out (`_optimise`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from robodyn_ros.model.errors import ModelError

from .excitation_constraints import (ClearanceConstraints, LimitConstraints, motionless_anchor, restricted,
                                     shrink_until_feasible, working_set)


@dataclass(frozen=True)
class DesignReport:
    """How the design went: costs at the start and end, SLSQP's verdict, wall time, and the factor by
    which the oscillation was finally shrunk to satisfy the limits on the dense check grid (1 = none)."""

    initial_cost: float
    final_cost: float
    iterations: int
    seconds: float
    success: bool
    message: str
    final_scale: float = 1.0


@dataclass(frozen=True, eq=False)
class FourierTrajectory:
    """Finite Fourier series trajectory of n joints with K harmonics of period T (module docstring).

    q0: (n,) offsets; a, b: (n, K) coefficients of harmonic k = 1..K (columns); period: T (s).
    """

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    period: float
    design_report: DesignReport | None = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "q0", np.asarray(self.q0, dtype=np.float64).reshape(-1))
        n = self.q0.size
        object.__setattr__(self, "a", np.asarray(self.a, dtype=np.float64).reshape(n, -1))
        object.__setattr__(self, "b", np.asarray(self.b, dtype=np.float64).reshape(n, -1))
        if self.a.shape != self.b.shape or not self.period > 0:
            raise ModelError(f"a {self.a.shape} and b {self.b.shape} must match and period > 0")

    @property
    def n_joints(self) -> int:
        return self.q0.size

    @property
    def harmonics(self) -> int:
        return self.a.shape[1]

    @property
    def omega_f(self) -> float:
        """Fundamental pulsation w_f = 2 pi / T (rad/s)."""
        return 2.0 * np.pi / self.period

    def derivatives(self, t, order: int) -> np.ndarray:
        """d^order q / dt^order at t: (n,) for scalar t, (N, n) for t of shape (N,). order 0..4 and beyond."""
        if order < 0:
            raise ModelError(f"order={order} must be >= 0")
        t = np.asarray(t, dtype=np.float64)
        sin_part, cos_part = _harmonic_basis(np.atleast_1d(t), self.harmonics, self.omega_f, order)
        value = sin_part @ self.a.T - cos_part @ self.b.T
        if order == 0:
            value = value + self.q0
        return value[0] if t.ndim == 0 else value

    def evaluate(self, t):
        """(q, v, a) at t, each (n,) for scalar t or (N, n) for t (N,): :meth:`derivatives` of orders 0, 1, 2
        (:func:`fourier_qva`)."""
        return fourier_qva(np.asarray(t, dtype=np.float64), self.omega_f * np.arange(1, self.harmonics + 1),
                           self.a.T, self.b.T, self.q0)

    def sample(self, dt: float, periods: int = 1):
        """Uniform samples over ``periods`` periods: t (N,), q, v, a (N, n), t[-1] < periods * T."""
        t = np.arange(0.0, periods * self.period - 0.5 * dt, dt)
        return (t, *self.evaluate(t))

    def to_dict(self) -> dict:
        return {"period": float(self.period), "q0": self.q0.tolist(), "a": self.a.tolist(), "b": self.b.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> FourierTrajectory:
        return cls(q0=data["q0"], a=data["a"], b=data["b"], period=data["period"])


def fourier_qva(t, w, aT, bT, q0):
    """``(q, v, a)`` of the Fourier series (module docstring) from one sine and one cosine per harmonic (the
    derivatives of orders 0, 1, 2 with sin(x + π/2) = cos x, cos(x + π/2) = -sin x): with s_k = sin(w_k t),
    c_k = cos(w_k t),

        q = Σ_k (s_k a_k - c_k b_k) / w_k + q0,   q̇ = Σ_k c_k a_k + s_k b_k,   q̈ = Σ_k w_k (c_k b_k - s_k a_k).

    ``t``: a time, (n,) results, or times (N,), (N, n) results; ``w`` (K,) the harmonics' pulsations; ``aT``,
    ``bT`` (K, n) the coefficients transposed (``bT`` None: all zero); ``q0`` (n,)."""
    angle = np.multiply.outer(t, w)
    s, c = np.sin(angle), np.cos(angle)
    q = (s / w) @ aT + q0
    v = c @ aT
    a = -(s * w) @ aT
    if bT is not None:
        q = q - (c / w) @ bT
        v = v + s @ bT
        a = a + (c * w) @ bT
    return q, v, a


def _harmonic_basis(t: np.ndarray, harmonics: int, omega_f: float, order: int):
    """(N, K) matrices S, C with d^r q/dt^r = S a^T - C b^T (+ q0 for r = 0):
    S_ik = (w_f k)^(r-1) sin(w_f k t_i + r pi/2), C_ik = (w_f k)^(r-1) cos(w_f k t_i + r pi/2)."""
    w = omega_f * np.arange(1, harmonics + 1)
    angle = np.outer(t, w) + order * np.pi / 2
    scale = w ** (order - 1)
    return np.sin(angle) * scale, np.cos(angle) * scale


# --------------------------------------------------------------------------------------------------
# Design
# --------------------------------------------------------------------------------------------------


class _Coefficients:
    """x = [q0 (n), a^T.ravel() (K*n), b^T.ravel() (K*n)] and the linear maps x -> q^(r) on a grid."""

    def __init__(self, n: int, harmonics: int, period: float):
        self.n, self.K, self.period = n, harmonics, period
        self.omega_f = 2.0 * np.pi / period
        self.size = n + 2 * n * harmonics

    def trajectory(self, x: np.ndarray, report: DesignReport | None = None) -> FourierTrajectory:
        n, K = self.n, self.K
        a = x[n:n + n * K].reshape(K, n).T
        b = x[n + n * K:].reshape(K, n).T
        return FourierTrajectory(q0=x[:n].copy(), a=a, b=b, period=self.period, design_report=report)

    def pack(self, q0, a, b) -> np.ndarray:
        return np.concatenate([q0, a.T.ravel(), b.T.ravel()])

    def linear_map(self, t: np.ndarray, order: int) -> np.ndarray:
        """G (N*n, size) with q^(order)(t).ravel() = G x (rows ordered sample-major)."""
        sin_part, cos_part = _harmonic_basis(t, self.K, self.omega_f, order)
        eye = np.eye(self.n)
        offset = np.kron(np.ones((len(t), 1)), eye) if order == 0 else np.zeros((len(t) * self.n, self.n))
        return np.hstack([offset, np.kron(sin_part, eye), -np.kron(cos_part, eye)])


def _per_joint(value, n: int, label: str) -> np.ndarray:
    array = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).copy()
    if not np.all(np.isfinite(array)):
        raise ModelError(f"{label} must be finite")
    return array


def _excitation_cost(coefficients: _Coefficients, grid: np.ndarray, scales: np.ndarray):
    """Default cost: -sum_j log det(Phi_j^T Phi_j / N + 1e-9 I), Phi_j (N, 3) = [(q_j - q0_j) / r_j,
    v_j / v_max_j, a_j / a_scale_j] on the grid: a D-optimal design of each joint's own signals. It rewards
    large amplitudes of position, velocity and acceleration of every joint (the log keeps one joint from
    being sacrificed to another) and decorrelates them (one harmonic alone gives a_j = -(w k)^2 (q_j - q0_j),
    a singular Phi_j), which separates inertial from gravity and friction terms. Cross-joint
    decorrelation is not sought: all joints share the 2K functions sin/cos(w_f k t), so more than 2K
    linear signals are always dependent; the regressor's nonlinearity (sin q, v_i v_j) is what separates
    joints, which a model-based ``cost`` captures. Returns cost(x) -> (value, exact gradient)."""
    n, N = coefficients.n, len(grid)
    maps = [coefficients.linear_map(grid, r).reshape(N, n, -1) for r in range(3)]
    maps[0][:, :, :n] = 0.0  # q - q0
    # L[j] maps x to Phi_j.ravel() (N*3,)
    L = np.stack(maps, axis=2) / scales.reshape(3, n).T[None, :, :, None]  # (N, n, 3, size)
    L = np.moveaxis(L, 1, 0).reshape(n, N * 3, -1)

    def cost(x):
        phi = (L @ x).reshape(n, N, 3)
        information = np.einsum("jnr,jns->jrs", phi, phi) / N + 1e-9 * np.eye(3)
        value = -np.sum(np.linalg.slogdet(information)[1])
        d_phi = -(2.0 / N) * np.einsum("jnr,jrs->jns", phi, np.linalg.inv(information))
        gradient = np.einsum("jm,jmp->p", d_phi.reshape(n, N * 3), L)
        return value, gradient

    return cost


def _equality_constraints(coefficients: _Coefficients, start_at_rest: bool, q_start):
    """Rows E, e with E x = e: v(0) = 0 and a(0) = 0 when start_at_rest; q(0) = q_start when given."""
    zero = np.zeros(1)
    rows, values = [], []
    if start_at_rest:
        rows += [coefficients.linear_map(zero, 1), coefficients.linear_map(zero, 2)]
        values += [np.zeros(coefficients.n), np.zeros(coefficients.n)]
    if q_start is not None:
        rows.append(coefficients.linear_map(zero, 0))
        values.append(q_start)
    if not rows:
        return None, None
    return np.vstack(rows), np.concatenate(values)


def _initial_guess(coefficients, rng, center, E, e, anchor_q, within_limits: Callable[[np.ndarray], bool],
                   clear: Callable[[np.ndarray], bool]):
    """Seeded random coefficients with a 1/k spectrum, projected on E x = e, shrunk until feasible (within
    the limits and clear); ModelError saying which of the two even a tiny motion breaks."""
    n, K = coefficients.n, coefficients.K
    decay = 1.0 / np.arange(1, K + 1)
    a = rng.normal(size=(n, K)) * decay
    b = rng.normal(size=(n, K)) * decay
    x = coefficients.pack(center, a, b)
    if E is not None:
        x = x + np.linalg.lstsq(E, e - E @ x, rcond=None)[0]
    anchor = motionless_anchor(coefficients, x, anchor_q)
    for _ in range(60):
        if within_limits(x) and clear(x):
            return x
        x = anchor + 0.5 * (x - anchor)
    broken = ("the position, velocity or effort limits with the margin" if not within_limits(x)
              else "the clearance to the floor, the workspace or between links")
    raise ModelError(f"no feasible starting trajectory: even a tiny motion about {','.join(f'{v:.4f}' for v in x[:n])} "
                     f"breaks {broken}")


def _checked_limits(n, lower, upper, v_max, a_max, tau_check, tau_max, margin, q_start):
    """``(lower, upper, v_max, a_max, tau_max, q_start)`` as (n,) arrays (a_max, tau_max, q_start None when
    not given), checked: finite, upper > lower, tau_check and tau_max together, 0 <= margin < 0.5, q_start
    inside the limits shrunk by the margin. ModelError naming the input at fault."""
    lower, upper = _per_joint(lower, n, "lower"), _per_joint(upper, n, "upper")
    if np.any(upper <= lower):
        raise ModelError(f"upper {upper} must exceed lower {lower} for every joint")
    v_max = _per_joint(v_max, n, "v_max")
    a_max = None if a_max is None else _per_joint(a_max, n, "a_max")
    if (tau_check is None) != (tau_max is None):
        raise ModelError("tau_check and tau_max go together: give both or neither")
    tau_max = None if tau_max is None else _per_joint(tau_max, n, "tau_max")
    if not 0.0 <= margin < 0.5:
        raise ModelError(f"margin={margin} must lie in [0, 0.5)")
    if q_start is not None:
        q_start = _per_joint(q_start, n, "q_start")
        if np.any(q_start <= lower + margin * (upper - lower)) or np.any(q_start >= upper - margin * (upper - lower)):
            raise ModelError(f"q_start {q_start} lies outside the limits shrunk by the margin")
    return lower, upper, v_max, a_max, tau_max, q_start


def _anchor_configuration(n, q_start, clearance, anchor):
    """The configuration (n,) the oscillation is shrunk towards: q_start when given; with a clearance
    constraint, else ``anchor``, which must satisfy it; else None (the trajectory's own mean q0)."""
    if clearance is None:
        return q_start
    anchor = q_start if q_start is not None else (None if anchor is None else _per_joint(anchor, n, "anchor"))
    if anchor is None or not clearance.slack(anchor[None])[0] > 0:
        raise ModelError("a clearance constraint needs an anchor configuration that satisfies it")
    return anchor


def _objective(coefficients, cost, sample_cost, grid, lower, upper, v_max, a_max):
    """``(objective, with_gradient)``: x -> ``cost(trajectory)`` when a cost is given (SLSQP differences
    it); x -> ``sample_cost(q, v, a)`` on the grid and its exact gradient through the linear maps x -> q,
    v, a when a sample cost is given; else the D-optimal signal criterion of `_excitation_cost` returning
    its exact gradient too."""
    if cost is not None:
        return (lambda x: float(cost(coefficients.trajectory(x)))), False
    if sample_cost is not None:
        maps = [coefficients.linear_map(grid, r).reshape(len(grid), coefficients.n, -1) for r in range(3)]

        def objective(x):
            value, gradient = sample_cost(*(G @ x for G in maps))
            return value, sum(np.einsum("ij,ijp->p", d, G) for d, G in zip(gradient, maps))
        return objective, True
    a_scale = a_max if a_max is not None else v_max * coefficients.omega_f * coefficients.K
    scales = np.concatenate([(upper - lower) / 2.0, v_max, a_scale])
    return _excitation_cost(coefficients, grid, scales), True


class _WorkingSetWatch:
    """SLSQP's callback under a working set of ``rows`` (``masks``, :func:`working_set`): reports progress
    (``progress(done + iterations of this run, total)``) and stops the run at an iterate that breaks a row
    outside the set, for the set to grow there."""

    def __init__(self, rows, masks, progress, done, total, x0):
        self.rows, self.masks = rows, masks
        self.good = np.array(x0)          # the last iterate that broke no row
        self.progress, self.done, self.total = progress, done, total
        self.breaking = None              # the iterate that broke a row outside the set

    def broken(self, x):
        return any(np.any(np.asarray(c["fun"](x))[~m] < 0.0) for c, m in zip(self.rows, self.masks)
                   if c["type"] == "ineq")

    def __call__(self, x):
        self.done += 1
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total)
        if self.broken(x):
            self.breaking = np.array(x)
            raise StopIteration
        self.good = np.array(x)


def _optimise(objective, with_gradient, x0, constraints, grid, clear, check_grid, refinements, max_iterations,
              progress=None):
    """SLSQP from ``x0`` under ``constraints`` and, with a clearance constraint ``clear``, its rows on a
    grid that starts as ``grid``: the instants of ``check_grid`` where the exact clearance has a local
    minimum short of the buffer join that grid and SLSQP resumes, at most ``refinements`` times.

    SLSQP is given the working set of the rows (:func:`working_set`: those near their bounds and the local minima
    of every series); when an iterate breaks a row outside it, the rows near that iterate join it and SLSQP resumes
    from the last iterate that broke none, within the same ``max_iterations``. A point it ends at breaking no row is
    therefore a solution of the problem with every row: the rows left out are inactive there.
    Returns ``(x, total iterations, the last SLSQP result)``."""
    clearance_grid, x, iterations = grid, x0, 0
    for _ in range(1 + (refinements if clear is not None else 0)):
        rows = list(constraints)
        if clear is not None:
            rows.append(clear.slsqp_constraint(clearance_grid))
        masks, budget = working_set(rows, x, len(grid)), max_iterations
        while True:
            watch = _WorkingSetWatch(rows, masks, progress, iterations, max_iterations, x)
            from scipy.optimize import minimize      # where used (a quarter of a second of every start)
            result = minimize(objective, x, jac=with_gradient, method="SLSQP", constraints=restricted(rows, masks),
                              callback=watch, options={"maxiter": budget, "ftol": 1e-9})
            iterations, budget = iterations + int(result.nit), budget - max(int(result.nit), 1)
            if watch.breaking is None and not watch.broken(result.x):
                x = result.x
                break
            x = watch.good
            if budget <= 0:
                result.success, result.message = False, "Iteration limit reached"
                break
            masks = working_set(rows, result.x if watch.breaking is None else watch.breaking, len(grid), masks)
        if clear is None:
            break
        short = clear.shortfalls(x, check_grid)
        if not len(short):
            break
        clearance_grid = np.union1d(clearance_grid, short)
    return x, iterations, result


def design_exciting_trajectory(
    n_joints: int, lower, upper, v_max, a_max=None, period: float = 10.0, harmonics: int = 5,
    cost: Callable[[FourierTrajectory], float] | None = None, seed: int = 0,
    tau_check: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None, tau_max=None, *,
    margin: float = 0.05, start_at_rest: bool = False, q_start=None, grid_points: int | None = None,
    max_iterations: int = 100, clearance=None, anchor=None, clearance_buffer: float = 0.01,
    check_interval: float = 0.001, refinements: int = 3, progress: Callable[[int, int], None] | None = None,
    sample_cost=None, tau_derivatives=None,
) -> FourierTrajectory:
    """Optimise a Fourier trajectory (module docstring) that respects joint limits with a margin.

    lower, upper: (n,) position limits; v_max, a_max, tau_max: (n,) or scalars (a_max, tau_max
    optional). Constraints, on ``grid_points`` (default 20 K) instants over one period:
    lower + margin (upper - lower) <= q <= upper - margin (upper - lower), |v| <= (1 - margin) v_max,
    |a| <= (1 - margin) a_max, |tau_check(q, v, a)| <= (1 - margin) tau_max, with tau_check mapping
    (N, n) arrays to (N, n) torques. start_at_rest imposes v(0) = a(0) = 0 (so v(T) = a(T) = 0 too);
    q_start imposes q(0) = q_start.

    Minimises ``cost(trajectory)`` (e.g. the condition number of the identification regressor;
    gradient by finite differences), or ``sample_cost(q, v, a)`` of the (N, n) samples on the grid returning
    the value and its gradient (3, N, n) with respect to every sample's q, v and a (chained to the
    coefficients exactly), or, when neither is given, the D-optimal signal criterion of
    `_excitation_cost`. ``tau_derivatives(q, v, a)``, optional with tau_check: (3, N, n, n), the Jacobians
    of every sample's torques with respect to its q, v and a (else SLSQP differences the torque rows).
    Afterwards the limits are re-checked on a grid 10 times denser and, if needed, the oscillation is
    shrunk towards the start/centre until they hold with margin/2 (``design_report.final_scale``).
    Deterministic given ``seed``. Returns the FourierTrajectory with its ``design_report``.

    ``clearance``: a configuration constraint with ``slack(Q) -> (N,)`` (exact smallest margin, >= 0
    when it holds) and ``smooth_slack(Q) -> ((N, k), (N, k, n))`` (smooth lower bounds and their
    gradients), e.g. a :class:`~robodyn_ros.identification.collision_clearance.ClearanceModel`. It is
    imposed with ``clearance_buffer`` on the grid, then checked exactly every ``check_interval`` s; the
    instants of the local minima that fall short join the grid and the design is resumed (at most
    ``refinements`` times), and finally the oscillation is shrunk towards ``anchor`` (a configuration
    (n,) with positive slack; required with ``clearance``, equal to q_start when that is given) until
    the check holds. ModelError when it cannot be made to hold.

    ``progress(iteration, max_iterations)`` is called after every optimiser iteration (e.g. a progress bar).
    """
    start = time.perf_counter()
    n = int(n_joints)
    lower, upper, v_max, a_max, tau_max, q_start = _checked_limits(n, lower, upper, v_max, a_max, tau_check,
                                                                   tau_max, margin, q_start)
    anchor = _anchor_configuration(n, q_start, clearance, anchor)
    coefficients = _Coefficients(n, int(harmonics), float(period))
    grid = np.linspace(0.0, period, grid_points or 20 * harmonics, endpoint=False)
    if cost is not None and sample_cost is not None:
        raise ModelError("give cost or sample_cost, not both")
    limits = LimitConstraints(coefficients, lower, upper, v_max, a_max, tau_check, tau_max, tau_derivatives)
    E, e = _equality_constraints(coefficients, start_at_rest, q_start)
    objective, with_gradient = _objective(coefficients, cost, sample_cost, grid, lower, upper, v_max, a_max)
    value = lambda x: objective(x)[0] if with_gradient else objective(x)  # noqa: E731

    center = anchor if anchor is not None else (lower + upper) / 2.0
    clear = None if clearance is None else ClearanceConstraints(coefficients, clearance, clearance_buffer)
    x0 = _initial_guess(coefficients, np.random.default_rng(seed), center, E, e, anchor,
                        lambda x: limits.satisfied(x, grid, margin),
                        lambda x: clear is None or clear.satisfied(x, grid))
    equality = [] if E is None else [{"type": "eq", "fun": lambda x: E @ x - e, "jac": lambda x: E}]
    initial_cost = value(x0)
    check_grid = np.arange(0.0, period, check_interval) if clear is not None else None
    x, iterations, result = _optimise(objective, with_gradient, x0, limits.slsqp_constraints(grid, margin) + equality,
                                      grid, clear, check_grid, refinements, max_iterations, progress)
    dense_grid = np.linspace(0.0, period, 10 * len(grid), endpoint=False)
    x, scale = shrink_until_feasible(coefficients, limits, x, anchor, margin, dense_grid, clear, check_grid)
    if value(x) > initial_cost:  # SLSQP ended far outside the feasible set: keep the start
        x, scale = shrink_until_feasible(coefficients, limits, x0, anchor, margin, dense_grid, clear, check_grid)
    report = DesignReport(initial_cost=float(initial_cost), final_cost=float(value(x)),
                          iterations=iterations, seconds=time.perf_counter() - start,
                          success=bool(result.success), message=str(result.message), final_scale=scale)
    return coefficients.trajectory(x, report)
