"""``robodyn node NAME [--ros-args ...]`` and the executables in ``lib/robodyn_ros`` (``ros2 run robodyn_ros
NAME``, launch_ros; ``nodes/`` in the source tree): one lifecycle node per process, spun by the executor that
``benchmarks/bench_rclpy_loop.py`` measured fastest (EventsExecutor: half the CPU per message of
SingleThreadedExecutor).

The node configures and activates itself unless started with ``--ros-args -p autostart:=false`` (then a
lifecycle manager, e.g. ``ros2 lifecycle set``, drives it). SIGINT (Ctrl-C), SIGTERM and the exit of the
process that started it (``ros2 launch``, ``ros2 run``) shut it down cleanly (:mod:`.process_stop`): the
node takes its lifecycle shutdown transition (a controller commands its ``stale_action`` on the way out),
its DDS participant is destroyed, and the process exits with code 0. OpenBLAS runs single-threaded (the
estimator's many small factorizations; :mod:`robodyn_ros.identification.blas_threads`).
``--help`` (before ``--ros-args``) prints the node's parameters from its schema and exits.

Before rclpy sees the arguments: every ``--params-file`` and ``-p`` is checked against the node's schema
(a parameter the node does not have, a wrong type, a value out of range: one line naming it, exit 2);
``-p robot:=FILE.yaml`` (a parameter file of ``robodyn config``) is read as a ``--params-file`` given
first, ``-p robot:=URDF`` as the file ``robodyn config URDF`` would write, so that later files and ``-p``
values override them; ``-p robot_description:=XML`` is passed in a parameter file (rcl's command-line
parser cannot read most URDF text).
"""
from __future__ import annotations

import os
import sys

from .process_stop import ProcessStop, StopRequested

NODE_CLASSES = {
    "simulator": ("robodyn_ros.ros.simulator_node", "SimulatorNode"),
    "inverse_dynamics": ("robodyn_ros.ros.inverse_dynamics_node", "InverseDynamicsNode"),
    "estimator": ("robodyn_ros.ros.estimator_node", "EstimatorNode"),
    "mpc": ("robodyn_ros.ros.mpc_node", "MpcNode"),
}

SPIN_PERIOD = 0.1   # s: the longest a stop request waits for the spin loop to see it


def node_class(name):
    """The lifecycle node class of node kind ``name``; ValueError naming the kinds otherwise."""
    import importlib

    if name not in NODE_CLASSES:
        raise ValueError(f"unknown node {name!r}; nodes: {', '.join(NODE_CLASSES)}")
    module, cls = NODE_CLASSES[name]
    return getattr(importlib.import_module(module), cls)


def make_executor(context, kind="events"):
    from .testing import make_executor as _make
    return _make(kind, context)


def bring_up(node, autostart=True):
    """Configure and activate ``node`` (when ``autostart``); returns False if a transition failed."""
    from lifecycle_msgs.msg import State

    if not autostart:
        return True
    if node._state_machine.current_state[0] == State.PRIMARY_STATE_UNCONFIGURED:
        node.trigger_configure()
    if node._state_machine.current_state[0] != State.PRIMARY_STATE_INACTIVE:
        return False
    node.trigger_activate()
    return node._state_machine.current_state[0] == State.PRIMARY_STATE_ACTIVE


def ros_arguments(argv):
    """``(params_files, node_name, namespace)`` given by the ``--ros-args`` part of ``argv`` (``--params-file
    PATH``, ``-r __node:=NAME``, ``-r __ns:=/NS``; None where absent)."""
    params_files, node_name, namespace = [], None, None
    in_ros, tokens = False, list(argv or [])
    for k, token in enumerate(tokens):
        if token == "--ros-args":
            in_ros = True
        elif token == "--":
            in_ros = False
        elif in_ros and k + 1 < len(tokens) and token == "--params-file":
            params_files.append(tokens[k + 1])
        elif in_ros and k + 1 < len(tokens) and token in ("-r", "--remap"):
            key, _, value = tokens[k + 1].partition(":=")
            key = key.rsplit(":", 1)[-1]          # "node:__ns:=/x" targets one node; one node runs here
            if key == "__node":
                node_name = value
            elif key == "__ns":
                namespace = value
    return params_files, node_name, namespace


def parameter_arguments(argv):
    """``[(index, node, name, value)]`` of the ``-p [node:]name:=value`` (``--param``) arguments of the
    ``--ros-args`` part of ``argv``: ``index`` of the value token, ``node`` None when not node-targeted."""
    found, in_ros, tokens = [], False, list(argv or [])
    for k, token in enumerate(tokens):
        if token == "--ros-args":
            in_ros = True
        elif token == "--":
            in_ros = False
        elif in_ros and k + 1 < len(tokens) and token in ("-p", "--param"):
            target, sep, value = tokens[k + 1].partition(":=")
            if sep:
                node, _, name = target.rpartition(":")
                found.append((k + 1, node or None, name, value))
    return found


def _node_parameters(argv, node_name):
    """The ``-p`` arguments of ``argv`` that apply to node ``node_name`` (untargeted or targeting it)."""
    return [(k, name, value) for k, node, name, value in parameter_arguments(argv)
            if node is None or node.strip("/").rsplit("/", 1)[-1] == node_name]


def params_file_error(kind, argv):
    """One line saying why the ``--params-file`` and ``-p`` arguments in ``argv`` cannot start node ``kind``
    (a file that is missing, unreadable or not YAML; a parameter the node does not have, named with the
    closest valid one; a parameter of the wrong type, out of range or not finite), or None. Checked against
    the node's schema before rclpy sees the file, which would otherwise fail with a multi-line RCLError
    traceback, or ignore a misspelt name. A name under a wildcard entry (``/**``) is refused only when no
    robodyn node has it (such an entry is shared by every node)."""
    import yaml

    from .node_parameters import resolve_node_config, unknown_parameter_error
    from .parameters import params_yaml_entries

    files, node_name, namespace = ros_arguments(argv)
    fqn = "/".join(part.strip("/") for part in (namespace or "", node_name or kind) if part.strip("/"))
    overrides = {}
    for path in files:
        try:
            entries = params_yaml_entries(path, "/" + fqn)
        except FileNotFoundError:
            return f"parameter file {path} does not exist"
        except (OSError, UnicodeDecodeError) as exc:
            return f"cannot read parameter file {path}: {exc}"
        except (yaml.YAMLError, ValueError) as exc:
            return f"parameter file {path} is not a valid ROS parameter file: {' '.join(str(exc).split())}"
        for key, params in entries:
            error = unknown_parameter_error(kind, list(params), shared="*" in key)
            if error is not None:
                return f"parameter file {path}: {error} (in its '{key}' entry)"
            overrides.update(params)
    for _, name, value in _node_parameters(argv, (node_name or kind).strip("/").rsplit("/", 1)[-1]):
        error = unknown_parameter_error(kind, [name])
        if error is not None:
            return f"-p {name}:={value[:40]}: {error}"
    try:
        resolve_node_config(kind, overrides)
    except ValueError as exc:
        return f"parameter file{'s' if len(files) > 1 else ''} {', '.join(files)}: {' '.join(str(exc).split())}"
    return None


def node_help(kind):
    """The ``--help`` text of node ``kind``: usage and the parameter table of its schema."""
    from .node_parameters import NODE_EXTRAS, SCHEMAS
    from .parameters import parameter_table

    return (f"usage: robodyn node {kind} [--help] [--ros-args [-p NAME:=VALUE ...] [--params-file FILE ...] "
            f"[-r __node:=NAME] ...]\n"
            f"       ros2 run robodyn_ros {kind} [--help] [--ros-args ...]\n\n"
            f"Runs the {kind} lifecycle node until Ctrl-C. -p robot:=PATH takes a URDF or a parameter file written "
            f"by robodyn config.\n\n"
            f"parameters (type, default; allowed values; read-only: fixed once the node exists; live: applied "
            f"while running):\n" + parameter_table(SCHEMAS[kind], NODE_EXTRAS))


def _wants_help(argv):
    tokens = list(argv or [])
    before_ros = tokens[:tokens.index("--ros-args")] if "--ros-args" in tokens else tokens
    return any(t in ("-h", "--help") for t in before_ros)


def prepare_arguments(kind, argv, directory):
    """``argv`` with ``-p robot:=PATH`` and ``-p robot_description:=XML`` turned into parameter files (module
    docstring), written into ``directory``; ModelError naming a robot that is neither bundled nor a file."""
    from .node_parameters import robot_source
    from .robot_config import write_temporary_configuration

    tokens = list(argv or [])
    _, node_name, _ = ros_arguments(tokens)
    node_name = (node_name or kind).strip("/").rsplit("/", 1)[-1]
    first, last, drop = [], [], set()
    for k, name, value in _node_parameters(tokens, node_name):
        if name == "robot":
            source_kind, path = robot_source(value)
            if source_kind == "parameters":
                first = ["--params-file", path]
            elif source_kind == "urdf":
                first = ["--params-file", write_temporary_configuration(path, directory)[0]]
            else:
                first = []
        elif name == "robot_description":
            import yaml
            path = os.path.join(directory, "robot_description.yaml")
            with open(path, "w", encoding="utf-8") as stream:
                yaml.safe_dump({"/**": {"ros__parameters": {"robot_description": value}}}, stream)
            last = ["--params-file", path]
            drop |= {k - 1, k}
    tokens = [t for k, t in enumerate(tokens) if k not in drop]
    if not (first or last):
        return tokens
    if "--ros-args" not in tokens:
        tokens.append("--ros-args")
    start = tokens.index("--ros-args") + 1
    return tokens[:start] + first + tokens[start:] + (["--ros-args"] + last if last else [])


def run(name, argv=None):
    """Run node ``name`` until shutdown, as the process's main function (it owns SIGINT and SIGTERM, and
    ignores them once it returns); ``argv`` are the arguments after the name (``--ros-args ...``).
    Returns the process exit code: 0 after a clean shutdown (also on SIGINT or SIGTERM, at any time), 2 for
    bad parameters (one line on stderr, no traceback), 1 when the node could not be configured and
    activated."""
    import tempfile

    from ..model.errors import ModelError

    if name not in NODE_CLASSES:
        print(f"robodyn node: unknown node {name!r}; nodes: {', '.join(NODE_CLASSES)}", file=sys.stderr)
        return 2
    if _wants_help(argv):
        print(node_help(name))
        return 0
    with tempfile.TemporaryDirectory(prefix="robodyn_node_") as directory:
        try:
            argv = prepare_arguments(name, argv, directory)
        except (ModelError, OSError) as exc:
            print(f"robodyn node {name}: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
        error = params_file_error(name, argv)
        if error is not None:
            print(f"robodyn node {name}: {error}", file=sys.stderr)
            return 2
        from ..identification.blas_threads import limit_blas_threads
        limit_blas_threads()
        stop = ProcessStop()
        try:
            return _run_node(name, node_class(name), argv, stop)
        except StopRequested:
            return 0
        finally:
            stop.ignore_signals()


def _run_node(name, cls, argv, stop):
    import rclpy
    from rclpy.executors import ExternalShutdownException

    context = rclpy.Context()
    node = None
    executor = None
    code = 0
    try:
        try:
            rclpy.init(args=[f"robodyn_{name}"] + list(argv or []), context=context)
        except Exception as exc:  # noqa: BLE001 - rclpy's RCLError for arguments rcl cannot parse
            shown = " ".join(argv or [])
            shown = shown if len(shown) <= 200 else shown[:200] + " ..."
            print(f"robodyn node {name}: invalid ROS arguments {shown!r}: {' '.join(str(exc).split())[:300]}",
                  file=sys.stderr)
            return 2
        node = cls(context=context)
        executor = make_executor(context)
        executor.add_node(node)
        if not bring_up(node, node.get_parameter("autostart").value):
            if getattr(node, "configure_error", None) is None:   # else on_configure logged why, in one line
                node.get_logger().error("could not configure and activate; exiting")
            return 1
        # spin_once in a loop, not spin(): the loop ends on a stop request (ProcessStop) or on a context shut
        # down from elsewhere, and EventsExecutor.spin() (measured here) dispatched no subscriptions of a lone node
        if not stop.running():
            while context.ok() and not stop.requested():
                executor.spin_once(timeout_sec=SPIN_PERIOD)
        if stop.reason == "parent exited":
            node.get_logger().info("the process that started this node exited: shutting down")
    except ExternalShutdownException:
        pass
    except ValueError as exc:  # bad parameters at declaration
        print(f"robodyn node {name}: {' '.join(str(exc).split())}", file=sys.stderr)
        code = 2
    finally:
        stop.running()     # a signal during the teardown is recorded, never raised
        if node is not None:
            shut_down(node)
            if executor is not None:
                executor.remove_node(node)
            node.destroy_node()
        if executor is not None:
            executor.shutdown()
        context.try_shutdown()
        # finalise rcl's context now (the DDS participant, and with it its Fast DDS shared-memory segments),
        # not whenever the interpreter's exit gets to it
        context.destroy()
    return code


def shut_down(node):
    """The lifecycle shutdown transition of ``node`` from whichever primary state it is in (on_shutdown: the
    controllers command their ``stale_action`` once, timers and threads stop, entities are destroyed);
    nothing if it is finalized already or the context is gone."""
    from lifecycle_msgs.msg import State

    primary = (State.PRIMARY_STATE_UNCONFIGURED, State.PRIMARY_STATE_INACTIVE, State.PRIMARY_STATE_ACTIVE)
    if node.context.ok() and node._state_machine.current_state[0] in primary:
        node.trigger_shutdown()


def _entry(name):
    sys.exit(run(name, sys.argv[1:]))


def simulator():
    _entry("simulator")


def inverse_dynamics():
    _entry("inverse_dynamics")


def estimator():
    _entry("estimator")


def mpc():
    _entry("mpc")


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
