"""The MPC as a controller: warm start, time limit, fallbacks and feedback gains around the solvers.

Solvers: ``fatrop`` (default) and ``ipopt`` converge the NLP (:mod:`.nlp`); ``rti`` runs the real-time
iteration (:mod:`.rti`), one Gauss-Newton step per control period split into :meth:`prepare` and the
feedback phase of :meth:`~ModelPredictiveController.solve`. Each solve is warm-started by the previous
solution shifted by one interval. A solve that fails, exceeds the time limit or returns non-finite numbers
is replaced by the previous solution shifted (status ``fallback_shifted``), else gravity compensation
(``fallback_gravity``); ``solver_status`` says why. Never NaN. Each solution carries ``τ_ff`` and the
time-varying LQR gains ``K_k`` of the Riccati recursion on the linearisation (at the solution for
fatrop/ipopt, the QP's own factorisation for RTI), so a 1 kHz loop applies
``τ = τ_ff,k + K_k (x - x_plan(t))`` between solves (:meth:`.solution.MPCSolution.torque`).
"""
from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np

from ..command_guard import effort_bounds
from ..reference import ReferenceClippedWarning, sample_reference
from .compile_cache import ocp_functions
from .config import MPCConfig, check_config, parameter_vector, replace_inertial_parameters
from .nlp import nlp_solve, nlp_solver
from .rti import RTIPhases, bounded_qp_name, bounded_qp_solver, sqp_steps
from .solution import MPCSolution, gravity_solution, shifted_plan, shifted_solution


class _Prepared(NamedTuple):
    """The preparation phase of the next RTI solve: for ``reference`` at ``t``, the linearisation point
    ``w_bar`` and parameters ``p``, and the time it took (s)."""

    reference: object
    t: float
    w_bar: np.ndarray
    p: np.ndarray
    elapsed: float


class ModelPredictiveController:
    """MPC of :class:`~.ocp.OCPFunctions` with warm start, time limit, fallbacks and feedback gains.

    ``solve(q, v, reference, t)`` returns an :class:`~.solution.MPCSolution`; ``reference`` answers
    ``evaluate(t) -> (q, v, a)`` (joint references of :mod:`robodyn_ros.control.reference`), sampled at
    ``t + k dt``. ``set_parameters(theta)`` / ``set_inertial_parameters(pi)`` change the model used by
    the next solve. ``quick``, ``nice``: how compiled functions are built the first time
    (:func:`~.compile_cache.ocp_functions`)."""

    def __init__(self, model, config=None, quick=False, nice=0, **options):
        self.model = model
        self.config = config or MPCConfig(**options)
        check_config(self.config)
        self.ocp = ocp_functions(model, self.config, quick, nice)
        self.theta = parameter_vector(model)
        self.tau_max = effort_bounds(model)
        self._bounds()
        self._w = None                      # last accepted primal solution
        self._w_t = None                    # the time (of the solve's reference) its first node is at
        self._solution = None
        self._qp_solvers = {}
        self._prepared = None               # the preparation phase of the next RTI solve
        self._nlp = None
        self.last_solver_stats = {}         # CasADi's stats of the last fatrop/ipopt solve (profiling)
        if self.config.solver == "rti":                         # build the solvers now, not in the first solve
            self._rti = RTIPhases(self.ocp)
            self._qp_solver()
        else:
            self._nlp = nlp_solver(self.ocp, self.config)

    # ------------------------------------------------------------------------------------- parameters
    def take_over(self, other):
        """Continue where the controller ``other`` (same model and problem) is: its parameters, and its
        last solution as this one's warm start (its preparation phase, if any, is done again here)."""
        self.set_parameters(other.theta)
        self._w, self._w_t, self._solution = other._w, other._w_t, other._solution

    def set_parameters(self, theta):
        """``θ = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) for the next solve (no rebuild)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.ocp.ntheta,) or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be a finite ({self.ocp.ntheta},) vector")
        self.theta = theta.copy()
        self._prepared = None                                   # prepared with the former parameters

    def set_inertial_parameters(self, pi):
        """Replace the inertial part ``π`` (10 nb,) of ``θ``."""
        self.set_parameters(replace_inertial_parameters(self.theta, pi, self.model.nbodies))

    def _bounds(self):
        m, cfg, ocp = self.model, self.config, self.ocp
        vlim = np.where(np.isfinite(m.velocity_limit) & (m.velocity_limit > 0), m.velocity_limit, np.inf)
        vmax = vlim * cfg.velocity_fraction
        x_lo = np.concatenate([m.lower + cfg.position_margin, -vmax])
        x_hi = np.concatenate([m.upper - cfg.position_margin, vmax])
        free = np.full(ocp.nx, np.inf)
        X_lo = np.vstack([-free] + [x_lo] * ocp.N)                      # x_0 is fixed by x_0 = x̂
        X_hi = np.vstack([free] + [x_hi] * ocp.N)
        U_lim = np.tile(self.tau_max, (ocp.N, 1))
        self.lbw = ocp.pack_w(X_lo, -U_lim)
        self.ubw = ocp.pack_w(X_hi, U_lim)
        self.x_lo, self.x_hi = x_lo, x_hi

    def _qp_solver(self):
        """The conic solver of the bounded RTI QP (built once)."""
        name = bounded_qp_name(self.config)
        if name not in self._qp_solvers:
            self._qp_solvers[name] = bounded_qp_solver(self.ocp, name)
        return self._qp_solvers[name]

    # ----------------------------------------------------------------------------------------- solves
    def reference_parameters(self, q, v, reference, t):
        """``p`` (np,) for the measured state and the reference sampled at ``t + k dt``; reference
        positions outside the (margin-reduced) joint limits are clipped, with a
        :class:`ReferenceClippedWarning` naming the joints."""
        N, dt, n = self.ocp.N, self.config.dt, self.ocp.n
        Q, V, A = sample_reference(reference, t + dt * np.arange(N + 1))
        lo, hi = self.x_lo[:n], self.x_hi[:n]
        outside = np.any((Q < lo) | (Q > hi), axis=0)
        if np.any(outside):
            names = ", ".join(self.model.joint_names[i] for i in np.flatnonzero(outside))
            warnings.warn(f"MPC reference outside the joint limits clipped for {names}", ReferenceClippedWarning,
                          stacklevel=3)
        Xr = np.hstack([np.clip(Q, lo, hi), V])
        Ar = A[:N]
        return np.concatenate([q, v, Xr.reshape(-1), Ar.reshape(-1), self.theta]), Xr

    def _initial_guess(self, x0, t, predicted=False):
        """The previous solution moved on to the time ``t`` of this solve (:func:`~.solution.shifted_plan`: by
        the time since its own, one interval when solves come one interval apart; last interval repeated),
        else the state ``x0`` held with gravity-compensating torques; the first state is the measurement
        ``x0``, or with ``predicted`` (and a previous solution) the previous plan's state at this time."""
        ocp = self.ocp
        if self._w is not None:
            X, U = ocp.unpack_numeric(self._w)
            X, U = shifted_plan(X, U, self.config.dt, self._shift(t))
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
        Returns an :class:`~.solution.MPCSolution` (never non-finite: see the fallbacks in the module
        docstring)."""
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        x0 = np.concatenate([q, v])
        if not np.all(np.isfinite(x0)):
            return self._fallback(x0, t, "nonfinite_state", 0.0)
        if self.config.solver == "rti":
            return self._solve_rti(x0, reference, t)
        p, _ = self.reference_parameters(q, v, reference, t)
        if not np.all(np.isfinite(p)):
            return self._fallback(x0, t, "nonfinite_reference", 0.0)
        w0 = self._initial_guess(x0, t)
        start = time.perf_counter()
        try:
            result = nlp_solve(self._nlp, w0, p, self.lbw, self.ubw)
            self.last_solver_stats = result.stats
            w, solver_status, iters = result.w, result.status, result.iterations
        except RuntimeError as err:                                       # solver crash: fall back
            w, solver_status, iters = None, f"error: {err}", 0
        elapsed = time.perf_counter() - start

        def gains():                                                      # the Riccati gains at the solution
            prepared = self.ocp.rti_prepare.call({"w": w, "p": p})
            return self.ocp.riccati_factor(prepared["A"], prepared["B"], prepared["b"], prepared["grad"])[0]
        return self._accept(x0, t, w, gains, "solved", solver_status, iters, elapsed, elapsed)

    # ------------------------------------------------------------ real-time iteration: two phases
    def prepare(self, reference, t, x_guess=None):
        """Preparation phase of the RTI solve at time ``t`` (:mod:`.rti`): shift the previous solution (its
        state at ``t`` stands for the measurement not yet known; without a previous solution ``x_guess``
        (nx,), else nothing is prepared), sample ``reference`` at ``t + k dt``, linearise all stages in one
        call and factorise the QP without its bounds: everything that does not depend on the measured
        state. ``solve(q, v, reference, t)`` with the same ``reference`` object and ``t`` then runs only the
        feedback phase. Returns the time it took (s); 0 for fatrop/ipopt, which have no such split."""
        if self.config.solver != "rti":
            return 0.0
        start = time.perf_counter()
        self._prepared = None
        if self._w is None and (x_guess is None or not np.all(np.isfinite(x_guess))):
            return 0.0
        n, nx = self.ocp.n, self.ocp.nx
        w_bar = self._initial_guess(None if self._w is not None else np.asarray(x_guess, dtype=float), t,
                                    predicted=True)
        p, _ = self.reference_parameters(w_bar[:n], w_bar[n:nx], reference, t)
        if not np.all(np.isfinite(p)):
            return time.perf_counter() - start
        self._rti.prepare(w_bar, p)
        elapsed = time.perf_counter() - start
        self._prepared = _Prepared(reference, float(t), w_bar, p, elapsed)
        return elapsed

    def _solve_rti(self, x0, reference, t):
        """Feedback phase (after :meth:`prepare` for this ``reference`` and ``t``, else both phases now);
        the time limit applies to this call, the delay of the command."""
        start = time.perf_counter()
        prep, self._prepared = self._prepared, None
        if prep is None or prep.reference is not reference or abs(prep.t - t) > 1e-9:
            self.prepare(reference, t, x0)
            prep, self._prepared = self._prepared, None
            if prep is None:
                return self._fallback(x0, t, "nonfinite_reference", time.perf_counter() - start)
            preparation = 0.0                                             # inside this call
        else:
            preparation = prep.elapsed
        try:
            step = sqp_steps(self._rti, self._qp_solver(), x0, prep.w_bar, prep.p, self.lbw, self.ubw, self.config)
        except RuntimeError as err:                                       # solver crash: fall back
            step = None, None, f"error: {err}", 0
        w, K, solver_status, iters = step
        elapsed = time.perf_counter() - start
        return self._accept(x0, t, w, lambda: K, "rti", solver_status, iters, preparation + elapsed, elapsed)

    def _shift(self, t):
        """Seconds from the last plan's first node to ``t`` (one interval when unknown or not after it)."""
        shift = None if self._w_t is None else t - self._w_t
        return shift if shift is not None and shift > 0.0 else self.config.dt

    def _accept(self, x0, t, w, gains, status, solver_status, iters, solve_time, elapsed):
        """The solution of the iterate ``w`` (nw,) with the gains ``gains()`` (nu, nx N), or the fallback
        when ``w`` is missing or not finite, ``elapsed`` (s, after the measurement) exceeds the time limit,
        or the gains are not finite."""
        if w is None or not np.all(np.isfinite(w)):
            return self._fallback(x0, t, solver_status, elapsed)
        if elapsed > self.config.time_limit:
            return self._fallback(x0, t, f"time limit ({elapsed * 1e3:.1f} ms)", elapsed)
        K = np.asarray(gains())
        if not np.all(np.isfinite(K)):
            return self._fallback(x0, t, "nonfinite gains", elapsed)
        X, U = self.ocp.unpack_numeric(w)
        N, nu, nx = self.ocp.N, self.ocp.nu, self.ocp.nx
        self._w, self._w_t = w, t
        self._solution = MPCSolution(tau_ff=np.clip(U, -self.tau_max, self.tau_max), x_pred=X,
                                     K=K.reshape(nu, N, nx).transpose(1, 0, 2), status=status,
                                     solver_status=solver_status, solve_time=solve_time, iterations=iters,
                                     dt=self.config.dt, tau_max=self.tau_max, feedback_time=elapsed)
        return self._solution

    def _fallback(self, x0, t, reason, elapsed):
        """The previous accepted solution shifted to now (``t``), else gravity compensation at the measured
        configuration (zero gains); never non-finite."""
        prev = self._solution
        if prev is not None and prev.status in ("solved", "rti", "fallback_shifted"):
            self._solution = shifted_solution(prev, reason, elapsed, self._shift(t))
            self._w, self._w_t = self.ocp.pack_w(self._solution.x_pred, self._solution.tau_ff), t
            return self._solution
        n = self.ocp.n
        x = x0 if np.all(np.isfinite(x0)) else np.concatenate([np.nan_to_num(x0[:n], nan=0.0), np.zeros(n)])
        self._solution = gravity_solution(self.ocp.gravity(x, self.theta), x, self.ocp.N, self.config.dt,
                                          self.tau_max, reason, elapsed)
        self._w = self._w_t = None
        return self._solution
