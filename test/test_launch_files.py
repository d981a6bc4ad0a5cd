"""The launch files and the in-process bringup start the same nodes with the same parameters.

``launch``/``launch_ros`` are not pip-installable, so each launch file is executed here against small
recording stand-ins of the few launch classes it uses (its own code runs: the table lookup, the YAML
path, the overrides); the nodes it would start are compared with the nodes :class:`Bringup` creates in
a real rclpy context, parameter by parameter, down to the values the rclpy nodes hold. Where launch_ros
imports, the real launch description is built too (skipped here with the reason)."""
import importlib.util
import os
import sys
import types

import pytest

from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.launch_description_data import LAUNCHES, RECORDED_TOPICS, config_file
from robodyn_ros.ros.node_parameters import SCHEMAS
from robodyn_ros.ros.parameters import load_params_yaml
from robodyn_ros.ros.testing import ros_context

LAUNCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "launch")


class _Recorder:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _LaunchConfiguration:
    values = {}

    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context[self.name]


def _stub_modules():
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = type("DeclareLaunchArgument", (_Recorder,), {})
    actions.OpaqueFunction = type("OpaqueFunction", (_Recorder,), {})
    actions.ExecuteProcess = type("ExecuteProcess", (_Recorder,), {})
    substitutions = types.ModuleType("launch.substitutions")
    substitutions.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.LifecycleNode = type("LifecycleNode", (_Recorder,), {})
    ros_actions.Node = type("Node", (_Recorder,), {})
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch_ros": launch_ros, "launch_ros.actions": ros_actions}


def launched_actions(launch, **arguments):
    """Execute ``launch/<launch>.launch.py`` with recording stand-ins; the actions its OpaqueFunction
    returns for ``arguments`` (defaults from its DeclareLaunchArgument)."""
    saved = {name: sys.modules.get(name) for name in _stub_modules()}
    sys.modules.update(_stub_modules())
    try:
        spec = importlib.util.spec_from_file_location(f"launch_{launch}", os.path.join(LAUNCH_DIR, f"{launch}.launch.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        description = module.generate_launch_description()
        declared = {a.args[0]: a.kwargs.get("default_value") for a in description
                    if type(a).__name__ == "DeclareLaunchArgument"}
        opaque = [a for a in description if type(a).__name__ == "OpaqueFunction"]
        assert len(opaque) == 1
        return opaque[0].kwargs["function"]({**declared, **arguments})
    finally:
        for name, mod in saved.items():
            if mod is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod


def _launch_parameters(node_action):
    """What ``ros2 launch`` gives the node: the params file's entries for its name, then the dicts."""
    values = {}
    for item in node_action.kwargs["parameters"]:
        values.update(load_params_yaml(item, node_action.kwargs["name"]) if isinstance(item, str) else item)
    return values


@pytest.mark.parametrize("launch", sorted(LAUNCHES))
def test_launch_file_and_bringup_start_the_same_nodes_with_the_same_parameters(launch):
    robot = "ur5" if launch == "robot" else "panda"     # a non-default robot through the argument too
    actions = launched_actions(launch, robot=robot)
    nodes = [a for a in actions if type(a).__name__ == "LifecycleNode"]
    with ros_context() as context, Bringup.from_launch(launch, context, robot=robot) as up:
        assert [n.kwargs["name"] for n in nodes] == list(up.nodes)
        for action in nodes:
            name = action.kwargs["name"]
            node = up.nodes[name]
            assert action.kwargs["package"] == "robodyn_ros"
            assert action.kwargs["executable"] == node.kind       # the colcon entry point of that node class
            assert action.kwargs["parameters"][0] == config_file(robot)
            expected = _launch_parameters(action)
            assert expected == up.parameters[name]
            # and the rclpy node holds exactly these values (schema defaults elsewhere)
            schema = {spec.name for spec in SCHEMAS[node.kind]}
            assert set(expected) - {"use_sim_time"} <= schema
            for pname, pvalue in expected.items():
                value = node.get_parameter(pname).value
                value = value if isinstance(value, (bool, int, float, str)) else list(value)
                assert value == pvalue, pname
            assert node.get_parameter("robot").value == robot
            assert node.get_parameter("use_sim_time").value is False
    recorders = [a for a in actions if type(a).__name__ == "ExecuteProcess"]
    if launch in RECORDED_TOPICS:
        cmd = recorders[0].kwargs["cmd"]
        assert cmd[:2] == ["robodyn", "record"] and cmd[-len(RECORDED_TOPICS[launch]):] == list(RECORDED_TOPICS[launch])
        assert cmd[2] == f"{launch}_bag"
        # trajectory:=FILE makes inverse_dynamics follow the file; nothing else changes
        with_file = launched_actions(launch, robot=robot, trajectory="traj.csv")
        for before, after in zip(actions, with_file):
            if type(before).__name__ == "LifecycleNode":
                extra = {"reference": "file", "trajectory_file": "traj.csv"} if before.kwargs["name"] == "inverse_dynamics" else {}
                assert _launch_parameters(after) == {**_launch_parameters(before), **extra}
    else:
        assert not recorders


def test_every_launch_file_reads_the_shared_table():
    """Each launch file is the shared builder called with its own name (so it starts the table's nodes)."""
    import ast

    for launch in LAUNCHES:
        tree = ast.parse(open(os.path.join(LAUNCH_DIR, f"{launch}.launch.py")).read())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "robodyn_ros.ros.launch_actions" for alias in node.names}
        assert imported == {"launch_description"}
        calls = [node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", "") == "launch_description"]
        assert calls == [launch]
    assert sorted(f[:-len(".launch.py")] for f in os.listdir(LAUNCH_DIR) if f.endswith(".launch.py")) == sorted(LAUNCHES)


@pytest.mark.parametrize("launch", sorted(LAUNCHES))
def test_real_launch_description_where_launch_ros_is_installed(launch):
    pytest.importorskip("launch_ros", reason="launch_ros is not pip-installable; exercised in ROS workspaces")
    from launch import LaunchContext

    spec = importlib.util.spec_from_file_location(f"real_launch_{launch}", os.path.join(LAUNCH_DIR, f"{launch}.launch.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    description = module.generate_launch_description()
    context = LaunchContext()
    for entity in description.entities:
        entity.visit(context)
    from launch_ros.actions import LifecycleNode

    from robodyn_ros.ros.launch_actions import launch_setup

    actions = launch_setup(context, launch)
    assert sum(isinstance(a, LifecycleNode) for a in actions) == len(LAUNCHES[launch])
