"""The soak run's monitor node: counts, checks and times everything the three nodes publish, per window.

It takes the three 1 kHz topics (joint states, commands, tracking errors) as raw CDR bytes from queues it
drains every ``POLL_SECONDS`` and reads only the fields it needs (:func:`robodyn_ros.bags.cdr.header_stamp_ns`,
:func:`robodyn_ros.bags.cdr.read_float64_multiarray`) instead of one executor callback with a deserialised
message per message: one executor wake-up per message is the largest cost of an rclpy subscriber at 1 kHz
(the two modes' CPU per message: docs/SOAK.md).
"""
from __future__ import annotations

import time

import numpy as np

from ..bags import cdr

RATE = 1000            # Hz: the simulator's joint states, and one command and one tracking error per state
POLL_SECONDS = 0.005   # the monitor drains its 1 kHz subscriptions every 5 ms (queues of FAST_DEPTH)
FAST_DEPTH = 100       # 100 ms of 1 kHz messages: a poll late by up to ~95 ms loses nothing


class SoakMonitor:
    """The soak process's node: counts, checks and times everything the three nodes publish.

    ``mode`` "poll" (default): the three 1 kHz topics (joint states, commands, tracking errors) are
    subscribed with ``raw=True`` on a node that no executor spins, with ``FAST_DEPTH``-deep queues, and
    :meth:`drain` takes every queued message every ``POLL_SECONDS`` and parses its CDR bytes; receipt times
    are the middleware's ``received_timestamp`` (CLOCK_REALTIME ns), so the round trip is DDS receipt of
    the state -> DDS receipt of the answer, without this process's scheduling. ``mode`` "typed": executor
    callbacks with deserialised messages, receipt = monotonic time in the callback, to measure what the
    poll mode saves. The slow topics (payload, base parameters, diagnostics) are deserialised by executor
    callbacks in both modes."""

    def __init__(self, context, effort_limit, mode="poll"):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import InertiaStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from ..ros import qos
        from ..ros.testing import plain_node

        if mode not in ("poll", "typed"):
            raise ValueError(f"monitor mode {mode!r} is not 'poll' or 'typed'")
        self.node = plain_node("soak_monitor", context)
        self.effort_limit = effort_limit
        self.mode = mode
        self.clock_ns = time.time_ns if mode == "poll" else time.monotonic_ns   # the receipt times' clock
        self.sent_ns = {}        # joint-state stamp (ns) -> receipt here (clock_ns); pruned per window
        self.diagnostics = {}    # node -> latest values
        self.payload = None
        self.base_parameters = None
        self.bad_examples = []
        self.reset_window()
        self.total = {"states": 0, "commands": 0, "answers": 0, "nan": 0, "over_limit": 0}
        fast = [(JointState, "/joint_states", qos.SENSOR_INPUT_QOS, self._take_state),
                (Float64MultiArray, "/effort_controller/commands", qos.COMMAND_QOS, self._take_command),
                (Float64MultiArray, "/inverse_dynamics/tracking_error", qos.ESTIMATE_QOS, self._take_answer)]
        self.fast_subscriptions = []
        if mode == "poll":
            self.fast_node = plain_node("soak_monitor_fast", context)
            for msg_type, topic, profile, handler in fast:
                sub = self.fast_node.create_subscription(msg_type, topic, lambda _: None,
                                                         qos.with_depth(profile, FAST_DEPTH), raw=True)
                self.fast_subscriptions.append((sub, handler))
        else:
            self.fast_node = None
            on_state = lambda m: self._on_state(m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec,  # noqa: E731
                                                time.monotonic_ns())
            on_command = lambda m: self._on_command(np.frombuffer(m.data) if len(m.data) else np.zeros(0))  # noqa: E731
            on_answer = lambda m: self._on_answer(np.frombuffer(m.data) if len(m.data) else np.zeros(0),  # noqa: E731
                                                  time.monotonic_ns())
            for (msg_type, topic, profile, _), callback in zip(fast, (on_state, on_command, on_answer)):
                self.node.create_subscription(msg_type, topic, callback, profile)
        self.node.create_subscription(InertiaStamped, "/estimator/payload", self._on_payload, qos.ESTIMATE_QOS)
        self.node.create_subscription(Float64MultiArray, "/estimator/base_parameters", self._on_base,
                                      qos.ESTIMATE_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, qos.DIAGNOSTICS_QOS)

    def _take_state(self, buf, info):
        self._on_state(cdr.header_stamp_ns(buf), info["received_timestamp"])

    def _take_command(self, buf, info):
        self._on_command(cdr.read_float64_multiarray(buf)[2])

    def _take_answer(self, buf, info):
        self._on_answer(cdr.read_float64_multiarray(buf)[2], info["received_timestamp"])

    def drain(self):
        """Take and handle every queued message of the 1 kHz subscriptions ("poll" mode; no-op otherwise).
        The answers are taken first and handled last: every answer taken here answers a state that reached
        this process before it, so that state is taken in the same drain and the round trip is matched."""
        taken = []
        for sub, handler in reversed(self.fast_subscriptions):     # answers, commands, states
            with sub.handle:
                while (message := sub.handle.take_message(sub.msg_type, True)) is not None:
                    taken.append((handler, message))
        order = {h: k for k, (_, h) in enumerate(self.fast_subscriptions)}
        taken.sort(key=lambda item: order[item[0]])                 # stable: arrival order within a topic
        for handler, (buf, info) in taken:
            handler(buf, info)

    def spin_for(self, executor, seconds):
        """Spin the slow topics' ``executor`` and drain the 1 kHz queues for ``seconds``."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            executor.spin_once(timeout_sec=min(POLL_SECONDS, remaining))
            self.drain()

    def spin_until(self, executor, predicate, timeout):
        """:meth:`spin_for` until ``predicate()``; returns its final value."""
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= end:
                return bool(predicate())
            self.spin_for(executor, POLL_SECONDS)
        return True

    def destroy(self):
        for node in (self.fast_node, self.node):
            if node is not None:
                node.destroy_node()

    def reset_window(self):
        self.w_states = 0
        self.w_first_stamp = None
        self.w_last_stamp = None
        self.w_gaps = 0
        self.w_commands = 0
        self.w_answers = 0
        self.w_other = 0         # payload, base-parameter and diagnostics messages
        self.w_nan = 0
        self.w_over = 0
        self.w_max_abs_ratio = 0.0
        self.w_round_trip = []
        self.w_id_diag = []
        self.w_tracking_max = 0.0

    def _on_state(self, stamp, now):
        """A joint state stamped ``stamp`` (ns) arrived at ``now`` (``clock_ns``)."""
        if self.w_last_stamp is not None and stamp - self.w_last_stamp > 1_500_000_000 // RATE:
            self.w_gaps += round((stamp - self.w_last_stamp) * RATE / 1e9) - 1
        if self.w_first_stamp is None:
            self.w_first_stamp = stamp
        self.w_last_stamp = stamp
        self.w_states += 1
        self.sent_ns[stamp] = now

    def _on_command(self, tau):
        """A command ``tau`` (n,) arrived."""
        self.w_commands += 1
        if tau.shape != self.effort_limit.shape or not np.isfinite(tau).all():
            self.w_nan += 1
            if len(self.bad_examples) < 10:
                self.bad_examples.append({"kind": "nan_or_length", "tau": [float(x) for x in tau]})
            return
        ratio = float(np.max(np.abs(tau) / self.effort_limit))
        if ratio > self.w_max_abs_ratio:
            self.w_max_abs_ratio = ratio
        if ratio > 1.0:
            self.w_over += 1
            if len(self.bad_examples) < 10:
                self.bad_examples.append({"kind": "over_limit", "tau": [float(x) for x in tau]})

    def _on_answer(self, data, now):
        """A tracking error arrived at ``now`` (``clock_ns``): ``data`` = [state stamp (s), q - q_d (n,) ...]."""
        self.w_answers += 1
        if not len(data):
            return
        stamp = int(round(data[0] * 1e9))
        if len(data) > 1:
            err = float(np.max(np.abs(data[1:])))
            if err > self.w_tracking_max:
                self.w_tracking_max = err
        # the controller's stamp went through float64 seconds: look up the exact key, then +-1 us
        received = self.sent_ns.pop(stamp, None)
        if received is None:
            for d in (-1000, 1000, -1, 1):
                received = self.sent_ns.pop(stamp + d, None)
                if received is not None:
                    break
        if received is not None:
            self.w_round_trip.append(now - received)

    def _on_payload(self, msg):
        self.w_other += 1
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        newest = (self.w_last_stamp or 0) / 1e9
        self.payload = {"mass": float(msg.inertia.m), "stamp": stamp,
                        "behind_newest_joint_state_s": round(newest - stamp, 3) if newest else None,
                        "com": [msg.inertia.com.x, msg.inertia.com.y, msg.inertia.com.z],
                        "frame_id": msg.header.frame_id}

    def _on_base(self, msg):
        self.w_other += 1
        self.base_parameters = {"count": len(msg.data),
                                "labels": [d.label for d in msg.layout.dim][:len(msg.data)]}

    def _on_diagnostics(self, msg):
        self.w_other += 1
        for status in msg.status:
            name = status.name.split(":")[0]
            values = {kv.key: kv.value for kv in status.values}
            values["_level"] = int.from_bytes(status.level, "little") if isinstance(status.level, bytes) \
                else int(status.level)
            values["_message"] = status.message
            self.diagnostics[name] = values
            if name == "inverse_dynamics":
                self.w_id_diag.append(values)

    def prune(self, older_than_ns):
        """Forget joint states received before ``older_than_ns`` (never answered: dropped)."""
        stale = [k for k, v in self.sent_ns.items() if v < older_than_ns]
        for k in stale:
            del self.sent_ns[k]
        return len(stale)