"""The one launch description behind ``launch/*.launch.py`` (``ros2 launch``, in a colcon workspace or after
``pip install .``).

Every launch file is ``launch_description(<name>)``: its lifecycle nodes come from
:data:`robodyn_ros.ros.launch_description_data.LAUNCHES` (the table the in-process bringup of pip users
reads too) with the parameter file of the ``robot`` argument (``config/<robot>.yaml`` for a bundled robot, a
file of ``robodyn config``, or a URDF: :func:`~robodyn_ros.ros.launch_description_data.robot_parameters_file`);
a launch listed in ``RECORDED_TOPICS`` also runs
``robodyn record`` of those topics into the folder of its ``bag`` argument, and its ``trajectory`` argument
(a CSV of ``robodyn excite``) makes the inverse_dynamics node follow that file. ``launch``/``launch_ros`` are
imported when a description is built, so this module imports where they are not installed.
"""
from robodyn_ros.ros.launch_description_data import (PACKAGE, RECORD_COMMAND, RECORDED_TOPICS, TRAJECTORY_NODE,
                                                     launch_nodes, launch_parameters, robot_parameters_file,
                                                     trajectory_overrides)


def _truthy(text):
    return text.strip().lower() in ("true", "1", "yes", "on")


def launch_setup(context, launch):
    """The actions of launch ``launch`` for the performed arguments ``robot``, ``use_sim_time`` (and ``bag``):
    one ``LifecycleNode`` per table entry with the robot's YAML then the entry's overrides."""
    from launch.actions import ExecuteProcess
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import LifecycleNode
    from launch_ros.substitutions import ExecutableInPackage

    robot = LaunchConfiguration("robot").perform(context)
    use_sim_time = _truthy(LaunchConfiguration("use_sim_time").perform(context))
    params_file = robot_parameters_file(robot)
    trajectory = LaunchConfiguration("trajectory").perform(context) if launch in RECORDED_TOPICS else ""
    extra = {TRAJECTORY_NODE: trajectory_overrides(trajectory)}
    actions = [LifecycleNode(package=PACKAGE, executable=entry.executable, name=entry.name, namespace="",
                             output="screen", parameters=[params_file, {**launch_parameters(entry, use_sim_time),
                                                                        **extra.get(entry.name, {})}])
               for entry in launch_nodes(launch)]
    if launch in RECORDED_TOPICS:
        bag = LaunchConfiguration("bag").perform(context)
        executable, command = RECORD_COMMAND
        actions.append(ExecuteProcess(cmd=[ExecutableInPackage(executable, PACKAGE), command, bag, "--storage", "mcap",
                                           "--quiet", "--topics", *RECORDED_TOPICS[launch]], output="screen"))
    return actions


def launch_description(launch):
    """``LaunchDescription`` of launch ``launch`` (a key of ``LAUNCHES``): its arguments and one
    ``OpaqueFunction`` running :func:`launch_setup`."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    arguments = [DeclareLaunchArgument("robot", default_value="panda",
                                       description="a bundled robot (panda, ur5, iiwa), a URDF file, or a parameter "
                                                   "file written by robodyn config"),
                 DeclareLaunchArgument("use_sim_time", default_value="false")]
    if launch in RECORDED_TOPICS:
        arguments.append(DeclareLaunchArgument("bag", default_value=f"{launch}_bag",
                                               description="output folder of robodyn record"))
        arguments.append(DeclareLaunchArgument("trajectory", default_value="",
                                               description="CSV of robodyn excite for inverse_dynamics to follow"))
    return LaunchDescription(arguments + [OpaqueFunction(function=lambda context: launch_setup(context, launch))])
