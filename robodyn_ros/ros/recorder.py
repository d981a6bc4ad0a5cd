"""Recording live ROS 2 topics into a rosbag2 bag with `rosbags` (for users without ``ros2 bag``).

:class:`TopicRecorder` subscribes to the named topics on a node, each with the type the ROS graph
reports for it (topics that have no publisher yet are subscribed as soon as one appears, see
:meth:`TopicRecorder.discover`), receives the messages serialized (raw CDR, never decoded) and writes
them with the node clock's time as the bag timestamp (so ``use_sim_time`` recordings carry sim time).
Joint states with values no joint has (a non-finite position, an infinite or absurd value:
:func:`robodyn_ros.bags.value_check.joint_state_problem`) are left out and counted per topic (``dropped``).

``span_topic``: the header stamps of that topic's recorded messages are followed (:attr:`TopicRecorder.span`, the
seconds of the robot's time they cover), for a recording that ends after so much of the robot's time rather
than of the wall clock's (a simulator faster or slower than real time); its type must start with a
``std_msgs/Header``.

QoS: reliable when every publisher of the topic offers reliable delivery (nothing is dropped between
publisher and bag), else best effort (which connects to any publisher); volatile; a deep queue.

Nothing partial is left behind: the bag is written into a hidden temporary folder next to the target and
renamed to the target only by :meth:`TopicRecorder.finish`; :meth:`TopicRecorder.abort` (or any
failure) deletes it.
"""
from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from ..model.errors import ModelError

STORAGES = ("mcap", "sqlite3")


def message_class(type_name):
    """The Python class of a ROS type name ``pkg/msg/Type``; ModelError when its package is not installed."""
    package, kind, name = (type_name.split("/") + ["", ""])[:3]
    try:
        return getattr(importlib.import_module(f"{package}.{kind}"), name)
    except (ImportError, AttributeError):
        raise ModelError(f"message type {type_name} is not installed (no Python package {package})") from None


class TopicRecorder:
    """Record ``topics`` seen by ``node`` into a new bag at ``path`` (module docstring).

    storage: "mcap" or "sqlite3". ``counts``: messages written per topic; ``dropped``: {topic: [count, the
    first one's reason]} of the joint states left out (module docstring). Call :meth:`discover` until every
    topic is subscribed (the command does it while spinning), then :meth:`finish` or :meth:`abort`.
    """

    def __init__(self, node, path, topics, storage="mcap", depth=1000, span_topic=None):
        from rosbags.rosbag2 import Writer
        from rosbags.rosbag2.enums import StoragePlugin

        if storage not in STORAGES:
            raise ModelError(f"storage {storage!r} unknown; use one of {', '.join(STORAGES)}")
        if not topics:
            raise ModelError("no topics to record")
        bad = [t for t in topics if not t.startswith("/")]
        if bad:
            raise ModelError(f"topic names must be absolute: {bad}")
        self.path = os.path.abspath(path)
        if os.path.exists(self.path):
            raise ModelError(f"{path} exists already; bags are never overwritten")
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            raise ModelError(f"{path}: directory {parent} does not exist or is not writable")
        self.node, self.depth = node, int(depth)
        self.topics = list(dict.fromkeys(topics))
        self.counts = {t: 0 for t in self.topics}
        if span_topic is not None and span_topic not in self.topics:
            raise ModelError(f"span topic {span_topic} is not among the recorded topics")
        self.span_topic = span_topic
        self._stamps = None            # (first, last) header stamp in ns of span_topic's recorded messages
        self.dropped = {}
        self.types = {}
        self._staging = tempfile.mkdtemp(prefix=f".{os.path.basename(self.path)}.", suffix=".partial", dir=parent)
        self._writer = Writer(os.path.join(self._staging, "bag"), version=9,
                              storage_plugin={"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage])
        self._writer.open()
        self._subscriptions = []
        from ..bags.storage import ros2_typestore
        self._typestore = ros2_typestore()

    @property
    def span(self):
        """Seconds between the first and the last header stamp of ``span_topic`` recorded so far (0 before
        two)."""
        return 0.0 if self._stamps is None else 1e-9 * (self._stamps[1] - self._stamps[0])

    @property
    def pending(self):
        """Topics not subscribed yet (no publisher seen)."""
        return [t for t in self.topics if t not in self.types]

    def _qos(self, topic):
        infos = self.node.get_publishers_info_by_topic(topic)
        reliable = bool(infos) and all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.depth, durability=DurabilityPolicy.VOLATILE,
                          reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT)

    def discover(self):
        """Subscribe to every pending topic that has a publisher in the graph now; returns the pending
        topics left. ModelError when a topic has several types or a type rosbags cannot describe."""
        graph = dict(self.node.get_topic_names_and_types())
        for topic in self.pending:
            if topic not in graph or not self.node.get_publishers_info_by_topic(topic):
                continue
            kinds = graph[topic]
            if len(kinds) != 1:
                raise ModelError(f"topic {topic} is published with several types: {kinds}")
            type_name = kinds[0]
            cls = message_class(type_name)
            if topic == self.span_topic and \
                    next(iter(cls.get_fields_and_field_types().items()), None) != ("header", "std_msgs/Header"):
                raise ModelError(f"topic {topic} ({type_name}) has no header stamp to measure the recorded span "
                                 f"by; record by wall time (--duration) instead")
            try:
                connection = self._writer.add_connection(topic, type_name, typestore=self._typestore)
            except Exception as exc:   # rosbags knows only the standard message definitions
                raise ModelError(f"topic {topic}: rosbags has no definition of {type_name} ({exc})") from None
            self._subscriptions.append(self.node.create_subscription(
                cls, topic, self._writer_for(topic, connection, type_name), self._qos(topic), raw=True))
            self.types[topic] = type_name
        return self.pending

    def _writer_for(self, topic, connection, type_name):
        from ..bags.cdr import JOINT_STATE_TYPE, header_stamp_ns
        from ..bags.value_check import joint_state_problem

        clock = self.node.get_clock()
        check = joint_state_problem if type_name == JOINT_STATE_TYPE else None
        spanned = topic == self.span_topic

        def write(raw):
            if self._writer is None:
                return
            problem = check(raw) if check is not None else None
            if problem is not None:
                dropped = self.dropped.setdefault(topic, [0, problem])
                dropped[0] += 1
                return
            self._writer.write(connection, clock.now().nanoseconds, raw)
            self.counts[topic] += 1
            if spanned:
                stamp = header_stamp_ns(raw)
                self._stamps = (stamp, stamp) if self._stamps is None else \
                    (min(self._stamps[0], stamp), max(self._stamps[1], stamp))
        return write

    def _stop(self):
        for sub in self._subscriptions:
            self.node.destroy_subscription(sub)
        self._subscriptions = []

    def finish(self):
        """Close the bag and move it to ``path``; returns the path. ModelError (and nothing written) when
        no message was recorded."""
        self._stop()
        if not any(self.counts.values()):
            self.abort()
            raise ModelError(f"no message received on {', '.join(self.topics)}; nothing was recorded")
        try:
            self._writer.close()
            self._writer = None
            os.replace(os.path.join(self._staging, "bag"), self.path)
        except BaseException:
            self.abort()
            raise
        shutil.rmtree(self._staging, ignore_errors=True)
        return self.path

    def abort(self):
        """Stop and delete everything recorded; the target path is not created."""
        self._stop()
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the staging folder goes anyway
                pass
        shutil.rmtree(self._staging, ignore_errors=True)


def record_topics(bag, topics, *, storage="mcap", duration=None, span=None, use_sim_time=False, stop=lambda: False,
                  progress=None):
    """Record ``topics`` into the bag directory ``bag`` until ``stop()`` is true, ``duration`` seconds pass or
    the first topic's header stamps span ``span`` seconds (:attr:`TopicRecorder.span`), in a context of its own;
    returns ``(path, {topic: message count}, {topic: (joint states dropped, the first one's reason)})``. On any
    failure nothing is left at ``bag``. ``progress(recorder, elapsed)`` is called about once a second."""
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = recorder = None
    try:
        node = rclpy.create_node("robodyn_record", context=context,
                                 parameter_overrides=[Parameter("use_sim_time", value=bool(use_sim_time))])
        recorder = TopicRecorder(node, bag, topics, storage=storage, span_topic=topics[0] if span else None)
        from rclpy.executors import SingleThreadedExecutor
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        start = last_report = time.monotonic()
        while not stop():
            now = time.monotonic()
            if duration is not None and now - start >= duration or span is not None and recorder.span >= span:
                break
            if recorder.pending:
                recorder.discover()
            executor.spin_once(timeout_sec=0.05)
            if progress is not None and now - last_report >= 1.0:
                progress(recorder, now - start)
                last_report = now
        executor.spin_once(timeout_sec=0.0)
        executor.remove_node(node)
        path = recorder.finish()
        return path, dict(recorder.counts), {t: tuple(d) for t, d in recorder.dropped.items()}
    except BaseException:
        if recorder is not None:
            recorder.abort()
        raise
    finally:
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
