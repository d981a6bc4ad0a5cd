"""What a ROS 2 user runs, run with ROS 2's own tools: the "In a ROS 2 workspace" section of docs/NODES.md.

The first block of the section (AMENT_PREFIX_PATH, the workspace, ``colcon build``, ``. install/setup.sh``)
runs as written in a POSIX shell, once per test process, with ``~/ros2_ws`` a temporary folder and the clone
a copy of this checkout's working tree (what a clone of it would hold once committed). Then each launch
file, and each node under ``ros2 run``, is started as a terminal starts it and checked with the ``ros2``
verbs of the guide, through the ROS 2 daemon as a user's verbs go (started in each test's domain and stopped
at its end, so that none outlives the test): every node active, each name once, the
topics of the guide's node table with their types, ``/joint_states`` above 500 Hz and commands flowing
(``ros2 topic hz``), ``ros2 param set`` applied and ``kp .inf`` refused with its reason, the launch's
parameters as the in-process bringup's (``ros2 param dump``), ``ros2 lifecycle set ... deactivate`` stopping
the commands and ``activate`` resuming them. Each run ends with a stop a user sends (Ctrl-C to the process
group, SIGINT or SIGTERM to ``ros2 launch`` alone, SIGTERM to a node, to ``ros2 run``) and must end every
process with exit code 0 (SIGTERM to ``ros2 launch`` kills launch itself: upstream launch has no handler
for it), without a traceback or FATAL line, without a Fast DDS shared-memory segment left behind, the
controller's last command its ``stale_action``.

Needs ``ros2``, ``colcon`` and ``launch_ros`` in the active environment (``../shared/ros2-cli/install.sh``,
or ROBODYN_ROS2_CLI naming its folder, with the pip wheels); skipped, saying why, without them. Every run
has its own ROS domain. Waits are conditions with generous deadlines: on a loaded 2-core machine one
``ros2`` call takes seconds.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from robodyn_ros.ros import ros2_cli as cli

MISSING = cli.missing()
# one worker runs the tests that start many processes, one after another (setup.cfg: --dist loadgroup)
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=f"the ROS 2 command line is not available: {MISSING}"),
              pytest.mark.xdist_group("processes")]

GUIDE = os.path.join(cli.CHECKOUT, "docs/NODES.md")      # the guide whose commands these tests run
VERB_FLAGS = ["--spin-time", "1"]  # the discovery window of the node a verb calls services with
START = 180.0      # s for a launch to bring its nodes up (imports, URDF, cached kernels; minutes on a loaded machine)
CALL = 120.0       # s for one ros2 verb
STOP = 60.0        # s for every process to end after a stop signal (reported: see tools/ctrl_c_trials.py)
MIN_RATE = 500.0   # Hz: /joint_states is published at 1 kHz; a loaded machine's listener sees less
FLOWING = 50.0     # Hz: commands flow (one per joint state the controller takes; it falls behind under load)
NODES = {"simulation": ("estimator", "inverse_dynamics", "simulator"), "robot": ("estimator", "inverse_dynamics"),
         "identification": ("inverse_dynamics", "simulator")}
# the guide's node table: what each node subscribes to and publishes (panda.yaml topics)
TABLE = {
    "simulator": ({"/effort_controller/commands": "std_msgs/msg/Float64MultiArray"},
                  {"/joint_states": "sensor_msgs/msg/JointState",
                   "/force_torque_sensor_broadcaster/wrench": "geometry_msgs/msg/WrenchStamped",
                   "/clock": "rosgraph_msgs/msg/Clock"}),
    "inverse_dynamics": ({"/joint_states": "sensor_msgs/msg/JointState",
                          "/inverse_dynamics/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
                          "/estimator/payload": "geometry_msgs/msg/InertiaStamped"},
                         {"/effort_controller/commands": "std_msgs/msg/Float64MultiArray",
                          "/inverse_dynamics/tracking_error": "std_msgs/msg/Float64MultiArray",
                          "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray"}),
    "estimator": ({"/joint_states": "sensor_msgs/msg/JointState",
                   "/force_torque_sensor_broadcaster/wrench": "geometry_msgs/msg/WrenchStamped"},
                  {"/estimator/payload": "geometry_msgs/msg/InertiaStamped",
                   "/estimator/base_parameters": "std_msgs/msg/Float64MultiArray",
                   "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray"}),
}
COMMANDS = "/effort_controller/commands"


# -------------------------------------------------------------------------------------------- the guide
def guide_blocks():
    """The bash blocks of docs/NODES.md's "In a ROS 2 workspace" section: lists of command lines (comments
    and blank lines dropped)."""
    text = open(GUIDE).read()
    section = text[text.index("## In a ROS 2 workspace"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [[line.split("  #")[0].strip() for line in block.splitlines()
             if line.strip() and not line.lstrip().startswith("#")] for block in blocks]


def guide_line(start):
    """The one guide command line of the section that starts with ``start``."""
    found = [line for block in guide_blocks() for line in block if line.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    """The guide's first block run as written (module docstring); ``(root, environment)``."""
    home = tmp_path_factory.mktemp("home")
    root = home / "ros2_ws"
    copy = tmp_path_factory.mktemp("checkout") / "robodyn_ros"
    import shutil
    shutil.copytree(cli.CHECKOUT, copy, ignore=cli.NOT_COPIED, symlinks=True)
    lines = guide_blocks()[0]
    assert lines[-1].startswith("ros2 launch robodyn_ros simulation.launch.py"), lines
    script = ["exec 3>&1 1>&2"]          # what the commands print goes to stderr, the environment to stdout
    for line in lines[:-1]:
        line = line.replace("~/ros2_ws", shlex.quote(str(root)))
        line = line.replace("git clone <this repository> robodyn_ros", f"cp -R {shlex.quote(str(copy))} robodyn_ros")
        script.append(line)
    script.append("env -0 >&3")
    env = dict(os.environ, PATH=cli.tool_path())
    done = subprocess.run(["sh", "-e", "-c", "\n".join(script)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=900)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    env = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    assert os.path.isfile(root / "install" / "robodyn_ros" / "lib" / "robodyn_ros" / "simulator")
    env["PYTHONUNBUFFERED"] = "1"   # the output of ros2 topic hz and of the nodes as it happens
    return root, env


# -------------------------------------------------------------------------------------- running things
def verb(env, line, *more, timeout=CALL):
    """A guide ``ros2`` line (or any ``ros2 ...`` string) with ``more`` arguments and :data:`VERB_FLAGS`, run
    again while the CLI has not discovered the node it addresses ("Node not found": a node that has just
    started may not be in the daemon's graph yet), until ``timeout`` s have passed."""
    args = shlex.split(line)
    assert args[0] == "ros2", line
    deadline = time.monotonic() + timeout
    while True:
        result = cli.ros2(env, *args[1:], *more, *VERB_FLAGS, timeout=timeout)
        if "Node not found" not in result.stdout + result.stderr or time.monotonic() > deadline:
            return result


def until(attempt, timeout, what):
    """Call ``attempt()`` until it returns something true (returned) or ``timeout`` s pass (AssertionError
    with the last result)."""
    deadline = time.monotonic() + timeout
    while True:
        result = attempt()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s; last: {result!r}")


class Attempt:
    """A failed attempt, false but carrying what was seen."""

    def __init__(self, seen):
        self.seen = seen

    def __bool__(self):
        return False

    def __repr__(self):
        return repr(self.seen)


def lifecycle_state(env, node):
    result = verb(env, guide_line("ros2 lifecycle get").replace("/inverse_dynamics", f"/{node}"))
    return result.stdout.strip() or Attempt(result.stdout + result.stderr)


def wait_active(env, nodes, runs, timeout=START):
    """``ros2 lifecycle get`` says ``active [3]`` of every node in ``nodes`` (within ``timeout`` s each), asked
    once each node's own ``configured for`` line is in the output of ``runs`` (:class:`cli.Launched`): a
    ``ros2`` call costs a second or two of CPU, which asking while the nodes still import would take from them."""
    def configured():
        text = "".join(run.output() for run in runs)
        missing = [node for node in nodes if f"[{node}]: configured for" not in text]
        if missing:
            time.sleep(0.2)        # the interval between two reads of the log files
        return not missing or Attempt(missing)
    until(configured, timeout, f"{', '.join(nodes)} configured")

    def attempt(node):
        state = lifecycle_state(env, node)
        return state == "active [3]" or Attempt(state)
    concurrently(lambda node: until(lambda: attempt(node), timeout, f"/{node} active"), nodes)


def concurrently(function, items):
    """``[function(item) for item in items]``, each call in a thread of its own: the ``ros2`` calls of
    independent questions (a node each) wait for their services side by side. The first exception raised
    is raised here, once every call has ended."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        futures = [pool.submit(function, item) for item in items]
    return [future.result() for future in futures]


def node_names(env, expected):
    """``ros2 node list`` once every expected node is listed; asserts each name is there once and ros2
    warns of no shared name."""
    def attempt():
        result = verb(env, guide_line("ros2 node list"))
        names = result.stdout.split()
        return (names, result.stderr) if all(f"/{n}" in names for n in expected) else Attempt(result.stdout)
    names, warnings = until(attempt, CALL, f"ros2 node list shows {expected}")
    assert "share an exact name" not in warnings, warnings
    assert len(names) == len(set(names)), names
    return names


def node_topics(env, node, want_sub=None, want_pub=None):
    """``({subscribed topic: type}, {published topic: type})`` of ``ros2 node info /node``, asked again until
    it lists ``want_sub`` and ``want_pub`` (the graph's discovery lags on a loaded machine) or ``CALL`` s pass."""
    def attempt():
        result = verb(env, f"ros2 node info /{node}")
        if "Publishers:" not in result.stdout:
            return Attempt(result.stdout + result.stderr)
        subscribed, published = _node_info_sections(result.stdout)
        if (want_sub or {}).items() <= subscribed.items() and (want_pub or {}).items() <= published.items():
            return result.stdout
        return Attempt(result.stdout)
    try:
        text = until(attempt, CALL, f"ros2 node info /{node}")
    except AssertionError as exc:      # what it listed last, for the caller's assertion to show
        text = getattr(exc, "last", None) or verb(env, f"ros2 node info /{node}").stdout
    return _node_info_sections(text)


def _node_info_sections(text):
    sections = {}
    current = None
    for line in text.splitlines():
        if line.strip().endswith(":") and not line.startswith("    "):
            current = line.strip()[:-1]
            sections[current] = {}
        elif current and ": " in line:
            topic, kind = line.strip().split(": ", 1)
            sections[current][topic] = kind
    return sections.get("Subscribers", {}), sections.get("Publishers", {})


def parameters(env, node):
    """``ros2 param dump /node`` as ``{name: value}`` (nested groups joined with dots)."""
    def attempt():
        result = verb(env, f"ros2 param dump /{node}")
        return result.stdout if "ros__parameters" in result.stdout else Attempt(result.stdout + result.stderr)
    dumped = yaml.safe_load(until(attempt, CALL, f"ros2 param dump /{node}"))
    flat = {}

    def walk(prefix, tree):
        for key, value in tree.items():
            if isinstance(value, dict):
                walk(f"{prefix}{key}.", value)
            else:
                flat[prefix + key] = value
    walk("", next(iter(dumped.values()))["ros__parameters"])
    return flat


def topic_hz(env, topic, log_path):
    """The guide's ``ros2 topic hz`` on ``topic`` until it prints an average rate; returns that rate (Hz)."""
    line = guide_line("ros2 topic hz").replace("/joint_states", topic)
    with cli.Launched(shlex.split(line), env, log_path=str(log_path)) as hz:
        def attempt():
            rates = re.findall(r"^average rate: ([\d.]+)", hz.output(), re.M)
            return float(rates[-1]) if rates else Attempt(hz.output()[-500:])
        return until(attempt, START, f"ros2 topic hz {topic}")


class Listener:
    """This test's own view of the topics, without a callback per message (``ros2 topic hz``, a Python
    callback per message, saw 110 of the 1000 joint states a second on a loaded machine): subscriptions that
    nothing spins, whose messages wait in deep queues until taken. ``count(topic)``: raw messages (never
    deserialised, best effort) taken since the last call; ``last_commands()``: the commands waiting in a
    reliable keep-last queue (the controller waits for this listener to acknowledge its last command)."""

    made = 0

    def __init__(self, domain_id, topics=("/joint_states", COMMANDS)):
        import rclpy
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        # a name of its own: a listener whose close timed out must not share a name with the next one
        Listener.made += 1
        self.node = rclpy.create_node(f"test_listener_{os.getpid()}_{Listener.made}", context=self.context)
        types = {"/joint_states": JointState, COMMANDS: Float64MultiArray}
        best_effort = QoSProfile(depth=5000, reliability=ReliabilityPolicy.BEST_EFFORT)
        self.raw = {t: self._polled(types[t], t, best_effort, raw=True) for t in topics}
        self.commands = self._polled(Float64MultiArray, COMMANDS,
                                     QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE))

    def _polled(self, msg_type, topic, qos, raw=False):
        sub = self.node.create_subscription(msg_type, topic, lambda msg: None, qos, raw=raw)
        self.node._subscriptions.remove(sub)     # no executor serves it (RobodynNode.polled_sub)
        return sub

    def count(self, topic):
        from robodyn_ros.ros.entities import take_pending
        return len(take_pending(self.raw[topic], 100000))

    def rate(self, topic, window=3.0):
        """Messages per second of ``topic`` arriving over the next ``window`` wall seconds."""
        self.count(topic)
        start = time.monotonic()
        taken = 0
        while time.monotonic() - start < window:
            time.sleep(0.05)                     # a measurement window, taken in steps the queue holds
            taken += self.count(topic)
        return taken / (time.monotonic() - start)

    def arrivals(self, topic, n, timeout):
        """Messages of ``topic`` that arrive from now on until ``n`` did or ``timeout`` s passed."""
        deadline = time.monotonic() + timeout
        taken = 0
        while taken < n and time.monotonic() < deadline:
            time.sleep(0.05)                     # steps the queue holds
            taken += self.count(topic)
        return taken

    def last_commands(self):
        from robodyn_ros.ros.entities import take_pending
        return [np.array(m.data) for m in take_pending(self.commands, 1000)]

    def close(self, timeout=20.0):
        """Destroy the node and its context, in a thread given ``timeout`` s: destroying a publisher of this
        node once blocked for good in rclpy (Publisher.destroy, at the end of a test whose launch had
        stopped), which hung the whole test run; a listener that cannot be closed is left to the process's
        exit instead."""
        import threading

        def close():
            self.node.destroy_node()
            self.context.try_shutdown()

        closer = threading.Thread(target=close, daemon=True)
        closer.start()
        closer.join(timeout)


def stopped_cleanly(run, how, nodes, launch_dies=False):
    """Send ``how`` to ``run`` (:class:`cli.Launched` of ros2 launch or ros2 run) and check the stop (module
    docstring). ``how``: "ctrl_c" (SIGINT to the process group), "SIGINT" or "SIGTERM" to the command
    alone, or ("SIGTERM", pid) to one process under it. ``launch_dies``: the command itself is killed by the
    signal (ros2 launch on SIGTERM). Returns the seconds from the signal until every process had ended."""
    below = run.descendants()
    assert len(below) >= len(nodes), (below, run.output()[-2000:])
    held = cli.held_shm_files(below + ([] if launch_dies else [run.pid]))
    if not held:      # Fast DDS falls back to UDP where /dev/shm is unusable: nothing to leave behind there
        print(f"no Fast DDS shared-memory segment held by {below}: the segment check has nothing to check")
    if how == "ctrl_c":
        run.ctrl_c()
    elif isinstance(how, tuple):
        run.signalled_at = time.monotonic()
        os.kill(how[1], getattr(signal, how[0]))
    else:
        run.send(getattr(signal, how))
    exits = run.wait(STOP)
    output = run.output()
    assert exits is not None, f"still running {STOP} s after {how}:\n{output[-3000:]}"
    ended = max(t for _, t in exits.values()) - run.signalled_at
    code, _ = exits.pop(run.pid)
    assert code == (-signal.SIGTERM if launch_dies else 0), (code, output[-3000:])
    # every node: reaped by ros2 launch (which reports the exit codes), by ros2 run (whose exit code is its
    # node's), or, once its parent was gone, by the terminal
    codes = {**cli.launched_exits(output), **{pid: code for pid, (code, _) in exits.items()}}
    assert all(c == 0 for c in codes.values()), (codes, output[-3000:])
    if "launch" in run.args or launch_dies:
        assert len(codes) >= len(nodes), (codes, output[-2000:])
    assert not cli.traceback_lines(output), "\n".join(cli.traceback_lines(output))
    assert not cli.abandoned_shm_files(held), cli.abandoned_shm_files(held)
    return ended


@pytest.fixture
def domain():
    """An isolated ROS domain for this test, its ROS 2 daemon running: the environment additions of every
    process started in it. The daemon keeps the domain's graph, so a verb finds a node without a discovery
    window of its own (without it, one window per call on a loaded machine missed nodes and calls were
    repeated); it is stopped at the end of the test, and the stop must succeed."""
    from robodyn_ros.ros.testing import isolated_ros_domain

    with isolated_ros_domain() as domain_id:
        added = {"ROS_DOMAIN_ID": str(domain_id), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        env = dict(os.environ, PATH=cli.tool_path(), **added)
        started = cli.ros2(env, "daemon", "start", timeout=CALL)
        assert "The daemon has been started" in started.stdout, started.stdout + started.stderr
        try:
            yield added
        finally:
            stopped = cli.ros2(env, "daemon", "stop", timeout=CALL)
            assert "The daemon has been stopped" in stopped.stdout, stopped.stdout + stopped.stderr


def launch_command(launch, **arguments):
    """The guide's ``ros2 launch robodyn_ros LAUNCH.launch.py robot:=panda ...`` line for ``launch``, its
    arguments replaced by ``arguments``."""
    line = guide_line(f"ros2 launch robodyn_ros {launch}.launch.py")
    args = [a for a in shlex.split(line) if ":=" not in a]
    given = dict(a.split(":=", 1) for a in shlex.split(line) if ":=" in a)
    given.update(arguments)
    return args + [f"{k}:={v}" for k, v in given.items()]


# ------------------------------------------------------------------------------------------------ tests
def flowing(listener, topics=("/joint_states", COMMANDS), timeout=START):
    """The joint states arriving above MIN_RATE, the commands above FLOWING (each over 3 s); returns
    ``{topic: rate}``."""
    least = {"/joint_states": MIN_RATE, COMMANDS: FLOWING}

    def attempt():
        rates = {topic: listener.rate(topic) for topic in topics}
        return rates if all(r > least[t] for t, r in rates.items()) else Attempt(rates)
    return until(attempt, timeout, f"{', '.join(topics)} flowing")


def test_simulation_launch_for_panda_with_the_readme_verbs(workspace, domain, tmp_path):
    """The guide's second block on the simulation launch, then Ctrl-C (a SIGINT to the process group)."""
    from robodyn_ros.ros.bringup import node_parameters
    from robodyn_ros.ros.launch_description_data import config_file, launch_nodes

    root, env = workspace
    env = {**env, **domain}
    listener = Listener(int(domain["ROS_DOMAIN_ID"]))
    try:
        with cli.Launched(launch_command("simulation", robot="panda"), env, log_path=str(tmp_path / "launch.log"),
                          cwd=root) as run:
            wait_active(env, NODES["simulation"], [run])
            node_names(env, NODES["simulation"])
            nodes = NODES["simulation"]
            for node, (subscribed, published) in zip(nodes, concurrently(lambda n: node_topics(env, n, *TABLE[n]),
                                                                         nodes)):
                want_sub, want_pub = TABLE[node]      # the guide's node table, with the types
                assert want_sub.items() <= subscribed.items(), (node, subscribed)
                assert want_pub.items() <= published.items(), (node, published)
            # the launch starts the nodes with the parameters of the in-process bringup (same table, same YAML)
            entries = launch_nodes("simulation")
            for entry, dumped in zip(entries, concurrently(lambda e: parameters(env, e.name), entries)):
                expected = node_parameters(entry, config_file("panda"))
                assert {k: dumped.get(k) for k in expected} == expected, entry.name
            print(f"ros2 topic hz /joint_states: {topic_hz(env, '/joint_states', tmp_path / 'hz.log'):.1f} Hz; "
                  f"this test's listener: {flowing(listener)}")
            # parameters: applied, refused with the reason
            result = verb(env, guide_line("ros2 param set /inverse_dynamics kp 500.0"))
            assert result.stdout.strip() == "Set parameter successful", result.stdout + result.stderr
            assert verb(env, "ros2 param get /inverse_dynamics kp").stdout.strip() == "Double value is: 500.0"
            result = verb(env, guide_line("ros2 param set /inverse_dynamics kp .inf"))
            refusal = (result.stdout + result.stderr).strip()
            assert refusal.startswith("Setting parameter failed:") and "kp" in refusal, refusal
            print(refusal)
            assert verb(env, "ros2 param get /inverse_dynamics kp").stdout.strip() == "Double value is: 500.0"
            # lifecycle: deactivate stops the commands (the joint states go on), activate resumes them
            result = verb(env, guide_line("ros2 lifecycle set /inverse_dynamics deactivate"))
            assert "Transitioning successful" in result.stdout, result.stdout + result.stderr
            assert lifecycle_state(env, "inverse_dynamics") == "inactive [2]"
            listener.count(COMMANDS)
            quiet = listener.rate(COMMANDS, window=2.0)
            assert quiet == 0.0 and listener.rate("/joint_states") > MIN_RATE, quiet
            result = verb(env, guide_line("ros2 lifecycle set /inverse_dynamics activate"))
            assert "Transitioning successful" in result.stdout, result.stdout + result.stderr
            flowing(listener, (COMMANDS,), timeout=CALL)
            # the controller's last command is its stale_action: zero torques once set so
            result = verb(env, "ros2 param set /inverse_dynamics stale_action zero")
            assert result.stdout.strip() == "Set parameter successful", result.stdout + result.stderr
            listener.last_commands()     # what came before
            seconds = stopped_cleanly(run, "ctrl_c", NODES["simulation"])
            print(f"Ctrl-C: every process ended {seconds:.2f} s after the signal")
            final = listener.last_commands()
            assert final and np.array_equal(final[-1], np.zeros(7)) and np.abs(final[0]).max() > 0, final[-3:]
    finally:
        listener.close()


@pytest.mark.parametrize("robot, how", [("ur5", "SIGINT"), ("iiwa", "SIGTERM")])
def test_simulation_launch_for_ur5_and_iiwa_stops_on_a_signal_to_ros2_launch(workspace, domain, tmp_path, robot, how):
    """The other robots: nodes active and named once, the robot argument reaching them, joint states above
    500 Hz, commands flowing; then SIGINT, or SIGTERM, to ``ros2 launch`` alone."""
    root, env = workspace
    env = {**env, **domain}
    listener = Listener(int(domain["ROS_DOMAIN_ID"]))
    try:
        with cli.Launched(launch_command("simulation", robot=robot), env, log_path=str(tmp_path / "launch.log"),
                          cwd=root) as run:
            wait_active(env, NODES["simulation"], [run])
            node_names(env, NODES["simulation"])
            assert parameters(env, "simulator")["robot"] == robot      # the launch argument reached the nodes
            print(f"{robot}: {flowing(listener)}")
            seconds = stopped_cleanly(run, how, NODES["simulation"], launch_dies=how == "SIGTERM")
            print(f"{how} to ros2 launch ({robot}): every process ended {seconds:.2f} s after it")
    finally:
        listener.close()


def test_robot_launch_beside_ros2_run_simulator(workspace, domain, tmp_path):
    """``robot.launch.py`` (estimator and controller of a ros2_control robot) with ``ros2 run robodyn_ros
    simulator`` as the robot: its table override (state_timeout 0.01) reaches the controller, the loop
    closes; then Ctrl-C to ``ros2 run`` (the single node) and SIGTERM to the launch."""
    root, env = workspace
    env = {**env, **domain}
    listener = Listener(int(domain["ROS_DOMAIN_ID"]))
    try:
        with cli.Launched(shlex.split(guide_line("ros2 run robodyn_ros simulator")), env,
                          log_path=str(tmp_path / "simulator.log"), cwd=root) as simulator, \
                cli.Launched(launch_command("robot", robot="panda"), env, log_path=str(tmp_path / "launch.log"),
                             cwd=root) as run:
            wait_active(env, NODES["robot"] + ("simulator",), [simulator, run])
            node_names(env, NODES["robot"] + ("simulator",))
            assert parameters(env, "inverse_dynamics")["state_timeout"] == 0.01
            print(f"robot launch and ros2 run simulator: {flowing(listener)}")
            seconds = stopped_cleanly(simulator, "ctrl_c", ("simulator",))
            print(f"Ctrl-C to ros2 run simulator: ended {seconds:.2f} s after it")
            seconds = stopped_cleanly(run, "SIGTERM", NODES["robot"], launch_dies=True)
            print(f"SIGTERM to ros2 launch robot.launch.py: every process ended {seconds:.2f} s after it")
    finally:
        listener.close()


def test_ros2_run_each_node_with_its_parameter_file(workspace, domain, tmp_path):
    """``ros2 run robodyn_ros NODE --ros-args --params-file ...`` for every node at once: all active, named
    once, the loop closes (the mpc node solving beside it); stopped by SIGTERM to the estimator node itself,
    SIGTERM to the ``ros2 run`` of the mpc node (the node sees its parent gone), Ctrl-C to the
    controller's (its last command its stale_action, zero here) and to the simulator's."""
    root, env = workspace
    env = {**env, **domain}
    line = guide_line("ros2 run robodyn_ros simulator")
    extra = {"inverse_dynamics": ["-p", "stale_action:=zero"]}
    kinds = ("simulator", "inverse_dynamics", "estimator", "mpc")
    listener = Listener(int(domain["ROS_DOMAIN_ID"]))
    runs = {}
    try:
        for kind in kinds:
            runs[kind] = cli.Launched([*shlex.split(line.replace(" simulator ", f" {kind} ")), *extra.get(kind, [])],
                                      env, log_path=str(tmp_path / f"{kind}.log"), cwd=root)
        wait_active(env, kinds, runs.values())
        node_names(env, kinds)
        print(f"ros2 run of every node: {flowing(listener)}")
        # asked again until listed: a node active for the lifecycle may not be in the CLI's graph whole yet
        published = node_topics(env, "mpc", want_pub={"/mpc/solution": "std_msgs/msg/Float64MultiArray"})[1]
        assert "/mpc/solution" in published, published
        estimator = runs["estimator"].descendants()
        assert len(estimator) == 1, estimator
        seconds = {"estimator": stopped_cleanly(runs["estimator"], ("SIGTERM", estimator[0]), ("estimator",)),
                   "mpc": stopped_cleanly(runs["mpc"], "SIGTERM", ("mpc",), launch_dies=True)}
        listener.last_commands()
        # a command of the running controller first (on a loaded machine the queue may be empty right now)
        moving = until(lambda: [c for c in listener.last_commands() if np.abs(c).max() > 0], START,
                       "a non-zero command before the Ctrl-C")
        seconds["inverse_dynamics"] = stopped_cleanly(runs["inverse_dynamics"], "ctrl_c", ("inverse_dynamics",))
        final = moving[-1:] + listener.last_commands()
        assert len(final) >= 2 and np.array_equal(final[-1], np.zeros(7)), final[-3:]
        seconds["simulator"] = stopped_cleanly(runs["simulator"], "ctrl_c", ("simulator",))
        print("stopped after (s): " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    finally:
        for run in runs.values():
            run.__exit__(None, None, None)
        listener.close()


def test_identification_launch_records_a_bag_that_robodyn_identify_reads(workspace, domain, tmp_path):
    """The guide's identification lines: an exciting trajectory (short settings), the launch following
    and recording it, Ctrl-C, then ``robodyn identify`` on the bag."""
    root, env = workspace
    env = {**env, **domain}
    trajectory = tmp_path / "traj.csv"
    excite = shlex.split(guide_line("robodyn excite").replace("traj.csv", str(trajectory)))
    done = subprocess.run([*excite, "--period", "4", "--harmonics", "2", "--iterations", "1"], env=env, cwd=root,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert done.returncode == 0 and trajectory.is_file(), done.stdout[-2000:]
    bag = tmp_path / "ident"
    listener = Listener(int(domain["ROS_DOMAIN_ID"]), topics=("/joint_states",))
    try:
        with cli.Launched(launch_command("identification", robot="panda", bag=bag, trajectory=trajectory), env,
                          log_path=str(tmp_path / "launch.log"), cwd=root) as run:
            wait_active(env, NODES["identification"], [run])
            node_names(env, NODES["identification"])
            dumped = parameters(env, "inverse_dynamics")
            assert (dumped["reference"], dumped["trajectory_file"], dumped["use_estimates"]) == \
                ("file", str(trajectory), False)
            # the approach and two periods of the trajectory recorded: 12 000 joint states arrived here
            listener.count("/joint_states")
            assert listener.arrivals("/joint_states", 12000, START) >= 12000
            seconds = stopped_cleanly(run, "ctrl_c", NODES["identification"])
            print(f"Ctrl-C: every process ended {seconds:.2f} s after the signal")
            assert f"wrote {bag}" in run.output(), run.output()[-2000:]
    finally:
        listener.close()
    identify = shlex.split(guide_line("robodyn identify").replace("ident ", f"{bag} ")
                           .replace("params.yaml", str(tmp_path / "params.yaml")))
    done = subprocess.run(identify, env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert done.returncode == 0 and (tmp_path / "params.yaml").is_file(), done.stdout[-3000:]
    print(done.stdout[-1500:])


def test_ros2_launch_after_a_plain_pip_install(domain, tmp_path):
    """Without a workspace: the package as pip installed it into this environment (``.ci/run``: ``pip
    install ".[ros,test]"``), AMENT_PREFIX_PATH its prefix: ``ros2 pkg executables`` lists the node
    executables, the simulation launch brings its nodes up and Ctrl-C stops them cleanly."""
    executables = os.path.join(sys.prefix, "lib", "robodyn_ros")
    if not os.path.isfile(os.path.join(executables, "simulator")):
        pytest.skip(f"robodyn_ros is not pip-installed in {sys.prefix} with its data files (an editable install "
                    "has none): pip install .")
    env = dict(os.environ, AMENT_PREFIX_PATH=sys.prefix, PYTHONUNBUFFERED="1", PATH=cli.tool_path(), **domain)
    env.pop("PYTHONPATH", None)
    listed = cli.ros2(env, "pkg", "executables", "robodyn_ros").stdout.split()
    assert sorted(listed[1::2]) == ["estimator", "inverse_dynamics", "mpc", "robodyn", "simulator"], listed
    with cli.Launched(["ros2", "launch", "robodyn_ros", "simulation.launch.py"], env,
                      log_path=str(tmp_path / "launch.log"), cwd=tmp_path) as run:
        wait_active(env, NODES["simulation"], [run])
        node_names(env, NODES["simulation"])
        seconds = stopped_cleanly(run, "ctrl_c", NODES["simulation"])
        print(f"Ctrl-C: every process ended {seconds:.2f} s after the signal")
