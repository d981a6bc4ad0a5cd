"""How well a motion excites a robot's base parameters, and an exciting trajectory optimised for it within
the robot's URDF limits (Swevers et al. 1997; Gautier & Khalil 1992).

Excitation measure: the condition number of the base regressor stacked over the samples of the motion,

    κ = σ_max / σ_min  of  W = [Y_base(q_1, v_1, a_1); ...; Y_base(q_N, v_N, a_N)]   (N nv, r)

with the columns in SI units (rigid-body base parameters, then armature, viscous, Coulomb with
``tanh(v / width)`` and offset per joint), exactly the number ``robodyn identify`` reports as the fit's
"condition number" (there on the filtered measured samples). Stacking the samples more densely scales
every singular value by the same factor, so κ does not depend on the sampling rate; a small κ means the
least squares determine every base parameter with similar relative accuracy from noisy torques.

:func:`design_for_model` minimises log κ over the coefficients of a finite Fourier series
(:func:`robodyn_ros.identification.exciting_trajectory.design_exciting_trajectory`) subject to the
URDF's position limits (or narrower ranges), velocity limits and effort limits (the nominal model's
inverse dynamics, friction included), each shrunk by a margin, starting and ending at rest, and, given
a :class:`~robodyn_ros.identification.collision_clearance.ClearanceModel`, clear of the floor (or a
workspace box) and of itself at every millisecond. The optimiser is given the gradients of log κ and of the
torques in the coefficients, differenced through the samples (:func:`displaced_samples`: 3 nv + 1 evaluations
of the regressor, where differencing the 2 nv K + nv coefficients takes one each).
"""
from __future__ import annotations

import numpy as np

from ..model.errors import ModelError
from .base_parameters import compute_base_parameters
from .exciting_trajectory import design_exciting_trajectory


def regressor_condition_number(model, base, Q, V, A, chunk=8192):
    """κ (module docstring) of the base regressor of ``base`` stacked over Q (N, nq), V, A (N, nv)."""
    from .least_squares import RegressorAccumulator
    acc = RegressorAccumulator(model.nv, base.count)
    for s in range(0, len(Q), chunk):
        e = s + chunk
        acc.add(base.regressor(model, Q[s:e], V[s:e], A[s:e]), np.zeros((len(Q[s:e]), model.nv)))
    R = acc.weighted_factor(np.ones(model.nv))[:base.count, :base.count]
    return float(np.linalg.cond(R))


def design_for_model(model, period=10.0, harmonics=5, margin=0.05, coulomb_width=0.05, seed=0,
                     a_max=None, grid_points=None, max_iterations=100, base=None, q_start=None,
                     lower=None, upper=None, clearance=None, preferred=None, progress=None):
    """The Fourier trajectory of period ``period`` (s) with ``harmonics`` harmonics minimising κ of
    ``model``'s base regressor (module docstring) within the URDF limits with ``margin`` (positions
    within ``[lower + margin range, upper - margin range]``, ``|v| <= (1 - margin) v_max``,
    ``|tau| <= (1 - margin) effort``), at rest at t = 0 and t = period. a_max: optional (nv,)
    acceleration limits; q_start: (nv,) configuration to start and end at (default: free);
    lower, upper: (nv,) position ranges replacing the URDF's (within them).

    ``clearance``: a :class:`~robodyn_ros.identification.collision_clearance.ClearanceModel` whose margins
    must stay >= 0 along the whole motion (checked every millisecond). The motion is designed about an
    anchor configuration that satisfies it with room to spare: q_start when given, else the configuration
    :func:`clear_configuration` finds nearest to ``preferred`` (default: the middle of the ranges). The start,
    or that anchor, is checked first (:func:`start_problem`: ranges with the margin, the torque that holds it
    against gravity, the clearance).

    ``progress(iteration, max_iterations)``: called after every optimiser iteration.

    Returns ``(trajectory, κ)``. Raises ModelError when a limit is missing, the start fails
    :func:`start_problem` (the line names the joint or links, the constraint and the numbers), or no clear
    motion is found."""
    nv = model.nv
    if model.nq != nv:
        raise ModelError("exciting trajectories need one coordinate per joint (no floating base or spherical joints)")
    lower = model.lower if lower is None else np.asarray(lower, dtype=float)
    upper = model.upper if upper is None else np.asarray(upper, dtype=float)
    bad = [n for n, lo, hi in zip(model.joint_names, lower, upper) if not (np.isfinite(lo) and np.isfinite(hi))]
    if bad:
        raise ModelError(f"joint(s) {bad} have no position limits in the URDF; give them limits (a range) or lock them")
    bad = [n for n, lo, hi, m_lo, m_hi in zip(model.joint_names, lower, upper, model.lower, model.upper)
           if not m_lo <= lo < hi <= m_hi]
    if bad:
        raise ModelError(f"joint(s) {bad}: the ranges must be increasing and within the URDF's limits")
    for label, limit in (("velocity", model.velocity_limit), ("effort", model.effort_limit)):
        bad = [n for n, x in zip(model.joint_names, limit) if not (np.isfinite(x) and x > 0)]
        if bad:
            raise ModelError(f"joint(s) {bad} have no {label} limit in the URDF (<limit {label}=...>)")
    base = base or compute_base_parameters(model, coulomb_width=coulomb_width)
    grid = np.linspace(0.0, period, grid_points or 40 * harmonics, endpoint=False)
    from .batch import predict_torques

    def regressor(q, v, a):
        return base.regressor(model, q, v, a)

    def torques(q, v, a):
        return predict_torques(model, q, v, a, coulomb_width)

    if q_start is not None:
        problem = start_problem(model, q_start, lower, upper, margin, clearance, coulomb_width)
        if problem is not None:
            raise ModelError(f"the start {_comma(q_start)} cannot be used: {problem}")
    anchor = None
    if clearance is not None:
        anchor = _anchor_configuration(clearance, lower, upper, margin, q_start, preferred, seed)
        problem = start_problem(model, anchor, lower, upper, margin, clearance, coulomb_width)
        if problem is not None:
            raise ModelError(f"the configuration the motion is designed about, {_comma(anchor)}, cannot be used: "
                             f"{problem}; give --start")
    trajectory = design_exciting_trajectory(
        nv, lower, upper, model.velocity_limit, a_max=a_max, period=period, harmonics=harmonics,
        sample_cost=lambda q, v, a: log_condition_number(regressor, q, v, a), seed=seed, tau_check=torques,
        tau_derivatives=lambda q, v, a: sample_jacobians(torques, q, v, a)[1], tau_max=model.effort_limit,
        margin=margin, start_at_rest=True,
        grid_points=len(grid), max_iterations=max_iterations, q_start=q_start, clearance=clearance, anchor=anchor,
        progress=progress)
    t, q, v, a = trajectory.sample(0.001)
    return trajectory, regressor_condition_number(model, base, q, v, a)


SAMPLE_STEP = (np.sqrt(np.finfo(float).eps), np.sqrt(np.finfo(float).eps), 1.0)
"""Forward-difference steps in q, v and a of :func:`displaced_samples`, relative to max(1, |x|): the square root
of the machine epsilon where f is nonlinear; 1 in a, in which the torques and the regressor are linear."""


def displaced_samples(Q, V, A, steps=SAMPLE_STEP):
    """For each group g (0: q, 1: v, 2: a) and joint j: ``(g, j, h, (Q', V', A'))`` with column j of group g
    displaced by h (N,) in every sample at once (h = steps[g] max(1, |x|)). For a function whose row i
    depends on sample i alone (torques, regressor rows), one evaluation at the displaced samples gives the
    forward difference of every row with respect to its own sample's q_j, v_j or a_j: 3 n + 1 evaluations
    give the derivative with respect to any parameters of the motion, by the chain rule through the
    samples, where differencing those parameters directly takes one evaluation per parameter."""
    groups = (Q, V, A)
    for g, X in enumerate(groups):
        for j in range(X.shape[1]):
            h = steps[g] * np.maximum(1.0, np.abs(X[:, j]))
            displaced = X.copy()
            displaced[:, j] += h
            h = displaced[:, j] - X[:, j]   # the step as represented
            yield g, j, h, tuple(displaced if k == g else groups[k] for k in range(3))


def sample_jacobians(f, Q, V, A):
    """``(f(Q, V, A) (N, m), J (3, N, m, n))`` for f whose row i depends on sample i alone: J[g, i] the
    forward-difference Jacobian of row i with respect to sample i's q (g = 0), v (1) or a (2)
    (:func:`displaced_samples`)."""
    f0 = np.asarray(f(Q, V, A), dtype=float)
    J = np.empty((3, len(Q), f0.shape[1], Q.shape[1]))
    for g, j, h, samples in displaced_samples(Q, V, A):
        J[g, :, :, j] = (np.asarray(f(*samples), dtype=float) - f0) / h[:, None]
    return f0, J


def log_condition_number(regressor, Q, V, A):
    """log κ (module docstring) of the regressor rows ``regressor(Q, V, A)`` (N, nv, r) stacked, and its
    gradient (3, N, nv) with respect to every sample's q, v and a. With W = U diag(s) V^T,
    d s_k = u_k^T dW v_k, so d log κ = u_1^T dW v_1 / s_1 - u_r^T dW v_r / s_r, a sum over the samples
    of their own rows' terms, each differenced by :func:`displaced_samples`."""
    W = np.asarray(regressor(Q, V, A), dtype=float)
    N, nv, r = W.shape
    U, s, Vt = np.linalg.svd(W.reshape(N * nv, r), full_matrices=False)
    s_min = max(s[-1], 1e-300)
    u_max, u_min = U[:, 0].reshape(N, nv), U[:, -1].reshape(N, nv)
    w_max, w_min = W @ Vt[0], W @ Vt[-1]      # (N, nv): W v_1 and W v_r sample by sample
    gradient = np.empty((3, N, nv))
    for g, j, h, samples in displaced_samples(Q, V, A):
        D = np.asarray(regressor(*samples), dtype=float)
        d_max = np.einsum("ik,ik->i", u_max, D @ Vt[0] - w_max)
        d_min = np.einsum("ik,ik->i", u_min, D @ Vt[-1] - w_min)
        gradient[g, :, j] = (d_max / s[0] - d_min / s_min) / h
    return float(np.log(s[0] / s_min)), gradient


def start_problem(model, q, lower=None, upper=None, margin=0.05, clearance=None, coulomb_width=0.05):
    """Why an exciting motion cannot start (and end) at rest at ``q`` (nv,), as one line naming the joint or
    links, the constraint and the numbers, or None when it can: every joint inside its range shrunk by
    ``margin`` of it, the torque that holds ``q`` against gravity within ``(1 - margin)`` of every effort
    limit, and ``clearance`` (a :class:`~robodyn_ros.identification.collision_clearance.ClearanceModel`, or
    None) satisfied. The checks :func:`design_for_model` makes of its start; ``robodyn config`` makes them
    of its home."""
    from .batch import predict_torques
    q = np.asarray(q, dtype=float)
    lower = model.lower if lower is None else np.asarray(lower, dtype=float)
    upper = model.upper if upper is None else np.asarray(upper, dtype=float)
    for name, x, lo, hi in zip(model.joint_names, q, lower, upper):
        room = margin * (hi - lo)
        if np.isfinite(room) and not lo + room < x < hi - room:
            return (f"joint {name} at {x:.4g} lies within {100 * margin:g} % of its range [{lo:.4g}, {hi:.4g}] "
                    f"of a limit (it must stay inside [{lo + room:.4g}, {hi - room:.4g}])")
    tau = predict_torques(model, q[None], np.zeros((1, model.nv)), np.zeros((1, model.nv)), coulomb_width)[0]
    share = np.abs(tau) / np.where(model.effort_limit > 0, model.effort_limit, np.inf)
    j = int(np.argmax(share))
    if share[j] > 1.0 - margin:
        return (f"joint {model.joint_names[j]} needs {abs(tau[j]):.4g} N m to hold it against gravity, above "
                f"{100 * (1 - margin):g} % of its effort limit {model.effort_limit[j]:g} N m")
    if clearance is not None:
        return clearance.violation(q[None])
    return None


def _comma(q):
    return ",".join(f"{x:.4f}" for x in q)


ANCHOR_ROOM = 0.05
"""m: margin beyond every clearance that the configuration the motion is designed about should have."""


def _anchor_configuration(clearance, lower, upper, margin, q_start, preferred, seed):
    """q_start when given, else a clear
    configuration within the ranges shrunk by the margin, nearest to ``preferred``."""
    from .collision_clearance import clear_configuration
    if q_start is not None:   # checked by start_problem
        return q_start
    inner_lower, inner_upper = lower + 1.01 * margin * (upper - lower), upper - 1.01 * margin * (upper - lower)
    preferred = (lower + upper) / 2.0 if preferred is None else np.clip(preferred, inner_lower, inner_upper)
    return clear_configuration(clearance, inner_lower, inner_upper, preferred, room=ANCHOR_ROOM, seed=seed)[0]
