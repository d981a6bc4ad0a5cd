"""``mpc`` lifecycle node: :class:`robodyn_ros.control.mpc.ModelPredictiveController` at ``rate`` (100 Hz)
on the newest ``/joint_states``, tracking the same built-in Fourier reference as the inverse_dynamics
node (time from the first joint-state stamp).

``output: feedforward`` publishes each solution on ``solution_topic`` (Float64MultiArray
``[t_state, N, dt, tau_ff (N nv), x_pred ((N+1) 2nv), K (N nv 2nv)]``) for the inverse_dynamics node in
mode ``mpc``, which applies ``tau_ff,k + K_k (x - x_k)`` at the joint-state rate between solves;
``output: commands`` does that here and publishes the torques itself. Also ``~/solve_time``
(std_msgs/Float64, s) and ``/diagnostics`` (solve time, iterations, status). The estimator's payload
updates the model of the next solve.

``output: commands`` goes through the same output stage as the inverse_dynamics node
(:class:`~robodyn_ros.ros.inverse_dynamics_node.TorqueOutput`): effort clamp, ``max_torque_rate``, the
``state_timeout`` watchdog (``stale_action``: gravity of the MPC model at the last q, or zeros; no solves
while stale), and the joint-state stamp checks (duplicates and out-of-order stamps dropped; a jump back is a
time reset: the reference time is re-based so that it continues, the solution of the old time line is
dropped). A solve that misses ``time_limit`` returns the MPC's fallback (``fallback_shifted`` /
``fallback_gravity``): it is applied like a solution, and the diagnostics turn WARN with the status and the
count of fallbacks.
"""
from __future__ import annotations

from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray

from ..control.mpc import BackgroundController, MPCConfig
from ..control.reference import fourier_reference
from . import messages as rm
from . import qos
from .base_node import RobodynNode
from .inverse_dynamics_node import TorqueOutput, inertia_stamped_to_body_parameters


def solution_to_array(t_state, solution):
    """The Float64MultiArray data of a solution (module docstring)."""
    N = solution.tau_ff.shape[0]
    return np.concatenate([[t_state, N, solution.dt], solution.tau_ff.ravel(), solution.x_pred.ravel(),
                           solution.K.ravel()])


class MpcNode(RobodynNode):
    kind = "mpc"

    def setup(self):
        c, robot = self.config, self.robot
        self.mpc = BackgroundController(robot.model, MPCConfig(       # gravity fallback while it builds
            horizon=c["horizon"], dt=c["dt"], solver=c["solver"], compiled=c["compiled"], time_limit=c["time_limit"],
            q_weight=c["q_weight"], v_weight=c["v_weight"], r_weight=c["r_weight"]))
        self.pi_nominal = robot.model.inertial_parameters()
        self.reference = fourier_reference(robot.home, c["generator.amplitude"], c["generator.period"],
                                           c["generator.harmonics"])
        self.state = None
        self.t0 = None
        self.solution = None
        self.solves = 0
        self.fallbacks = 0
        self._cache = {}
        self.solution_pub = self.pub(Float64MultiArray, c["solution_topic"], qos.ESTIMATE_QOS)
        self.solve_time_pub = self.pub(Float64, "~/solve_time", qos.ESTIMATE_QOS)
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.output = TorqueOutput(self, self.mpc.tau_max, self._gravity) if c["output"] == "commands" else None
        self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS)
        if c["use_estimates"]:
            self.sub(InertiaStamped, c["payload_topic"], self._on_payload, qos.ESTIMATE_QOS, group=self.service_group)
        self._timer = None

    def start(self):
        self.state = None
        self.t0 = None
        self.solution = None
        self._timer = self.timer(1.0 / self.config["rate"], self._solve)
        self._watchdog = None
        if self.output is not None:
            self.output.start()
            self._watchdog = self.timer(self.config["state_timeout"] / 4.0, self.output.on_watchdog, steady=True)

    def stop(self):
        for name in ("_timer", "_watchdog"):
            if getattr(self, name, None) is not None:
                self.destroy_entity(getattr(self, name))
                setattr(self, name, None)

    def apply_live(self, changed):
        if "max_torque_rate" in changed and self.output is not None:
            self.output.set_max_torque_rate(changed["max_torque_rate"])

    def _gravity(self, q):
        """Gravity hold of the MPC's model (nv,) at ``q`` (with its friction offset)."""
        return self.mpc.gravity(q)

    def _on_state(self, msg):
        if not self.active:
            return
        state = self.joint_state_with_velocity(msg, self._cache, "MPC")
        if state is None:
            return
        t, q, v = state
        if self.output is not None:
            newest = self.output.gate.newest
            verdict = self.output.accept_state(t, q)
            if verdict is None:
                return
            if verdict == "reset":
                self.t0 = None if self.t0 is None else self.t0 + (t - newest)
                self.solution = None
        if self.t0 is None:
            self.t0 = t
        self.state = (t, q, v)
        if self.output is not None and self.solution is not None:
            tau = self.solution[1].torque(np.concatenate([q, v]), t - self.solution[0])
            self.output.publish(tau, t)

    def _solve(self):
        if not self.active or self.state is None or (self.output is not None and self.output.stale):
            return
        t, q, v = self.state
        solution = self.mpc.solve(q, v, self.reference, t - self.t0)
        self.solution = (t, solution)
        self.solves += 1
        self.fallbacks += solution.status.startswith("fallback")
        msg = Float64MultiArray()
        msg.data = array("d", solution_to_array(t, solution).tobytes())
        self.solution_pub.publish(msg)
        self.solve_time_pub.publish(Float64(data=float(solution.solve_time)))
        level = "OK" if solution.status in ("solved", "rti") else "WARN"
        self.diag_pub.publish(rm.make_diagnostic_array(
            rm.seconds_to_time(t), f"{self.get_name()}: model predictive control", level, solution.status,
            {"solve_time_ms": solution.solve_time * 1e3, "iterations": solution.iterations,
             "status": solution.status, "solver_status": solution.solver_status, "solves": self.solves,
             "fallbacks": self.fallbacks, **(self.output.diagnostic_values() if self.output is not None else {})},
            hardware_id=self.robot.name))

    def _on_payload(self, msg):
        try:
            body, pi_body = inertia_stamped_to_body_parameters(msg, self.robot.model)
        except rm.MessageRejected as exc:
            self.reject("payload", exc)
            return
        pi = self.pi_nominal.copy()
        pi[10 * body:10 * body + 10] += pi_body
        self.mpc.set_inertial_parameters(pi)
