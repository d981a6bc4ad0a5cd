"""Which nodes each launch file starts, with which parameters: ONE table read by the launch files
(``launch/*.launch.py``, where launch_ros exists) and by the in-process bringup (:mod:`.bringup`, for pip
users), so both start the same nodes with the same parameters (checked by test/ros/test_launch_files.py).

Pure Python (no rclpy, no launch): every entry names the node kind (a key of
:data:`robodyn_ros.ros.node_parameters.SCHEMAS`), the node name, the per-robot YAML file from ``config/`` (or the
parameter file or URDF given as ``robot``, :func:`robot_parameters_file`) and the launch-specific overrides
applied on top of it.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

PACKAGE = "robodyn_ros"
ROBOTS = ("panda", "ur5", "iiwa")


@dataclass(frozen=True)
class NodeEntry:
    """One node of a launch: ``kind`` (node class), ``name``, ``executable`` (colcon entry point),
    ``overrides`` (parameters on top of the robot's YAML)."""

    kind: str
    name: str
    executable: str
    overrides: dict = field(default_factory=dict)


# Launch -> nodes. The recorder of the identification launch is not a robodyn node: ``robodyn record``
# (RECORD_COMMAND, rosbags; works without the ros2 CLI) in the launch file,
# :class:`robodyn_ros.ros.bringup.BagRecorder` in process (RECORDED_TOPICS).
LAUNCHES = {
    "simulation": (
        NodeEntry("simulator", "simulator", "simulator"),
        NodeEntry("estimator", "estimator", "estimator"),
        NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics"),
    ),
    "robot": (
        NodeEntry("estimator", "estimator", "estimator"),
        NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics",
                  {"state_timeout": 0.01}),
    ),
    "identification": (
        NodeEntry("simulator", "simulator", "simulator"),
        # an exciting reference: larger, faster, richer than the tracking demo's
        NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics",
                  {"use_estimates": False, "generator.amplitude": 0.6, "generator.period": 6.0,
                   "generator.harmonics": 4}),
    ),
}

RECORDED_TOPICS = {"identification": ("/joint_states", "/force_torque_sensor_broadcaster/wrench")}
RECORD_COMMAND = ("robodyn", "record")
"""The recorder a launch with RECORDED_TOPICS runs: ``robodyn record BAG --storage mcap --quiet --topics ...``,
``robodyn`` being this package's executable in ``lib/robodyn_ros`` (found as ``ros2 run`` finds the nodes, so
it needs no ``robodyn`` on PATH)."""

# A launch's ``trajectory:=FILE`` argument (the CSV of ``robodyn excite``) becomes these overrides of its
# inverse_dynamics node: follow the file (robodyn_ros.control.trajectory_file.TrajectoryFileReference,
# looping) instead of the built-in generator. Empty: the generator of the table's overrides.
TRAJECTORY_NODE = "inverse_dynamics"


def trajectory_overrides(path):
    """Parameters of the inverse_dynamics node that make it follow trajectory file ``path`` (empty: none)."""
    return {"reference": "file", "trajectory_file": str(path)} if path else {}


def config_dirs():
    """Where the per-robot YAML files are looked for: the source tree's ``config/``, then the installed
    ``share/robodyn_ros/config`` (colcon and pip data files)."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.path.normpath(os.path.join(here, "..", "..", "config")),
            os.path.join(sys.prefix, "share", PACKAGE, "config")]
    try:  # a ROS workspace
        from ament_index_python.packages import get_package_share_directory
        dirs.insert(0, os.path.join(get_package_share_directory(PACKAGE), "config"))
    except Exception:  # noqa: BLE001 - ament is optional
        pass
    return dirs


def config_file(robot):
    """Path of ``config/<robot>.yaml``; FileNotFoundError listing where it was looked for."""
    return _config_path(f"{robot}.yaml")


def robot_parameters_file(robot, directory=None):
    """The parameter file a launch's ``robot`` argument stands for: ``config/<robot>.yaml`` for a bundled robot,
    the file itself for a parameter file (``robodyn config``'s), and for a URDF the file ``robodyn config URDF``
    writes, in a new temporary file (in ``directory``, default the system's). ModelError naming anything else."""
    from .node_parameters import robot_source

    kind, path = robot_source(robot)
    if kind == "bundled":
        return config_file(robot)
    if kind == "parameters":
        return os.path.abspath(path)
    from .robot_config import write_temporary_configuration
    return write_temporary_configuration(path, directory)[0]


def udp_transport_profile():
    """Path of ``config/fastdds_udp.xml``, the Fast DDS profile without shared memory (its comment says
    when and how to use it); FileNotFoundError listing where it was looked for."""
    return _config_path("fastdds_udp.xml")


def _config_path(name):
    for d in config_dirs():
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"no {name} in {', '.join(config_dirs())}")


def launch_nodes(launch):
    """The :class:`NodeEntry` tuple of launch ``launch`` (a key of :data:`LAUNCHES`)."""
    if launch not in LAUNCHES:
        raise ValueError(f"unknown launch {launch!r}; launches: {', '.join(LAUNCHES)}")
    return LAUNCHES[launch]


def launch_parameters(entry, use_sim_time=False):
    """Overrides of one entry as the launch file passes them (after the YAML file): the entry's own plus
    ``use_sim_time``."""
    return {**entry.overrides, "use_sim_time": bool(use_sim_time)}
