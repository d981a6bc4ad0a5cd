"""The command side shared by the controller nodes: the torque command publisher (one reused message), the
stale-state watchdog's timer, the last command a stopping controller sends, the ``~/reset`` service and the
logging of :class:`~robodyn_ros.control.torque_output.TorqueOutput`'s events."""

import numpy as np
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from . import messages as rm
from . import qos


def output_report(node):
    """The ``report(kind, text)`` of a :class:`TorqueOutput` on ``node``'s logger (dropped stamps throttled)."""
    def report(kind, text):
        if kind.startswith("stamp_"):
            node.warn_throttled(kind, text)
        elif kind == "resumed":
            node.get_logger().info(text)
        else:
            node.get_logger().warning(text)
    return report


def command_publisher(node):
    """``(publisher, publish(command))``: the Float64MultiArray of every command on ``command_topic`` kept
    serialized (:class:`~robodyn_ros.ros.messages.SerializedFloat64MultiArray`: the layout is encoded once,
    each command writes its values into the bytes)."""
    pub = node.pub(Float64MultiArray, node.config["command_topic"], qos.COMMAND_QOS)
    msg = rm.SerializedFloat64MultiArray(np.zeros(len(node.robot.joints)))

    def publish(command):
        node.command_pub.publish(msg.serialize(command))
    return pub, publish


def command_watchdog(node):
    """A steady-clock timer every ``state_timeout / 4`` s that, while ``node`` is active, lets its
    :class:`TorqueOutput` check for stale joint states (:meth:`TorqueOutput.on_watchdog`)."""
    def tick():
        if node.active:
            node.output.on_watchdog()
    return node.timer(node.config["state_timeout"] / 4.0, tick, steady=True)


FINAL_ACK_TIMEOUT = 2.0   # s a stopping controller waits at most for its subscribers to acknowledge its last command
# (0.5 s was too short on a loaded 2-core machine: the process exited before a subscriber had the zero torque)


def send_final_command(node, output):
    """:meth:`TorqueOutput.final_command` (the ``stale_action`` torque, once, after a command of this
    activation) on ``node``'s command topic, then wait up to FINAL_ACK_TIMEOUT s until the reliable
    subscribers acknowledged it, so that a process that exits right after still delivers it. True if sent."""
    from rclpy.duration import Duration

    if output is None or getattr(node, "command_pub", None) is None or output.final_command() is None:
        return False
    node.command_pub.wait_for_all_acked(Duration(seconds=FINAL_ACK_TIMEOUT))
    return True


def reset_service(node):
    """``~/reset`` (std_srvs/Trigger; a tool change) on a controller node: ``node.loop.reset_parameters()``, the
    URDF's parameters from the next command (or solve) on, the applied estimate and the payload dropped."""
    def on_reset(request, response):
        node.loop.reset_parameters()
        text = "model reset to the URDF's parameters (applied estimate and payload dropped)"
        node.get_logger().info(text)
        response.success, response.message = True, text
        return response
    return node.srv(Trigger, "~/reset", on_reset)
