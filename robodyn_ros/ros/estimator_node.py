"""``estimator`` lifecycle node: online payload and base-parameter estimation
(:mod:`robodyn_ros.identification`) on ``/joint_states`` and the wrist wrench.

Input: with ``input_poll_rate`` > 0 (the default, 200 Hz) the joint-state and wrench subscriptions are
polled (:meth:`RobodynNode.polled_sub`): a steady timer takes what waits in their 50-deep keep-last queues
and estimates from every due joint state in arrival order (:meth:`EstimatorNode._poll_inputs`), so a
1 kHz pair of streams costs 200 executor wake-ups a second instead of 2 000, and a node that falls behind
never queues more than the middleware's keep-last depth. ``input_poll_rate`` 0: one executor callback per
message (:meth:`EstimatorNode._on_state`, :meth:`EstimatorNode._on_wrench`); the two paths give the same
estimates bit for bit on the same messages (test_estimator_polling.py).

Every ``decimation``-th joint state goes through the causal Butterworth filter
(:class:`~robodyn_ros.identification.signal_filters.CausalButterworthFilter`, giving q, q̇, q̈ and τ); the latest wrench
goes through the same filter (same delay). Then

* payload (``use_wrench``): recursive least squares on ``w = Y_b(q, q̇, q̈) pi_p + b`` (sensor frame,
  :mod:`robodyn_ros.identification.sensor_wrench`), pi_p the payload's 10 parameters, b the sensor bias; a CUSUM test
  on the innovations detects a payload change and re-opens the payload covariance
  (:class:`~robodyn_ros.estimation.recursive.RecursiveLeastSquares`);
* base parameters (``base_parameters``): the same RLS on ``τ = Y_base(q, q̇, q̈) beta`` (Gautier-Khalil
  base parameters incl. armature and friction); without the wrench the payload is the change of the
  last body's parameters explaining the change of beta.

Faults (README "Fault injection"):

* payload removed or added: the CUSUM / outlier-run detector re-opens the payload covariance and the
  estimate re-converges to the new payload (zero after a removal); each event is counted
  (``payload_changes``) and reported in ``/diagnostics`` (``last_payload_change``,
  ``last_payload_change_mass_before``, and the status message for one second);
* a saturated F/T sensor: a wrench sample with any |f_i| >= ``wrench_saturation.force`` or
  |t_i| >= ``wrench_saturation.torque`` (0: off) never enters the wrench filter, and the payload RLS pauses
  until the filter has settled again (``settle_time`` = 3 / ``filter.cutoff`` after the last saturated
  sample); likewise a joint torque at ``effort_saturation`` times the URDF effort limit pauses the
  base-parameter RLS. Counted as ``wrench_saturated`` / ``effort_saturated``;
* time: a joint state or wrench whose stamp repeats or goes back by at most ``time_jump_threshold`` is
  dropped (counted as ``dropped_stamps``, throttled warning); a jump of more than ``time_jump_threshold``
  either way (simulation reset, bag loop, a gap) restarts the filters and the publishing schedule and
  keeps the estimate (``time_jumps``); after every filter (re)start the RLS waits ``settle_time``;
* falling behind: two updates more than ``filter.max_interval`` apart (a starved node, or a decimation too
  coarse for the cutoff) alias the filter's band, so the RLS pauses for ``settle_time`` after every such
  gap (``sparse_gaps``): a starved estimator stops estimating instead of publishing wrong payloads.

Publishes at ``publish_rate`` (joint-state time; ``/diagnostics`` at ``diagnostics_rate``, at most
``publish_rate``: building its status costs as much as an update): ``payload_topic`` (geometry_msgs/InertiaStamped,
``frame_id`` the wrist link, or the last body's link without the wrench), ``base_parameters_topic``
(Float64MultiArray, one labelled layout dimension per base parameter) and ``/diagnostics``.
"""
from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..identification.base_parameters import compute_base_parameters, full_parameters, smooth_sign
from ..identification.payload import PayloadChangeDetector, body_parameter_change
from ..estimation.recursive import RecursiveLeastSquares
from ..kernels import compile_kernels
from ..identification.sensor_wrench import SensorWrenchRegressor
from ..identification.signal_filters import CausalButterworthFilter
from . import messages as rm
from . import qos
from .base_node import RobodynNode
from .heap_trim import HeapTrimmer

COULOMB_WIDTH = 1e-3  # rad/s, the simulator's tanh smoothing of the Coulomb friction
HEAP_TRIM_PERIOD = 10.0    # wall s between two malloc_trim calls
PENDING_LIMIT = 20  # messages taken per wake-up beyond the one delivered (2 x the input QoS depth)
POLL_LIMIT = 100    # messages taken per poll and topic (2 x the polled queues' depth)
POLL_BUDGET = 0.8   # fraction of the poll period spent on in-order updates before skipping to the newest
PAYLOAD_EVENT_WINDOW = 0.5  # s: detector alarms this close to the previous one report the same change


def point_mass_parameters(m, mc):
    """Inertial parameters (10,) of a point mass ``m`` with first moment ``mc`` (3,) = m c, about the frame
    origin (Pinocchio's order ``[m, mcx, mcy, mcz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``): ``I = m (|c|^2 1 - c c^T)``."""
    if abs(m) < 1e-9:
        return np.zeros(10)
    c = np.asarray(mc, dtype=float) / m
    I = m * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def payload_prior_variance(mass_std, length=0.2):
    """Prior / boost variances (10,) of a payload's parameters: mass ``mass_std``², first moments
    ``(mass_std length)``², inertias ``(mass_std length²)``² (a load within ``length`` of the flange)."""
    return np.array([mass_std**2] + [(mass_std * length) ** 2] * 3 + [(mass_std * length**2) ** 2] * 6)


class EstimatorNode(RobodynNode):
    kind = "estimator"

    def setup(self):
        c, robot = self.config, self.robot
        model = robot.model
        self.kernels = compile_kernels(model, register=False)
        self.joint_filter = CausalButterworthFilter(model.nv, c["filter.cutoff"], c["filter.order"])
        self.wrench_filter = CausalButterworthFilter(6, c["filter.cutoff"], c["filter.order"])
        self.wrench_rls = None
        if c["use_wrench"]:
            self.wrench_regressor = SensorWrenchRegressor(model, robot.wrist_link)
            n = 16 if c["estimate_bias"] else 10
            P0 = np.concatenate([payload_prior_variance(c["payload_mass_std"]), [100.0] * 3 + [1.0] * 3])[:n]
            self.wrench_rls = RecursiveLeastSquares(
                np.zeros(n), P0, [c["force_noise"]] * 3 + [c["torque_noise"]] * 3, forgetting=c["forgetting"],
                trace_max=10.0 * P0.sum(), boost_indices=np.arange(10), boost_variance=P0[:10],
                detector=PayloadChangeDetector(threshold=c["change_threshold"]))
        self.base = None
        if c["base_parameters"]:
            self.base = compute_base_parameters(model, coulomb_width=COULOMB_WIDTH)
            n_rigid = 10 * model.nbodies
            self._Y_rigid = np.empty((model.nv, n_rigid))
            self._Y_full = np.zeros((model.nv, n_rigid + 4 * model.nv))
            j = np.arange(model.nv)
            self._joint_columns = (j, n_rigid + 4 * j)     # row j, column of a_j; v_j, sgn(v_j), 1 follow
            self._Y_full[j, n_rigid + 4 * j + 3] = 1.0
            self.beta_nominal = self.base.from_full(full_parameters(model))
            last = model.nbodies - 1
            moved = np.flatnonzero(np.abs(self.base.K[:, 10 * last:10 * last + 10]).sum(axis=1) > 1e-9)
            P0 = (0.2 * np.abs(self.beta_nominal) + 0.01) ** 2
            P0[moved] += 0.25
            self.base_rls = RecursiveLeastSquares(
                self.beta_nominal, P0, c["effort_noise"], forgetting=c["forgetting"], trace_max=10.0 * P0.sum(),
                boost_indices=moved, detector=PayloadChangeDetector(threshold=c["change_threshold"]))
        self.payload_frame = robot.wrist_link if c["use_wrench"] else model.body_names[-1]
        self.latest_wrench = None
        self.filtered = None
        self.samples = 0
        self.updates = 0
        self.last_publish = None
        self.payload_events = []      # (stamp, payload mass before) of detected payload changes
        self._converged_payload = None   # the last payload estimate within payload_publish_std
        self.unconverged_publishes = 0   # publish times at which the estimate was not (converged_payload)
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
        self._cache = {}
        self._base_msg = None
        self.payload_pub = self.pub(InertiaStamped, c["payload_topic"], qos.ESTIMATE_QOS)
        self.base_pub = self.pub(Float64MultiArray, c["base_parameters_topic"], qos.ESTIMATE_QOS)
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.skipped_overload = 0    # due samples superseded by a newer due one in the same wake-up
        # the middleware's receive threads allocate the message buffers this thread frees: bursts (a node
        # falling behind for a moment) ratchet glibc's arenas up; trimming every HEAP_TRIM_PERIOD s gives
        # the free pages back (robodyn_ros.ros.heap_trim)
        self.heap_trimmer = HeapTrimmer(HEAP_TRIM_PERIOD)
        self.wrench_sub = None
        if c["input_poll_rate"] > 0.0:
            self.poll_period = 1.0 / c["input_poll_rate"]
            self.state_sub = self.polled_sub(JointState, c["joint_states_topic"], qos.POLLED_SENSOR_INPUT_QOS)
            if c["use_wrench"]:
                self.wrench_sub = self.polled_sub(WrenchStamped, c["wrench_topic"], qos.POLLED_SENSOR_INPUT_QOS)
            self.timer(self.poll_period, self._poll_inputs, steady=True)
        else:
            self.state_sub = self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS)
            if c["use_wrench"]:
                self.wrench_sub = self.sub(WrenchStamped, c["wrench_topic"], self._on_wrench, qos.SENSOR_INPUT_QOS)

    def start(self):
        self._restart_time()

    def _restart_time(self):
        """Forget the time-dependent state (filters, stamps, publishing schedule, saturation pauses); the
        estimate and its covariance are kept."""
        self.joint_filter.reset()
        self.wrench_filter.reset()
        self._last_t = None
        self._last_wrench_t = None      # stamp of the last wrench fed to the wrench filter
        self.latest_wrench = None
        self.last_publish = None
        self._last_diagnostics = None   # joint-state time of the last /diagnostics message
        self._settled_at = None         # joint-state time from which the filters have settled
        self._wrench_settled_at = None
        self._wrench_clean_at = -np.inf  # joint-state time after which the last saturated wrench has decayed
        self._effort_clean_at = -np.inf
        self._last_update_t = None      # joint-state time of the last update (filter step)
        self._dense_at = -np.inf        # joint-state time after which the filters have settled on dense samples

    def _drop_stamp(self, kind, t, previous):
        self.dropped_stamps += 1
        self.reject(f"{kind}_stamp", rm.MessageRejected(
            f"{kind} stamp {t:.6f} s is not after the previous {previous:.6f} s (duplicate or out of order)"))

    # ------------------------------------------------------------------------------------- messages
    def _on_wrench(self, msg):
        """Wrench callback: this message, then those already waiting (:meth:`take_pending`); only the newest
        clean one is kept (``latest_wrench``), each is checked for saturation and stamp order."""
        if not self.active:
            return
        self._wrench_sample(msg)
        for newer in self.take_pending(self.wrench_sub, PENDING_LIMIT):
            self._wrench_sample(newer)

    def _wrench_sample(self, msg):
        try:
            t, frame_id, w = rm.wrench_stamped_to_array(msg)
            if frame_id and frame_id != self.robot.wrist_link:
                raise rm.MessageRejected(f"WrenchStamped.header.frame_id is '{frame_id}', expected "
                                         f"'{self.robot.wrist_link}'")
        except rm.MessageRejected as exc:
            self.reject("wrench", exc)
            return
        if self.latest_wrench is not None:
            previous = self.latest_wrench[0]
            if previous - self.config["time_jump_threshold"] <= t <= previous:
                self._drop_stamp("wrench", t, previous)
                return
        if np.any(np.abs(w) >= self.wrench_limit):
            # a clipped sample is wrong by an unknown amount: keep it out of the filter and pause the RLS
            self.wrench_saturated += 1
            self._wrench_clean_at = t + self.settle_time
            self.warn_throttled("wrench_saturated", f"F/T sensor saturated ({self.wrench_saturated} samples so "
                                f"far): |w| = {np.round(np.abs(w), 3).tolist()}; payload estimation paused")
            return
        self.latest_wrench = (t, w)
        return self.latest_wrench

    def _on_state(self, msg):
        """Joint-state callback: the message goes through :meth:`_admit` (validation, stamp checks,
        decimation count). A skipped sample ends there. A due one first takes the joint states already
        waiting (:meth:`take_pending`, at most PENDING_LIMIT, each through :meth:`_admit`) and estimates from the newest due joint state of this wake-up, the others
        counting as ``skipped_overload``: a node that falls behind uses the newest data, and its backlog
        (rclpy's EventsExecutor queues an event per arriving message) stays within the subscription depth."""
        if not self.active:
            return
        due = self._admit(msg)
        if due is None:
            return
        for newer in self.take_pending(self.state_sub, PENDING_LIMIT):
            restarts = self.time_jumps
            sample = self._admit(newer)
            if due is not None and (sample is not None or self.time_jumps != restarts):
                self.skipped_overload += 1     # superseded, or from before a time jump
                due = None
            if sample is not None:
                due = sample
        if due is not None:
            self._estimate(due)

    def _poll_inputs(self):
        """Timer callback (``input_poll_rate``): take the wrenches and joint states waiting in the polled
        subscriptions' queues, then estimate from every due joint state in arrival order, each with the
        newest clean wrench stamped at or before it (the sensor's sample of the same instant when both
        come from one 1 kHz loop). A poll that has used ``POLL_BUDGET`` of its period skips to the newest
        due joint state (the skipped ones count as ``skipped_overload``): a node that falls behind uses
        the newest data, and the middleware's keep-last queues bound what waits."""
        wrenches = self.take_pending(self.wrench_sub, POLL_LIMIT) if self.wrench_sub is not None else []
        states = self.take_pending(self.state_sub, POLL_LIMIT)
        if not self.active:
            return
        deadline = time.monotonic() + POLL_BUDGET * self.poll_period
        before = self.latest_wrench
        accepted = [w for w in map(self._wrench_sample, wrenches) if w is not None]
        self.latest_wrench, k, pending = before, 0, None
        for msg in states:
            restarts = self.time_jumps
            sample = self._admit(msg)
            if self.time_jumps != restarts:
                # a clock jump restarted the filters and forgot the wrenches taken so far (as when the
                # callbacks receive them first): a deferred older sample is moot, and of this poll's
                # wrenches only those stamped after the joint state that revealed the jump are kept
                if pending is not None:
                    self.skipped_overload += 1
                t_jump, threshold = self._last_t, self.config["time_jump_threshold"]
                accepted, k, pending = [w for w in accepted if t_jump < w[0] <= t_jump + threshold], 0, None
            if sample is None:
                continue
            if time.monotonic() < deadline:
                k = self._estimate_with_wrench(sample, accepted, k)
            else:
                if pending is not None:
                    self.skipped_overload += 1
                pending = sample
        if pending is not None:
            self._estimate_with_wrench(pending, accepted, k)
        if accepted:
            self.latest_wrench = accepted[-1]

    def _estimate_with_wrench(self, due, wrenches, k):
        """:meth:`_estimate` on ``due`` with ``latest_wrench`` the newest of ``wrenches[k:]`` (arrival order)
        stamped at or before it, stopping where the wrench clock jumps back (a later timeline, used once
        the joint states jump too); returns the index of the first wrench not used."""
        threshold = self.config["time_jump_threshold"]
        while k < len(wrenches) and wrenches[k][0] <= due[0] \
                and (k == 0 or wrenches[k][0] >= wrenches[k - 1][0] - threshold):
            self.latest_wrench = wrenches[k]
            k += 1
        self._estimate(due)
        return k

    def _estimate(self, due):
        """Update the estimate with one due joint state ``(t, q, v, tau, stamp)`` and publish on schedule."""
        t, q, v, tau, stamp = due
        self.update(t, q, v, tau)
        if self.last_publish is None or t - self.last_publish >= 1.0 / self.config["publish_rate"] - 1e-9:
            self.last_publish = t
            self.publish(stamp)

    def _admit(self, msg):
        """Validation, stamp checks and the decimation count of one joint state (every message is validated,
        so malformed ones are rejected and counted whatever the decimation); ``(t, q, v, tau, stamp)`` when
        it is a due (every ``decimation``-th) sample, else None."""
        try:
            t, q, v, tau = rm.joint_state_to_arrays(msg, self.robot.model.joint_names, self._cache)
            if tau is None and self.base is not None:
                raise rm.MessageRejected("JointState.effort is empty (the torque estimator needs efforts)")
        except rm.MessageRejected as exc:
            self.reject("joint_states", exc)
            return None
        if self._last_t is not None:
            step = t - self._last_t
            if abs(step) > self.config["time_jump_threshold"]:
                self.time_jumps += 1
                self.warn_throttled("time_jump", f"joint-state time jumped by {step:+.3f} s (simulation reset, "
                                    "bag loop or gap): filters restarted, estimate kept")
                self._restart_time()
            elif step <= 0.0:
                self._drop_stamp("joint_states", t, self._last_t)
                return None
        self._last_t = t
        self.samples += 1
        if (self.samples - 1) % self.config["decimation"]:
            return None
        return t, q, v, tau, msg.header.stamp

    # ------------------------------------------------------------------------------------ estimation
    def update(self, t, q, v, tau):
        """One (decimated) joint state at time t: filters, then the RLS updates that the faults allow
        (module docstring)."""
        if self._settled_at is None:
            self._settled_at = t + self.settle_time
        if tau is not None and np.any(np.abs(tau) >= self.effort_limit):
            self.effort_saturated += 1
            self._effort_clean_at = t + self.settle_time
        if self._last_update_t is not None and t - self._last_update_t > self.max_interval:
            # samples this far apart alias the filter's band: its accelerations are wrong until it settles
            self.sparse_gaps += 1
            self._dense_at = t + self.settle_time
            self.warn_throttled("sparse", f"estimator updates {1e3 * (t - self._last_update_t):.1f} ms apart "
                                f"(> {1e3 * self.max_interval:.1f} ms, filter.max_interval): falling behind or "
                                "decimating too coarsely; estimation paused until the filters settle")
        self._last_update_t = t
        q_f, v_f, a_f, tau_f = self.joint_filter.update(t, q, v, tau)
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
            result = self.base_rls.update(self.base.reduce(Y_full), tau_f)
            if result.change_detected and self.wrench_rls is None:
                self._payload_changed(t, mass_before, "joint torques")
        self.updates += 1
        start, count = self._rate_window
        now = time.monotonic()
        if now - start >= 1.0:
            self.update_rate_hz = (self.updates - count) / (now - start)
            self._rate_window = (now, self.updates)

    def _full_regressor(self, q_f, v_f, a_f):
        """``Y_full`` (nv, 10 nb + 4 nv): the rigid-body regressor (compiled kernel) and the joint columns
        ``[a_j, v_j, tanh(v_j / COULOMB_WIDTH), 1]`` (armature, viscous, Coulomb, offset) of
        :func:`~robodyn_ros.identification.base_parameters.batch_joint_parameter_regressor`, written into
        one preallocated array."""
        Y = self._Y_full
        self.kernels.regressor(q_f, v_f, a_f, self._Y_rigid)
        Y[:, :self._Y_rigid.shape[1]] = self._Y_rigid
        rows, col = self._joint_columns
        Y[rows, col] = a_f
        Y[rows, col + 1] = v_f
        Y[rows, col + 2] = smooth_sign(v_f, COULOMB_WIDTH)
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
        self.get_logger().info(f"payload change detected from {source} at t = {t:.3f} s "
                               f"(payload mass before: {mass_before:.3f} kg)")

    def payload_parameters(self):
        """Payload parameters (10,) about ``payload_frame`` (the wrist link, or the last body)."""
        if self.wrench_rls is not None:
            return self.wrench_rls.beta[:10].copy()
        return body_parameter_change(self.base, self.beta_nominal, self.base_rls.beta, self.robot.model.nbodies - 1)

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

    def publish(self, stamp):
        self.heap_trimmer.maybe_trim()
        published = self.converged_payload()
        if published is None:
            pass            # nothing converged yet: no payload message rather than a guess
        elif abs(published[0]) > 1e-6:
            self.payload_pub.publish(rm.inertial_parameters_to_inertia_stamped(stamp, self.payload_frame, published))
        else:
            self.payload_pub.publish(rm.make_inertia_stamped(stamp, self.payload_frame, published[0], np.zeros(3),
                                                             np.zeros((3, 3))))
        if self.base is not None:
            if self._base_msg is None:  # the labelled layout (one dimension per parameter) is serialized once
                self._base_msg = rm.SerializedFloat64MultiArray(self.base_rls.beta, labels=self.base.names)
            self.base_pub.publish(self._base_msg.serialize(self.base_rls.beta))
        t = self._last_t
        if self._last_diagnostics is not None and t is not None \
                and 0.0 <= t - self._last_diagnostics < 1.0 / self.config["diagnostics_rate"] - 1e-9:
            return
        self._last_diagnostics = t
        level, text, values = self.diagnostic_status(t)
        self.diag_pub.publish(rm.make_diagnostic_array(stamp, f"{self.get_name()}: online estimation", level, text,
                                                       values, hardware_id=self.robot.name))

    def diagnostic_status(self, t, pi=None):
        """``(level, message, values)`` of the node's /diagnostics status at joint-state time t."""
        pi = self.payload_parameters() if pi is None else pi
        values = {"updates": self.updates, "update_rate_hz": float(self.update_rate_hz),
                  "decimation": self.config["decimation"], "skipped_overload": self.skipped_overload,
                  "payload_mass": float(pi[0]),
                  "payload_changes": len(self.payload_events),
                  "rejected_messages": sum(n for kind, n in self.rejected.items() if not kind.endswith("_stamp")),
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
            values["base_covariance_trace"] = float(np.trace(self.base_rls.P))
            values["torque_outliers"] = self.base_rls.rejected
            # excitation: how much the last update shrank the covariance relative to its bound
            values["base_covariance_fraction_of_bound"] = float(np.trace(self.base_rls.P) / self.base_rls.trace_max)
        if self.payload_events:
            t_change, mass_before = self.payload_events[-1]
            values["last_payload_change"] = t_change
            values["last_payload_change_mass_before"] = mass_before
            if t is not None and 0.0 <= t - t_change <= 1.0:
                notes.append(f"payload change detected at t = {t_change:.3f} s (mass before {mass_before:.3f} kg, "
                             f"now {float(pi[0]):.3f} kg)")
        paused = [what for what, until in (("wrench saturated", self._wrench_clean_at),
                                           ("effort saturated", self._effort_clean_at),
                                           ("updates too sparse (falling behind)", self._dense_at))
                  if t is not None and t < until]
        if paused:
            level = "WARN"
            notes.append(f"estimation paused: {', '.join(paused)}")
        malformed = {kind: n for kind, n in self.rejected.items() if not kind.endswith("_stamp")}
        if malformed:
            level = "WARN"
            notes.append(f"dropped malformed messages: {malformed}")
        if notes:
            text = "; ".join(notes)
        return level, text, values
