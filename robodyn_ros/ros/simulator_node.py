"""``simulator`` lifecycle node: :class:`robodyn_ros.simulation.runtime.SimulationRuntime` (the simulator, its
payload, command timeout and pacing) behind the topics of a ros2_control robot (joint_state_broadcaster,
force_torque_sensor_broadcaster, an effort controller).

Publishes ``/joint_states`` (position, velocity, measured effort), the wrist wrench (``frame_id`` the
wrist link) and, with ``publish_clock``, ``/clock``; takes ``/effort_controller/commands`` (reliable,
joint order of ``joints``). Services ``~/attach_payload`` and ``~/detach_payload`` (std_srvs/Trigger):
attach the box of the ``payload.*`` parameters, which are live (set ``payload.mass``, ``payload.link``,
``payload.com``, ``payload.size``, then call ``~/attach_payload``: any load on any link, nothing rebuilt;
a load attached when they change is replaced at once).

The robot's driver (``driver``: franka, ur, lbr, and the driver parameters its profile sets;
:mod:`robodyn_ros.simulation.driver_emulation`): gravity and friction compensation added to the commands,
efforts as the driver reports them, its rate limit and watchdogs, logged on one line at configure. Services
``~/error_recovery`` (std_srvs/Trigger): clears a Franka reflex (Franka's ``error_recovery`` action); a UR
stop after ``receive_timeout`` lasts until the node is deactivated and activated again. ``~/set_payload``
(Trigger): the robot is told the load of the ``payload.*`` parameters (mass 0: none), whose gravity it then
adds and leaves out of gravity-compensated efforts; until then the robot's set payload is none. The counts
``driver_stops``, ``driver_reflexes``, ``driver_missed_cycles`` (cycles the controller had time for and sent
no command in) and ``catch_up_steps`` (steps the simulator took late, after it was starved of CPU: not counted
against the controller) are attributes of the node (and in ``~/error_recovery``'s reply).

Timing and stepping (real time, as fast as possible, lockstep, ``publish_decimation``, the stepping thread
of ``step_thread``), and the stop on a diverged step (no more joint states, one error line naming the joint
and the likely cause, until the node is configured again): see :mod:`robodyn_ros.simulation.runtime`.
Without ``step_thread`` (and always in lockstep) the executor's timers step: real time on a timer of one
step's wall period, as fast as possible in bursts on a ``FREE_RUN_PERIOD`` timer. Stamps are simulated time (plus the wall time at activation when
``/clock`` is not published).

Speed: the JointState, wrench and clock messages are built once and refilled in place, the joint fields
through NumPy views of the messages' own ``array('d')`` buffers (rclpy serialises in ``publish``, so a
refilled message never changes one already sent). Note: with ``ROS_PYTHON_CHECK_FIELDS`` unset (the
default), assigning an ``array('d')`` to a message field COPIES it, so a message whose fields were
assigned once from preallocated arrays keeps publishing their values at assignment time: the views must
be taken of the message's fields after assignment (``_make_messages``). The wrench and ``/clock`` are
computed and published only while someone subscribes (counted every ``LISTENER_CHECK_STEPS`` steps).
"""
from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from rosgraph_msgs.msg import Clock as ClockMsg
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from ..model.errors import ModelError
from ..simulation.runtime import SimulationRuntime
from . import messages as rm
from . import qos
from .base_node import RobodynNode

CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
FREE_RUN_PERIOD = 1e-4   # s: the free-running timer is due again as soon as a burst ends
LISTENER_CHECK_STEPS = 100  # steps between two counts of the wrench and /clock subscribers


class SimulatorNode(RobodynNode):
    kind = "simulator"

    def setup(self):
        c = self.config
        self.runtime = SimulationRuntime(self.robot, c, self.publish_state, self._log, self._on_runtime_stop)
        self.sim, self.kernels = self.runtime.sim, self.runtime.kernels
        self._wrench_listeners = self._clock_listeners = 1
        self.stamp_offset = 0.0
        self._timer = None
        self.joint_pub = self.pub(JointState, c["joint_states_topic"], qos.JOINT_STATE_OUTPUT_QOS)
        self.wrench_pub = self.pub(WrenchStamped, c["wrench_topic"], qos.WRENCH_OUTPUT_QOS)
        self.clock_pub = self.pub(ClockMsg, "/clock", CLOCK_QOS) if c["publish_clock"] else None
        self.sub(Float64MultiArray, c["command_topic"], self._on_command, qos.COMMAND_QOS, raw=True)
        self.srv(Trigger, "~/attach_payload", self._on_attach)
        self.srv(Trigger, "~/detach_payload", self._on_detach)
        self.srv(Trigger, "~/error_recovery", self._on_error_recovery)
        self.srv(Trigger, "~/set_payload", self._on_set_payload)
        self._next_clock = 0.0
        self._make_messages()

    # the runtime's counters, read by the demo, benchmarks and tests
    steps = property(lambda self: self.runtime.steps)
    commands_received = property(lambda self: self.runtime.commands_received)
    command_timed_out = property(lambda self: self.runtime.command_timed_out)
    driver_stops = property(lambda self: self.runtime.driver.stops)
    driver_reflexes = property(lambda self: self.runtime.driver.reflexes)
    driver_missed_cycles = property(lambda self: self.runtime.driver.missed_cycles)
    catch_up_steps = property(lambda self: self.runtime.catch_up_steps)

    def _log(self, level, kind, text):
        if level == "throttled":
            self.warn_throttled(kind, text)
        elif level == "info":   # one call site per severity: rclpy refuses a severity change at a call site
            self.get_logger().info(text)
        elif level == "warning":
            self.get_logger().warning(text)
        else:
            self.get_logger().error(text)

    def _make_messages(self):
        """The JointState and wrench messages as CDR bytes, encoded once (``publish_state`` writes the stamp and
        the values into them: :class:`~robodyn_ros.ros.messages.SerializedJointState`,
        :class:`~robodyn_ros.ros.messages.SerializedWrenchStamped`) and the clock message; ``_joint_q``,
        ``_joint_v``, ``_joint_tau`` (nv,) are views of the JointState's values, ``_measured`` the model-order
        scratch arrays."""
        robot, n = self.robot, self.robot.model.nv
        self._stamp = Time()
        self._joint_msg = rm.SerializedJointState(robot.joints)
        self._joint_q, self._joint_v, self._joint_tau = self._joint_msg.values
        order = np.asarray(robot.command_order)
        self._identity_order = bool(np.array_equal(order, np.arange(n)))
        self._measured = (self._joint_q, self._joint_v, self._joint_tau) if self._identity_order else \
            (np.zeros(n), np.zeros(n), np.zeros(n))
        self._wrench_msg = rm.SerializedWrenchStamped(robot.wrist_link)
        self._clock_msg = ClockMsg()
        self._clock_msg.clock = self._stamp

    def apply_live(self, changed):
        if any(name.startswith("payload.") for name in changed) and getattr(self, "runtime", None) is not None:
            with self.runtime.lock:
                self.runtime.apply_payload_parameters()

    # ------------------------------------------------------------------------------------ lifecycle
    def start(self):
        c, runtime = self.config, self.runtime
        self.stamp_offset = 0.0 if c["publish_clock"] else self.get_clock().now().nanoseconds * 1e-9
        runtime.start()
        if runtime.fault is not None:       # a diverged simulation stays stopped until configured again
            self.get_logger().error(f"not stepping: {runtime.fault.message()}; configure the simulator again")
            return
        runtime.publish_state()
        if runtime.threaded():
            runtime.start_thread(self.context.ok)
        elif c["real_time_factor"] > 0.0:
            self._timer = self.timer(min(1.0 / c["rate"] / c["real_time_factor"], 0.001), runtime.on_real_time_tick,
                                     steady=True)
        elif c["lockstep"]:
            self._timer = self.timer(max(c["lockstep_timeout"], 1e-3) / 2.0, runtime.on_lockstep_tick, steady=True)
        else:
            self._timer = self.timer(FREE_RUN_PERIOD, runtime.on_free_run_tick, steady=True)

    def _on_runtime_stop(self):
        """The runtime stopped on a diverged step: its timer has nothing left to do."""
        if self._timer is not None:
            self._timer.cancel()

    def stop(self):
        if getattr(self, "runtime", None) is not None:     # None: never configured
            self.runtime.stop()
        if getattr(self, "_timer", None) is not None:
            self.destroy_entity(self._timer)
            self._timer = None

    def destroy_node(self):
        self.active = False
        self.stop()
        return super().destroy_node()

    def publish_state(self):
        """Refill the three messages in place (one shared stamp) and publish them (module docstring)."""
        sim = self.sim
        self._stamp.sec, self._stamp.nanosec = divmod(round((sim.t + self.stamp_offset) * 1e9), 1_000_000_000)
        q, v, tau = self._measured
        self.runtime.measure_joints_into(q, v, tau)
        if not self._identity_order:
            order = self.robot.command_order
            np.take(q, order, out=self._joint_q)
            np.take(v, order, out=self._joint_v)
            np.take(tau, order, out=self._joint_tau)
        self.joint_pub.publish(self._joint_msg.serialize(self._stamp))
        if self.runtime.steps % LISTENER_CHECK_STEPS == 0:  # the wrench costs ~0.1 ms: only while someone listens
            self._wrench_listeners = self.wrench_pub.get_subscription_count()
            if self.clock_pub is not None:
                self._clock_listeners = self.clock_pub.get_subscription_count()
        if self._wrench_listeners:
            self.wrench_pub.publish(self._wrench_msg.serialize(self._stamp, sim.measure_wrench()))
        if self.clock_pub is not None and self._clock_listeners and sim.t + 1e-9 >= self._next_clock:
            self._next_clock = sim.t + 1.0 / self.config["clock_rate"]
            self.clock_pub.publish(self._clock_msg)

    def _on_command(self, msg):
        """A command: the CDR bytes the subscription takes (or a message, as tests hand it)."""
        convert = rm.raw_float64_multiarray_to_array if isinstance(msg, bytes) else rm.float64_multiarray_to_array
        try:
            command = convert(msg, self.robot.model.nv)
        except rm.MessageRejected as exc:
            self.reject("command", exc)
            return
        self.runtime.set_command(command)

    def _on_attach(self, request, response):
        try:
            with self.runtime.lock:       # between two steps of the stepping thread
                self.runtime.attach()
            response.success = True
            response.message = f"attached {self.runtime.payload.mass} kg at t = {self.sim.t:.3f} s"
        except ModelError as exc:
            response.success, response.message = False, str(exc)
        return response

    def _on_detach(self, request, response):
        with self.runtime.lock:
            self.runtime.detach()
        response.success, response.message = True, f"detached at t = {self.sim.t:.3f} s"
        return response

    def _on_error_recovery(self, request, response):
        response.success, message = self.runtime.error_recovery()
        driver = self.runtime.driver
        response.message = (f"{message} (stops {driver.stops}, reflexes {driver.reflexes}, missed cycles "
                            f"{driver.missed_cycles}, simulator catch-up steps {self.runtime.catch_up_steps})")
        return response

    def _on_set_payload(self, request, response):
        payload = self.runtime.set_robot_payload()
        response.success = True
        response.message = "robot payload: " + ("none" if payload is None else f"{payload.mass} kg on {payload.link}")
        return response
