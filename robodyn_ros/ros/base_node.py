"""What the four lifecycle nodes share: parameters from one schema, the robot loaded on configure, the two
callback groups of ROS_NOTES.md, and rejection of malformed messages with a throttled warning.

A node subclass implements ``setup()`` (on_configure, after ``self.config`` and ``self.robot`` exist:
library objects, publishers, subscriptions, services), ``start()`` / ``stop()`` (on_activate /
on_deactivate: timers) and optionally ``apply_live(changed)``. Publishing is gated by ``self.active``;
everything ``setup()`` creates through :meth:`sub`, :meth:`pub`, :meth:`srv` and :meth:`timer` is
destroyed on cleanup, so configure -> cleanup -> configure reloads the URDF and the parameters.
"""
from __future__ import annotations

import gc
import time

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from .messages import MessageRejected, RawJointState, joint_state_to_arrays
from .entities import destroy_entities, destroy_rclpy_entity, take_pending
from .node_parameters import NODE_EXTRAS, SCHEMAS, load_robot, node_schema, unknown_parameter_error
from .parameters import declare_parameters, descriptor_for, install_live_update, read_config, validate

WARN_PERIOD = 2.0  # s between two warnings about the same kind of rejected message


class RobodynNode(LifecycleNode):
    """Base of the robodyn_ros lifecycle nodes (module docstring); ``kind`` is a key of ``SCHEMAS``."""

    kind = ""

    def __init__(self, name=None, **kwargs):
        # set before rclpy's constructor: if declaring the parameters fails, the context still destroys
        # this half-built node at shutdown, and destroy_node() reads it
        self._entities = []
        self.configure_error = None   # why the last configure failed (logged once), None after a success
        super().__init__(name or self.kind, **kwargs)
        autostart = next(spec for spec in NODE_EXTRAS if spec.name == "autostart")
        self.declare_parameter(autostart.name, autostart.default, descriptor_for(autostart))
        # the driver first: its profile sets the other parameters' defaults (overrides still win)
        driver = next(spec for spec in SCHEMAS[self.kind] if spec.name == "driver")
        declare_parameters(self, (driver,))
        self.schema = node_schema(self.kind, self.get_parameter("driver").value)
        declare_parameters(self, tuple(spec for spec in self.schema if spec.name != "driver"))
        # a name no robodyn node has is a typing mistake (robodyn node and ros2 run refuse it earlier, also names
        # of other nodes in this node's own entry); rclpy would ignore it
        error = unknown_parameter_error(self.kind, list(self._parameter_overrides), shared=True)
        if error is not None:
            raise ValueError(f"parameters of node {self.get_name()}: {error}")
        install_live_update(self, self.schema, self._on_live_update)
        # ROS_NOTES: state input and control output in one exclusive group; services, parameters and
        # diagnostics in another
        self.control_group = MutuallyExclusiveCallbackGroup()
        self.service_group = MutuallyExclusiveCallbackGroup()
        self.steady_clock = Clock(clock_type=ClockType.STEADY_TIME)
        self.active = False
        self.config = None
        self.robot = None
        self.rejected = {}            # message kind -> count of dropped messages
        self._last_warning = {}

    # ----------------------------------------------------------------------------------- lifecycle
    def on_configure(self, state):
        try:
            self.config = read_config(self, self.schema)
            errors = validate(self.schema, self.config)
            if errors:
                raise ValueError("; ".join(errors))
            self.robot = load_robot(self.config)
            self.setup()
        except Exception as exc:  # a bad URDF or parameter must not kill the process: report, stay unconfigured
            self.configure_error = f"configure failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
            self.get_logger().error(self.configure_error)
            destroy_entities(self)
            return TransitionCallbackReturn.FAILURE
        self.configure_error = None
        # the model, kernels and rclpy objects live as long as the node: move them out of the collector's
        # generations so that a full collection (if allocation ever triggers one) does not traverse them
        gc.freeze()
        self.get_logger().info(f"configured for {self.robot.name} ({len(self.robot.joints)} joints)")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state):
        self.active = True
        self.start()
        return super().on_activate(state)

    def on_deactivate(self, state):
        self.active = False
        self.stop()
        return super().on_deactivate(state)

    def on_cleanup(self, state):
        self.active = False
        destroy_entities(self)
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        self.active = False
        self.stop()
        destroy_entities(self)
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state):
        self.active = False
        return TransitionCallbackReturn.SUCCESS

    # -------------------------------------------------------------------------------- for subclasses
    def setup(self):
        raise NotImplementedError

    def start(self):
        pass

    def stop(self):
        pass

    def apply_live(self, changed):
        pass

    def _on_live_update(self, changed):
        if self.config is not None:
            self.config.update(changed)
            self.apply_live(changed)

    def sub(self, msg_type, topic, callback, qos, group=None, raw=False):
        """A subscription served by the node's executor; ``raw``: the callback gets the CDR bytes (read joint
        states with :meth:`joint_state_with_velocity`, which takes either)."""
        s = self.create_subscription(msg_type, topic, callback, qos, callback_group=group or self.control_group,
                                     raw=raw)
        self._entities.append(s)
        return s

    def polled_sub(self, msg_type, topic, qos, raw=False):
        """A subscription of this node that no executor serves: its messages wait in the middleware's
        keep-last queue (``qos.depth``) until :meth:`take_pending` takes them, e.g. from a timer, so arriving
        messages cost no executor wake-up and no event queue entry (an rclpy EventsExecutor queues one event
        per message without bound for a slow node: ``take_pending``). Destroyed with the node's other
        entities.

        It is this node's own (``ros2 node info`` lists it; remappings apply) but left out of the node's
        list of subscriptions, which is where rclpy's executors look for what to serve. A companion node
        would have served too, but ``ros2 launch`` and ``ros2 run`` name the node with ``-r __node:=NAME``,
        which rcl applies to every node of the process: it became a second node of the same name.

        ``raw``: :meth:`take_pending` gives the CDR bytes instead of messages (read them with
        :class:`~robodyn_ros.ros.messages.RawJointState` or :func:`~robodyn_ros.ros.messages.
        raw_wrench_stamped_to_array`)."""
        s = self.create_subscription(msg_type, topic, lambda msg: None, qos, callback_group=self.control_group,
                                     raw=raw)
        self._subscriptions.remove(s)
        s.robodyn_polled = True
        self._entities.append(s)
        return s

    def pub(self, msg_type, topic, qos):
        p = self.create_publisher(msg_type, topic, qos)
        self._entities.append(p)
        return p

    def srv(self, srv_type, name, callback):
        s = self.create_service(srv_type, name, callback, callback_group=self.service_group)
        self._entities.append(s)
        return s

    def timer(self, period, callback, steady=False, group=None):
        """A timer on the node clock (sim time when use_sim_time), or on the steady wall clock."""
        t = self.create_timer(period, callback, callback_group=group or self.control_group,
                              clock=self.steady_clock if steady else None)
        self._entities.append(t)
        return t

    def destroy_entity(self, entity):
        if entity in self._entities:
            self._entities.remove(entity)
            destroy_rclpy_entity(self, entity)

    take_pending = staticmethod(take_pending)

    def reject(self, kind, error):
        """Count a dropped message and warn about it at most every WARN_PERIOD seconds per kind."""
        self.rejected[kind] = self.rejected.get(kind, 0) + 1
        reason = error.reason if isinstance(error, MessageRejected) else str(error)
        self.warn_throttled(kind, f"dropped {kind} message ({self.rejected[kind]} so far): {reason}")

    def joint_state_with_velocity(self, msg, cache, user, effort=False):
        """``(t, q, v)`` (``effort``: ``(t, q, v, tau or None)``) of a JointState (a message or its CDR bytes,
        read in place: :class:`~robodyn_ros.ros.messages.RawJointState`) mapped by name to the model's joints, or
        None after rejecting it (counted, warned about) when it is malformed or carries no velocities, which
        ``user`` needs. ``cache``: a dict the caller keeps per subscription."""
        try:
            if isinstance(msg, bytes):
                msg = RawJointState(msg, cache.setdefault("raw_layout", {}))
            t, q, v, tau = joint_state_to_arrays(msg, self.robot.model.joint_names, cache)
            if v is None:
                raise MessageRejected(f"JointState.velocity is empty (the {user} needs velocities)")
        except MessageRejected as exc:
            self.reject("joint_states", exc)
            return None
        return (t, q, v, tau) if effort else (t, q, v)

    def warn_throttled(self, kind, text):
        now = time.monotonic()
        if now - self._last_warning.get(kind, -1e9) >= WARN_PERIOD:
            self._last_warning[kind] = now
            self.get_logger().warning(text)

    def destroy_node(self):
        for entity in [e for e in self._entities if getattr(e, "robodyn_polled", False)]:
            self.destroy_entity(entity)    # the node's destroy_node does not know them
        destroyed = super().destroy_node()
        # rclpy's LifecycleNode.destroy_node leaves its state machine, which holds the node's rcl handle and
        # through it the context: the DDS participant then outlived rclpy's shutdown of the context, and
        # with it its Fast DDS shared-memory segments outlived the process
        if getattr(self, "_state_machine", None) is not None:
            self._state_machine.destroy_when_not_in_use()
        return destroyed
