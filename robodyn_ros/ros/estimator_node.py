"""``estimator`` lifecycle node: :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator` (payload and
base-parameter estimation, its faults and publishing schedule) on ``/joint_states`` and the wrist wrench.

Input: with ``input_poll_rate`` > 0 (the default, 200 Hz) the joint-state and wrench subscriptions are
polled (:meth:`RobodynNode.polled_sub`): a steady timer takes what waits in their keep-last queues (1 s of a
1 kHz stream, ``qos.POLLED_SENSOR_INPUT_QOS``) and estimates from every due joint state in arrival order,
each with the newest clean wrench stamped at or before it, so a 1 kHz pair of streams costs 200 executor
wake-ups a second instead of 2 000; they are taken as CDR bytes and read in place
(:class:`~robodyn_ros.ros.messages.RawJointState`), two thirds of the cost of rclpy's messages. The messages lost before a poll took them (a queue that overflowed, a
best-effort transport) are counted from the publishers' sequence numbers (``lost_joint_states``,
``lost_wrenches`` in /diagnostics; :class:`~robodyn_ros.estimation.message_loss.PublicationGaps`).
``input_poll_rate`` 0: one executor callback per message, which also takes the joint states waiting behind
it and estimates from them in order (:meth:`EstimatorNode._on_state`). Publishes ``payload_topic``
(geometry_msgs/InertiaStamped, ``frame_id`` the wrist link, or the last body's link without the wrench),
``base_parameters_topic`` (Float64MultiArray, one labelled layout dimension per base parameter), with
``publish_covariance`` their covariance (``base_covariance_topic``, r x r row-major) and ``/diagnostics``.

Services (std_srvs/Trigger): ``~/save`` writes the current base-parameter estimate to ``save_path`` in the
format of ``robodyn identify`` (:func:`~robodyn_ros.estimation.stored_parameters.write_estimate`: a snapshot
taken at the call, the 1-3 s consistent fit in a worker thread while the node keeps estimating; the answer
comes once the file is written), also at shutdown with ``save_on_shutdown``; ``~/reset`` puts the estimate
back to the URDF's (:meth:`OnlineEstimator.reset_estimate`, after a tool change). ``initial_parameters``
starts from such a file once it has predicted the first seconds of motion better than the URDF.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped, WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from ..estimation.message_loss import PublicationGaps
from ..estimation.online_estimator import OnlineEstimator
from ..estimation.stored_parameters import write_estimate
from ..model.errors import ModelError
from . import messages as rm
from . import qos
from .base_node import RobodynNode
from .heap_trim import HeapTrimmer

HEAP_TRIM_PERIOD = 10.0    # wall s between two malloc_trim calls
PENDING_LIMIT = 20  # messages taken per wake-up beyond the one delivered (2 x the input QoS depth)
CALLBACK_BUDGET = 0.004  # wall s per callback wake-up estimating in arrival order (the poll's at its default 200 Hz)
POLL_LIMIT = 100    # messages taken per poll and topic: at 200 Hz, 20 times what a 1 kHz stream brings
POLL_BUDGET = 0.8   # fraction of the poll period spent on in-order updates before skipping to the newest


class EstimatorNode(RobodynNode):
    kind = "estimator"

    def setup(self):
        c = self.config
        self.estimator = OnlineEstimator(self.robot.model, c, wrist_link=self.robot.wrist_link, report=self._report)
        self.skipped_overload, self._cache, self._base_msg = 0, {}, None  # skipped: due samples superseded
        self._layouts = {}   # the byte layout of the last polled joint state (rm.RawJointState)
        self.payload_pub = self.pub(InertiaStamped, c["payload_topic"], qos.ESTIMATE_QOS)
        self.base_pub = self.pub(Float64MultiArray, c["base_parameters_topic"], qos.ESTIMATE_QOS)
        self.covariance_pub = None   # the base parameters' covariance (r x r), for base-parameter controllers
        if c["publish_covariance"] and self.estimator.base is not None:
            self.covariance_pub = self.pub(Float64MultiArray, c["base_covariance_topic"], qos.ESTIMATE_QOS)
            self._covariance_msg = rm.SerializedFloat64MultiArray(self.estimator.base_estimator.P, dim_label="covariance")
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        # the middleware's receive threads allocate the message buffers this thread frees: bursts ratchet
        # glibc's arenas up; trimming every HEAP_TRIM_PERIOD s gives the free pages back (ros.heap_trim)
        self.heap_trimmer = HeapTrimmer(HEAP_TRIM_PERIOD)
        self.wrench_sub = None
        polled = c["input_poll_rate"] > 0.0
        subscribe = (lambda t, topic, cb: self.polled_sub(t, topic, qos.POLLED_SENSOR_INPUT_QOS, raw=True)) \
            if polled else \
            (lambda t, topic, cb: self.sub(t, topic, cb, qos.SENSOR_INPUT_QOS))
        self.state_sub = subscribe(JointState, c["joint_states_topic"], self._on_state)
        if c["use_wrench"]:
            self.wrench_sub = subscribe(WrenchStamped, c["wrench_topic"], self._on_wrench)
        self.srv(Trigger, "~/save", self._on_save)
        self.srv(Trigger, "~/reset", self._on_reset)
        self._saving = False
        self.lost = None   # {input: PublicationGaps} of the polled inputs
        if polled:
            self.lost = {"joint_states": PublicationGaps(), "wrenches": PublicationGaps()}
            self.poll_period = 1.0 / c["input_poll_rate"]
            self.timer(self.poll_period, self._poll_inputs, steady=True)

    def start(self):
        self.estimator.restart_time()

    def on_shutdown(self, state):
        if self.config is not None and self.config["save_on_shutdown"] and getattr(self, "estimator", None) is not None:
            ok, text = self._write(self._snapshot())
            (self.get_logger().info if ok else self.get_logger().error)(text)
        return super().on_shutdown(state)

    # ------------------------------------------------------------------------------------- services
    def _snapshot(self):
        """``(snapshot, path)`` of the current estimate, or ``(None, why not)``."""
        path = self.config["save_path"]
        if not path:
            return None, "save_path is not set: nothing written (ros2 param set <node> save_path FILE.yaml)"
        try:
            return self.estimator.snapshot({"saved_by": self.get_name()}), path
        except ModelError as exc:
            return None, f"nothing written to {path}: {exc}"

    def _write(self, taken):
        snapshot, path = taken
        if snapshot is None:
            return False, path
        try:
            return True, write_estimate(snapshot, path, robot=self.robot.name)
        except (ModelError, OSError, ValueError) as exc:
            return False, f"could not write {path}: {exc}"

    async def _on_save(self, request, response):
        """~/save: the snapshot now, the file written in a worker thread (the estimation goes on meanwhile)."""
        if self._saving:
            response.success, response.message = False, "a save is already being written"
            return response
        taken = self._snapshot()
        if taken[0] is None:
            response.success, response.message = False, taken[1]
            self.get_logger().warn(taken[1])
            return response
        from rclpy.task import Future
        done = Future()
        self._saving = True

        def work():
            try:
                result = self._write(taken)
            except Exception as exc:   # the fit's own failures: answered, never a thread that hangs the service
                result = (False, f"could not write {taken[1]}: {exc}")
            done.set_result(result)
        threading.Thread(target=work, daemon=True, name="estimate-save").start()
        try:
            ok, text = await done
        finally:
            self._saving = False
        (self.get_logger().info if ok else self.get_logger().error)(text)
        response.success, response.message = ok, text
        return response

    def _on_reset(self, request, response):
        """~/reset: back to the URDF's parameters and no payload."""
        self.estimator.reset_estimate()
        text = "estimate reset to the URDF's parameters, payload none"
        self.get_logger().info(text)
        response.success, response.message = True, text
        return response

    def _report(self, kind, text):
        if kind.endswith("_stamp"):
            self.reject(kind, rm.MessageRejected(text))
        elif kind in ("payload_change", "initial_parameters"):
            self.get_logger().info(text)
        else:
            self.warn_throttled(kind, text)

    # ------------------------------------------------------------------------------------- messages
    def _on_wrench(self, msg):
        """Wrench callback: this message, then those already waiting (:meth:`take_pending`)."""
        if not self.active:
            return
        self._wrench_sample(msg)
        for newer in self.take_pending(self.wrench_sub, PENDING_LIMIT):
            self._wrench_sample(newer)

    def _wrench_sample(self, msg, convert=rm.wrench_stamped_to_array):
        """The wrench of ``msg`` admitted by the estimator (``(t, w)``), or None (rejected: logged and counted;
        or dropped by the estimator's stamp and saturation checks)."""
        try:
            t, frame_id, w = convert(msg)
            if frame_id and frame_id != self.robot.wrist_link:
                raise rm.MessageRejected(f"WrenchStamped.header.frame_id is '{frame_id}', expected "
                                         f"'{self.robot.wrist_link}'")
        except rm.MessageRejected as exc:
            self.reject("wrench", exc)
            return None
        return self.estimator.admit_wrench(t, w)

    def _raw_wrench_sample(self, raw):
        """:meth:`_wrench_sample` of a polled wrench (CDR bytes)."""
        return self._wrench_sample(raw, rm.raw_wrench_stamped_to_array)

    def _on_state(self, msg):
        """Joint-state callback: a due sample takes the joint states already waiting (at most PENDING_LIMIT)
        and estimates from every due one in arrival order while CALLBACK_BUDGET lasts; past it, from the
        newest due one only, the others counting as ``skipped_overload``: a node that falls behind uses the
        newest data, one that is merely woken late loses nothing (the RLS wants every sample)."""
        if not self.active:
            return
        due = self._admit(msg)
        if due is None:
            return
        deadline = time.monotonic() + CALLBACK_BUDGET
        pending = None
        waiting = iter(self.take_pending(self.state_sub, PENDING_LIMIT))
        sample = due
        while True:
            if sample is not None:
                if time.monotonic() < deadline:
                    self._estimate(sample)
                else:
                    self.skipped_overload += pending is not None
                    pending = sample
            newer = next(waiting, None)
            if newer is None:
                break
            restarts = self.estimator.time_jumps
            sample = self._admit(newer)
            if self.estimator.time_jumps != restarts and pending is not None:
                self.skipped_overload += 1     # from before a time jump: never estimated
                pending = None
        if pending is not None:
            self._estimate(pending)

    def _poll_inputs(self):
        """Timer callback (``input_poll_rate``): the waiting wrenches, then every due joint state in arrival
        order with the newest clean wrench stamped at or before it; past ``POLL_BUDGET`` of the period, the
        newest due joint state only (the skipped ones count as ``skipped_overload``). Every message taken counts
        towards the lost ones (``self.lost``), also while inactive, when they are discarded, not lost."""
        est = self.estimator
        numbered = {"wrenches": [], "joint_states": []}
        wrenches = self.take_pending(self.wrench_sub, POLL_LIMIT, sequences=numbered["wrenches"]) \
            if self.wrench_sub is not None else []
        states = self.take_pending(self.state_sub, POLL_LIMIT, sequences=numbered["joint_states"])
        for kind, sequences in numbered.items():
            for publisher, sequence in sequences:
                self.lost[kind].observe(publisher, sequence)
        if not self.active:
            return
        deadline = time.monotonic() + POLL_BUDGET * self.poll_period
        before = est.latest_wrench
        accepted = [w for w in map(self._raw_wrench_sample, wrenches) if w is not None]
        est.latest_wrench, k, pending = before, 0, None
        for raw in states:
            restarts = est.time_jumps
            sample = self._admit(raw)
            if est.time_jumps != restarts:
                # a clock jump forgot the wrenches taken so far: keep this poll's wrenches stamped after the
                # joint state that revealed the jump
                self.skipped_overload += pending is not None
                t_jump, threshold = est.last_t, est.config["time_jump_threshold"]
                accepted, k, pending = [w for w in accepted if t_jump < w[0] <= t_jump + threshold], 0, None
            if sample is None:
                continue
            if time.monotonic() < deadline:
                k = self._estimate_with_wrench(sample, accepted, k)
            else:
                self.skipped_overload += pending is not None
                pending = sample
        if pending is not None:
            self._estimate_with_wrench(pending, accepted, k)
        if accepted:
            est.latest_wrench = accepted[-1]

    def _estimate_with_wrench(self, due, wrenches, k):
        """:meth:`_estimate` on ``due`` with the newest of ``wrenches[k:]`` stamped at or before it, stopping
        where the wrench clock jumps back; returns the index of the first wrench not used."""
        threshold = self.estimator.config["time_jump_threshold"]
        while k < len(wrenches) and wrenches[k][0] <= due[0] \
                and (k == 0 or wrenches[k][0] >= wrenches[k - 1][0] - threshold):
            self.estimator.latest_wrench = wrenches[k]
            k += 1
        self._estimate(due)
        return k

    def _admit(self, msg):
        """``(t, q, v, tau, stamp)`` of a valid, in-order, due joint state (a message, or the CDR bytes of a
        polled one), else None (malformed ones are rejected and counted whatever the decimation)."""
        try:
            if isinstance(msg, bytes):
                msg = rm.RawJointState(msg, self._layouts)
            t, q, v, tau = rm.joint_state_to_arrays(msg, self.robot.model.joint_names, self._cache)
            if tau is None and self.estimator.base is not None:
                raise rm.MessageRejected("JointState.effort is empty (the torque estimator needs efforts)")
        except rm.MessageRejected as exc:
            self.reject("joint_states", exc)
            return None
        return (t, q, v, tau, msg.header.stamp) if self.estimator.admit(t, q, v, tau) else None

    def _estimate(self, due):
        t, q, v, tau, stamp = due
        if self.estimator.step(t, q, v, tau):
            self.publish(stamp)

    # ------------------------------------------------------------------------------------- publishing
    def publish(self, stamp):
        self.heap_trimmer.maybe_trim()
        est = self.estimator
        published = est.publish()   # None: nothing converged yet, no payload message rather than a guess
        if published is not None and abs(published[0]) > 1e-6:
            self.payload_pub.publish(rm.inertial_parameters_to_inertia_stamped(stamp, est.payload_frame, published))
        elif published is not None:
            self.payload_pub.publish(rm.make_inertia_stamped(stamp, est.payload_frame, published[0], np.zeros(3),
                                                             np.zeros((3, 3))))
        if est.base is not None and not est.withheld:
            if self._base_msg is None:  # the labelled layout (one dimension per parameter) is serialized once
                self._base_msg = rm.SerializedFloat64MultiArray(est.base_estimator.beta, labels=est.base.names)
            self.base_pub.publish(self._base_msg.serialize(est.base_estimator.beta))
            if self.covariance_pub:
                self.covariance_pub.publish(self._covariance_msg.serialize(est.base_estimator.P))
        if est.diagnostics_due():
            level, text, values = self.diagnostic_status(est.last_t)
            self.diag_pub.publish(rm.make_diagnostic_array(stamp, f"{self.get_name()}: online estimation", level,
                                                           text, values, hardware_id=self.robot.name))

    def diagnostic_status(self, t):
        """``(level, message, values)`` of the node's /diagnostics status at joint-state time t."""
        lost = None if self.lost is None else {kind: gaps.lost for kind, gaps in self.lost.items()}
        return self.estimator.status(t, rejected=self.rejected, skipped_overload=self.skipped_overload, lost=lost)
