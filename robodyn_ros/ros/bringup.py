"""In-process bringup: several robodyn nodes with the same YAML and the same launch table as
``launch/*.launch.py``, in one process and one executor, for pip users without ``ros2 launch``.

    with Bringup.from_launch("simulation", robot="panda") as up:
        up.activate()
        up.spin_until(lambda: ..., timeout=10.0)

Parameters of each node: the robot's parameter file (``config/<robot>.yaml``, or for ``robot`` a URDF or a
file of ``robodyn config``: :func:`robot_parameters_file`), as ``--params-file`` would give them
(:func:`load_params_yaml`), then the launch entry's overrides, then ``overrides[node name]``. A parameter the
node does not have is refused as ``robodyn node`` refuses it (ValueError naming it and the closest name).
"""
from __future__ import annotations

import time

from rclpy.parameter import Parameter

from .launch_description_data import NodeEntry, launch_nodes, launch_parameters, robot_parameters_file
from .node_main import bring_up, node_class, shut_down
from .node_parameters import SCHEMAS, unknown_parameter_error
from .parameters import params_yaml_entries
from .testing import make_executor


def node_parameters(entry, params_file, use_sim_time=False, extra=None):
    """``{name: value}`` a node of ``entry`` starts with: YAML, launch overrides, ``extra``; ValueError naming a
    parameter the node does not have (a wildcard entry of the file: one no node has)."""
    values = {}
    for key, params in (params_yaml_entries(params_file, entry.name) if params_file else []):
        error = unknown_parameter_error(entry.kind, list(params), shared="*" in key)
        if error is not None:
            raise ValueError(f"parameter file {params_file}: {error}")
        values.update(params)
    values.update(launch_parameters(entry, use_sim_time))
    error = unknown_parameter_error(entry.kind, list(extra or {}))
    if error is not None:
        raise ValueError(f"overrides: {error}")
    values.update(extra or {})
    return values


def _parameter(kind, name, value):
    """rclpy Parameter; an empty list is typed from the schema (rclpy cannot infer it)."""
    if isinstance(value, (list, tuple)) and len(value) == 0:
        spec = {s.name: s for s in SCHEMAS[kind]}.get(name)
        element = spec.element_type if spec is not None else str
        kind_of = {bool: Parameter.Type.BOOL_ARRAY, int: Parameter.Type.INTEGER_ARRAY,
                   float: Parameter.Type.DOUBLE_ARRAY, str: Parameter.Type.STRING_ARRAY}[element]
        return Parameter(name, kind_of, [])
    return Parameter(name, value=list(value) if isinstance(value, tuple) else value)


class Bringup:
    """Nodes of ``entries`` (:class:`NodeEntry`) in ``context`` with one executor (module docstring)."""

    def __init__(self, entries, context, params_file=None, overrides=None, use_sim_time=False, executor="events"):
        self.context = context
        self.executor = make_executor(executor, context)
        self.nodes = {}
        self.parameters = {}
        self._plain = []
        overrides = overrides or {}
        try:
            for entry in entries:
                values = node_parameters(entry, params_file, use_sim_time, overrides.get(entry.name))
                self.parameters[entry.name] = values
                node = node_class(entry.kind)(entry.name, context=context, parameter_overrides=[
                    _parameter(entry.kind, k, v) for k, v in values.items()])
                self.nodes[entry.name] = node
                self.executor.add_node(node)
        except Exception:
            self.close()
            raise

    @classmethod
    def from_launch(cls, launch, context, robot="panda", params_file=None, **kwargs):
        """The nodes of ``launch/<launch>.launch.py`` for ``robot`` (a bundled robot, a URDF or a parameter file
        of ``robodyn config``; its parameter file unless ``params_file``)."""
        if params_file is not None:
            return cls(launch_nodes(launch), context, params_file, **kwargs)
        import tempfile
        with tempfile.TemporaryDirectory(prefix="robodyn_bringup_") as directory:
            # the nodes read the file while they are created: it is not needed afterwards
            return cls(launch_nodes(launch), context, robot_parameters_file(robot, directory), **kwargs)

    def activate(self, order=None):
        """Configure and activate every node (``order``: names, default controllers before the simulator
        so that its first state finds them); RuntimeError naming a node that failed."""
        names = order or sorted(self.nodes, key=lambda n: self.nodes[n].kind == "simulator")
        for name in names:
            if not bring_up(self.nodes[name]):
                raise RuntimeError(f"node {name} failed to configure/activate (see its log)")

    def spin_until(self, predicate, timeout):
        """Spin until ``predicate()`` or ``timeout`` wall seconds; returns ``predicate()``."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                return bool(predicate())
            self.executor.spin_once(timeout_sec=0.01)
        return True

    def add_node(self, node):
        self.executor.add_node(node)

    def plain_node(self, name):
        """A plain rclpy node ``name`` in this context, spun by this executor (e.g. a recorder's
        subscriptions); destroyed by :meth:`close`."""
        from rclpy.node import Node
        node = Node(name, context=self.context)
        self.executor.add_node(node)
        self._plain.append(node)
        return node

    def close(self):
        for node in self._plain[::-1]:
            self.executor.remove_node(node)
            node.destroy_node()
        self._plain.clear()
        for node in list(self.nodes.values())[::-1]:
            try:
                shut_down(node)    # as a node process ends: the lifecycle shutdown transition
            except Exception:  # noqa: BLE001 - best effort on teardown
                pass
            self.executor.remove_node(node)
            node.destroy_node()
        self.nodes.clear()
        self.executor.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class BagRecorder:
    """``ros2 bag record`` for pip users: subscribes to ``topics`` on ``node`` (raw CDR, no decoding) and
    writes them to a rosbag2 bag at ``path`` (sqlite3, readable by :mod:`robodyn_ros.bags` and
    ``robodyn identify``), receive time as the bag timestamp. ``close()`` finishes the bag."""

    TYPES = {"sensor_msgs/msg/JointState": "sensor_msgs.msg.JointState",
             "geometry_msgs/msg/WrenchStamped": "geometry_msgs.msg.WrenchStamped"}

    def __init__(self, node, path, topics):
        import importlib

        from rosbags.rosbag2 import Writer

        from ..bags.storage import ros2_typestore
        from . import qos

        self.writer = Writer(path, version=9)
        self.writer.open()
        self.counts = {}
        typestore = ros2_typestore()
        kinds = {"/joint_states": "sensor_msgs/msg/JointState"}
        for topic in topics:
            msgtype = kinds.get(topic, "geometry_msgs/msg/WrenchStamped")
            module, cls = self.TYPES[msgtype].rsplit(".", 1)
            connection = self.writer.add_connection(topic, msgtype, typestore=typestore)
            self.counts[topic] = 0
            node.create_subscription(getattr(importlib.import_module(module), cls), topic,
                                     self._writer_for(topic, connection, node), qos.SENSOR_INPUT_QOS, raw=True)

    def _writer_for(self, topic, connection, node):
        def write(raw):
            self.writer.write(connection, time.time_ns(), raw)
            self.counts[topic] += 1
        return write

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


__all__ = ["Bringup", "BagRecorder", "NodeEntry", "node_parameters"]
