"""The online estimator: payload and base parameters from a stream of joint states (and wrist wrenches),
as the ``estimator`` node runs it and as ``robodyn replay`` runs a bag. No ROS: the node converts messages
to arrays, calls this object and publishes what it returns.

Every ``decimation``-th joint state goes through the causal Butterworth filter
(:class:`~robodyn_ros.identification.signal_filters.CausalButterworthFilter`, giving q, q̇, q̈ and τ); the
latest wrench goes through the same filter (same delay). Then

* payload (``use_wrench``): recursive least squares on ``w = Y_b(q, q̇, q̈) pi_p + b`` (sensor frame,
  :mod:`robodyn_ros.identification.sensor_wrench`), pi_p the payload's 10 parameters, b the sensor bias; a
  CUSUM test on the innovations detects a payload change and re-opens the payload covariance
  (:class:`~robodyn_ros.estimation.recursive.RecursiveLeastSquares`);
* base parameters (``base_parameters``): the same RLS on ``τ = Y_base(q, q̇, q̈) beta`` (Gautier-Khalil
  base parameters incl. armature and friction, the Coulomb sign ``tanh(v / coulomb_width)``, σ per joint
  ``effort_noise_per_joint`` or ``effort_noise``); without the wrench the payload is the change of the last
  body's parameters explaining the change of beta from the nominal one (``payload_reference: nominal``), or
  (``before_change``, right when the model is not the robot) a 10-parameter RLS on the torque residual of
  the estimate held just before the detected change, ``τ_f - Y_base β_ref = Y_last π_p`` (zero before the
  first change; changes within ``payload_change_holdoff`` s of the first update are the estimate converging).

Faults (README "Fault injection"):

* payload removed or added: the change detector re-opens the payload covariance and the estimate
  re-converges (zero after a removal); each event is recorded (``payload_events``);
* a saturated F/T sensor: a wrench with any |f_i| >= ``wrench_saturation.force`` or |t_i| >=
  ``wrench_saturation.torque`` (0: off) never enters the wrench filter, and the payload RLS pauses until the
  filter has settled again (``settle_time`` = 3 / ``filter.cutoff`` after the last saturated sample);
  likewise a joint torque at ``effort_saturation`` times the URDF effort limit pauses the base-parameter RLS;
* time: a joint state or wrench whose stamp repeats or goes back by at most ``time_jump_threshold`` is
  dropped; a jump of more than ``time_jump_threshold`` either way (simulation reset, bag loop, a gap)
  restarts the filters and the publishing schedule and keeps the estimate; after every filter (re)start
  the RLS waits ``settle_time``;
* falling behind: two updates more than ``filter.max_interval`` apart alias the filter's band, so the RLS
  pauses for ``settle_time`` after every such gap: a starved estimator stops estimating instead of
  publishing wrong payloads.

Publishing schedule (joint-state time): an estimate is due every 1 / ``publish_rate`` s; the payload
published then is gated on its standard deviations (:meth:`OnlineEstimator.converged_payload`) and on being
physical (:func:`~robodyn_ros.identification.payload.physical_payload`: a mass <= 0 is no payload, a non-physical inertia its nearest physical one).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..identification.base_parameters import compute_base_parameters, full_parameters, smooth_sign
from ..identification.payload import (PayloadChangeDetector, body_parameter_change, physical_payload,
                                      point_mass_parameters)
from ..identification.sensor_wrench import SensorWrenchRegressor
from ..identification.signal_filters import CausalButterworthFilter
from ..kernels import compile_kernels
from ..dynamics.torque_scale import joint_torque_scale
from ..model.parameter_schema import check_value, copy_value
from .base_parameter_estimator import BaseParameterEstimator, base_parameter_prior
from .estimator_parameters import ESTIMATION, estimation_spec
from .recursive import RecursiveLeastSquares

PAYLOAD_EVENT_WINDOW = 0.5  # s: detector alarms this close to the previous one report the same change
PAYLOAD_REFERENCE_WINDOW = 3.0  # s: payload_reference before_change keeps its reference through re-alarms this close
FRICTION_BOUND = 0.03           # Coulomb friction of a joint, at most, as a fraction of its torque scale
FRICTION_SMOOTHING_MAX = 0.05   # rad/s: beyond a few of these every plausible Coulomb transition is complete

#: The estimation parameters and their defaults (:data:`~robodyn_ros.estimation.estimator_parameters.ESTIMATION`,
#: where each is described, plus the wrist link the node takes from its robot parameters).
DEFAULTS = {"wrist_link": "", **{spec.name: spec.default for spec in ESTIMATION}}


def estimator_config(config=None):
    """The estimator configuration ``{name: value}``: :data:`DEFAULTS` updated by ``config``, a dict with
    dotted names (``"filter.cutoff"``) or nested as in the node's YAML section (``filter: {cutoff: }``,
    optionally under ``ros__parameters``). Names of other node parameters (robot, topics) are ignored.
    ``effort_noise`` may also be a list (one σ per joint, N m): it then becomes ``effort_noise_per_joint``.
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
    for name, value in flat.items():
        if name not in DEFAULTS:
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


def repeated_change_note(events, t, count, window):
    """A line when the payload-change detector reported at least ``count`` changes (``events``: ``(time, payload
    mass before)``) within the ``window`` seconds up to joint-state time ``t``, else None (``count`` 0: never).
    A detector that alarms again and again is not seeing payloads: the model does not fit the robot, or the
    noise levels it normalises the innovations with are set below the real ones."""
    if count <= 0 or t is None:
        return None
    recent = [mass for t_event, mass in events if 0.0 <= t - t_event <= window]
    if len(recent) < count:
        return None
    return (f"payload change detected {len(recent)} times in the last {window:g} s (payload mass before them "
            f"from {min(recent):.3g} to {max(recent):.3g} kg): not payloads, but a model that does not fit the robot "
            "(the right URDF? identified parameters?) or noise levels (effort_noise, force_noise, torque_noise) "
            "below the real ones")


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


def payload_prior_variance(mass_std, length=0.2):
    """Prior / boost variances (10,) of a payload's parameters: mass ``mass_std``², first moments
    ``(mass_std length)``², inertias ``(mass_std length²)``² (a load within ``length`` of the flange)."""
    return np.array([mass_std**2] + [(mass_std * length) ** 2] * 3 + [(mass_std * length**2) ** 2] * 6)


@dataclass(frozen=True)
class OnlineEstimate:
    """What :meth:`OnlineEstimator.update` returns after a sample.

    t: time of the sample (s); updated: the sample went through the filters and the RLS updates the
    faults allow (a due, in-order sample); published: an estimate is due at this sample (the node
    publishes now); base_parameters, base_parameters_std (r,) and base_parameter_names (r,): the
    base-parameter estimate (None when ``base_parameters`` is off); friction, friction_std: ``{"viscous",
    "coulomb", "offset": (nv,)}`` from the base parameters and their std (None without them); payload: the payload (10,) about
    ``payload_frame`` last published (None before the first converged one); payload_estimate and
    payload_std (10,): the live estimate (std None without the wrench, except with payload_reference
    before_change after a change); status: ``(level, message, values)`` as in the node's /diagnostics;
    base_parameters_covariance (r, r): the base-parameter RLS
    covariance P, on published estimates only (None otherwise and without base parameters)."""

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


class OnlineEstimator:
    """The estimator node's logic (module docstring) on one model.

    model: :class:`~robodyn_ros.model.model.Model`; config: the estimator's parameters (see
    :func:`estimator_config`; None: the node's defaults); wrist_link: the link of the F/T sensor and payload
    (default ``config["wrist_link"]``, else the last body); report: optional ``report(kind, text)`` called on
    events (kinds ``joint_states_stamp``, ``wrench_stamp``: a dropped stamp; ``time_jump``,
    ``wrench_saturated``, ``sparse``: a pause; ``payload_change``). ``update(t, q, v, tau, wrench=None)`` per
    sample; the node drives the finer steps itself (:meth:`admit_wrench`, :meth:`admit`, :meth:`step`,
    :meth:`publish`) to pair wrenches and joint states that arrive apart.
    """

    def __init__(self, model, config=None, wrist_link=None, report=None):
        c = self.config = estimator_config(config)
        self.model = model
        self.wrist_link = wrist_link or c["wrist_link"] or model.body_names[-1]
        model.body_index(self.wrist_link)  # ModelError naming the links if unknown
        self.report = report or (lambda kind, text: None)
        self.kernels = compile_kernels(model, register=False)
        self.joint_filter = CausalButterworthFilter(model.nv, c["filter.cutoff"], c["filter.order"])
        self.wrench_filter = CausalButterworthFilter(6, c["filter.cutoff"], c["filter.order"])
        self.wrench_rls = None
        if c["use_wrench"]:
            self.wrench_regressor = SensorWrenchRegressor(model, self.wrist_link)
            n = 16 if c["estimate_bias"] else 10
            P0 = np.concatenate([payload_prior_variance(c["payload_mass_std"]), [100.0] * 3 + [1.0] * 3])[:n]
            self.wrench_rls = RecursiveLeastSquares(
                np.zeros(n), P0, [c["force_noise"]] * 3 + [c["torque_noise"]] * 3, forgetting=c["forgetting"],
                trace_max=10.0 * P0.sum(), boost_indices=np.arange(10), boost_variance=P0[:10],
                detector=PayloadChangeDetector(threshold=c["change_threshold"]))
        self.base = None
        if c["base_parameters"]:
            self._setup_base_parameters()
        self.payload_frame = self.wrist_link if c["use_wrench"] else model.body_names[-1]
        self.base_started_at = None     # joint-state time of the first base-parameter update
        self.samples = self.updates = 0
        self.filtered, self.base_updated = None, False
        self.base_sample = None          # (Y_base (nv, r), τ_f (nv,)) of this step's base-parameter update, or None
        self.payload_events = []         # (time, payload mass before) of detected payload changes
        self._converged_payload = None   # the last payload estimate within payload_publish_std
        self.unconverged_publishes = 0   # publishes at which the estimate was not converged
        self.settle_time = 3.0 / c["filter.cutoff"]
        self.max_interval = c["filter.max_interval"] if c["filter.max_interval"] > 0.0 else 1.0 / c["filter.cutoff"]
        self.sparse_gaps = 0
        saturation = np.array([c["wrench_saturation.force"]] * 3 + [c["wrench_saturation.torque"]] * 3)
        self.wrench_limit = np.where(saturation > 0.0, saturation, np.inf)
        fraction = c["effort_saturation"]
        limit = np.asarray(model.effort_limit, dtype=float)
        self.effort_limit = np.where((fraction > 0.0) & (limit > 0.0), fraction * limit, np.inf)
        self.wrench_saturated = self.effort_saturated = 0
        self.dropped_stamps = self.time_jumps = 0
        self._rate_window = (time.monotonic(), 0)
        self.update_rate_hz = 0.0
        self.restart_time()

    def _setup_base_parameters(self):
        model, c = self.model, self.config
        self.coulomb_width = c["coulomb_width"]
        self.base = compute_base_parameters(model, coulomb_width=self.coulomb_width)
        n_rigid = 10 * model.nbodies
        self._Y_rigid = np.empty((model.nv, n_rigid))
        self._Y_full = np.zeros((model.nv, n_rigid + 4 * model.nv))
        j = np.arange(model.nv)
        self._joint_columns = (j, n_rigid + 4 * j)     # row j, column of a_j; v_j, sgn(v_j), 1 follow
        self._Y_full[j, n_rigid + 4 * j + 3] = 1.0
        self.beta_nominal = self.base.from_full(full_parameters(model))
        last = model.nbodies - 1
        moved = np.flatnonzero(np.abs(self.base.K[:, 10 * last:10 * last + 10]).sum(axis=1) > 1e-9)
        prior = base_parameter_prior(model, self.base, self.beta_nominal)
        self._friction_bound = FRICTION_BOUND * joint_torque_scale(model)
        fixed = self._fixed_effort_std()
        self.base_estimator = BaseParameterEstimator(
            self.beta_nominal, prior, model.nv, bandwidth=c["filter.cutoff"], sigma=fixed,
            sigma_floor=1e-4 * joint_torque_scale(model), forgetting=c["forgetting"], boost_indices=moved,
            boost_variance=prior[moved] ** 2, change_ratio=c["change_ratio"],
            change_time=c["change_time"] if c["change_time"] > 0 else 3.0 / c["filter.cutoff"])
        self._friction_index = self._pure_base_columns(n_rigid)
        # payload_reference before_change: the load on the last body explaining the torque residual of the
        # base estimate held just before the detected change, ``τ_f - Y_base β_ref = Y_last π_p``
        self.last_body_columns = slice(10 * last, 10 * last + 10)
        self._beta_ref = None
        self._payload_ref = np.zeros(10)
        self._reference_t = None
        self.payload_references = []     # times at which a detected change became the payload's reference
        self.payload_rls = RecursiveLeastSquares(
            np.zeros(10), payload_prior_variance(c["payload_mass_std"]), 1.0, forgetting=1.0, detector=None)

    @property
    def effort_std(self):
        """σ (nv,) of the joint torques the base-parameter estimate weighs them with now: the configured
        ``effort_noise_per_joint`` / ``effort_noise``, or the level learnt from the data (None before the first
        sample)."""
        return self.base_estimator.sigma

    def _fixed_effort_std(self):
        """A configured σ of the joint torques: ``effort_noise_per_joint`` (nv,) when given, else the scalar
        ``effort_noise`` when positive, else None (learnt from the data). ValueError when the list's length is
        not nv."""
        per_joint = self.config["effort_noise_per_joint"]
        if not per_joint:
            return self.config["effort_noise"] if self.config["effort_noise"] > 0 else None
        if len(per_joint) != self.model.nv:
            raise ValueError(f"estimator parameter effort_noise_per_joint: {len(per_joint)} values for "
                             f"{self.model.nv} joints ({', '.join(self.model.joint_names)})")
        return np.array(per_joint, dtype=float)

    def _pure_base_columns(self, n_rigid):
        """Base-parameter index (or -1) of each joint's viscous, Coulomb and offset columns: (3, nv), for the
        columns that are base parameters on their own (a unit row of K)."""
        out = np.full((3, self.model.nv), -1)
        K = self.base.K
        for j in range(self.model.nv):
            for k in range(3):
                col = n_rigid + 4 * j + 1 + k
                rows = np.flatnonzero(np.abs(K[:, col]) > 1e-12)
                if len(rows) == 1 and abs(K[rows[0], col] - 1.0) < 1e-12 and \
                        np.count_nonzero(np.abs(K[rows[0]]) > 1e-12) == 1:
                    out[k, j] = rows[0]
        return out

    def restart_time(self):
        """Forget the time-dependent state (filters, stamps, publishing schedule, saturation pauses); the
        estimate and its covariance are kept."""
        self.joint_filter.reset()
        self.wrench_filter.reset()
        self.last_t = None               # stamp of the last admitted joint state
        self._last_wrench_t = None       # stamp of the last wrench fed to the wrench filter
        self.latest_wrench = None        # (t, w) the next update uses
        self.last_publish = None
        self._last_diagnostics = None    # joint-state time of the last diagnostics
        self._settled_at = None          # joint-state time from which the filters have settled
        self._wrench_settled_at = None
        self._wrench_clean_at = -np.inf  # joint-state time after which the last saturated wrench has decayed
        self._effort_clean_at = -np.inf
        self.last_update_t = None        # joint-state time of the last update (filter step)
        self._update_step = 1e-3         # s between the last two updates
        self._dense_at = -np.inf         # joint-state time after which the filters have settled on dense samples

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
        None (dropped: a repeated or slightly older stamp; or saturated, which pauses the payload RLS)."""
        if self.latest_wrench is not None:
            previous = self.latest_wrench[0]
            if previous - self.config["time_jump_threshold"] <= t <= previous:
                self.dropped_stamps += 1
                self.report("wrench_stamp", f"wrench stamp {t:.6f} s is not after the previous {previous:.6f} s "
                                            "(duplicate or out of order)")
                return None
        if np.any(np.abs(w) >= self.wrench_limit):
            # a clipped sample is wrong by an unknown amount: keep it out of the filter and pause the RLS
            self.wrench_saturated += 1
            self._wrench_clean_at = t + self.settle_time
            self.report("wrench_saturated", f"F/T sensor saturated ({self.wrench_saturated} samples so far): "
                        f"|w| = {np.round(np.abs(w), 3).tolist()}; payload estimation paused")
            return None
        self.latest_wrench = (t, w)
        return self.latest_wrench

    def admit(self, t, q, v, tau):
        """Stamp checks and the decimation count of one joint state: True when it is due (every
        ``decimation``-th admitted sample). A repeated or slightly older stamp is dropped; a jump beyond
        ``time_jump_threshold`` restarts the time-dependent state (:meth:`restart_time`)."""
        if self.last_t is not None:
            step = t - self.last_t
            if abs(step) > self.config["time_jump_threshold"]:
                self.time_jumps += 1
                self.report("time_jump", f"joint-state time jumped by {step:+.3f} s (simulation reset, bag loop "
                                         "or gap): filters restarted, estimate kept")
                self.restart_time()
            elif step <= 0.0:
                self.dropped_stamps += 1
                self.report("joint_states_stamp", f"joint_states stamp {t:.6f} s is not after the previous "
                                                  f"{self.last_t:.6f} s (duplicate or out of order)")
                return False
        self.last_t = t
        self.samples += 1
        return not (self.samples - 1) % self.config["decimation"]

    def step(self, t, q, v, tau):
        """One due joint state at time t: filters, then the RLS updates that the faults allow (module
        docstring). Returns True when an estimate is due for publishing (``publish_rate``)."""
        if self._settled_at is None:
            self._settled_at = t + self.settle_time
        if tau is not None and np.any(np.abs(tau) >= self.effort_limit):
            self.effort_saturated += 1
            self._effort_clean_at = t + self.settle_time
        if self.last_update_t is not None and t - self.last_update_t > self.max_interval:
            # samples this far apart alias the filter's band: its accelerations are wrong until it settles
            self.sparse_gaps += 1
            self._dense_at = t + self.settle_time
            self.report("sparse", f"estimator updates {1e3 * (t - self.last_update_t):.1f} ms apart "
                        f"(> {1e3 * self.max_interval:.1f} ms, filter.max_interval): falling behind or "
                        "decimating too coarsely; estimation paused until the filters settle")
        if self.last_update_t is not None:
            self._update_step = t - self.last_update_t
        self.last_update_t = t
        q_f, v_f, a_f, tau_f = self.joint_filter.update(t, q, v, tau)
        self.filtered = (q_f, v_f, a_f, tau_f)   # what this step estimated from (a replay keeps them)
        self.base_updated, self.base_sample = False, None
        settled = t >= self._settled_at and t >= self._dense_at
        if self.wrench_rls is not None and self.latest_wrench is not None:
            t_w, w = self.latest_wrench
            threshold = self.config["time_jump_threshold"]
            if self._last_wrench_t is not None and t_w < self._last_wrench_t - threshold:
                self.wrench_filter.reset()          # the sensor's clock jumped back: restart its filter
                self._last_wrench_t = None
            if self._last_wrench_t is None or t_w > self._last_wrench_t:
                if self._last_wrench_t is None:
                    self._wrench_settled_at = t + self.settle_time
                self._last_wrench_t = t_w
                self._w_f = self.wrench_filter.update(t_w, w)[0]
            fresh = abs(t - t_w) <= threshold       # same timeline as the joint states
            if settled and fresh and t >= self._wrench_settled_at and t >= self._wrench_clean_at:
                self._update_payload(t, q_f, v_f, a_f, self._w_f)
        if self.base is not None and settled and t >= self._effort_clean_at:
            Y_full = self._full_regressor(q_f, v_f, a_f)
            mass_before = self.payload_parameters()[0] if self.wrench_rls is None else None
            Y_base = self.base.reduce(Y_full)
            beta_before = self.base_estimator.beta.copy() if self._referenced else None
            result = self.base_estimator.update(t, Y_base, tau_f, self._friction_variance(v_f))
            self.base_updated, self.base_sample = result.accepted, (Y_base, tau_f)
            if self.base_started_at is None:
                self.base_started_at = t
            if result.change_detected and self.wrench_rls is None:
                if self._referenced:
                    self._reference_payload(t, beta_before)
                self._payload_changed(t, mass_before, "joint torques")
            if self._referenced and self._beta_ref is not None:
                # rows scaled by σ / sqrt(σ² + friction variance): the friction near rest weighs as in the
                # base-parameter estimate
                s2 = self.base_estimator.sigma ** 2
                w = np.sqrt(s2 / (s2 + self._friction_variance(v_f)))
                self.payload_rls.update(w[:, None] * Y_full[:, self.last_body_columns],
                                        w * (tau_f - Y_base @ self._beta_ref))
        self.updates += 1
        start, count = self._rate_window
        now = time.monotonic()
        if now - start >= 1.0:
            self.update_rate_hz = (self.updates - count) / (now - start)
            self._rate_window = (now, self.updates)
        if self.last_publish is None or t - self.last_publish >= 1.0 / self.config["publish_rate"] - 1e-9:
            self.last_publish = t
            return True
        return False

    @property
    def _referenced(self):
        """Whether the payload from joint torques is referenced to the estimate before the change."""
        return self.wrench_rls is None and self.config["payload_reference"] == "before_change"

    def _reference_payload(self, t, beta_before):
        """A change detected at t (payload_reference before_change): unless it falls within
        ``payload_change_holdoff`` s of the first base-parameter update (the estimate still converging) or within
        PAYLOAD_REFERENCE_WINDOW of the last reference (the same change re-alarming), the payload so far
        becomes the reference, ``β_ref`` the estimate before this sample and the payload RLS restarts."""
        if t - self.base_started_at < self.config["payload_change_holdoff"]:
            return
        if self._reference_t is not None and t - self._reference_t <= PAYLOAD_REFERENCE_WINDOW:
            return
        self._payload_ref = self.payload_parameters()
        self._beta_ref = beta_before
        self._reference_t = t
        self.payload_references.append(float(t))
        self.payload_rls.reset()
        # the payload RLS takes samples as independent: σ of the filtered torques over the share of an
        # independent sample each one is (BaseParameterEstimator's c_k)
        share = min(1.0, 2.0 * self.config["filter.cutoff"] * max(self._update_step, 1e-6))
        self.payload_rls.set_noise_std(self.base_estimator.sigma / np.sqrt(share))

    def _friction_variance(self, v_f):
        """The variance (nv,) of what no Coulomb model fixed in advance says about each joint's friction at the
        filtered velocity ``v_f``: ``(c_j (1 - tanh(|v_j| / FRICTION_SMOOTHING_MAX)))²`` with ``c_j``
        FRICTION_BOUND of the joint's torque scale. Near rest a joint's friction is stiction, anything up to its
        Coulomb level, and up to ``FRICTION_SMOOTHING_MAX`` it depends on how smoothly the friction turns
        over, which differs from joint to joint and robot to robot; beyond it every plausible model agrees. So
        the equations of joints near rest weigh little in the estimate (a Coulomb smoothing that is not the
        robot's would otherwise bias the Coulomb and viscous coefficients), while they still count where
        they carry information the other rows do not."""
        return (self._friction_bound * (1.0 - np.tanh(np.abs(v_f) / FRICTION_SMOOTHING_MAX))) ** 2

    def _full_regressor(self, q_f, v_f, a_f):
        """``Y_full`` (nv, 10 nb + 4 nv): the rigid-body regressor (compiled kernel) and the joint columns
        ``[a_j, v_j, tanh(v_j / coulomb_width), 1]`` (armature, viscous, Coulomb, offset) of
        :func:`~robodyn_ros.identification.base_parameters.batch_joint_parameter_regressor`, written into
        one preallocated array."""
        Y = self._Y_full
        self.kernels.regressor(q_f, v_f, a_f, self._Y_rigid)
        Y[:, :self._Y_rigid.shape[1]] = self._Y_rigid
        rows, col = self._joint_columns
        Y[rows, col] = a_f
        Y[rows, col + 1] = v_f
        Y[rows, col + 2] = smooth_sign(v_f, self.coulomb_width)
        return Y

    def _update_payload(self, t, q_f, v_f, a_f, w_f):
        """Payload RLS update on the filtered wrench w_f (6,) with the filtered joint state."""
        Y = self.wrench_regressor(q_f, v_f, a_f)
        if self.wrench_rls.beta.size == 16:
            Y = np.hstack([Y, np.eye(6)])
        mass_before = float(self.wrench_rls.beta[0])
        if self.wrench_rls.update(Y, w_f).change_detected:
            self._payload_changed(t, mass_before, "the wrist wrench")

    def _payload_changed(self, t, mass_before, source):
        """Record a detected payload change; alarms within PAYLOAD_EVENT_WINDOW of the previous one are the
        same physical event (the detector may re-alarm while the estimate is still moving)."""
        if self.payload_events and 0.0 <= t - self.payload_events[-1][0] <= PAYLOAD_EVENT_WINDOW:
            return
        self.payload_events.append((float(t), float(mass_before)))
        self.report("payload_change", f"payload change detected from {source} at t = {t:.3f} s "
                                      f"(payload mass before: {mass_before:.3f} kg)")

    # ---------------------------------------------------------------------------------------- estimates
    def payload_parameters(self):
        """Live payload parameters (10,) about ``payload_frame`` (the wrist link, or the last body). From joint
        torques: the change of the last body's parameters from the nominal ones (``payload_reference``
        nominal), or the load explaining the torque residual of the estimate held before the last detected
        change (before_change; zero before the first change: the robot starts without one)."""
        if self.wrench_rls is not None:
            return self.wrench_rls.beta[:10].copy()
        if self._referenced:
            return self._payload_ref + (self.payload_rls.beta if self._beta_ref is not None else 0.0)
        return body_parameter_change(self.base, self.beta_nominal, self.base_estimator.beta, self.model.nbodies - 1)

    def converged_payload(self):
        """The payload parameters (10,) to publish, from the wrench estimate and its standard deviations:

        * mass and first moments within ``payload_publish_std.mass`` / ``.first_moment``, rotational inertia
          within ``payload_publish_std.inertia``: the estimate;
        * mass and first moments within their bounds, inertia not yet: the estimate's mass at its centre of
          mass as a point mass (rotational inertia about the frame ``m (|c|^2 1 - c c^T)``, physically
          consistent; a compact load is close to it);
        * otherwise the last payload published, or None before the first.

        Right after a detected change the RLS covariance is re-opened and for some tens of milliseconds the
        estimate sweeps through loads no robot carries (measured on the 2 kg test payload: rotational
        inertia 0.59 kg m^2 off, about 50 times Panda's wrist link, 40 ms after the change, with a std of
        0.5; mass and centre of mass settle within 30-40 ms, the inertia within ~0.3 s); a controller
        applying those (use_estimates) lost tracking (3.8 rad) in 1 of 4 20-s soaks under load, 0 of 4 with
        this gate. Without the wrench the estimate is the base-parameter difference, published as it is."""
        pi = self.payload_parameters()
        if self.wrench_rls is None:
            return pi
        std, c = self.wrench_rls.std[:10], self.config
        within = lambda lo, hi, bound: bound <= 0.0 or std[lo:hi].max() <= bound  # noqa: E731
        if not (within(0, 1, c["payload_publish_std.mass"]) and within(1, 4, c["payload_publish_std.first_moment"])):
            self.unconverged_publishes += 1
            return self._converged_payload
        if not within(4, 10, c["payload_publish_std.inertia"]):
            self.unconverged_publishes += 1
            pi = point_mass_parameters(pi[0], pi[1:4])
        self._converged_payload = pi
        return pi

    def publish(self):
        """The payload (10,) to publish now (:meth:`converged_payload` made physical by
        :func:`physical_payload`), or None while nothing has converged yet."""
        published = self.converged_payload()
        return None if published is None else physical_payload(published)

    def diagnostics_due(self):
        """Whether a diagnostics status is due at the last joint-state time (``diagnostics_rate``)."""
        t = self.last_t
        if self._last_diagnostics is not None and t is not None \
                and 0.0 <= t - self._last_diagnostics < 1.0 / self.config["diagnostics_rate"] - 1e-9:
            return False
        self._last_diagnostics = t
        return True

    def friction(self, std=False):
        """``{"viscous", "coulomb", "offset": (nv,)}`` of the base-parameter estimate, or with ``std`` their
        standard deviations (NaN for a joint whose column is not a base parameter on its own); None without
        base parameters."""
        if self.base is None:
            return None
        beta = np.append(self.base_estimator.std if std else self.base_estimator.beta, np.nan)
        return {k: beta[self._friction_index[i]] for i, k in enumerate(("viscous", "coulomb", "offset"))}

    def estimate(self, t, updated=False, published=False, payload=None):
        """:class:`OnlineEstimate` of the current state (payload: the one just published, else the last)."""
        base = self.base is not None
        last = self._converged_payload if payload is None else payload
        return OnlineEstimate(
            t=t, updated=updated, published=published,
            base_parameters=self.base_estimator.beta.copy() if base else None,
            base_parameters_std=self.base_estimator.std if base else None,
            base_parameter_names=self.base.names if base else None, friction=self.friction(),
            friction_std=self.friction(std=True),
            payload=None if last is None else physical_payload(last), payload_estimate=self.payload_parameters(),
            payload_std=(self.wrench_rls.std[:10] if self.wrench_rls is not None else
                         self.payload_rls.std if base and self._referenced and self._beta_ref is not None else None),
            payload_frame=self.payload_frame, status=self.status(t),
            base_parameters_covariance=self.base_estimator.P.copy() if base and published else None)

    def status(self, t, rejected=None, skipped_overload=0):
        """``(level, message, values)`` of the estimator's diagnostics at joint-state time t; ``rejected``:
        the caller's ``{message kind: count}`` of dropped messages (kinds ending in ``_stamp`` are dropped
        stamps, the others malformed messages), ``skipped_overload``: due samples it skipped."""
        rejected = rejected or {}
        pi = self.payload_parameters()
        values = {"updates": self.updates, "update_rate_hz": float(self.update_rate_hz),
                  "decimation": self.config["decimation"], "skipped_overload": skipped_overload,
                  "payload_mass": float(pi[0]),
                  "payload_changes": len(self.payload_events),
                  "rejected_messages": sum(n for kind, n in rejected.items() if not kind.endswith("_stamp")),
                  "dropped_stamps": self.dropped_stamps, "time_jumps": self.time_jumps,
                  "wrench_saturated": self.wrench_saturated, "effort_saturated": self.effort_saturated,
                  "sparse_gaps": self.sparse_gaps}
        level, text = "OK", "estimating"
        notes = []
        if self.wrench_rls is not None:
            std = self.wrench_rls.std
            values["payload_mass_std"] = float(std[0])
            values["payload_first_moment_std"] = float(std[1:4].max())
            values["payload_inertia_std"] = float(std[4:10].max())
            values["published_payload_mass"] = (float(self._converged_payload[0]) if self._converged_payload is not None
                                                else float("nan"))
            values["unconverged_publishes"] = self.unconverged_publishes
            values["wrench_covariance_trace"] = float(np.trace(self.wrench_rls.P))
            values["wrench_outliers"] = self.wrench_rls.rejected
        if self.base is not None:
            values["base_covariance_trace"] = float(np.trace(self.base_estimator.P))
            values["torque_outliers"] = self.base_estimator.rejected
            # excitation: how much the last update shrank the covariance relative to its bound
            sigma = self.base_estimator.sigma
            if sigma is not None:
                values["effort_noise_learnt"] = [round(float(x), 6) for x in sigma]
            values["change_detector_armed"] = self.base_estimator.armed
        if self.payload_events:
            t_change, mass_before = self.payload_events[-1]
            values["last_payload_change"] = t_change
            values["last_payload_change_mass_before"] = mass_before
            if t is not None and 0.0 <= t - t_change <= 1.0:
                notes.append(f"payload change detected at t = {t_change:.3f} s (mass before {mass_before:.3f} kg, "
                             f"now {float(pi[0]):.3f} kg)")
        if self.base is not None:
            low = self.base_estimator.sigma_too_low()
            if len(low):
                rms = self.base_estimator.innovation_rms
                level = "WARN"
                notes.append("torque noise set far below what the data show (" + ", ".join(
                    f"{self.model.joint_names[j]} {self.base_estimator.sigma[j]:.3g} N m, residual {rms[j]:.3g}"
                    for j in low) + "): leave effort_noise unset to learn it")
        repeated = repeated_change_note(self.payload_events, t, self.config["change_alarms.count"],
                                        self.config["change_alarms.window"])
        if repeated is not None:
            level = "WARN"
            notes.append(repeated)
        paused = [what for what, until in (("wrench saturated", self._wrench_clean_at),
                                           ("effort saturated", self._effort_clean_at),
                                           ("updates too sparse (falling behind)", self._dense_at))
                  if t is not None and t < until]
        if paused:
            level = "WARN"
            notes.append(f"estimation paused: {', '.join(paused)}")
        malformed = {kind: n for kind, n in rejected.items() if not kind.endswith("_stamp")}
        if malformed:
            level = "WARN"
            notes.append(f"dropped malformed messages: {malformed}")
        if notes:
            text = "; ".join(notes)
        return level, text, values
