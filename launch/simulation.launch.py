"""Simulator + estimator + inverse_dynamics (the loop of `robodyn demo`, in real time by default).

    ros2 launch robodyn_ros simulation.launch.py robot:=panda use_sim_time:=false

The nodes and their parameters come from robodyn_ros.ros.launch_description_data (the table the in-process
bringup of pip users reads too) and config/<robot>.yaml; every node configures and activates itself
(autostart) unless given autostart:=false.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode

from robodyn_ros.ros.launch_description_data import PACKAGE, config_file, launch_nodes, launch_parameters

LAUNCH = "simulation"


def launch_setup(context):
    robot = LaunchConfiguration("robot").perform(context)
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("true", "1")
    params_file = config_file(robot)
    actions = [LifecycleNode(package=PACKAGE, executable=entry.executable, name=entry.name, namespace="",
                             output="screen", parameters=[params_file, launch_parameters(entry, use_sim_time)])
               for entry in launch_nodes(LAUNCH)]
    return actions


def generate_launch_description():
    arguments = [DeclareLaunchArgument("robot", default_value="panda", description="bundled robot: panda, ur5, iiwa"),
                 DeclareLaunchArgument("use_sim_time", default_value="false")]
    return LaunchDescription(arguments + [OpaqueFunction(function=launch_setup)])
