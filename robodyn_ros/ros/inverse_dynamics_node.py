"""``inverse_dynamics`` lifecycle node: computed torque, gravity compensation, Slotine-Li adaptive control or
MPC feedforward + gains (:mod:`robodyn_ros.control`), one command per ``/joint_states`` message.

Reference: the built-in Fourier generator around the home pose, ``~/joint_trajectory``
(trajectory_msgs/JointTrajectory, sampled like joint_trajectory_controller), or the first measured
configuration held. Reference time is the joint-state stamp, so the node follows simulated time.
Model updates: the estimator's payload (geometry_msgs/InertiaStamped, ``frame_id`` a link of the robot)
is added to the nominal parameters of that link's body from the next command on (certainty equivalence;
in ``slotine_li`` mode it also resets the adapted estimate). Watchdog: without a valid joint state for
``state_timeout`` wall seconds the node stops commanding motion and publishes ``g(q_last)``
(``gravity_hold``) or zeros, until states come back. Also publishes ``~/tracking_error``
(Float64MultiArray ``[stamp, q - q_d]``, labelled).
"""
from __future__ import annotations

import time
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from ..control import ComputedTorqueController, ConstantReference, GravityCompensation, SlotineLiController
from ..control.kernel_dynamics import KernelDynamics
from ..control.mpc import MPCSolution
from ..control.reference import fourier_reference
from ..kernels import compile_kernels
from ..sensor_wrench import link_inertia_in_body
from ..spatial import numpy_inertia_params
from . import messages as rm
from . import qos
from .base_node import RobodynNode


LATENCY_WINDOW = 10000


def inertia_stamped_to_body_parameters(msg, model):
    """``(body index, pi (10,) about the body frame)`` of a payload message; MessageRejected if unusable."""
    link = msg.header.frame_id
    if link not in model.frames or model.frames[link].body < 0:
        raise rm.MessageRejected(f"InertiaStamped.header.frame_id '{link}' is not a moving link of the robot")
    i = msg.inertia
    values = np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz])
    if not np.isfinite(values).all():
        raise rm.MessageRejected("InertiaStamped.inertia is not finite")
    Ic = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    pi = numpy_inertia_params(i.m, values[1:4], Ic)
    return model.frames[link].body, link_inertia_in_body(model, pi, link)


def mpc_solution_from_message(msg, nv, tau_max):
    """:class:`MPCSolution` from the mpc node's Float64MultiArray ``[t0, N, dt, tau_ff (N nv), x_pred
    ((N+1) 2nv), K (N nv 2nv)]``; returns ``(t0, solution)``."""
    data = np.asarray(msg.data, dtype=float)
    if len(data) < 3 or not np.isfinite(data).all():
        raise rm.MessageRejected("MPC solution is empty or not finite")
    t0, N, dt = data[0], int(data[1]), data[2]
    nx = 2 * nv
    sizes = (N * nv, (N + 1) * nx, N * nv * nx)
    if N < 1 or len(data) != 3 + sum(sizes) or dt <= 0:
        raise rm.MessageRejected(f"MPC solution has {len(data)} numbers, not 3 + {sum(sizes)} for N = {N}")
    tau_ff, x_pred, K = np.split(data[3:], np.cumsum(sizes)[:2])
    return t0, MPCSolution(tau_ff.reshape(N, nv), x_pred.reshape(N + 1, nx), K.reshape(N, nv, nx), "mpc",
                           dt=dt, tau_max=tau_max)


class InverseDynamicsNode(RobodynNode):
    kind = "inverse_dynamics"

    def setup(self):
        c, model = self.config, self.robot.model
        self.kernels = compile_kernels(model, register=False)
        self.functions = KernelDynamics(model, self.kernels)
        self.pi_nominal = model.inertial_parameters()
        self.controller = self._make_controller()
        self.reference = None
        self.trajectory = None
        self.t0 = None
        self.last_state_wall = None
        self.q_last = None
        self.stale = False
        self.commands = 0
        self.non_finite_commands = 0
        self.payload_updates = 0
        self.mpc = None
        self.command_pub = self.pub(Float64MultiArray, c["command_topic"], qos.COMMAND_QOS)
        self.error_pub = self.pub(Float64MultiArray, "~/tracking_error", qos.ESTIMATE_QOS)
        # the labelled layout is built once: 8 MultiArrayDimension objects per message cost ~0.1 ms
        self._error_msg = rm.make_float64_multiarray(np.zeros(model.nv + 1), labels=["stamp"] + list(self.robot.joints))
        self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS)
        self.sub(JointTrajectory, "~/joint_trajectory", self._on_trajectory, qos.TRAJECTORY_QOS)
        if c["use_estimates"]:
            self.sub(InertiaStamped, c["payload_topic"], self._on_payload, qos.ESTIMATE_QOS, group=self.service_group)
        if c["mode"] == "mpc":
            self.sub(Float64MultiArray, c["mpc_topic"], self._on_mpc, qos.ESTIMATE_QOS)
        self._state_cache = {}
        self._watchdog = None
        # latency of the 1 kHz path (state callback entry -> command published), last LATENCY_WINDOW samples
        self.latency_ns = np.zeros(LATENCY_WINDOW, dtype=np.int64)
        self.states_received = 0
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.timer(1.0, self._publish_diagnostics, steady=True, group=self.service_group)

    def _make_controller(self):
        c, model = self.config, self.robot.model
        common = dict(functions=self.functions, gravity_compensated_by_robot=c["gravity_compensated_by_robot"])
        if c["mode"] == "gravity_compensation":
            return GravityCompensation(model, c["kp"], c["kd"], **common)
        if c["mode"] == "slotine_li":
            kd = c["slotine_li.kd"] if c["slotine_li.kd"] >= 0 else \
                40.0 * np.diag(self.functions.mass(self.robot.home, model.inertial_parameters()))
            return SlotineLiController(model, Lambda=c["slotine_li.lambda"], kd=kd,
                                       gamma=c["slotine_li.gamma"], dead_zone=c["slotine_li.dead_zone"],
                                       friction_compensation=c["friction_compensation"], **common)
        return ComputedTorqueController(model, c["kp"], c["kd"], friction_compensation=c["friction_compensation"],
                                        **common)

    def apply_live(self, changed):
        for name in ("kp", "kd"):
            if name in changed and hasattr(self.controller, name):
                setattr(self.controller, name, np.full(self.robot.model.nv, float(changed[name])))

    def start(self):
        self.t0 = None
        self.last_state_wall = None
        self.stale = False
        self._watchdog = self.timer(self.config["state_timeout"] / 4.0, self._on_watchdog, steady=True)

    def stop(self):
        if self._watchdog is not None:
            self.destroy_entity(self._watchdog)
            self._watchdog = None

    # ------------------------------------------------------------------------------------ reference
    def _make_reference(self, q):
        c = self.config
        if c["reference"] == "hold":
            return ConstantReference(q.copy())
        center = self.robot.from_command(np.asarray(c["generator.center"])) if c["generator.center"] else \
            (self.robot.home if self.robot.name in ("panda", "ur5", "iiwa") else q.copy())
        return fourier_reference(center, c["generator.amplitude"], c["generator.period"], c["generator.harmonics"])

    def desired(self, t, q):
        if self.trajectory is not None:
            traj, start = self.trajectory
            return traj.sample(t - start)
        if self.reference is None:
            self.reference = self._make_reference(q)
        return self.reference.evaluate(t - self.t0)

    # -------------------------------------------------------------------------------------- control
    def _on_state(self, msg):
        if not self.active:
            return
        start = time.perf_counter_ns()
        state = self.joint_state_with_velocity(msg, self._state_cache, "controller")
        if state is None:
            return
        t, q, v = state
        self.last_state_wall = time.monotonic()
        if self.stale:
            self.get_logger().info("joint states are back: resuming control")
            self.stale = False
        if self.t0 is None:
            self.t0 = t
        self.q_last = q
        q_d, v_d, a_d = self.desired(t, q)
        mode = self.config["mode"]
        if mode == "gravity_compensation":
            tau, status = self.controller.compute(q, v, q_d)
        elif mode == "slotine_li":
            dt = t - self._t_prev if getattr(self, "_t_prev", None) is not None else 0.0
            tau, status = self.controller.compute(q, v, q_d, v_d, a_d, min(max(dt, 0.0), 0.01))
        elif mode == "mpc" and self.mpc is not None:
            tau = self.mpc[1].torque(np.concatenate([q, v]), t - self.mpc[0])
        else:  # computed torque, also in mode mpc until the first solution arrives
            tau, status = self.controller.compute(q, v, q_d, v_d, a_d)
        self._t_prev = t
        self.publish_command(tau)
        self.latency_ns[self.states_received % LATENCY_WINDOW] = time.perf_counter_ns() - start
        self.states_received += 1
        error = np.empty(len(q) + 1)
        error[0], error[1:] = t, self.robot.to_command(q - q_d)
        self._error_msg.data = array("d", error.tobytes())
        self.error_pub.publish(self._error_msg)

    def publish_command(self, tau):
        if not np.isfinite(tau).all():
            self.non_finite_commands += 1
            tau = np.zeros_like(tau)
        self.commands += 1
        self.command_pub.publish(rm.make_float64_multiarray(self.robot.to_command(tau)))

    def _on_watchdog(self):
        if not self.active or self.last_state_wall is None:
            return
        age = time.monotonic() - self.last_state_wall
        if age < self.config["state_timeout"]:
            return
        if not self.stale:
            self.get_logger().warning(f"no valid joint state for {age * 1e3:.0f} ms (timeout "
                                      f"{self.config['state_timeout'] * 1e3:.0f} ms): "
                                      f"{self.config['stale_action']} until they come back")
            self.stale = True
        if self.config["stale_action"] == "gravity_hold" and self.q_last is not None \
                and not self.config["gravity_compensated_by_robot"]:
            tau = self.functions.gravity(self.q_last, self.controller_parameters())
        else:
            tau = np.zeros(self.robot.model.nv)
        self.publish_command(tau)

    def latency_percentiles_us(self):
        """(p50, p99, max) of the state -> command latency over the last LATENCY_WINDOW states, us."""
        n = min(self.states_received, LATENCY_WINDOW)
        if n == 0:
            return (0.0, 0.0, 0.0)
        x = self.latency_ns[:n] / 1e3
        return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(x.max())

    def _publish_diagnostics(self):
        if not self.active:
            return
        p50, p99, worst = self.latency_percentiles_us()
        level = "WARN" if self.stale or self.rejected else "OK"
        text = "joint states stale: holding" if self.stale else (
            f"dropped malformed messages: {dict(self.rejected)}" if self.rejected else "controlling")
        values = {"mode": self.config["mode"], "states_received": self.states_received, "commands": self.commands,
                  "latency_p50_us": p50, "latency_p99_us": p99, "latency_max_us": worst,
                  "latency_window": min(self.states_received, LATENCY_WINDOW), "stale": self.stale,
                  "payload_updates": self.payload_updates, "non_finite_commands": self.non_finite_commands,
                  "rejected_messages": sum(self.rejected.values())}
        self.diag_pub.publish(rm.make_diagnostic_array(self.get_clock().now().to_msg(),
                                                       f"{self.get_name()}: inverse dynamics", level, text, values,
                                                       hardware_id=self.robot.name))

    def controller_parameters(self):
        return self.controller.pi_hat if hasattr(self.controller, "pi_hat") else self.controller.pi

    # ------------------------------------------------------------------------------------- updates
    def _on_trajectory(self, msg):
        try:
            traj = rm.joint_trajectory_to_reference(msg, self.robot.model.joint_names)
        except rm.MessageRejected as exc:
            self.reject("joint_trajectory", exc)
            return
        start = traj.start_stamp if traj.start_stamp > 0 else (self._t_prev if getattr(self, "_t_prev", None) else 0.0)
        self.trajectory = (traj, start)

    def _on_payload(self, msg):
        try:
            body, pi_body = inertia_stamped_to_body_parameters(msg, self.robot.model)
        except rm.MessageRejected as exc:
            self.reject("payload", exc)
            return
        pi = self.pi_nominal.copy()
        if abs(msg.inertia.m) >= self.config["payload_min_mass"]:
            pi[10 * body:10 * body + 10] += pi_body
        if hasattr(self.controller, "pi_hat"):
            self.controller.pi_hat = pi
        else:
            self.controller.set_parameters(pi)
        self.payload_updates += 1

    def _on_mpc(self, msg):
        try:
            self.mpc = mpc_solution_from_message(msg, self.robot.model.nv, self.controller.guard.tau_max)
        except rm.MessageRejected as exc:
            self.reject("mpc_solution", exc)
