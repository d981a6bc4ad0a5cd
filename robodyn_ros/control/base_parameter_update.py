"""The estimator's base parameters as a controller's model: what the ``inverse_dynamics`` and ``mpc`` nodes do
with them (``use_base_parameters``), without ROS.

The estimator publishes its base-parameter estimate ``β`` (r,) and covariance ``P`` (r, r) from joint
torques. The controller judges them with a :class:`~robodyn_ros.control.parameter_gate.ParameterGate` on
its own samples: the joint states it controls from, through the estimator's causal Butterworth filter
(``cutoff``, ``order``), as ``(Y_base(q_f, v_f, a_f), τ_f)`` every ``observe_period`` s of joint-state time
(every ``observe_every``-th state, from the median interval of the states seen while the filter settles: the
10th at 1 kHz, the 5th at a UR's or a KUKA's 500 Hz, so that the gate's window and warm-up last as long at any
rate), weighed by
the nominal ``M(q_f)⁻¹``: an estimate is applied only once it has predicted samples it never saw better than
the parameters in use and than the nominal model. What it offers is the closest physically consistent
parameter set reproducing the estimate (:class:`~robodyn_ros.control.consistent_parameters.ConsistentParameters`,
tens of milliseconds of IPOPT on the bundled arms), fitted by a :class:`ConsistentWorker` thread (CasADi releases
the GIL: the control loop runs on) to the estimate every ``consistent_period`` s of joint-state time; a fit submitted at time ``t``
is offered from ``t + consistent_latency`` on. With ``deterministic`` (simulated time in lockstep, where the
simulation waits for the controller) the loop waits for that fit if it is not finished by then, so the same
run gives the same decisions whatever the machine's load; otherwise it offers the newest finished fit.

The roll-back of a diverging estimate happens in the estimator's own process (its divergence guard,
:class:`~robodyn_ros.estimation.base_parameter_estimator.BaseParameterEstimator`); here the last good
parameters stay applied (``rollbacks`` counts the verdicts). A payload estimate from joint torques (the
estimator's ``payload_reference: before_change``: the load explaining the torque residual of the estimate held
before the change) becomes the candidate ``β_before + K_body π_p`` (``β_before`` the parameters applied when
the payload appeared, ``K_body`` the columns of ``β = K π`` of its body), a second source of candidates for the
same gate; the window is cleared when a payload appears or goes (the robot changed). With
``nominal_on_change`` (the default) the links' nominal inertias are applied again until a candidate of the
changed robot is accepted: the estimate of the robot before a payload, with the payload missing, can track
worse than the nominal model with it missing (on the Panda twin: the MPC 2.5 times worse at the wrist in the
half second before the payload's candidate was accepted; computed torque 1.13-1.22 times in the second of the
payload). With ``keep_drives`` (the default; computed torque and Slotine-Li) the joints' armature and friction
of the applied set stay (:func:`nominal_links`): a payload changes no joint's friction, and on an arm whose URDF
has none it is most of what the estimate learned (the UR3 of example-robot-data under computed torque, ten
perturbed plants: with the nominal set whole 3 of them had a second after the payload 1.54-2.06 times worse
than the nominal loop, with the drives kept one, 1.43). The MPC (``keep_drives=False``) takes the nominal set
whole: with the drives kept two of ten perturbed UR5 plants had their payload's second 1.22 and 1.46 times
worse than the nominal loop, none with the nominal set.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..identification.base_parameters import full_parameters
from ..identification.payload import payload_as_point_mass
from ..identification.signal_filters import CausalButterworthFilter
from .base_parameter_control import BaseParameterDynamics, InertiaPlausibility
from .consistent_parameters import ConsistentParameters
from .parameter_gate import REFINEMENT_VARIANCE, ParameterGate, friction_indices, mass_matrix_weighting

# gate samples a payload candidate must predict before it is judged (ten parameters on top of a converged
# model, where the estimate's own fifty keep early estimates of the whole robot out)
PAYLOAD_FRESH = 20
OBSERVE_PERIOD = 0.01
"""s of joint-state time between two of the gate's samples."""


EFFORT_PARAMETERS = ("effort.kind", "effort.torque_constants", "effort.filter_cutoff", "effort.payload_mass",
                     "effort.payload_com")
"""The controllers' parameters saying what ``/joint_states`` effort is (the estimator's, set by the driver
profile), which the parameter gate judges estimates on."""


def effort_measurement(robot, config):
    """The :class:`~robodyn_ros.estimation.effort_measurement.EffortMeasurement` of a controller's ``config``
    (its ``effort.*`` parameters) for ``robot`` (a :class:`~robodyn_ros.ros.node_parameters.Robot`: its model
    and wrist link), or None when the efforts are joint torques as they are (or ``config`` has no ``effort.*``)."""
    from ..estimation.effort_measurement import EffortMeasurement
    if any(name not in config for name in EFFORT_PARAMETERS):
        return None
    measurement = EffortMeasurement(robot.model, {name: config[name] for name in EFFORT_PARAMETERS},
                                    robot.wrist_link)
    return measurement if measurement.converts else None


def nominal_links(base, pi_nominal, beta, theta):
    """``(β', θ')``: the applied base parameters ``β`` (r,), whose consistent parameters are ``θ = [π, f_v, f_c,
    f_o]`` (10 nb + 3 nv,), with every link's inertial parameters ``π`` replaced by the nominal ``pi_nominal``
    (10 nb,) and the joints' armature and friction kept: ``β' = β + K_π (π_nom - π)`` (``K_π`` the link
    columns of ``β = K π_full``), ``θ' = [π_nom, f_v, f_c, f_o]``. Where ``θ`` is None (the nominal set is
    applied, or one without consistent parameters): None. A consistent θ gives a consistent θ' (nominal
    bodies, non-negative friction and armature)."""
    if theta is None:
        return None
    pi_nominal, theta = np.asarray(pi_nominal, dtype=float), np.asarray(theta, dtype=float)
    n = pi_nominal.size
    beta = np.asarray(beta, dtype=float) + base.K[:, :n] @ (pi_nominal - theta[:n])
    return beta, np.concatenate([pi_nominal, theta[n:]])


def initial_parameters(update, path):
    """The node's ``initial_parameters`` file ``path`` (empty: none) as ``update``'s first candidate
    (:meth:`BaseParameterUpdate.set_initial`); a file that cannot be read onto this robot (another robot's
    links, not the format of ``robodyn identify``) is refused at once with the reason, the controller starting
    from the URDF."""
    if not path:
        return
    from ..estimation.stored_parameters import StoredParameters, stored_parameters
    from ..model.errors import ModelError
    try:
        update.set_initial(stored_parameters(update.model, update.base, path))
    except ModelError as exc:
        update.set_initial(StoredParameters(None, None, None, path))
        update.initial_verdict = "refused"
        update.initial_note = f"initial_parameters refused: {exc}: starting from the URDF"


class ConsistentWorker:
    """A thread fitting :class:`~robodyn_ros.control.consistent_parameters.ConsistentParameters` to the
    ``(β, P)`` of the jobs handed to :meth:`submit` (each named by its joint-state time). ``keep_all``: fit
    every job in order (deterministic runs); otherwise only the newest waiting one. :meth:`result` returns the
    fit of a job, waiting for it if asked. ``fit`` (``(β, P) -> ConsistentEstimate``) replaces the solver
    (tests). :meth:`close` stops the thread."""

    def __init__(self, consistent=None, fit=None, keep_all=False):
        self.fit = fit or consistent.fit
        self.keep_all = bool(keep_all)
        self.fits = self.failures = 0
        self.last_failure = None     # why the last failed fit failed (IPOPT's status or the exception)
        self._jobs = OrderedDict()          # time -> (β, P) waiting
        self._done = OrderedDict()          # time -> ConsistentEstimate or None (failed), newest last
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="consistent_parameters", daemon=True)
        self._thread.start()

    def submit(self, t, beta, P):
        with self._cv:
            if not self.keep_all:
                self._jobs.clear()
            self._jobs[float(t)] = (np.array(beta, dtype=float), np.array(P, dtype=float))
            self._cv.notify_all()

    def _run(self):
        while True:
            with self._cv:
                while not self._jobs and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
                t, job = self._jobs.popitem(last=False)
            try:
                fit, reason = self.fit(*job), None
            except Exception as exc:      # a failed solve: no result for this job
                fit, reason = None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            with self._cv:
                ok = fit is not None and fit.success
                self.fits += ok
                self.failures += not ok
                if not ok:
                    self.last_failure = reason if fit is None else f"IPOPT {fit.solver}"
                self._done[t] = (fit if ok else None, job[1])
                while len(self._done) > 16:
                    self._done.popitem(last=False)
                self._cv.notify_all()

    def result(self, t_latest, wait=False, timeout=60.0):
        """``(ConsistentEstimate, P)`` of the newest job submitted at or before ``t_latest`` that has finished
        (with ``wait``: of the newest job submitted by then, waiting up to ``timeout`` wall s for it), or None
        (nothing finished, or that fit failed)."""
        with self._cv:
            if wait:
                pending = [t for t in list(self._jobs) + list(self._done) if t <= t_latest]
                if pending:
                    target = max(pending)
                    self._cv.wait_for(lambda: target in self._done or self._closed, timeout)
            done = [t for t in self._done if t <= t_latest]
            if not done:
                return None
            fit, P = self._done[max(done)]
            return None if fit is None else (fit, P)

    def close(self):
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=5.0)


class BaseParameterUpdate:
    """Gated base-parameter estimates for a controller on ``model`` with base parameters ``base`` (module
    docstring). ``worker``: the :class:`ConsistentWorker` (default: one on ``model``); ``refinement_variance``:
    the gate's (:class:`~robodyn_ros.control.parameter_gate.ParameterGate`; None for the MPC)."""

    def __init__(self, model, base, cutoff=20.0, order=2, window=400, fresh=50, observe_period=OBSERVE_PERIOD,
                 payload_min_mass=0.05, consistent_period=0.5, consistent_latency=0.5, deterministic=False,
                 worker=None, nominal_on_change=True, keep_drives=True, measurement=None,
                 refinement_variance=REFINEMENT_VARIANCE):
        self.model, self.base = model, base
        self.measurement = measurement   # the driver's efforts as joint torques (EffortMeasurement), or None
        self.dynamics = BaseParameterDynamics(model, base)
        self.beta_nominal = base.from_full(full_parameters(model))
        self.filter = CausalButterworthFilter(model.nv, cutoff, order)
        self.settle_time = 3.0 / cutoff
        self.observe_period = float(observe_period)
        self.observe_every = None       # states per gate sample, from the intervals seen while the filter settles
        self._intervals = []
        self.payload_min_mass = float(payload_min_mass)
        self.consistent_period, self.consistent_latency = float(consistent_period), float(consistent_latency)
        self.deterministic = bool(deterministic)
        self.nominal_on_change, self.keep_drives = bool(nominal_on_change), bool(keep_drives)
        self.gate = ParameterGate(self.beta_nominal, window=window, fresh=fresh, weighting=mass_matrix_weighting(model),
                                  friction_indices=friction_indices(base),
                                  plausibility=InertiaPlausibility(self.dynamics, self.beta_nominal),
                                  refinement_variance=refinement_variance)
        self.P = None                  # the estimator's latest covariance (r, r)
        self.payload = None            # (K_body (r, 10), π_p (10,), body) of the latest payload estimate, or None
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
        self.t = None                  # joint-state time of the last observed state
        self._t0, self._count, self._last_t = None, 0, None
        self._submitted = None         # joint-state time of the last fit submitted
        self._observe_from = -np.inf   # no samples before this time (the filter's response to a change)
        self.worker = worker or ConsistentWorker(ConsistentParameters(model, base), keep_all=self.deterministic)
        self.initial, self.initial_verdict, self.initial_note = None, None, None   # set_initial
        self.initial_time = None

    def set_initial(self, stored):
        """A stored parameter set (:class:`~robodyn_ros.estimation.stored_parameters.StoredParameters`, the
        node's ``initial_parameters``) as the first candidate: judged by the gate on the samples observed from
        now on, like an estimate (:meth:`offer_initial`)."""
        self.initial, self.initial_verdict, self.initial_note = stored, "pending", None
        self.initial_time = None       # joint-state time of the verdict

    def offer_initial(self):
        """Offer the stored set while it is pending (each observed sample); returns the gate's decision once it
        is judged (accepted: applied; otherwise refused, :attr:`initial_note` says why), else None."""
        if self.initial is None or self.initial_verdict != "pending":
            return None
        # every sample is new to a stored set (it was fitted to another run): judged on the gate's ``fresh``
        # samples without the warm-up that keeps early estimates, fitted to the little motion seen, out
        decision = self.gate.offer(self.initial.beta, source="initial", tag=self.initial.theta.copy(),
                                   warmup=self.gate.fresh)
        if decision.status == "unconverged":
            return None
        taken = decision.status == "accepted"
        self.initial_verdict, self.initial_time = ("taken" if taken else "refused"), self.t
        self.initial_note = (f"initial_parameters {self.initial.source} " + ("taken" if taken else "refused") +
                             f" by the parameter gate ({self.gate.last_reason})")
        self.theta = self._applied_theta()
        return decision

    def reset(self):
        """Back to the nominal parameters at once (``~/reset``, a tool change): the gate's applied set, the
        payload candidate and a pending stored set dropped."""
        self.gate.reset()
        self.beta_before = self.payload = self._theta_before = None
        if self.initial is not None and self.initial_verdict == "pending":
            self.initial_verdict, self.initial_note = "reset", None
        self.theta = self._applied_theta()

    def _applied_theta(self):
        """θ of the gate's applied parameters (the nominal θ when the nominal parameters are applied)."""
        return self.theta_nominal.copy() if self.gate.applied_tag is None else self.gate.applied_tag.copy()

    def close(self):
        """Stop the worker thread."""
        self.worker.close()

    def diagnostic_values(self):
        """``rollbacks``, the gate's decisions (``gate_<status>``), the worker's ``consistent_fits`` and
        ``consistent_failures`` so far and the ``initial_parameters`` verdict (the controllers' /diagnostics)."""
        values = {"rollbacks": self.rollbacks, **{f"gate_{k}": n for k, n in self.gate.counts.items()},
                  "consistent_fits": self.worker.fits, "consistent_failures": self.worker.failures}
        if self.initial is not None:
            values["initial_parameters"] = self.initial_verdict
        return values

    def restart(self):
        """A new activation or a time reset: the filter starts again (the gate's window is kept)."""
        self.filter.reset()
        if self.measurement is not None:
            self.measurement.restart()
        self._t0, self._count, self._last_t = None, 0, None
        self.observe_every, self._intervals = None, []
        self._submitted = None

    def observe(self, t, q, v, tau):
        """One measured joint state (q (nq,), v (nv,), tau (nv,) at time t) for the gate's window; True when it
        entered the window. With a ``measurement``, ``tau`` is the effort as the driver reports it: turned into
        joint torques, and q, v passed through the driver's filter, as the estimator does."""
        self.t = float(t)
        if self.measurement is not None:
            tau = self.measurement.torque(q, tau)
            q, v = self.measurement.lag(t, q, v)
        q_f, v_f, a_f, tau_f = self.filter.update(t, q, v, tau)
        if self._t0 is None:
            self._t0 = t
        self._count += 1
        if t - self._t0 < self.settle_time:
            if self._last_t is not None and t > self._last_t:
                self._intervals.append(t - self._last_t)
            self._last_t = t
            return False
        if self.observe_every is None:
            step = float(np.median(self._intervals)) if self._intervals else self.observe_period
            self.observe_every = max(1, int(round(self.observe_period / step)))
        if self._count % self.observe_every == 0 and t >= self._observe_from:
            self.gate.observe(self.dynamics.regressor(q_f, v_f, a_f), tau_f, q=q_f)
            return True
        return False

    def set_covariance(self, P):
        """The estimator's covariance ``P`` (r, r) of the next offered estimates."""
        P = np.asarray(P, dtype=float)
        if P.shape != (self.base.count,) * 2:
            raise ValueError(f"covariance must be ({self.base.count}, {self.base.count}), got {P.shape}")
        self.P = P

    def offer(self, beta):
        """An estimate ``β`` (r,) at the time of the last observed state: a fit submitted when one is due; the
        gate judges the consistent set due now (module docstring) and the payload candidate. Returns the
        :class:`~robodyn_ros.control.parameter_gate.GateDecision` (its ``beta`` is what the controller applies)."""
        self.offers += 1
        t = self.t if self.t is not None else 0.0
        if self.P is not None and (self._submitted is None or t - self._submitted >= self.consistent_period - 1e-9):
            self.worker.submit(t, beta, self.P)
            self._submitted = t
        decision = None
        ready = self.worker.result(t - self.consistent_latency, wait=self.deterministic)
        if ready is not None:
            fit, P = ready
            decision = self.gate.offer(fit.beta, P, source="estimate", tag=np.array(fit.theta, dtype=float))
            if decision.status == "diverging":
                self.rollbacks += 1
        if self.beta_before is not None and t >= self._observe_from:
            K, pi_p, body = self.payload
            theta = self._theta_before.copy()
            theta[10 * body:10 * body + 10] += pi_p
            payload_decision = self.gate.offer(self.beta_before + K @ pi_p, source="payload", tag=theta,
                                               fresh=PAYLOAD_FRESH)
            if decision is None or payload_decision.status != "unconverged":
                decision = payload_decision
        if decision is None:         # no consistent set yet: nothing to judge
            decision = self.gate._decide("unconverged", why="no consistent parameter set fitted yet")
        self.theta = self._applied_theta()
        return decision

    def waiting_reason(self):
        """Why no estimate is applied, in words: nothing received, no covariance, no consistent fit yet, or the
        gate's last decision."""
        if self.offers == 0:
            return "no base parameters received (is the estimator running, with base_parameters: true, on " \
                   "base_parameters_topic?)"
        if self.P is None:
            return "no covariance received on base_covariance_topic (the estimator needs publish_covariance: true)"
        if self.worker.fits == 0:
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

    def revoke(self):
        """The controller could not use the applied parameters (an MPC unsound with them): back to the ones
        applied before."""
        self.gate.revoke()
        self.theta = self._applied_theta()

    def set_payload(self, body, pi_p):
        """A payload estimate π_p (10,) on ``body`` (about its frame): the candidate of the next offers, as a point
        mass (:func:`~robodyn_ros.identification.payload.payload_as_point_mass`). A
        payload appearing (mass crossing ``payload_min_mass``) freezes ``β_before`` and clears the window; one
        going away drops the candidate and clears it too."""
        mass = float(pi_p[0])
        had = self.beta_before is not None
        if abs(mass) >= self.payload_min_mass:
            if not had:
                self.beta_before, self._theta_before = self.gate.applied.copy(), self.theta.copy()
                self._clear_window()
            self.payload = (self.base.K[:, 10 * body:10 * body + 10], payload_as_point_mass(pi_p), body)
        elif had:
            self.beta_before = self.payload = None
            self._clear_window()

    def _clear_window(self):
        """The robot changed: the gate forgets its samples, and takes none while the filter responds to the
        change (its settling time); the links' nominal inertias meanwhile (``nominal_on_change``), with the drives
        of the applied set (``keep_drives``)."""
        fallback = None if not self.keep_drives else nominal_links(
            self.base, self.theta_nominal[:10 * self.model.nbodies], self.gate.applied, self.gate.applied_tag)
        self.gate.clear_window(nominal=self.nominal_on_change, fallback=fallback)
        self.theta = self._applied_theta()
        if self.t is not None:
            self._observe_from = self.t + self.settle_time
