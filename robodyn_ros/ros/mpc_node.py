"""``mpc`` lifecycle node: :class:`robodyn_ros.control.mpc.ModelPredictiveController` at ``rate`` (100 Hz)
on the newest ``/joint_states`` (``trigger: timer``), or on every joint state (``trigger: joint_state``: the
real-time iteration's feedback phase in the state's callback, its solution published, then the next step
prepared), tracking the same built-in Fourier reference as the inverse_dynamics node (time from the first
joint-state stamp).

``output: feedforward`` publishes each solution on ``solution_topic`` (Float64MultiArray
``[t_state, N, dt, tau_ff (N nv), x_pred ((N+1) 2nv), K (N nv 2nv), omitted]``, ``omitted`` the terms left out of
``tau_ff``: 1 gravity (``gravity_compensated_by_robot``), 2 friction (``friction_compensation: false``), summed)
for the inverse_dynamics node in
mode ``mpc``, which applies ``tau_ff,k + K_k (x - x_k)`` at the joint-state rate between solves;
``output: commands`` does that here and publishes the torques itself. Also ``~/solve_time``
(std_msgs/Float64, s) after every solve and ``/diagnostics`` at 1 Hz (the last solve's time, iterations
and status, the counts of solves and fallbacks, ``reference_t0``: the joint-state stamp the reference's time
starts from, and ``state_to_solution_p50_us``/``_p99_us``/``_max_us``: wall time from the arrival of the joint
state a solve started from to its solution published, over the last 10 000 solves of the built MPC;
``states_skipped``: joint states passed over because a newer one was already waiting when the node got to
them, the newest being what it solves and commands from). The estimator's payload
updates the model of the next solve; with ``use_base_parameters`` the estimator's base parameters do, as
consistent full parameters through the parameter gate (:class:`~robodyn_ros.control.mpc_loop.MpcLoop`).

The loop is :class:`~robodyn_ros.control.mpc_loop.MpcLoop`. ``output: commands`` goes through the same
output stage as the inverse_dynamics node (:class:`~robodyn_ros.control.torque_output.TorqueOutput`): effort clamp, ``max_torque_rate``, the
``state_timeout`` watchdog (``stale_action``: gravity of the MPC model at the last q, or zeros; no solves
while stale), and the joint-state stamp checks (duplicates and out-of-order stamps dropped; a jump back is a
time reset: the reference time is re-based so that it continues, the solution of the old time line is
dropped). A solve that misses ``time_limit`` returns the MPC's fallback (``fallback_shifted`` /
``fallback_gravity``): it is applied like a solution, and the diagnostics turn WARN with the status and the
count of fallbacks.
"""
from __future__ import annotations

import time
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray

from ..control.mpc_loop import MpcLoop
from . import messages as rm
from . import qos
from .base_node import RobodynNode
from .base_parameter_topics import BaseParameterTopics
from .command_output import command_publisher, command_watchdog, output_report, send_final_command, reset_service
from .latency import LatencyWindow


def solution_to_array(t_state, solution):
    """The Float64MultiArray data of a solution (module docstring)."""
    N = solution.tau_ff.shape[0]
    return np.concatenate([[t_state, N, solution.dt], solution.tau_ff.ravel(), solution.x_pred.ravel(),
                           solution.K.ravel(), [solution.omitted]])


BUILD_LINES = {   # the log line of each stage of the MPC's first build (BackgroundController.build)
    "building": "MPC building its compiled functions: gravity compensation meanwhile",
    "quick": "MPC serving from its quick (unoptimised) build; the optimised build runs at low priority",
    "optimised": "MPC serving from its optimised build",
}


class MpcNode(RobodynNode):
    kind = "mpc"

    def setup(self):
        c = self.config
        publish = None
        if getattr(self, "loop", None) is not None:
            self.loop.close()        # a reconfigure: the previous loop's worker thread
        if c["output"] == "commands":
            self.command_pub, publish = command_publisher(self)
        self.loop = MpcLoop(self.robot, c, publish, output_report(self))
        self.mpc, self.output, self.reference = self.loop.mpc, self.loop.output, self.loop.reference
        self._cache = {}
        self.latency = LatencyWindow()      # joint state arrival -> its solution published
        self._state_arrival = None          # perf_counter_ns at the arrival of the loop's newest state
        self.solution_pub = self.pub(Float64MultiArray, c["solution_topic"], qos.ESTIMATE_QOS)
        self.solve_time_pub = self.pub(Float64, "~/solve_time", qos.ESTIMATE_QOS)
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.timer(1.0, self._publish_diagnostics, steady=True, group=self.service_group)
        self.state_sub = self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS, raw=True)
        self.states_skipped = 0             # states already followed by a newer one when the node got to them
        if c["use_estimates"]:
            self.sub(InertiaStamped, c["payload_topic"], self._on_payload, qos.ESTIMATE_QOS, group=self.service_group)
        if self.loop.base_update is not None:
            self.base_topics = BaseParameterTopics(self, self.loop)
        self._timer = self._watchdog = None
        reset_service(self)

    # the loop's state, read by tests
    solution = property(lambda self: self.loop.solution)
    solves = property(lambda self: self.loop.solves)
    fallbacks = property(lambda self: self.loop.fallbacks)
    _gravity = property(lambda self: self.loop.gravity)

    def start(self):
        self.loop.start()
        if self.config["trigger"] == "timer":
            self._timer = self.timer(1.0 / self.config["rate"], self._solve)
        if self.output is not None:
            self._watchdog = command_watchdog(self)

    def stop(self):
        """Deactivate, shutdown: solves and the watchdog stop; with ``output: commands`` the last command is
        the ``stale_action``."""
        for name in ("_timer", "_watchdog"):
            if getattr(self, name, None) is not None:
                self.destroy_entity(getattr(self, name))
                setattr(self, name, None)
        send_final_command(self, getattr(self, "output", None))

    def destroy_node(self):
        if getattr(self, "loop", None) is not None:
            self.loop.close()
        return super().destroy_node()

    def apply_live(self, changed):
        self.loop.apply_live(changed)

    def _on_state(self, msg):
        if not self.active:
            return
        arrival = time.perf_counter_ns()
        waiting = self.take_pending(self.state_sub, qos.SENSOR_INPUT_QOS.depth)
        if waiting:            # behind the joint states (solving on each): the newest only, the executor's
            self.states_skipped += len(waiting)           # queued events for the others find nothing to take
            msg = waiting[-1]
        state = self.joint_state_with_velocity(msg, self._cache, "MPC", effort=True)
        if state is None:
            return
        newest = self.loop.state
        self.loop.on_state(*state)
        if self.loop.state is not newest:
            self._state_arrival = arrival
        solved = self.loop.take_solution()          # trigger joint_state: this state's feedback phase
        if solved is not None:
            self._publish_solution(*solved)
            self.loop.prepare()                     # the next state's preparation phase

    def _solve(self):
        if not self.active:
            return
        solved = self.loop.solve()
        if solved is not None:
            self._publish_solution(*solved)

    def _publish_solution(self, t, solution):
        msg = Float64MultiArray()
        msg.data = array("d", solution_to_array(t, solution).tobytes())
        self.solution_pub.publish(msg)
        if self._state_arrival is not None and self.mpc.ready:    # the MPC's, not the fallback's while it builds
            # wall time only: a timer's solve runs on another thread than the state's callback
            self.latency.add(time.perf_counter_ns() - self._state_arrival, 0)
        self.solve_time_pub.publish(Float64(data=float(solution.solve_time)))

    def _publish_diagnostics(self):
        stage = (self.mpc.build, self.mpc.error)
        if getattr(self, "_build_logged", None) != stage:
            self._build_logged = stage
            if self.mpc.error is None:
                self.get_logger().info(BUILD_LINES[self.mpc.build])
            else:
                self.get_logger().error(f"MPC build failed: {self.mpc.error}; " + (
                    "serving from its quick (unoptimised) build" if self.mpc.build == "quick"
                    else "gravity compensation only"))
        if not self.active or self.loop.solution is None:
            return
        t, solution = self.loop.solution
        level, text, values = self.loop.status(solution)
        p50, p99, worst = self.latency.percentiles_us(self.latency.wall_ns)
        values.update(state_to_solution_p50_us=p50, state_to_solution_p99_us=p99, state_to_solution_max_us=worst,
                      states_skipped=self.states_skipped)
        self.diag_pub.publish(rm.make_diagnostic_array(
            rm.seconds_to_time(t), f"{self.get_name()}: model predictive control", level, text, values,
            hardware_id=self.robot.name))

    def _on_payload(self, msg):
        try:
            self.loop.apply_payload(*rm.inertia_stamped_to_arrays(msg))
        except rm.MessageRejected as exc:
            self.reject("payload", exc)
        except ValueError as exc:
            self.reject("payload", rm.MessageRejected(f"InertiaStamped.header.frame_id: {exc}"))
