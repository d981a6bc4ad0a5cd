"""The estimator's base parameters as a controller's model: what the ``inverse_dynamics`` node does with them
(``use_base_parameters``), without ROS.

The estimator publishes its base-parameter estimate ``β`` (r,) and covariance ``P`` (r, r) from joint
torques. The controller judges them with a :class:`~robodyn_ros.control.parameter_gate.ParameterGate` on
its own recent samples: the joint states it controls from, through the estimator's causal Butterworth filter
(``cutoff``, ``order``), as ``(Y_base(q_f, v_f, a_f), τ_f)`` every ``observe_every``-th state. What it
offers is the closest physically consistent parameter set reproducing the latest estimate
(:class:`~robodyn_ros.control.consistent_parameters.ConsistentParameters`, 0.1-0.8 s of IPOPT), computed by a
:class:`ConsistentWorker` thread from the newest ``(β, P)`` (CasADi releases the GIL: the control loop runs
on); a raw RLS estimate of a plant that is not the model is mostly refused by the gate's inertia check
(its mass matrix lighter than 0.03 of the nominal one in some direction). Only an
accepted estimate reaches the control law (none before a covariance has arrived: convergence is judged from it) (:mod:`robodyn_ros.control.base_parameter_control`); a diverging
one is kept out and the last good one stays applied (the roll-back: the estimator itself is in another
process and keeps its estimate). A payload estimate from joint torques (the estimator's
``payload_reference: before_change``: the load explaining the torque residual of the estimate held before
the change) becomes the candidate ``β_before + K_body π_p`` (``β_before`` the parameters applied when the
payload appeared, ``K_body`` the columns of ``β = K π`` of its body), offered to the same gate whenever the
latest base estimate is not accepted; the window is cleared when a payload appears or goes (the robot
changed) and needs ``min_samples_after_change`` samples.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..identification.base_parameters import full_parameters
from ..identification.signal_filters import CausalButterworthFilter
from .base_parameter_control import BaseParameterDynamics, InertiaPlausibility
from .consistent_parameters import ConsistentParameters
from .parameter_gate import GateDecision, ParameterGate, friction_indices


class ConsistentWorker:
    """A thread fitting :class:`~robodyn_ros.control.consistent_parameters.ConsistentParameters` to the newest
    ``(β, P)`` handed to :meth:`submit`, at most every ``period`` wall seconds; :attr:`result` is
    ``(ConsistentEstimate, P)`` of the last fit (None before the first). ``fit`` (``(β, P) ->
    ConsistentEstimate``) replaces the solver (tests). :meth:`close` stops the thread."""

    def __init__(self, consistent=None, period=0.5, fit=None):
        self.fit = fit or consistent.fit
        self.period = float(period)
        self.result, self.fits, self.failures = None, 0, 0
        self.last_failure = None     # why the last failed fit failed (IPOPT's status or the exception)
        self._pending = None
        self._lock, self._wake, self._closed = threading.Lock(), threading.Event(), False
        self._thread = threading.Thread(target=self._run, name="consistent_parameters", daemon=True)
        self._thread.start()

    def submit(self, beta, P):
        with self._lock:
            self._pending = (np.array(beta, dtype=float), np.array(P, dtype=float))
        self._wake.set()

    def _run(self):
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                job, self._pending = self._pending, None
            if self._closed or job is None:
                continue
            start = time.monotonic()
            try:
                fit = self.fit(*job)
            except Exception as exc:      # a failed solve leaves the last result in place
                fit, reason = None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            if fit is not None and fit.success:
                self.result = (fit, job[1])
                self.fits += 1
            else:
                self.last_failure = reason if fit is None else f"IPOPT {fit.solver}"
                self.failures += 1
            time.sleep(max(0.0, self.period - (time.monotonic() - start)))

    def close(self):
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5.0)


class BaseParameterUpdate:
    """Gated base-parameter estimates for a controller on ``model`` with base parameters ``base``
    (module docstring). ``effort_std``: σ of the measured joint torques (scalar or (nv,), N m); ``worker``:
    the :class:`ConsistentWorker` (default: one on ``model``, a fit every ``consistent_period`` wall s)."""

    def __init__(self, model, base, effort_std=0.5, cutoff=20.0, order=2, window=200, observe_every=10,
                 min_samples_after_change=30, payload_min_mass=0.05, consistent_period=0.5, worker=None):
        self.model, self.base = model, base
        self.dynamics = BaseParameterDynamics(model, base)
        self.beta_nominal = base.from_full(full_parameters(model))
        self.filter = CausalButterworthFilter(model.nv, cutoff, order)
        self.settle_time = 3.0 / cutoff
        self.observe_every = int(observe_every)
        self.min_samples_after_change = int(min_samples_after_change)
        self.payload_min_mass = float(payload_min_mass)
        self.gate = ParameterGate(self.beta_nominal, window=window, torque_std=effort_std,
                                  friction_indices=friction_indices(base),
                                  plausibility=InertiaPlausibility(self.dynamics, self.beta_nominal))
        self.P = None                  # the estimator's latest covariance (r, r)
        self.payload = None            # (K_body (r, 10), π_p (10,)) of the latest payload estimate, or None
        self.beta_before = None        # β applied when the payload appeared
        # θ = [π, f_v, f_c, f_o] (10 nb + 3 nv,): the consistent full parameters the applied β stands for (the
        # MPC's NLP parameters); the nominal model's at first
        self.theta_nominal = np.concatenate([model.inertial_parameters(), model.viscous, model.coulomb,
                                             model.friction_offset])
        self.theta = self.theta_nominal.copy()
        self._theta_before = None
        self.rollbacks = 0
        self.offers = 0                # estimates offered so far
        self._failures_reported = 0
        self._t0, self._count = None, 0
        self.worker = worker or ConsistentWorker(ConsistentParameters(model, base), consistent_period)

    def close(self):
        """Stop the worker thread."""
        self.worker.close()

    def diagnostic_values(self):
        """``rollbacks``, the gate's decisions (``gate_<status>``) and the worker's ``consistent_fits`` and
        ``consistent_failures`` so far (the controllers' /diagnostics)."""
        return {"rollbacks": self.rollbacks, **{f"gate_{k}": n for k, n in self.gate.counts.items()},
                "consistent_fits": self.worker.fits, "consistent_failures": self.worker.failures}

    def restart(self):
        """A new activation or a time reset: the filter starts again (the gate's window is kept)."""
        self.filter.reset()
        self._t0, self._count = None, 0

    def observe(self, t, q, v, tau):
        """One measured joint state (q (nq,), v (nv,), tau (nv,) at time t) for the gate's window."""
        q_f, v_f, a_f, tau_f = self.filter.update(t, q, v, tau)
        if self._t0 is None:
            self._t0 = t
        self._count += 1
        if t - self._t0 >= self.settle_time and self._count % self.observe_every == 0:
            self.gate.observe(self.dynamics.regressor(q_f, v_f, a_f), tau_f, q=q)

    def set_covariance(self, P):
        """The estimator's covariance ``P`` (r, r) of the next offered estimates."""
        P = np.asarray(P, dtype=float)
        if P.shape != (self.base.count,) * 2:
            raise ValueError(f"covariance must be ({self.base.count}, {self.base.count}), got {P.shape}")
        self.P = P

    def offer(self, beta):
        """An estimate ``β`` (r,): handed to the worker; the gate judges the consistent set of the last fit
        (returns the :class:`~robodyn_ros.control.parameter_gate.GateDecision` whose ``beta`` the controller
        applies); the payload candidate is offered when that is not accepted."""
        self.offers += 1
        if self.P is not None:
            self.worker.submit(beta, self.P)
        if self.worker.result is not None:
            fit, P = self.worker.result
            decision = self.gate.offer(fit.beta, P)
            if decision.status == "accepted":
                self.theta = np.array(fit.theta, dtype=float)
        else:   # no consistent set yet: nothing counts as converged
            self.gate.counts["unconverged"] += 1
            nan = float("nan")
            decision = GateDecision("unconverged", self.gate.applied.copy(), None, nan, nan, nan)
        if decision.status == "diverging":
            self.rollbacks += 1
        if decision.status != "accepted" and self.beta_before is not None:
            K, pi_p, body = self.payload
            decision = self.gate.offer(self.beta_before + K @ pi_p)
            if decision.status == "accepted":
                self.theta = self._theta_before.copy()
                self.theta[10 * body:10 * body + 10] += pi_p
        if np.array_equal(decision.beta, self.beta_nominal):     # nothing accepted yet, or a fallback
            self.theta = self.theta_nominal.copy()
        return decision

    def waiting_reason(self):
        """Why no estimate is applied, in words: nothing received, no covariance, no consistent fit yet, or the
        gate's last decision."""
        if self.offers == 0:
            return "no base parameters received (is the estimator running, with base_parameters: true, on " \
                   "base_parameters_topic?)"
        if self.P is None:
            return "no covariance received on base_covariance_topic (the estimator needs publish_covariance: true)"
        if self.worker.result is None:
            worker = self.worker
            failed = f"; {worker.failures} failed, the last: {worker.last_failure}" if worker.failures else ""
            return f"no consistent parameter set fitted yet{failed}"
        return f"the parameter gate's last decision: {self.gate.last_reason}"

    def failure_note(self):
        """A line about the consistent-parameter fits that failed since the last call, or None (the node logs
        it, throttled)."""
        failures = self.worker.failures
        if failures == self._failures_reported:
            return None
        self._failures_reported = failures
        return (f"consistent-parameter fit failed ({failures} so far; the last estimate kept): "
                f"{self.worker.last_failure}")

    def set_payload(self, body, pi_p):
        """A payload estimate π_p (10,) on ``body`` (about its frame): the candidate of the next offers. A
        payload appearing (mass crossing ``payload_min_mass``) freezes ``β_before`` and clears the window; one
        going away drops the candidate and clears it too."""
        mass = float(pi_p[0])
        had = self.beta_before is not None
        if abs(mass) >= self.payload_min_mass:
            if not had:
                self.beta_before, self._theta_before = self.gate.applied.copy(), self.theta.copy()
                self.gate.clear_window(self.min_samples_after_change)
            self.payload = (self.base.K[:, 10 * body:10 * body + 10], np.asarray(pi_p, dtype=float), body)
        elif had:
            self.beta_before = self.payload = None
            self.gate.clear_window(self.min_samples_after_change)
