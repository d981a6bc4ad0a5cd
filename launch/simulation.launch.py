"""Simulator + estimator + inverse_dynamics (the loop of `robodyn demo`, in real time by default).

    ros2 launch robodyn_ros simulation.launch.py robot:=panda use_sim_time:=false

Nodes, parameters and arguments: robodyn_ros.ros.launch_actions.
"""
from robodyn_ros.ros.launch_actions import launch_description


def generate_launch_description():
    return launch_description("simulation")
