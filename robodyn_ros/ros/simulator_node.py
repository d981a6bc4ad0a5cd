"""``simulator`` lifecycle node: :class:`robodyn_ros.simulation.simulator.Simulator` behind the topics of a
ros2_control robot (joint_state_broadcaster, force_torque_sensor_broadcaster, an effort controller).

Publishes ``/joint_states`` (position, velocity, measured effort), the wrist wrench (``frame_id`` the
wrist link) and, with ``publish_clock``, ``/clock``; takes ``/effort_controller/commands`` (reliable,
joint order of ``joints``). Services ``~/attach_payload`` and ``~/detach_payload`` (std_srvs/Trigger):
attach the box of the ``payload.*`` parameters, which are live (set ``payload.mass``, ``payload.link``,
``payload.com``, ``payload.size``, then call ``~/attach_payload``: any load on any link, nothing rebuilt;
a load attached when they change is replaced at once).

Timing: ``real_time_factor > 0`` steps on a wall timer, catching up whole steps; ``0`` runs as fast as
possible, in ``lockstep`` stepping as soon as a command answers the last published state (or after
``lockstep_timeout`` wall seconds). Stamps are simulated time (plus the wall time at activation when
``/clock`` is not published). A command older than ``command_timeout`` simulated seconds is replaced by
zero torque, with a warning. ``publish_decimation`` k > 1 publishes the joint states, the wrench and
``/clock`` after every k-th step only (in lockstep, k steps per command). Dynamics: one compiled function
per step (:class:`robodyn_ros.simulation.simulation_step.CompiledStep`, robot and payload parameters as its input,
compiled on configure; the same function in CasADi's virtual machine if no C compiler works).

Stepping: with ``step_thread`` (default), real time and as fast as possible without lockstep step in a
thread of their own (the executor then only serves commands, services and parameters): real time sleeps
until the absolute wall time of the next step (no executor wake-up per step: measured at load 7-9, 13 %
of a core instead of 29 % at 1 kHz for the Panda), catching up whole steps and dropping wall time when more than
``MAX_CATCH_UP_STEPS`` behind, exactly as the timer callback does; as fast as possible steps back to back.
Steps, payload changes and deactivation are serialised by one lock. Without ``step_thread`` (and always
in lockstep) the executor's timers step: real time on a timer of one step's wall period, as fast as
possible in bursts of ``FREE_RUN_BURST`` wall seconds on a ``FREE_RUN_PERIOD`` timer. The stepping
thread holds the GIL while it steps: in-process callbacks get it between steps of real time, and every
``FREE_RUN_BURST`` when free-running. :meth:`SimulatorNode.stepping_cpu_seconds` is the thread's CPU time
(the executor thread's ``time.thread_time()`` no longer includes the stepping).

Speed: the JointState, wrench and clock messages are built once and refilled in place, the joint fields
through NumPy views of the messages' own ``array('d')`` buffers (rclpy serialises in ``publish``, so a
refilled message never changes one already sent). Note: with ``ROS_PYTHON_CHECK_FIELDS`` unset (the
default), assigning an ``array('d')`` to a message field COPIES it, so a message whose fields were
assigned once from preallocated arrays keeps publishing their values at assignment time: the views must
be taken of the message's fields after assignment (``_make_messages``). The wrench and ``/clock`` are
computed and published only while someone subscribes (counted every ``LISTENER_CHECK_STEPS`` steps).
"""
from __future__ import annotations

import os
import threading
import time
from array import array

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from rosgraph_msgs.msg import Clock as ClockMsg
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from ..kernels.compiled_functions import CompileError
from ..model.errors import ModelError
from ..dynamics.aba import aba
from ..kernels import compile_kernels
from ..identification.sensor_wrench import SensorWrenchRegressor
from ..simulation.simulator import Payload, SensorNoise, Simulator, SimulatorConfig
from ..simulation.simulation_step import CompiledStep
from . import messages as rm
from . import qos
from .base_node import RobodynNode

CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
MAX_CATCH_UP_STEPS = 50
FREE_RUN_PERIOD = 1e-4   # s: the free-running timer is due again as soon as a burst ends
FREE_RUN_BURST = 1e-3    # s of stepping per free-running callback (timer) or between two GIL offers (thread)
LISTENER_CHECK_STEPS = 100  # steps between two counts of the wrench and /clock subscribers


def stable_limit_stops(model, kernels, q, dt):
    """``(stiffness, damping)`` of the joint-limit stops that an explicit step ``dt`` integrates stably for
    the lightest joint: with ``m = 1 / max diag(M⁻¹(q))`` (the smallest effective inertia), ``k dt² / m``
    and ``c dt / m`` of 0.5 (RK4 is stable up to about 2.8; the library's defaults, 2e4 and 2e2, make the
    Panda's wrist diverge at 1 kHz when it falls into a stop)."""
    m = 1.0 / float(np.max(np.diag(np.linalg.inv(kernels.crba(q)))))
    return 0.5 * m / dt**2, 0.5 * m / dt


class SimulatorNode(RobodynNode):
    kind = "simulator"

    def setup(self):
        c, robot = self.config, self.robot
        model = robot.model if c["friction"] else robot.model.with_friction(
            np.zeros(robot.model.nv), np.zeros(robot.model.nv), np.zeros(robot.model.nv))
        self.kernels = compile_kernels(model, register=False)
        self.payload = self._configured_payload(c)
        q0 = np.asarray(c["initial_positions"], dtype=float) if c["initial_positions"] else None
        q0 = robot.home if q0 is None else robot.from_command(q0)
        noise = SensorNoise(c["noise.position"], c["noise.velocity"], c["noise.effort"], c["noise.force"],
                            c["noise.torque"])
        stiffness, damping = stable_limit_stops(model, self.kernels, q0, 1.0 / c["rate"])
        sim_config = SimulatorConfig(dt=1.0 / c["rate"], integrator=c["integrator"], noise=noise,
                                     wrench_bias=tuple(c["wrench_bias"]), seed=c["noise.seed"],
                                     limit_stiffness=stiffness if c["limits.stiffness"] < 0 else c["limits.stiffness"],
                                     limit_damping=damping if c["limits.damping"] < 0 else c["limits.damping"])
        try:
            step_function = CompiledStep(model, sim_config.integrator)
        except CompileError as exc:   # the same function in CasADi's virtual machine: still pi as input
            self.get_logger().warning(f"stepping in CasADi's virtual machine (no compiled step): {exc}")
            step_function = CompiledStep(model, sim_config.integrator, compiled=False)
        self.sim = Simulator(model, sim_config, q0, forward_dynamics=self._robot_dynamics,
                             sensor_link=robot.wrist_link,
                             wrench_regressor=SensorWrenchRegressor(model, robot.wrist_link),
                             step_function=step_function)
        if self.payload is not None:
            self.sim.attach_payload(self.payload)      # validates the link (nothing to compile: pi is an input)
            self.sim.detach_payload()
        self.command = np.zeros(model.nv)
        self._zero_command = np.zeros(model.nv)
        self._auto_attached = False
        self._wrench_listeners = 1
        self._clock_listeners = 1
        self._lock = threading.Lock()     # one step, a payload change or a stop at a time
        self._thread = None
        self._thread_id = None
        self._thread_cpu_total = None
        self._running = False
        self.last_command_time = 0.0
        self.commands_received = 0
        self.command_timed_out = False
        self.steps = 0
        self.awaiting_command = False
        self.last_step_wall = time.monotonic()
        self.stamp_offset = 0.0
        self._timer = None
        self.joint_pub = self.pub(JointState, c["joint_states_topic"], qos.JOINT_STATE_OUTPUT_QOS)
        self.wrench_pub = self.pub(WrenchStamped, c["wrench_topic"], qos.WRENCH_OUTPUT_QOS)
        self.clock_pub = self.pub(ClockMsg, "/clock", CLOCK_QOS) if c["publish_clock"] else None
        self.sub(Float64MultiArray, c["command_topic"], self._on_command, qos.COMMAND_QOS)
        self.srv(Trigger, "~/attach_payload", self._on_attach)
        self.srv(Trigger, "~/detach_payload", self._on_detach)
        self._next_clock = 0.0
        self._make_messages()

    def _make_messages(self):
        """The JointState, wrench and clock messages, built once (``publish_state`` refills them), sharing
        one stamp; ``_joint_q``, ``_joint_v``, ``_joint_tau`` (nv,) are views of the JointState's own fields
        (taken after assignment: the field setters copy), ``_measured`` the model-order scratch arrays."""
        robot, n = self.robot, self.robot.model.nv
        self._stamp = Time()
        self._joint_msg = rm.make_joint_state(self._stamp, robot.joints, np.zeros(n), np.zeros(n), np.zeros(n))
        self._joint_msg.header.stamp = self._stamp
        self._joint_q, self._joint_v, self._joint_tau = (
            np.frombuffer(f, dtype=np.float64) for f in (self._joint_msg.position, self._joint_msg.velocity,
                                                         self._joint_msg.effort))
        order = np.asarray(robot.command_order)
        self._identity_order = bool(np.array_equal(order, np.arange(n)))
        self._measured = (self._joint_q, self._joint_v, self._joint_tau) if self._identity_order else \
            (np.zeros(n), np.zeros(n), np.zeros(n))
        self._wrench_msg = WrenchStamped()
        self._wrench_msg.header.frame_id = robot.wrist_link
        self._wrench_msg.header.stamp = self._stamp
        self._clock_msg = ClockMsg()
        self._clock_msg.clock = self._stamp

    def _robot_dynamics(self, q, v, tau, pi):
        return self.kernels.aba(q, v, tau)

    def _payload_dynamics(self, q, v, tau, pi):
        """``sim.forward_dynamics`` with a payload: the interpreted ABA with the parameters ``pi`` (any load
        on any link, nothing compiled; the step itself is the compiled step, which takes ``pi`` as input)."""
        return aba(self.sim.model, q, v, tau, pi=pi)

    def _configured_payload(self, c):
        """The box of the ``payload.*`` parameters (None for mass 0)."""
        if c["payload.mass"] <= 0.0:
            return None
        return Payload.box(c["payload.link"] or self.robot.wrist_link, c["payload.mass"], tuple(c["payload.com"]),
                           tuple(c["payload.size"]))

    def apply_live(self, changed):
        """``payload.*`` changed: the next ``~/attach_payload`` attaches the new load (to its link); a load
        attached now is replaced at once, between two steps. An unknown link is refused with an error and
        the previous load kept."""
        if not any(name.startswith("payload.") for name in changed) or getattr(self, "sim", None) is None:
            return
        payload = self._configured_payload(self.config)
        with self._lock:
            previous = self.sim.payload
            try:
                if payload is not None:
                    self.sim.attach_payload(payload)       # validates the link
                    if previous is None:
                        self.sim.detach_payload()
                elif previous is not None:
                    self.sim.detach_payload()
                    self.sim.forward_dynamics = self._robot_dynamics
            except ModelError as exc:
                self.get_logger().error(f"payload parameters refused, keeping the previous load: {exc}")
                return
            self.payload = payload

    # ------------------------------------------------------------------------------------ lifecycle
    def start(self):
        c = self.config
        self.stamp_offset = 0.0 if c["publish_clock"] else self.get_clock().now().nanoseconds * 1e-9
        self.last_command_time = self.sim.t
        self._wall_start, self._sim_start = time.monotonic(), self.sim.t
        self.publish_state()
        threaded = c["step_thread"] and (c["real_time_factor"] > 0.0 or not c["lockstep"])
        if threaded:
            self._running = True
            loop = self._real_time_loop if c["real_time_factor"] > 0.0 else self._free_run_loop
            self._thread = threading.Thread(target=self._thread_main, args=(loop,), name="simulator_step",
                                            daemon=True)
            self._thread.start()
        elif c["real_time_factor"] > 0.0:
            self._timer = self.timer(min(1.0 / c["rate"] / c["real_time_factor"], 0.001), self._on_real_time_tick,
                                     steady=True)
        elif c["lockstep"]:
            self._timer = self.timer(max(c["lockstep_timeout"], 1e-3) / 2.0, self._on_lockstep_tick, steady=True)
        else:
            self._timer = self.timer(FREE_RUN_PERIOD, self._on_free_run_tick, steady=True)

    def stop(self):
        self._running = False
        if getattr(self, "_thread", None) is not None:     # None, or never configured
            if self._thread is not threading.current_thread():
                self._thread.join(timeout=5.0)
            self._thread = None
        if getattr(self, "_timer", None) is not None:
            self.destroy_entity(self._timer)
            self._timer = None

    def destroy_node(self):
        self.active = False
        self.stop()
        return super().destroy_node()

    def stepping_cpu_seconds(self):
        """CPU seconds (user + system) used so far by the stepping thread (None without one): what the
        simulator costs a core, apart from the executor thread serving commands; after the thread ended,
        its total."""
        if self._thread_id is None:
            return None
        if self._thread is None or not self._thread.is_alive():
            return self._thread_cpu_total
        try:
            with open(f"/proc/self/task/{self._thread_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    # -------------------------------------------------------------------------------------- stepping
    def _thread_main(self, loop):
        self._thread_id, self._thread_cpu_total = threading.get_native_id(), None
        try:
            loop()
        except Exception as exc:  # noqa: BLE001 - e.g. the context shut down under a publish: stop stepping
            if self._running and self.context.ok():
                self.get_logger().error(f"stepping thread stopped: {type(exc).__name__}: {exc}")
        finally:
            self._running = False
            self._thread_cpu_total = time.thread_time()

    def _real_time_loop(self):
        """Real time in the stepping thread: the timer's catch-up (``_on_real_time_tick``), then a sleep
        until the absolute wall time at which the next step is due."""
        dt, factor = self.sim.config.dt, self.config["real_time_factor"]
        while self._running:
            with self._lock:
                if not self._running:
                    break
                self._on_real_time_tick()
                due = self._wall_start + (self.sim.t + dt - self._sim_start) / factor
            delay = due - time.monotonic()
            if delay > 0.0:
                time.sleep(min(delay, 0.05))

    def _free_run_loop(self):
        """As fast as possible in the stepping thread: steps back to back, offering the GIL to the executor
        thread every ``FREE_RUN_BURST`` wall seconds (else it waits for Python's 5 ms switch interval)."""
        lock, step = self._lock, self.step_and_publish
        end = time.monotonic() + FREE_RUN_BURST
        while self._running:
            with lock:
                if not self._running:
                    break
                step()
            if self.last_step_wall >= end:
                time.sleep(0)
                end = self.last_step_wall + FREE_RUN_BURST

    def _on_real_time_tick(self):
        target = self._sim_start + (time.monotonic() - self._wall_start) * self.config["real_time_factor"]
        steps = int((target - self.sim.t) / self.sim.config.dt + 1e-9)
        if steps > MAX_CATCH_UP_STEPS:  # too slow for real time: drop wall time instead of bursting
            self.warn_throttled("behind", f"simulator behind real time by {steps} steps; slowing down")
            self._wall_start, self._sim_start = time.monotonic(), self.sim.t
            steps = MAX_CATCH_UP_STEPS
        for _ in range(max(steps, 0)):
            self.step_and_publish()

    def _on_lockstep_tick(self):
        if time.monotonic() - self.last_step_wall >= self.config["lockstep_timeout"]:
            self.step_to_next_publish()

    def _on_free_run_tick(self):
        end = time.monotonic() + FREE_RUN_BURST
        while self.active:
            self.step_and_publish()
            if self.last_step_wall >= end:
                break

    def step_to_next_publish(self):
        """Step until the state is published (one step unless ``publish_decimation`` > 1)."""
        for _ in range(self.config["publish_decimation"]):
            if self.step_and_publish():
                return

    def step_and_publish(self):
        """One step; publishes the state after every ``publish_decimation``-th. Returns whether it did."""
        if not self.active:
            return False
        sim, c = self.sim, self.config
        if c["payload.attach_time"] >= 0.0 and self.payload is not None and sim.payload is None \
                and not self._auto_attached and sim.t + 1e-12 >= c["payload.attach_time"]:
            self._auto_attached = True
            self.attach()
        tau = self.command                 # validated on receipt (_on_command)
        if sim.t - self.last_command_time > c["command_timeout"]:
            if not self.command_timed_out:
                self.get_logger().warning(f"no command for {sim.t - self.last_command_time:.3f} s (timeout "
                                          f"{c['command_timeout']} s): applying zero torque")
            self.command_timed_out = True
            tau = self._zero_command
        try:
            sim.step_validated(tau)
        except ModelError as exc:
            self.warn_throttled("diverged", f"simulation step failed: {exc}")
        self.steps += 1
        self.last_step_wall = time.monotonic()
        if self.steps % c["publish_decimation"]:
            return False
        self.publish_state()
        return True

    def publish_state(self):
        """Refill the three messages in place (one shared stamp) and publish them (module docstring)."""
        sim = self.sim
        self._stamp.sec, self._stamp.nanosec = divmod(round((sim.t + self.stamp_offset) * 1e9), 1_000_000_000)
        q, v, tau = self._measured
        sim.measure_joints_into(q, v, tau)
        if not self._identity_order:
            order = self.robot.command_order
            np.take(q, order, out=self._joint_q)
            np.take(v, order, out=self._joint_v)
            np.take(tau, order, out=self._joint_tau)
        self.joint_pub.publish(self._joint_msg)
        if self.steps % LISTENER_CHECK_STEPS == 0:  # the wrench costs ~0.1 ms: computed only while someone listens
            self._wrench_listeners = self.wrench_pub.get_subscription_count()
            if self.clock_pub is not None:
                self._clock_listeners = self.clock_pub.get_subscription_count()
        if self._wrench_listeners:
            f, t = self._wrench_msg.wrench.force, self._wrench_msg.wrench.torque
            f.x, f.y, f.z, t.x, t.y, t.z = sim.measure_wrench().tolist()
            self.wrench_pub.publish(self._wrench_msg)
        if self.clock_pub is not None and self._clock_listeners and sim.t + 1e-9 >= self._next_clock:
            self._next_clock = sim.t + 1.0 / self.config["clock_rate"]
            self.clock_pub.publish(self._clock_msg)
        self.awaiting_command = True

    # -------------------------------------------------------------------------------------- commands
    def _on_command(self, msg):
        try:
            command = rm.float64_multiarray_to_array(msg, self.robot.model.nv)
        except rm.MessageRejected as exc:
            self.reject("command", exc)
            return
        self.command = self.robot.from_command(command)
        self.last_command_time = self.sim.t
        self.commands_received += 1
        if self.command_timed_out:
            self.get_logger().info("commands are back")
            self.command_timed_out = False
        if self.active and self.config["real_time_factor"] == 0.0 and self.config["lockstep"] and self.awaiting_command:
            self.awaiting_command = False
            self.step_to_next_publish()

    # --------------------------------------------------------------------------------------- payload
    def attach(self):
        if self.payload is None:
            raise ModelError("no payload configured (payload.mass is 0)")
        self.sim.attach_payload(self.payload)
        self.sim.forward_dynamics = self._payload_dynamics
        self.get_logger().info(f"payload of {self.payload.mass} kg attached to {self.payload.link} at "
                               f"t = {self.sim.t:.3f} s")

    def _on_attach(self, request, response):
        try:
            with self._lock:       # between two steps of the stepping thread
                self.attach()
            response.success, response.message = True, f"attached {self.payload.mass} kg at t = {self.sim.t:.3f} s"
        except ModelError as exc:
            response.success, response.message = False, str(exc)
        return response

    def _on_detach(self, request, response):
        with self._lock:
            self.sim.detach_payload()
            self.sim.forward_dynamics = self._robot_dynamics
        response.success, response.message = True, f"detached at t = {self.sim.t:.3f} s"
        return response
