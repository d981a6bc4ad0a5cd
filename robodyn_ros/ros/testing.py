"""Helpers for tests and benchmarks that talk over real DDS (ROS_NOTES.md: each test process gets its own
ROS_DOMAIN_ID, discovery stays on localhost, contexts are always shut down).

``ros_session()`` is the one most tests want::

    with ros_session() as ros:
        talker, listener = ros.node("talker"), ros.node("listener")
        ...
        assert spin_until(ros.executor, lambda: received, timeout=5.0)

pytest fixtures are one line on top: ``yield from`` is not needed, a test file writes
``@pytest.fixture`` ``def ros(): with ros_session() as s: yield s``. This module does not import pytest.
"""
import fcntl
import os
import tempfile
import time
from contextlib import contextmanager

import rclpy
from rclpy.executors import SingleThreadedExecutor

from .launch_description_data import udp_transport_profile

# Domain ids 1..101 are safe on Linux: higher ids map to UDP ports that can collide with the kernel's
# ephemeral range (32768+); 0 is everybody's default domain.
DOMAIN_IDS = range(1, 102)
_LOCK_DIR = os.path.join(tempfile.gettempdir(), "robodyn_ros_domains")


@contextmanager
def isolated_ros_domain(udp_only=False):
    """Claim a ROS domain id no other cooperating process on this machine holds, and set
    ``ROS_DOMAIN_ID`` and ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` for this process (and the
    subprocesses it starts) while inside; the previous environment is restored on exit.

    ``udp_only``: Fast DDS without its shared-memory transport instead (``config/fastdds_udp.xml`` as
    ``FASTDDS_DEFAULT_PROFILES_FILE``, discovery range ``SYSTEM_DEFAULT`` so that rmw_fastrtps_cpp keeps the
    profile's transports), for tests that SIGKILL a node: a process killed while writing into a peer's
    shared-memory port stalls the other writers to that port. Fast DDS reads the profile once per process:
    it takes effect in the subprocesses started inside, and in this process only if no participant was
    created before; a peer that has shared memory talks UDP to one that has not.

    The search starts at a pid-derived id and probes upward; an id is held through an exclusive
    ``flock`` on a file in the temp dir, released automatically if the process dies. Must be entered
    BEFORE ``rclpy.init``: rcl reads both variables at init. Yields the id (int).
    """
    os.makedirs(_LOCK_DIR, exist_ok=True)
    start = os.getpid() % len(DOMAIN_IDS)
    lock = None
    for k in range(len(DOMAIN_IDS)):
        domain_id = DOMAIN_IDS[(start + k) % len(DOMAIN_IDS)]
        handle = open(os.path.join(_LOCK_DIR, f"{domain_id}.lock"), "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        lock = handle
        break
    if lock is None:
        raise RuntimeError(f"all ROS domain ids {DOMAIN_IDS.start}..{DOMAIN_IDS.stop - 1} are held by other processes")
    saved = {name: os.environ.get(name) for name in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE",
                                                    "ROS_LOCALHOST_ONLY", "FASTDDS_DEFAULT_PROFILES_FILE")}
    os.environ["ROS_DOMAIN_ID"] = str(domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "SYSTEM_DEFAULT" if udp_only else "LOCALHOST"
    if udp_only:
        os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = udp_transport_profile()
    os.environ.pop("ROS_LOCALHOST_ONLY", None)  # deprecated since Jazzy; rcl warns if both are set
    try:
        yield domain_id
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


class RosSession:
    """A private rclpy context plus the nodes and executor made through it, torn down in reverse order."""

    def __init__(self, context, domain_id, executor_kind):
        self.context = context
        self.domain_id = domain_id
        self.nodes = []
        self.executor = make_executor(executor_kind, context)

    def node(self, name, node_class=None, **kwargs):
        """A node (``rclpy.node.Node`` or ``node_class``) in this context, added to the executor."""
        from rclpy.node import Node

        node = (node_class or Node)(name, context=self.context, **kwargs)
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def close(self):
        for node in reversed(self.nodes):
            self.executor.remove_node(node)
            node.destroy_node()
        self.nodes.clear()
        self.executor.shutdown()


def make_executor(kind, context):
    """``"single"`` -> SingleThreadedExecutor, ``"events"`` -> rclpy.experimental.EventsExecutor."""
    if kind == "single":
        return SingleThreadedExecutor(context=context)
    if kind == "events":
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    raise ValueError(f"executor kind {kind!r} is not 'single' or 'events'")


def init_context(domain_id):
    """A new ``rclpy.Context`` initialised in ``domain_id`` (the caller shuts it down)."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=domain_id)
    return context


def plain_node(name, context):
    """A plain rclpy node ``name`` in ``context`` (a test's or a benchmark's talker or listener)."""
    return rclpy.create_node(name, context=context)


@contextmanager
def ros_context(udp_only=False):
    """An initialised private ``rclpy.Context`` in an isolated domain (:func:`isolated_ros_domain`, with
    ``udp_only``); always shut down. Yields it."""
    with isolated_ros_domain(udp_only) as domain_id:
        context = rclpy.Context()
        rclpy.init(context=context, domain_id=domain_id)
        try:
            yield context
        finally:
            context.try_shutdown()


@contextmanager
def ros_session(executor="single"):
    """:class:`RosSession` in an isolated domain; nodes destroyed, executor and context shut down."""
    with ros_context() as context:
        session = RosSession(context, context.get_domain_id(), executor)
        try:
            yield session
        finally:
            session.close()


def spin_until(executor, predicate, timeout, step=0.01):
    """Spin ``executor`` until ``predicate()`` is true or ``timeout`` seconds pass; returns the final
    ``predicate()``. ``step`` bounds each ``spin_once`` so a quiet graph does not overshoot the deadline."""
    deadline = time.monotonic() + timeout
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0.0:
            return bool(predicate())
        executor.spin_once(timeout_sec=min(step, remaining))
    return True
