"""The QoS profiles of the nodes, named by what travels on them (ROS_NOTES.md, "Topics a ros2_control robot
already has").

Compatibility rules that shaped them (DDS request-vs-offered): a BEST_EFFORT subscriber connects to a
RELIABLE or BEST_EFFORT publisher, a RELIABLE subscriber only to a RELIABLE publisher; a VOLATILE
subscriber connects to TRANSIENT_LOCAL or VOLATILE publishers. So inputs we only need the newest of are
read best-effort (they connect to anything), and everything another controller reads is published
reliable (JointGroupEffortController subscribes reliable: a best-effort command publisher never connects).
"""
from rclpy.qos import DurabilityPolicy, HistoryPolicy, LivelinessPolicy, QoSProfile, ReliabilityPolicy


def _profile(reliability, depth, durability=DurabilityPolicy.VOLATILE):
    # Liveliness is spelled out (AUTOMATIC is what SYSTEM_DEFAULT means on every RMW) so that
    # qos_check_compatible can say OK instead of "cannot tell".
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=reliability,
                      durability=durability, liveliness=LivelinessPolicy.AUTOMATIC)


# Subscribing to /joint_states and the wrist wrench: best effort connects to joint_state_broadcaster's and
# force_torque_sensor_broadcaster's reliable publishers and to best-effort drivers alike; a controller
# wants the newest sample, not a retransmitted old one. Depth 10 keeps every 1 kHz sample through a
# 10 ms hiccup for the estimator, which wants them all.
SENSOR_INPUT_QOS = _profile(ReliabilityPolicy.BEST_EFFORT, 10)

# The same inputs read by polling (RobodynNode.polled_sub, the estimator's input_poll_rate): the queue is all the
# buffering there is between two polls, so it holds 1 s of a 1 kHz stream: a Python process on busy cores
# waits far longer than 50 ms for one (docs/PERFORMANCE.md, "Estimator intake under load").
POLLED_SENSOR_INPUT_QOS = _profile(ReliabilityPolicy.BEST_EFFORT, 1000)

# Publishing joint states (the simulator standing in for joint_state_broadcaster): reliable keep-last 10,
# the broadcaster's own (system-default) profile, so any subscriber profile connects.
JOINT_STATE_OUTPUT_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# Publishing wrist wrenches (the simulator standing in for force_torque_sensor_broadcaster).
WRENCH_OUTPUT_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# Torque commands to /<controller>/commands (Float64MultiArray), both directions: the effort controller
# subscribes reliable keep-last 10; our simulator subscribes with the same profile so a command published
# for the real robot drives the simulator unchanged.
COMMAND_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# JointTrajectory references (joint_trajectory_controller subscribes reliable, system default).
TRAJECTORY_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# Estimates (inertial parameters, payload InertiaStamped), MPC plans and solve times: reliable so a
# late-joining logger or plotter still connects whatever it asks for; keep-last 10.
ESTIMATE_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# /diagnostics (diagnostic_aggregator subscribes with the system default, reliable keep-last 10).
DIAGNOSTICS_QOS = _profile(ReliabilityPolicy.RELIABLE, 10)

# Once-per-configuration facts (model fingerprint, joint order, parameter labels): latched, so a node
# started later receives the last one, like /robot_description.
LATCHED_QOS = _profile(ReliabilityPolicy.RELIABLE, 1, DurabilityPolicy.TRANSIENT_LOCAL)


def with_depth(profile, depth):
    """``profile`` with a keep-last queue of ``depth`` messages."""
    return QoSProfile(history=profile.history, depth=depth, reliability=profile.reliability,
                      durability=profile.durability, liveliness=profile.liveliness)
