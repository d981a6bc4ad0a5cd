"""``robodyn node NAME [--ros-args ...]`` and the colcon entry points (``ros2 run robodyn_ros NAME``): one
lifecycle node per process, spun by the executor that ``benchmarks/bench_rclpy_loop.py`` measured fastest
(EventsExecutor: half the CPU per message of SingleThreadedExecutor).

The node configures and activates itself unless started with ``--ros-args -p autostart:=false`` (then a
lifecycle manager, e.g. ``ros2 lifecycle set``, drives it). SIGINT/SIGTERM shut it down cleanly.
"""
from __future__ import annotations

import sys

NODE_CLASSES = {
    "simulator": ("robodyn_ros.ros.simulator_node", "SimulatorNode"),
    "inverse_dynamics": ("robodyn_ros.ros.inverse_dynamics_node", "InverseDynamicsNode"),
    "estimator": ("robodyn_ros.ros.estimator_node", "EstimatorNode"),
    "mpc": ("robodyn_ros.ros.mpc_node", "MpcNode"),
}


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
    """Run node ``name`` until shutdown; ``argv`` are the arguments after the name (``--ros-args ...``).
    Returns the process exit code: 0 after a clean shutdown, 2 for bad parameters (one line on stderr,
    no traceback), 1 when the node could not be configured and activated."""
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
    try:
        rclpy.init(args=[f"robodyn_{name}"] + list(argv or []), context=context)
    except Exception as exc:  # noqa: BLE001 - rclpy's RCLError for arguments rcl cannot parse
        print(f"robodyn node {name}: invalid ROS arguments {' '.join(argv or [])!r}: {' '.join(str(exc).split())}",
              file=sys.stderr)
        return 2
    node = None
    executor = None
    code = 0
    try:
        node = cls(context=context)
        executor = make_executor(context)
        executor.add_node(node)
        if not bring_up(node, node.get_parameter("autostart").value):
            if getattr(node, "configure_error", None) is None:   # else on_configure logged why, in one line
                node.get_logger().error("could not configure and activate; exiting")
            return 1
        # spin_once in a loop, not spin(): EventsExecutor.spin() neither notices the context shutdown
        # that rclpy's SIGINT handler performs nor (measured here) dispatched subscriptions of a lone node
        while context.ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except Exception:  # noqa: BLE001 - a callback interrupted by the shutdown signal (e.g. inside CasADi)
                if context.ok():
                    raise
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ValueError as exc:  # bad parameters at declaration
        print(f"robodyn node {name}: {' '.join(str(exc).split())}", file=sys.stderr)
        code = 2
    finally:
        if node is not None:
            try:
                if node.active:
                    node.trigger_deactivate()
            except Exception:  # noqa: BLE001 - the context may already be shut down by the signal
                pass
            if executor is not None:
                executor.remove_node(node)
            node.destroy_node()
        if executor is not None:
            executor.shutdown()
        context.try_shutdown()
    return code


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
