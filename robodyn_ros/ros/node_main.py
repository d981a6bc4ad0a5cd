"""``robodyn node NAME [--ros-args ...]`` and the executables in ``lib/robodyn_ros`` (``ros2 run robodyn_ros
NAME``, launch_ros; ``nodes/`` in the source tree): one lifecycle node per process, spun by the executor that
``benchmarks/bench_rclpy_loop.py`` measured fastest (EventsExecutor: half the CPU per message of
SingleThreadedExecutor).

The node configures and activates itself unless started with ``--ros-args -p autostart:=false`` (then a
lifecycle manager, e.g. ``ros2 lifecycle set``, drives it). SIGINT (Ctrl-C), SIGTERM and the exit of the
process that started it (``ros2 launch``, ``ros2 run``) shut it down cleanly (:mod:`.process_stop`): the
node takes its lifecycle shutdown transition (a controller commands its ``stale_action`` on the way out),
its DDS participant is destroyed, and the process exits with code 0.
"""
from __future__ import annotations

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


def params_file_error(kind, argv):
    """One line saying why the ``--params-file`` arguments in ``argv`` cannot start node ``kind`` (a file
    that is missing, unreadable or not YAML; a parameter of the wrong type, out of range or not finite),
    or None. Checked against the node's schema before rclpy sees the file, which would otherwise fail
    with a multi-line RCLError traceback."""
    import yaml

    from .node_parameters import resolve_node_config
    from .parameters import load_params_yaml

    files, node_name, namespace = ros_arguments(argv)
    fqn = "/".join(part.strip("/") for part in (namespace or "", node_name or kind) if part.strip("/"))
    overrides = {}
    for path in files:
        try:
            overrides.update(load_params_yaml(path, "/" + fqn))
        except FileNotFoundError:
            return f"parameter file {path} does not exist"
        except (OSError, UnicodeDecodeError) as exc:
            return f"cannot read parameter file {path}: {exc}"
        except (yaml.YAMLError, ValueError) as exc:
            return f"parameter file {path} is not a valid ROS parameter file: {' '.join(str(exc).split())}"
    try:
        resolve_node_config(kind, overrides)
    except ValueError as exc:
        return f"parameter file{'s' if len(files) > 1 else ''} {', '.join(files)}: {' '.join(str(exc).split())}"
    return None


def run(name, argv=None):
    """Run node ``name`` until shutdown, as the process's main function (it owns SIGINT and SIGTERM, and
    ignores them once it returns); ``argv`` are the arguments after the name (``--ros-args ...``).
    Returns the process exit code: 0 after a clean shutdown (also on SIGINT or SIGTERM, at any time), 2 for
    bad parameters (one line on stderr, no traceback), 1 when the node could not be configured and
    activated."""
    stop = ProcessStop()
    try:
        return _run(name, argv, stop)
    except StopRequested:
        return 0
    finally:
        stop.ignore_signals()


def _run(name, argv, stop):
    import rclpy
    from rclpy.executors import ExternalShutdownException

    try:
        cls = node_class(name)
    except ValueError as exc:
        print(f"robodyn node: {exc}", file=sys.stderr)
        return 2
    error = params_file_error(name, argv)
    if error is not None:
        print(f"robodyn node {name}: {error}", file=sys.stderr)
        return 2
    context = rclpy.Context()
    node = None
    executor = None
    code = 0
    try:
        try:
            rclpy.init(args=[f"robodyn_{name}"] + list(argv or []), context=context)
        except Exception as exc:  # noqa: BLE001 - rclpy's RCLError for arguments rcl cannot parse
            print(f"robodyn node {name}: invalid ROS arguments {' '.join(argv or [])!r}: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]))
