"""Simulator + estimator + inverse_dynamics (the loop of `robodyn demo`, in real time by default).

    ros2 launch robodyn_ros simulation.launch.py robot:=panda use_sim_time:=false

The nodes come from robodyn_ros.ros.launch_actions (the table of robodyn_ros.ros.launch_description_data,
which the in-process bringup reads too) with config/<robot>.yaml (robot:=PATH: a URDF, or a parameter file
of robodyn config); every node configures and activates itself (autostart) unless given autostart:=false.
"""
from robodyn_ros.ros.launch_actions import launch_description


def generate_launch_description():
    return launch_description("simulation")
