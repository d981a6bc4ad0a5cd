"""The online estimator: payload and base parameters from a stream of joint states (and wrist wrenches),
as the ``estimator`` node runs it and as ``robodyn replay`` runs a bag. No ROS: the node converts messages
to arrays, calls this object and publishes what it returns.

:class:`OnlineEstimator` composes, per sample:

1. sample admission (:class:`~robodyn_ros.estimation.sample_gate.SampleGate`): stamps, clock jumps,
   decimation, saturation and update gaps decide which samples enter and when the filters have settled;
2. the causal Butterworth filter
   (:class:`~robodyn_ros.identification.signal_filters.CausalButterworthFilter`) of every due joint state,
   giving q, q̇, q̈ and τ (the wrench through its own filter, same delay);
3. the payload from the wrist wrench (``use_wrench``,
   :class:`~robodyn_ros.estimation.payload_estimator.WrenchPayloadEstimator`);
4. the base parameters (``base_parameters``): the joint-torque regressor
   (:class:`~robodyn_ros.estimation.torque_regressor.JointTorqueRegressor`) and its recursive weighted least
   squares (:class:`~robodyn_ros.estimation.base_parameter_estimator.BaseParameterEstimator`; σ per joint
   ``effort_noise_per_joint`` or ``effort_noise``, else learnt). Without the wrench the payload is the
   change of the last body's parameters explaining the change of β from the nominal one
   (``payload_reference: nominal``), or (``before_change``, right when the model is not the robot) the load
   explaining the torque residual of the estimate held just before the detected change
   (:class:`~robodyn_ros.estimation.payload_estimator.TorqueResidualPayload`; zero before the first change;
   changes within ``payload_change_holdoff`` s of the first update are the estimate converging);
5. the publishing gate (:class:`~robodyn_ros.estimation.publishing_gate.PublishingGate`): an estimate is due
   every 1 / ``publish_rate`` s of joint-state time, its payload gated on its standard deviations and made
   physical (:func:`~robodyn_ros.identification.payload.physical_payload`: a mass <= 0 is no payload, a
   non-physical inertia its nearest physical one);
6. the status the node reports on /diagnostics (:mod:`~robodyn_ros.estimation.estimator_status`).

Faults (docs/FAULTS.md): a payload removed or added re-opens the payload covariance and the
estimate re-converges (zero after a removal), each event recorded (``payload_events``); a saturated F/T
sensor or joint torque, a clock jump and a starved estimator pause the estimates until the filters have
settled (:mod:`~robodyn_ros.estimation.sample_gate`); a clock jump restarts the filters and the publishing
schedule and keeps the estimate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..identification.payload import body_parameter_change, physical_payload
from ..identification.signal_filters import CausalButterworthFilter
from ..dynamics.torque_scale import joint_torque_scale
from ..model.driver_profiles import profile_defaults
from ..model.errors import ModelError
from ..model.parameter_schema import check_value, copy_value
from .effort_check import EffortCheck
from .effort_measurement import EffortMeasurement
from .base_parameter_estimator import BaseParameterEstimator, base_parameter_prior
from .estimator_parameters import ESTIMATION, estimation_spec
from .estimator_status import UpdateRate, estimator_status
from .payload_estimator import PayloadChanges, TorqueResidualPayload, WrenchPayloadEstimator
from .publishing_gate import PublishingGate
from .sample_gate import SampleGate
from .stored_parameters import EstimateSnapshot, StoredParameterCheck, stored_parameters
from .torque_regressor import JointTorqueRegressor


#: The estimation parameters and their defaults (:data:`~robodyn_ros.estimation.estimator_parameters.ESTIMATION`,
#: where each is described, plus the wrist link the node takes from its robot parameters).
DEFAULTS = {"wrist_link": "", "driver": "generic", **{spec.name: spec.default for spec in ESTIMATION}}


def estimator_config(config=None):
    """The estimator configuration ``{name: value}``: :data:`DEFAULTS` updated by ``config``, a dict with
    dotted names (``"filter.cutoff"``) or nested as in the node's YAML section (``filter: {cutoff: }``,
    optionally under ``ros__parameters``). Names of other node parameters (robot, topics) are ignored.
    ``effort_noise`` may also be a list (one σ per joint, N m): it then becomes ``effort_noise_per_joint``.
    ``driver`` (:data:`~robodyn_ros.model.driver_profiles.DRIVERS`) sets the defaults of its profile first.
    ValueError naming the parameter on a wrong type or an out-of-range value."""
    flat = {}

    def flatten(d, prefix):
        for key, value in d.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                flatten(value, name)
            else:
                flat[name] = value

    config = dict(config or {})
    flatten(config.get("ros__parameters", config), "")
    if isinstance(flat.get("effort_noise"), (list, tuple, np.ndarray)):
        flat["effort_noise_per_joint"] = flat.pop("effort_noise")
    values = dict(DEFAULTS)
    driver = flat.get("driver", "generic")
    try:
        values.update(profile_defaults("estimator", driver), driver=driver)
    except ValueError as exc:
        raise ValueError(f"estimator parameter {exc}") from None
    for name, value in flat.items():
        if name not in DEFAULTS or name == "driver":
            continue
        if name == "wrist_link":
            if not isinstance(value, str):
                raise ValueError(f"estimator parameter wrist_link: expected str, got {value!r}")
            values[name] = value
            continue
        spec = estimation_spec(name)
        value = _as_float(value, spec)
        errors = check_value(spec, value)
        if errors:
            raise ValueError(f"estimator parameter {errors[0]}")
        values[name] = copy_value(value)
    return values


def _as_float(value, spec):
    """``value`` with integers made floats where ``spec`` (a float or list-of-float parameter) wants floats: a
    library configuration may say ``cutoff: 20`` where a ROS parameter file must say ``20.0``."""
    def one(x):
        return float(x) if isinstance(x, (int, np.integer, np.floating)) and not isinstance(x, bool) else x
    if spec.element_type is not float:
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return [one(x) for x in value]
    return one(value)


@dataclass(frozen=True)
class OnlineEstimate:
    """What :meth:`OnlineEstimator.update` returns after a sample.

    t: time of the sample (s); updated: the sample went through the filters and the RLS updates the
    faults allow (a due, in-order sample); published: an estimate is due at this sample (the node
    publishes now); base_parameters, base_parameters_std (r,) and base_parameter_names (r,): the
    base-parameter estimate (None when ``base_parameters`` is off); friction, friction_std: ``{"viscous",
    "coulomb", "offset": (nv,)}`` from the base parameters and their std (None without them); payload: the
    payload (10,) about ``payload_frame`` last published (None before the first converged one);
    payload_estimate and payload_std (10,): the live estimate (std None without the wrench, except with
    payload_reference before_change after a change); status: ``(level, message, values)`` as in the node's
    /diagnostics; base_parameters_covariance (r, r): the base-parameter RLS covariance P, on published
    estimates only (None otherwise and without base parameters); withheld: what is learned from the joint
    torques is not published (the node publishes no base parameters) until the effort check has found the
    efforts consistent (:attr:`OnlineEstimator.withheld`)."""

    t: float
    updated: bool
    published: bool
    base_parameters: np.ndarray | None
    base_parameters_std: np.ndarray | None
    base_parameter_names: tuple | None
    friction: dict | None
    friction_std: dict | None
    payload: np.ndarray | None
    payload_estimate: np.ndarray
    payload_std: np.ndarray | None
    payload_frame: str
    status: tuple
    base_parameters_covariance: np.ndarray | None = None
    withheld: bool = False


def fixed_effort_std(config, model):
    """A configured σ (N m) of the joint torques of ``model``: ``effort_noise_per_joint`` (nv,) when given,
    else the scalar ``effort_noise`` when positive, else None (learnt from the data). ValueError when the
    list's length is not nv."""
    per_joint = config["effort_noise_per_joint"]
    if not per_joint:
        return config["effort_noise"] if config["effort_noise"] > 0 else None
    if len(per_joint) != model.nv:
        raise ValueError(f"estimator parameter effort_noise_per_joint: {len(per_joint)} values for "
                         f"{model.nv} joints ({', '.join(model.joint_names)})")
    return np.array(per_joint, dtype=float)


def base_parameter_estimator(model, regressor, config):
    """The :class:`~robodyn_ros.estimation.base_parameter_estimator.BaseParameterEstimator` of ``regressor``'s
    base parameters as the estimator configuration ``config`` sets it up: prior from the nominal model, a
    change boosts the parameters the last body (the payload) moves."""
    c, base, beta_nominal = config, regressor.base, regressor.beta_nominal
    last = model.nbodies - 1
    moved = np.flatnonzero(np.abs(base.K[:, 10 * last:10 * last + 10]).sum(axis=1) > 1e-9)
    prior = base_parameter_prior(model, base, beta_nominal)
    return BaseParameterEstimator(
        beta_nominal, prior, model.nv, bandwidth=c["filter.cutoff"], sigma=fixed_effort_std(c, model),
        sigma_floor=1e-4 * joint_torque_scale(model), forgetting=c["forgetting"], boost_indices=moved,
        boost_variance=prior[moved] ** 2, change_ratio=c["change_ratio"],
        change_time=c["change_time"] if c["change_time"] > 0 else 3.0 / c["filter.cutoff"])


def _part_state(part, name, doc):
    """A read-only view of ``name`` of the part ``part`` (an attribute of the estimator)."""
    return property(lambda self: getattr(getattr(self, part), name), doc=doc)


class OnlineEstimator:
    """The estimator node's logic (module docstring) on one model.

    model: :class:`~robodyn_ros.model.model.Model`; config: the estimator's parameters (see
    :func:`estimator_config`; None: the node's defaults); wrist_link: the link of the F/T sensor and payload
    (default ``config["wrist_link"]``, else the last body); report: optional ``report(kind, text)`` called on
    events (kinds ``joint_states_stamp``, ``wrench_stamp``: a dropped stamp; ``time_jump``,
    ``wrench_saturated``, ``sparse``: a pause; ``payload_change``). ``update(t, q, v, tau, wrench=None)`` per
    sample; the node drives the finer steps itself (:meth:`admit_wrench`, :meth:`admit`, :meth:`step`,
    :meth:`publish`) to pair wrenches and joint states that arrive apart.

    The parts: ``gate`` (sample admission), ``wrench_payload`` (None without ``use_wrench``), ``regressor``,
    ``base_estimator`` and ``torque_payload`` (None without ``base_parameters``), ``publishing``, ``changes``.
    """

    samples = _part_state("gate", "samples", "Joint states admitted.")
    dropped_stamps = _part_state("gate", "dropped_stamps", "Joint states and wrenches dropped for their stamps.")
    time_jumps = _part_state("gate", "time_jumps", "Clock jumps of the joint states.")
    wrench_saturated = _part_state("gate", "wrench_saturated", "Saturated wrenches kept out.")
    effort_saturated = _part_state("gate", "effort_saturated", "Due joint states with a saturated torque.")
    sparse_gaps = _part_state("gate", "sparse_gaps", "Updates farther apart than filter.max_interval.")
    last_t = _part_state("gate", "last_t", "Stamp of the last admitted joint state (None after a restart).")
    last_update_t = _part_state("gate", "last_update_t", "Joint-state time of the last update (None after a restart).")
    update_rate_hz = _part_state("rate", "hz", "Updates per second of wall time.")
    unconverged_publishes = _part_state("publishing", "unconverged_publishes",
                                        "Publishes at which the wrench estimate was not converged.")

    def __init__(self, model, config=None, wrist_link=None, report=None):
        c = self.config = estimator_config(config)
        self.model = model
        self.wrist_link = wrist_link or c["wrist_link"] or model.body_names[-1]
        model.body_index(self.wrist_link)  # ModelError naming the links if unknown
        self.report = report or (lambda kind, text: None)
        self.gate = SampleGate(c, model.effort_limit, self.report)
        self.settle_time = self.gate.settle_time
        self.joint_filter = CausalButterworthFilter(model.nv, c["filter.cutoff"], c["filter.order"])
        self.wrench_payload = WrenchPayloadEstimator(model, self.wrist_link, c) if c["use_wrench"] else None
        self.wrench_rls = self.wrench_payload.rls if c["use_wrench"] else None
        self.regressor = self.base = self.base_estimator = self.torque_payload = None
        if c["base_parameters"]:
            self.regressor = JointTorqueRegressor(model, c["coulomb_width"])
            self.base, self.beta_nominal = self.regressor.base, self.regressor.beta_nominal
            self.base_estimator = base_parameter_estimator(model, self.regressor, c)
            self.torque_payload = TorqueResidualPayload(model.nbodies - 1, c["payload_mass_std"],
                                                        c["payload_change_holdoff"], c["filter.cutoff"])
            self.payload_rls, self.last_body_columns = self.torque_payload.rls, self.torque_payload.columns
            self.payload_references = self.torque_payload.references
        self.stored = self.stored_check = None   # initial_parameters: the file and its judgement
        if c["initial_parameters"] and self.base is not None:
            try:
                self.stored = stored_parameters(model, self.base, c["initial_parameters"])
                self.stored_check = StoredParameterCheck(self.stored.beta, self.beta_nominal, c["initial_parameters"])
            except ModelError as exc:   # not this robot's file: the estimate starts from the URDF, and says so
                self.stored_check = StoredParameterCheck.unreadable(c["initial_parameters"], str(exc))
                self.report("initial_parameters", self.stored_check.reason)
        self.effort = EffortMeasurement(model, c, self.wrist_link)
        self.effort_check = EffortCheck(model.joint_names, c["effort.kind"], c["effort.filter_cutoff"]) \
            if c["effort.check"] and c["base_parameters"] else None
        self.payload_frame = self.wrist_link if c["use_wrench"] else model.body_names[-1]
        self.publishing = PublishingGate(c)
        self.changes = PayloadChanges(self.report)
        self.payload_events = self.changes.events    # (time, payload mass before) of detected payload changes
        self.rate = UpdateRate()
        self.base_started_at = None     # joint-state time of the first base-parameter update
        self.updates = 0
        self.filtered, self.base_updated = None, False
        self.base_sample = None          # (Y_base (nv, r), τ_f (nv,)) of this step's base-parameter update, or None

    @property
    def latest_wrench(self):
        """``(t, w)``: the wrench the next :meth:`step` uses (None: none yet); the node sets it to pair wrenches
        and joint states that arrive apart."""
        return self.gate.latest_wrench

    @latest_wrench.setter
    def latest_wrench(self, value):
        self.gate.latest_wrench = value

    @property
    def effort_std(self):
        """σ (nv,) of the joint torques the base-parameter estimate weighs them with now: the configured
        ``effort_noise_per_joint`` / ``effort_noise``, or the level learnt from the data (None before the first
        sample)."""
        return self.base_estimator.sigma

    @property
    def _referenced(self):
        """Whether the payload from joint torques is referenced to the estimate before the change."""
        return self.wrench_payload is None and self.config["payload_reference"] == "before_change"

    @property
    def withheld(self):
        """Whether what is learned from the joint torques (base parameters, the payload from joint torques) is
        kept back: while :attr:`effort_check` has not judged the efforts consistent (the first seconds of
        motion), and for good once it has found them inconsistent (:class:`~robodyn_ros.estimation.effort_check.
        EffortCheck`)."""
        return self.effort_check is not None and self.effort_check.verdict != "consistent"

    def restart_time(self):
        """Forget the time-dependent state (filters, stamps, publishing schedule, saturation pauses); the
        estimate and its covariance are kept."""
        self.joint_filter.reset()
        self.effort.restart()
        self.gate.restart()
        if self.wrench_payload is not None:
            self.wrench_payload.restart()
        self.publishing.restart()

    # ------------------------------------------------------------------------------------------ samples
    def update(self, t, q, v, tau, wrench=None):
        """One sample: time t (s), q (nq,), v (nv,), tau (nv,) or None in ``model.joint_names`` order, and
        optionally the wrist wrench (6,) ``[f, t]`` measured at the same time. Returns
        :class:`OnlineEstimate`."""
        if tau is None and self.base is not None:
            raise ValueError("tau is None: the base-parameter estimate needs joint torques")
        if wrench is not None:
            self.admit_wrench(float(t), np.asarray(wrench, dtype=float))
        due = self.admit(float(t), q, v, tau)
        published = self.step(float(t), q, v, tau) if due else False
        payload = self.publish() if published else None
        return self.estimate(float(t), updated=due, published=published, payload=payload)

    def admit_wrench(self, t, w):
        """Stamp and saturation checks of one wrench (6,) at time t: ``(t, w)``, now ``latest_wrench``, or
        None (:meth:`SampleGate.admit_wrench <robodyn_ros.estimation.sample_gate.SampleGate.admit_wrench>`)."""
        return self.gate.admit_wrench(t, w)

    def admit(self, t, q, v, tau):
        """Stamp checks and the decimation count of one joint state: True when it is due (every
        ``decimation``-th admitted sample). A repeated or slightly older stamp is dropped; a jump beyond
        ``time_jump_threshold`` restarts the time-dependent state (:meth:`restart_time`)."""
        if self.gate.time_jump(t):
            self.restart_time()
        return self.gate.admit(t)

    def step(self, t, q, v, tau):
        """One due joint state at time t: filters, then the estimates that the faults allow (module
        docstring). Returns True when an estimate is due for publishing (``publish_rate``)."""
        if tau is not None:
            tau = self.effort.torque(q, np.asarray(tau, dtype=float))
        settled = self.gate.step(t, tau)
        q_f, v_f, a_f, tau_f = self.joint_filter.update(t, *self.effort.lag(t, q, v), tau)
        self.filtered = (q_f, v_f, a_f, tau_f)   # what this step estimated from (a replay keeps them)
        self.base_updated, self.base_sample = False, None
        if self.wrench_payload is not None and self.gate.latest_wrench is not None:
            usable = self.wrench_payload.filter_wrench(t, *self.gate.latest_wrench)
            if settled and usable and self.gate.wrench_clean(t):
                mass_before = self.wrench_payload.update(q_f, v_f, a_f)
                if mass_before is not None:
                    self.changes.record(t, mass_before, "the wrist wrench")
        if self.base is not None and settled and self.gate.effort_clean(t):
            self._update_base_parameters(t, q_f, v_f, a_f, tau_f)
        self.updates += 1
        self.rate.count(self.updates)
        return self.publishing.publish_due(t)

    def _update_base_parameters(self, t, q_f, v_f, a_f, tau_f):
        """The base-parameter update on one filtered sample, and the payload from joint torques."""
        Y_full = self.regressor(q_f, v_f, a_f)
        mass_before = self.payload_parameters()[0] if self.wrench_payload is None else None
        Y_base = self.base.reduce(Y_full)
        beta_before = self.base_estimator.beta.copy() if self._referenced else None
        friction_variance = self.regressor.friction_variance(v_f)
        if self.effort_check is not None and self.effort_check.verdict == "pending":
            as_reported = tau_f - self.effort.compensation(q_f) if self.effort.kind == "gravity_compensated" else None
            if self.effort_check.observe(t, Y_base @ self.beta_nominal, tau_f, v_f, as_reported) == "mismatch":
                self.report("effort_mismatch", self.effort_check.reason)
        if self.stored_check is not None and self.stored_check.verdict == "pending":
            if self.stored_check.observe(t, Y_base, tau_f, v_f) == "taken":
                self.base_estimator.set_prior_mean(self.stored.beta)
            if self.stored_check.verdict != "pending":
                self.report("initial_parameters", self.stored_check.reason)
        result = self.base_estimator.update(t, Y_base, tau_f, friction_variance)
        self.base_updated, self.base_sample = result.accepted, (Y_base, tau_f)
        if self.base_started_at is None:
            self.base_started_at = t
        if result.change_detected and self.wrench_payload is None:
            if self._referenced:
                self.torque_payload.change(t, beta_before, self.base_started_at, self.base_estimator.sigma,
                                           self.gate.update_step)
            self.changes.record(t, mass_before, "joint torques")
        if self._referenced:
            self.torque_payload.update(Y_full, Y_base, tau_f, self.base_estimator.sigma, friction_variance)

    def reset_estimate(self):
        """Back to the nominal model (after a tool change): the base-parameter estimate to the URDF's prior (a
        taken ``initial_parameters`` file forgotten), the payload estimates to none; σ learnt again, the
        filters and the effort check kept."""
        if self.base is not None:
            self.base_estimator.set_prior_mean(self.beta_nominal)
            self.base_estimator.reset()
            self.torque_payload = TorqueResidualPayload(self.model.nbodies - 1, self.config["payload_mass_std"],
                                                        self.config["payload_change_holdoff"],
                                                        self.config["filter.cutoff"])
            self.payload_rls = self.torque_payload.rls
            self.payload_references = self.torque_payload.references
            self.stored_check = None
        if self.wrench_payload is not None:
            self.wrench_payload.rls.reset()
        self.publishing.restart()

    def snapshot(self, extra=None):
        """:class:`~robodyn_ros.estimation.stored_parameters.EstimateSnapshot` of the current base-parameter
        estimate for :func:`~robodyn_ros.estimation.stored_parameters.estimate_document`, with ``estimate:``
        (joint-state time, updates, the payload now, the initial_parameters verdict) and ``extra`` as top-level
        entries; ModelError when there is no estimate to save."""
        rls = self.base_estimator
        if rls is None:
            raise ModelError("the estimator runs with base_parameters: false: there is no estimate to save")
        if rls.updates == 0:
            raise ModelError("the estimator has taken no joint-torque sample yet: there is no estimate to save")
        payload = self.publish()
        stored = None if self.stored_check is None else {"file": self.stored_check.source,
                                                          "verdict": self.stored_check.verdict}
        note = {"estimate": {"t": None if self.last_t is None else float(self.last_t), "updates": int(self.updates),
                             "base_parameter_updates": int(rls.updates), "payload_frame": self.payload_frame,
                             "payload": None if payload is None else [float(x) for x in payload],
                             "initial_parameters": stored,
                             "note": "fit.relative_error: each sample predicted by the estimate before it"}}
        c = self.config
        return EstimateSnapshot(model=self.model, base=self.base, beta=rls.beta.copy(), P=np.array(rls.P),
                                sigma=None if rls.sigma is None else rls.sigma.copy(), A_data=rls.A_data.copy(),
                                prediction_error=rls.prediction_error, updates=int(rls.updates),
                                cutoff=float(c["filter.cutoff"]), order=int(c["filter.order"]),
                                coulomb_width=float(c["coulomb_width"]), extra={**note, **(extra or {})})

    # ---------------------------------------------------------------------------------------- estimates
    def payload_parameters(self):
        """Live payload parameters (10,) about ``payload_frame`` (the wrist link, or the last body). From joint
        torques: the change of the last body's parameters from the nominal ones (``payload_reference``
        nominal), or the load explaining the torque residual of the estimate held before the last detected
        change (before_change; zero before the first change: the robot starts without one)."""
        if self.wrench_payload is not None:
            return self.wrench_payload.parameters()
        if self._referenced:
            return self.torque_payload.parameters()
        return body_parameter_change(self.base, self.beta_nominal, self.base_estimator.beta, self.model.nbodies - 1)

    def converged_payload(self):
        """The payload parameters (10,) to publish
        (:meth:`PublishingGate.converged <robodyn_ros.estimation.publishing_gate.PublishingGate.converged>` on
        the wrench estimate; without the wrench the live estimate), or None before the first converged one."""
        pi = self.payload_parameters()
        if self.wrench_payload is None:
            return pi
        return self.publishing.converged(pi, self.wrench_payload.std)

    def publish(self):
        """The payload (10,) to publish now (:meth:`converged_payload` made physical by
        :func:`physical_payload`), or None while nothing has converged yet."""
        published = self.converged_payload()
        if published is None or (self.wrench_payload is None and self.withheld):
            return None
        return physical_payload(published)

    def diagnostics_due(self):
        """Whether a diagnostics status is due at the last joint-state time (``diagnostics_rate``)."""
        return self.publishing.diagnostics_due(self.gate.last_t)

    def friction(self, std=False):
        """``{"viscous", "coulomb", "offset": (nv,)}`` of the base-parameter estimate, or with ``std`` their
        standard deviations (NaN for a joint whose column is not a base parameter on its own); None without
        base parameters."""
        if self.base is None:
            return None
        return self.regressor.friction(self.base_estimator.std if std else self.base_estimator.beta)

    def estimate(self, t, updated=False, published=False, payload=None):
        """:class:`OnlineEstimate` of the current state (payload: the one just published, else the last)."""
        base = self.base is not None
        last = self.publishing.last_converged if payload is None else payload
        if self.wrench_payload is not None:
            payload_std = self.wrench_payload.std
        else:
            payload_std = self.torque_payload.std if base and self._referenced else None
        return OnlineEstimate(
            t=t, updated=updated, published=published,
            base_parameters=self.base_estimator.beta.copy() if base else None,
            base_parameters_std=self.base_estimator.std if base else None,
            base_parameter_names=self.base.names if base else None, friction=self.friction(),
            friction_std=self.friction(std=True),
            payload=None if last is None else physical_payload(last), payload_estimate=self.payload_parameters(),
            payload_std=payload_std, payload_frame=self.payload_frame, status=self.status(t),
            base_parameters_covariance=self.base_estimator.P.copy() if base and published else None,
            withheld=self.withheld)

    def status(self, t, rejected=None, skipped_overload=0, lost=None):
        """``(level, message, values)`` of the estimator's diagnostics at joint-state time t
        (:func:`~robodyn_ros.estimation.estimator_status.estimator_status`); ``rejected``: the caller's
        ``{message kind: count}`` of dropped messages, ``skipped_overload``: due samples it skipped, ``lost``:
        ``{input: count}`` of messages lost before it took them (None: not counted)."""
        return estimator_status(self, t, rejected, skipped_overload, lost)
