"""`robodyn config URDF`: a parameter file for a robot that is not bundled, which every node, the launch files
and the in-process bringup accept (also as robot:=PATH), with a home inside the limits (a floor-plane home
reported), settings within the limits and gains scaled to the robot; on two arms of example-robot-data."""
import importlib.util
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from conftest import CHECKOUT, erd_path
from robodyn_ros.cli.main import main
from robodyn_ros.model.model import Model
from robodyn_ros.ros.node_main import params_file_error, prepare_arguments
from robodyn_ros.ros.node_parameters import NODE_NAMES, load_robot, resolve_node_config
from robodyn_ros.ros.parameters import load_params_yaml
from robodyn_ros.ros.robot_config import (check_marked, clearance_for, configuration_yaml, home_problem,
                                          reference_inertia, robot_configuration)

ARMS = {"ur10": "ur_description/urdf/ur10_robot.urdf", "kinova": "kinova_description/robots/kinova.urdf"}
UR10_HOME = "0,-1.571,1.571,-1.571,-1.571,0"


def urdf_of(arm):
    path = erd_path(ARMS[arm])
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    return path


def write_config(tmp_path, arm, *extra):
    out = tmp_path / f"{arm}.yaml"
    assert main(["config", urdf_of(arm), "--output", str(out), *extra]) == 0
    return str(out)


@pytest.mark.parametrize("arm, extra", [("ur10", ["--home", UR10_HOME]), ("kinova", [])])
def test_every_node_configures_from_the_written_file(tmp_path, capsys, arm, extra):
    """The file loads for each node exactly as written (rcl's typing: floats stay floats), passes the node's
    parameter pre-check, and resolves to the robot: every movable joint, the home inside the limits, the
    flange link; each node's robot is the same."""
    path = write_config(tmp_path, arm, *extra)
    out = capsys.readouterr().out
    assert "warning" not in out, out
    model = Model.from_urdf(urdf_of(arm))
    config = robot_configuration(urdf_of(arm), home=[float(x) for x in UR10_HOME.split(",")] if extra else None)
    robots = []
    for node in NODE_NAMES:
        assert params_file_error(node, ["--ros-args", "--params-file", path]) is None
        loaded = load_params_yaml(path, node)
        assert loaded == config.parameters(node)
        assert all(type(loaded[name]) is type(value) for name, value in config.parameters(node).items())
        robot = load_robot(resolve_node_config(node, loaded))
        assert robot.joints == model.joint_names and robot.home_known
        assert np.all(robot.home >= model.lower) and np.all(robot.home <= model.upper)
        robots.append(robot)
    assert len({(r.wrist_link, tuple(r.home)) for r in robots}) == 1
    if arm == "kinova":       # zero is outside joints 2, 3 and 5 ([0.82, 5.46], ...): mid-range there, 0 elsewhere
        mid = 0.5 * (model.lower + model.upper)
        outside = ~((model.lower <= 0) & (model.upper >= 0))
        np.testing.assert_allclose(robots[0].home[outside], mid[outside])
        assert np.all(robots[0].home[~outside] == 0.0) and outside.sum() == 3
        assert robots[0].wrist_link == "j2s6s200_end_effector"
    else:
        assert robots[0].wrist_link == "tool0"


def test_home_in_the_floor_plane_is_reported(tmp_path, capsys):
    """UR10 at zero lies flat at shoulder height: reported as excite would refuse it (the floor), with a home
    that passes; the UR10's usual home and the Jaco's mid-range home pass."""
    write_config(tmp_path, "ur10")
    out = capsys.readouterr().out
    assert "warning: at the home [0, 0, 0, 0, 0, 0] link" in out and "floor at z = 0.000 m" in out, out
    suggestion = out.split("(e.g. ")[1].split(",", 6)
    suggested = np.array([float(x) for x in suggestion[:5]] + [float(suggestion[5].split(" ")[0])])
    assert "# WARNING: at the home" in open(tmp_path / "ur10.yaml").read()
    ur10 = Model.from_urdf(urdf_of("ur10"))
    clearance = clearance_for(ur10, urdf_of("ur10"))[0]
    assert home_problem(ur10, suggested, clearance) is None
    assert home_problem(ur10, np.array([0, -1.571, 1.571, -1.571, -1.571, 0]), clearance) is None
    kinova = Model.from_urdf(urdf_of("kinova"))
    clearance = clearance_for(kinova, urdf_of("kinova"))[0]
    assert home_problem(kinova, robot_configuration(urdf_of("kinova")).home, clearance) is None


def test_settings_follow_the_limits_and_the_inertia(tmp_path):
    """The bundled Panda gets back the bundled file's tuned values; the generator stays within the position and
    velocity limits (Jaco's 0.63 rad/s shrinks it); the MPC's torque weight scales with 1 / inertia^2; the
    estimator learns the torque noise."""
    panda = robot_configuration("panda")
    assert panda.parameters("mpc")["r_weight"] == pytest.approx(1e-3, rel=1e-3)
    assert panda.parameters("inverse_dynamics")["generator.amplitude"] == 0.3
    assert panda.parameters("inverse_dynamics")["kp"] == load_params_yaml(
        os.path.join(CHECKOUT, "config", "panda.yaml"), "inverse_dynamics")["kp"]
    for arm in ARMS:
        home = [float(x) for x in UR10_HOME.split(",")] if arm == "ur10" else None
        config = robot_configuration(urdf_of(arm), home=home)
        model = Model.from_urdf(urdf_of(arm))
        p = config.parameters("inverse_dynamics")
        amplitude = p["generator.amplitude"]
        assert 0.0 < amplitude <= 0.3
        assert np.all(config.home - amplitude >= model.lower) and np.all(config.home + amplitude <= model.upper)
        peak_velocity = amplitude * (2 * np.pi / p["generator.period"]) * (p["generator.harmonics"] + 1) / 2
        assert peak_velocity <= model.velocity_limit.min()
        from robodyn_ros.dynamics.crba import crba
        m = np.mean(np.diag(crba(model, config.home)))
        assert config.parameters("mpc")["r_weight"] == pytest.approx(1e-3 * (reference_inertia() / m) ** 2, rel=2e-3)
        assert config.parameters("estimator")["effort_noise"] == 0.0          # learnt from the data
    assert robot_configuration(urdf_of("kinova")).parameters("inverse_dynamics")["generator.amplitude"] < 0.3
    # heavier arm, smaller torque weight
    assert robot_configuration(urdf_of("ur10")).parameters("mpc")["r_weight"] < 1e-3 < \
        robot_configuration(urdf_of("kinova")).parameters("mpc")["r_weight"]


def test_bad_inputs_are_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "x.yaml"
    for args, says in (([urdf_of("ur10"), "--home", "0,0"], "--home: 2 values for 6 joints"),
                       ([urdf_of("ur10"), "--home", "0,0,9,0,0,0"], "elbow_joint 9 outside"),
                       ([urdf_of("ur10"), "--home", "a,b"], "comma-separated numbers"),
                       ([urdf_of("ur10"), "--lock-joint", "wrist_9_joint=0"], "wrist_9_joint: not a movable joint"),
                       (["ur10_robot.urdf"], "no such URDF file")):
        assert main(["config", *args, "--output", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert not out.exists()


def test_locked_joints_reach_every_node(tmp_path):
    path = write_config(tmp_path, "ur10", "--lock-joint", "wrist_3_joint=0.5", "--home", "0,-1.571,1.571,-1.571,-1.571")
    for node in NODE_NAMES:
        robot = load_robot(resolve_node_config(node, load_params_yaml(path, node)))
        assert robot.joints == ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
                                "wrist_2_joint")


# ------------------------------------------------------------------- the launch file's node actions
LAUNCH_DIR = os.path.join(CHECKOUT, "launch")


class _Recorder:   # launch / launch_ros stand-ins: record how they are called
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
    launch_ros.__path__ = []
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.LifecycleNode = type("LifecycleNode", (_Recorder,), {})
    ros_actions.Node = type("Node", (_Recorder,), {})
    ros_substitutions = types.ModuleType("launch_ros.substitutions")
    ros_substitutions.ExecutableInPackage = type("ExecutableInPackage", (_Recorder,), {})
    launch.__path__ = []
    return {"launch": launch, "launch.actions": actions, "launch.substitutions": substitutions,
            "launch_ros": launch_ros, "launch_ros.actions": ros_actions, "launch_ros.substitutions": ros_substitutions}


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


def test_robot_path_in_node_arguments_and_launch_files(tmp_path):
    """-p robot:=FILE.yaml is read as a --params-file given first (explicit files and -p override it); robot:=URDF
    as the file robodyn config writes; the launch files and the bringup take the same (the real launch file run
    with recording stand-ins of launch and launch_ros: which parameters it hands each node; test_ros2_workspace.py
    runs it with ros2 launch)."""

    path = write_config(tmp_path, "ur10", "--home", UR10_HOME)
    argv = prepare_arguments("simulator", ["--ros-args", "-p", f"robot:={path}", "-p", "rate:=500.0"], str(tmp_path))
    assert argv[:3] == ["--ros-args", "--params-file", path]
    generated = prepare_arguments("estimator", ["--ros-args", "-p", f"robot:={urdf_of('ur10')}"], str(tmp_path))
    assert load_params_yaml(generated[2], "estimator") == robot_configuration(urdf_of("ur10")).parameters("estimator")
    actions = launched_actions("simulation", robot=path)
    nodes = [a for a in actions if type(a).__name__ == "LifecycleNode"]
    assert [a.kwargs["parameters"][0] for a in nodes] == [path] * 3
    for action in nodes:
        name = action.kwargs["name"]
        assert _launch_parameters(action) == {**load_params_yaml(path, name), "use_sim_time": False}
    from_urdf = [a for a in launched_actions("simulation", robot=urdf_of("ur10"))
                 if type(a).__name__ == "LifecycleNode"]
    expected = robot_configuration(urdf_of("ur10"))
    for action in from_urdf:
        assert _launch_parameters(action) == {**expected.parameters(action.kwargs["name"]), "use_sim_time": False}
    os.unlink(from_urdf[0].kwargs["parameters"][0])


def test_bringup_with_a_robot_file_starts_the_nodes_on_that_robot(tmp_path):
    pytest.importorskip("rclpy")
    from robodyn_ros.ros.bringup import Bringup
    from robodyn_ros.ros.testing import ros_context

    path = write_config(tmp_path, "kinova")
    with ros_context() as context, Bringup.from_launch("robot", context, robot=path) as up:
        for node in up.nodes.values():
            assert node.get_parameter("urdf_path").value == urdf_of("kinova")
            assert list(node.get_parameter("home").value) == load_params_yaml(path, node.get_name())["home"]


def test_a_node_process_runs_the_robot_of_the_file(tmp_path):
    """robodyn node simulator -p robot:=FILE.yaml in another process: it configures for the UR10 and publishes
    its joint states from the file's home (in lockstep, so that the arm waits for commands there)."""
    pytest.importorskip("rclpy")
    import rclpy
    from sensor_msgs.msg import JointState

    from robodyn_ros.ros import qos
    from robodyn_ros.ros.testing import ros_context, spin_until

    path = write_config(tmp_path, "ur10", "--home", UR10_HOME)
    with ros_context() as context:
        env = dict(os.environ, PYTHONPATH=CHECKOUT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   OPENBLAS_NUM_THREADS="1")
        proc = subprocess.Popen([sys.executable, "-m", "robodyn_ros.ros.node_main", "simulator", "--ros-args",
                                 "-p", f"robot:={path}", "-p", "real_time_factor:=0.0", "-p", "lockstep_timeout:=10.0"],
                                env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            node = rclpy.create_node("listener", context=context)
            states = []
            node.create_subscription(JointState, "/joint_states", states.append, qos.SENSOR_INPUT_QOS)
            executor = rclpy.executors.SingleThreadedExecutor(context=context)
            executor.add_node(node)
            deadline = time.monotonic() + 180.0
            while not states and time.monotonic() < deadline and proc.poll() is None:
                spin_until(executor, lambda: bool(states), 0.5)
            assert states, "no joint state from the node process"
            assert list(states[0].name) == ["shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
                                            "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"]
            np.testing.assert_allclose(states[0].position, [float(x) for x in UR10_HOME.split(",")], atol=1e-2)
            executor.remove_node(node)
            node.destroy_node()
            executor.shutdown()
        finally:
            if proc.poll() is None:
                proc.send_signal(2)
            try:
                out, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        assert proc.returncode == 0 and "configured for ur10 (6 joints)" in out, out[-2000:]


def test_configuration_yaml_is_what_pyyaml_reads_too(tmp_path):
    """Other readers (PyYAML: robodyn replay --config) type the file's values as rcl does."""
    import yaml

    config = robot_configuration(urdf_of("ur10"))
    doc = yaml.safe_load(configuration_yaml(config))
    assert doc["mpc"]["ros__parameters"]["r_weight"] == config.parameters("mpc")["r_weight"]
    assert isinstance(doc["simulator"]["ros__parameters"]["noise"]["position"], float)

    path = tmp_path / "ur10.yaml"
    path.write_text(configuration_yaml(config))
    for node in doc:     # every parameter once: a group written twice would lose the first one's entries
        assert load_params_yaml(str(path), node).keys() == config.parameters(node).keys(), node


def test_robot_description_and_unknown_robots_on_the_command_line(tmp_path):
    """-p robot_description:="$(cat URDF)" reaches the node through a parameter file (rcl's command-line parser
    printed the whole URDF back and failed); -p robot:=ur10 (neither bundled nor a file) says what robot takes."""
    from robodyn_ros.model.errors import ModelError

    xml = open(urdf_of("ur10")).read()
    argv = prepare_arguments("estimator", ["--ros-args", "-p", f"robot_description:={xml}", "-p", "decimation:=2"],
                             str(tmp_path))
    assert xml not in argv and argv[:3] == ["--ros-args", "-p", "decimation:=2"]
    assert argv[3:5] == ["--ros-args", "--params-file"]
    assert load_params_yaml(argv[5], "estimator") == {"robot_description": xml}
    assert params_file_error("estimator", argv) is None
    assert load_robot(resolve_node_config("estimator", load_params_yaml(argv[5], "estimator"))).name == "ur10"
    with pytest.raises(ModelError, match=r"unknown robot 'ur10': not a bundled robot \(panda, ur5, iiwa\) nor a "
                                         r"file; give robot:=PATH of a URDF or of a parameter file"):
        prepare_arguments("simulator", ["--ros-args", "-p", "robot:=ur10"], str(tmp_path))


# ------------------------------------------------------------------------- never less safe than the nodes
SAFETY_ROBOTS = {"panda": "panda", "ur5": "ur5", "iiwa": "iiwa", "xarm7": "xarm_description/urdf/xarm7.urdf",
                 "z1": "z1_description/urdf/z1.urdf", "ur10": "ur_description/urdf/ur10_robot.urdf"}
ROBOT_ITSELF = {"urdf_path", "joints", "home", "wrist_link", "locked_joints"}
SENSOR_NOISE = {"noise.position", "noise.velocity", "noise.effort", "noise.force", "noise.torque"}
"""The simulator's measurement noise: how robot-like the simulated sensors are, not a safety setting."""


def safety_robot(name):
    source = SAFETY_ROBOTS[name]
    if "/" not in source:
        return source
    path = erd_path(source)
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    return path


def _at_least_as_safe(name, value, default, config):
    """Whether ``value`` of setting ``name`` (not the node default ``default``) is explicitly safer: a smaller
    generator motion, or an MPC torque weight no smaller per unit of the robot's inertia than the default on
    the robot it was tuned on (the Panda)."""
    from robodyn_ros.dynamics.crba import crba

    if name == "generator.amplitude":
        return value <= default
    if name == "r_weight":
        model = Model.from_urdf(config.urdf_path, locked_joints=config.locked_joints or None)
        inertia = float(np.mean(np.diag(crba(model, config.home))))
        return value * inertia ** 2 >= default * reference_inertia() ** 2 * (1 - 5e-3)   # 3 digits written
    return False


@pytest.mark.parametrize("robot", list(SAFETY_ROBOTS))
def test_config_never_writes_a_setting_less_safe_than_the_node_default(robot):
    """Every setting robodyn config writes for every node is the node's default or explicitly safer (the robot's
    own description and the simulator's sensor noise aside): e.g. the simulator's integrator is rk4_implicit,
    the controllers' state_timeout and max_torque_rate the nodes' own."""
    from robodyn_ros.ros.node_parameters import SCHEMAS

    config = robot_configuration(safety_robot(robot))
    assert config.parameters("simulator")["integrator"] == "rk4_implicit"
    unsafe = []
    for node in NODE_NAMES:
        defaults = {spec.name: spec.default for spec in SCHEMAS[node]}
        for name, value in config.parameters(node).items():
            default = defaults[name]
            if name in ROBOT_ITSELF or (node == "simulator" and name in SENSOR_NOISE) or value == default \
                    or (isinstance(default, (list, tuple)) and list(value) == list(default)):
                continue
            if not _at_least_as_safe(name, value, default, config):
                unsafe.append(f"{node}.{name} = {value!r} (node default {default!r})")
    assert not unsafe, unsafe


def test_written_xarm7_file_simulates_finite_under_a_simple_controller():
    """The xArm7's file (joint 7: 2 N m s/rad of damping and 1 N m of Coulomb friction on 1.4e-4 kg m²) as the
    simulator node builds it, 2 s at 1 kHz under a PD law with gravity compensation tracking 0.2 rad around
    home: the state stays finite and within the velocity limits (with the explicit rk4 it diverged within 5
    ms)."""
    from robodyn_ros.simulation.runtime import SimulationRuntime

    config = robot_configuration(safety_robot("xarm7"))
    settings = resolve_node_config("simulator", config.parameters("simulator"))
    robot = load_robot(settings)
    failures = []
    runtime = SimulationRuntime(robot, settings, lambda: None, lambda level, kind, text: failures.append(text))
    runtime.start()
    model, kernels, sim = robot.model, runtime.kernels, runtime.sim
    from robodyn_ros.dynamics.crba import crba
    m = np.diag(crba(model, robot.home))
    zero = np.zeros(model.nv)
    largest = 0.0
    for _ in range(2000):
        target = robot.home + 0.2 * np.sin(2 * np.pi * 0.5 * sim.t)
        tau = kernels.rnea(sim.q, zero, zero) + m * (100.0 * (target - sim.q) - 20.0 * sim.v)
        runtime.set_command(robot.to_command(tau))
        runtime.step_and_publish()
        assert np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))
        largest = max(largest, float(np.max(np.abs(sim.v) / model.velocity_limit)))
    assert sim.t == pytest.approx(2.0) and not failures, failures
    assert largest < 1.0


def test_home_starting_with_a_negative_value_in_both_spellings(tmp_path, capsys):
    """--home -0.16,... (argparse alone took the value for an option: "expected one argument") and
    --home=-0.16,... write the same home; the file's header repeats the command as given, which runs too."""
    home = "-0.1598,-1.571,1.571,-1.571,-1.571,0"
    written = []
    for name, spelling in (("space", ["--home", home]), ("equals", [f"--home={home}"])):
        out = tmp_path / f"{name}.yaml"
        assert main(["config", urdf_of("ur10"), "--output", str(out), *spelling]) == 0, capsys.readouterr().err
        assert load_params_yaml(str(out), "simulator")["home"] == [float(x) for x in home.split(",")]
        written.append(out.read_text().split("\n", 1)[1])
    assert written[0] == written[1]
    assert "--home -0.1598," in (tmp_path / "space.yaml").read_text().split("\n", 1)[0]
    assert main(["config", urdf_of("ur10"), "--output", str(tmp_path / "x.yaml"), "--home", "-0.1,0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--home: 2 values for 6 joints" in err[0], err
