"""``inverse_dynamics`` lifecycle node: :class:`~robodyn_ros.control.control_loop.ControlLoop` (computed
torque, gravity compensation, Slotine-Li adaptive control or MPC feedforward + gains, the reference, live
payload updates and the output stage) on ``/joint_states``, one command per message.

Inputs: ``joint_states_topic``; ``~/joint_trajectory`` (trajectory_msgs/JointTrajectory, sampled like
joint_trajectory_controller) with ``reference: trajectory``; the estimator's payload (``payload_topic``,
geometry_msgs/InertiaStamped, ``frame_id`` a link of the robot) with ``use_estimates``; the mpc node's
solutions (``mpc_topic``) in mode ``mpc``; with ``use_base_parameters`` the estimator's base parameters and
their covariance (``base_parameters_topic``, ``base_covariance_topic``, Float64MultiArray). Outputs:
``command_topic`` (every torque clamped to the URDF
effort limits, rate limited to ``max_torque_rate``, a non-finite torque replaced by the last safe command;
without a valid joint state for ``state_timeout`` wall seconds ``g(q_last)`` (``gravity_hold``) or zeros:
:class:`~robodyn_ros.control.torque_output.TorqueOutput`), ``~/tracking_error`` (Float64MultiArray
``[stamp, q - q_d]``, labelled) and ``/diagnostics`` (1 Hz, with the state -> command latency; WARN while
stale, after malformed messages, while a joint tracks worse than ``tracking_error.threshold`` and while
adaptation applies nothing: :meth:`~robodyn_ros.control.control_loop.ControlLoop.status`).
"""
from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from ..control.control_loop import ControlLoop
from ..control.payload_update import ImplausiblePayload
from . import messages as rm
from . import qos
from .base_node import RobodynNode
from .base_parameter_topics import BaseParameterTopics
from .command_output import command_publisher, command_watchdog, output_report, send_final_command, reset_service
from .latency import LatencyWindow


class InverseDynamicsNode(RobodynNode):
    kind = "inverse_dynamics"

    def setup(self):
        c, robot = self.config, self.robot
        self.command_pub, publish = command_publisher(self)
        if getattr(self, "loop", None) is not None:
            self.loop.close()        # a reconfigure: the previous loop's worker thread
        self.loop = ControlLoop(robot, c, publish, output_report(self))
        self.kernels, self.output = self.loop.kernels, self.loop.output
        self.error_pub = self.pub(Float64MultiArray, "~/tracking_error", qos.ESTIMATE_QOS)
        # the labelled layout is serialized once; each error only writes its values into the bytes
        self._error_msg = rm.SerializedFloat64MultiArray(np.zeros(robot.model.nv + 1),
                                                         labels=["stamp"] + list(robot.joints))
        self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS, raw=True)
        self.sub(JointTrajectory, "~/joint_trajectory", self._on_trajectory, qos.TRAJECTORY_QOS)
        if c["use_estimates"]:
            self.sub(InertiaStamped, c["payload_topic"], self._on_payload, qos.ESTIMATE_QOS, group=self.service_group)
        if c["mode"] == "mpc":
            self.sub(Float64MultiArray, c["mpc_topic"], self._on_mpc, qos.ESTIMATE_QOS)
        if self.loop.base_update is not None:
            self.base_topics = BaseParameterTopics(self, self.loop)
        reset_service(self)
        self._state_cache = {}
        self._watchdog = None
        self.latency = LatencyWindow()
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.timer(1.0, self._publish_diagnostics, steady=True, group=self.service_group)

    # the loop's state, read by diagnostics, the demo and tests
    controller = property(lambda self: self.loop.controller)
    stale = property(lambda self: self.output.stale)
    commands = property(lambda self: self.output.commands)
    non_finite_commands = property(lambda self: self.output.non_finite)
    payload_updates = property(lambda self: self.loop.payload_updates)
    implausible_payloads = property(lambda self: self.loop.implausible_payloads)

    def destroy_node(self):
        if getattr(self, "loop", None) is not None:
            self.loop.close()        # the base-parameter worker thread
        return super().destroy_node()

    def apply_live(self, changed):
        self.loop.apply_live(changed)

    def start(self):
        self.loop.start()
        self._watchdog = command_watchdog(self)

    def stop(self):
        """Deactivate, shutdown: the watchdog stops and the last command is the ``stale_action``."""
        if getattr(self, "_watchdog", None) is not None:
            self.destroy_entity(self._watchdog)
            self._watchdog = None
        send_final_command(self, getattr(self, "output", None))

    def _on_state(self, msg):
        if not self.active:
            return
        start, cpu_start = time.perf_counter_ns(), time.thread_time_ns()
        state = self.joint_state_with_velocity(msg, self._state_cache, "controller", effort=True)
        if state is None:
            return
        t, q, v, effort = state
        result = self.loop.on_state(t, q, v, effort)
        if result is None:
            return
        # this thread's CPU time over the same span: a wall latency far above it was preemption
        self.latency.add(time.perf_counter_ns() - start, time.thread_time_ns() - cpu_start)
        error = np.empty(len(q) + 1)
        error[0], error[1:] = t, self.robot.to_command(result[1])
        self.error_pub.publish(self._error_msg.serialize(error))

    def _publish_diagnostics(self):
        if not self.active:
            return
        level, text, loop_values = self.loop.status(self.rejected)
        values = {"mode": self.config["mode"], **self.latency.values(), **loop_values,
                  "rejected_messages": sum(self.rejected.values())}
        self.diag_pub.publish(rm.make_diagnostic_array(self.get_clock().now().to_msg(),
                                                       f"{self.get_name()}: inverse dynamics", level, text, values,
                                                       hardware_id=self.robot.name))

    def controller_parameters(self):
        return self.loop.controller_parameters()

    def _on_trajectory(self, msg):
        try:
            traj = rm.joint_trajectory_to_reference(msg, self.robot.model.joint_names)
        except rm.MessageRejected as exc:
            self.reject("joint_trajectory", exc)
            return
        self.loop.set_trajectory(traj, traj.start_stamp)

    def _on_payload(self, msg):
        try:
            link, m, com, I_c = rm.inertia_stamped_to_arrays(msg)
            self.loop.apply_payload(link, m, com, I_c)
        except rm.MessageRejected as exc:
            self.reject("payload", exc)
        except ImplausiblePayload as exc:   # well formed, but not a load the robot could carry
            self.warn_throttled("implausible_payload", f"{exc} ({self.loop.implausible_payloads} so far)")
        except ValueError as exc:
            self.reject("payload", rm.MessageRejected(f"InertiaStamped.header.frame_id: {exc}"))

    def _on_mpc(self, msg):
        try:
            t0, solution = rm.mpc_solution_from_message(msg, self.robot.model.nv, self.loop.controller.guard.tau_max)
        except rm.MessageRejected as exc:
            self.reject("mpc_solution", exc)
            return
        try:
            fresh = self.loop.set_mpc_solution(t0, solution)
        except ValueError as exc:
            self.reject("mpc_solution", exc)
            return
        if not fresh:
            self.warn_throttled("mpc_future", f"dropped MPC solution of t = {t0:.3f} s, ahead of the newest joint "
                                f"state ({self.output.gate.newest:.3f} s): planned before a time reset")
