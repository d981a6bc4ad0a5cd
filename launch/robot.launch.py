"""Estimator + inverse_dynamics for a real robot under ros2_control (no simulator): joint_state_broadcaster,
force_torque_sensor_broadcaster and an effort controller provide the topics.

    ros2 launch robodyn_ros robot.launch.py robot:=panda use_sim_time:=false

Nodes, parameters and arguments: robodyn_ros.ros.launch_actions.
"""
from robodyn_ros.ros.launch_actions import launch_description


def generate_launch_description():
    return launch_description("robot")
