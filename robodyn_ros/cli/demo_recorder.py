"""The demo's recorder: a plain node listening to the inverse_dynamics node's tracking error, the payload
estimate and the torque commands (``robodyn demo``, both scenarios over the nodes)."""
from __future__ import annotations

import numpy as np


class DemoRecorder:
    """Subscribes to the tracking error, the payload estimate and the commands; keeps them as lists."""

    def __init__(self, node, command_topic, payload_topic, nv):
        from geometry_msgs.msg import InertiaStamped
        from std_msgs.msg import Float64MultiArray

        from ..ros import messages as rm
        from ..ros import qos

        self.errors, self.payload, self.commands, self.non_finite_commands = [], [], 0, 0
        self.nv = nv
        node.create_subscription(Float64MultiArray, "/inverse_dynamics/tracking_error",
                                 lambda m: self.errors.append(np.array(m.data)), qos.ESTIMATE_QOS)
        node.create_subscription(InertiaStamped, payload_topic,
                                 lambda m: self.payload.append((rm.time_to_seconds(m.header.stamp), m.inertia.m)),
                                 qos.ESTIMATE_QOS)
        node.create_subscription(Float64MultiArray, command_topic, self._on_command, qos.COMMAND_QOS)

    def _on_command(self, msg):
        self.commands += 1
        if len(msg.data) != self.nv or not np.isfinite(np.asarray(msg.data)).all():
            self.non_finite_commands += 1

    @property
    def t(self):
        return self.errors[-1][0] if self.errors else 0.0
