"""Simulator + inverse_dynamics following an exciting trajectory + `robodyn record` of the joint states and
the wrist wrench, for `robodyn identify BAG ...`.

    robodyn excite --urdf panda --output traj.csv
    ros2 launch robodyn_ros identification.launch.py robot:=panda bag:=ident_bag trajectory:=$PWD/traj.csv

Without `trajectory:=` the inverse_dynamics node follows its built-in Fourier generator (the table's
overrides); with it, the node follows the CSV (`reference: file`, `trajectory_file: PATH`). The recorder
is `robodyn record` (rosbags, mcap), so no `ros2 bag` is needed. Nodes, parameters and arguments:
robodyn_ros.ros.launch_actions.
"""
from robodyn_ros.ros.launch_actions import launch_description


def generate_launch_description():
    return launch_description("identification")
