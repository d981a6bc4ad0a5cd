"""Fault injection on the controller side over real DDS (rclpy, each test in its own isolated ROS domain):
the inverse_dynamics node and the mpc node's ``output: commands`` path. Each fault has its expected safe
behaviour (docs/FAULTS.md):

- joint states stop and resume: the watchdog commands the stale action within ``state_timeout`` and ramps
  to it at the torque rate limit; when states resume, control resumes from the held command, ramped;
- time jumps backwards (bag loop, simulator reset): one time reset, the reference continues where it was,
  commands stay finite and within the effort limits without a stale period;
- duplicated and out-of-order stamps: dropped and counted, never acted on (no zero or negative time step
  reaches the rate limiter or the adaptation law);
- an MPC solver that times out on every solve: the fallback is applied, commands finite and within the
  limits, diagnostics WARN with the fallback status and count.
"""
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from conftest import assert_close
from robodyn_ros.ros import qos
from robodyn_ros.ros.bringup import Bringup
from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
from robodyn_ros.ros.messages import make_joint_state
from robodyn_ros.ros.testing import ros_context

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
EFFORT = np.array([87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0])


class Driver:
    """A node publishing joint states and recording the commands (and the controller's tracking error)."""

    def __init__(self, up, context, command_topic="/effort_controller/commands"):
        self.up = up
        self.command_topic = command_topic
        self.node = rclpy.create_node("driver", context=context)
        self.commands = []           # (wall time, command (7,))
        self.errors = []             # stamps of ~/tracking_error
        self.diagnostics = []
        self.node.create_subscription(Float64MultiArray, command_topic,
                                      lambda m: self.commands.append((time.monotonic(), np.array(m.data))),
                                      qos.COMMAND_QOS)
        self.node.create_subscription(Float64MultiArray, "/inverse_dynamics/tracking_error",
                                      lambda m: self.errors.append(m.data[0]), qos.ESTIMATE_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.diagnostics.append(m),
                                      qos.DIAGNOSTICS_QOS)
        self.pub = self.node.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        up.add_node(self.node)

    def wait_connected(self):
        """Both ends matched: the publisher sees the node's subscription and the subscription sees the
        publisher (else the first best-effort sample can be lost)."""
        subs = [s for n in self.up.nodes.values() for s in n.subscriptions if s.topic_name == "/joint_states"]
        pubs = [p for n in self.up.nodes.values() for p in n.publishers if p.topic_name == self.command_topic]
        assert subs and pubs and self.up.spin_until(
            lambda: self.pub.get_subscription_count() >= len(subs) and all(s.get_publisher_count() > 0 for s in subs)
            and all(p.get_subscription_count() > 0 for p in pubs), 20.0)

    def send(self, t, q, v, until=None, timeout=2.0):
        """Publish one state and spin until ``until()`` (default: one more command arrived)."""
        n = len(self.commands)
        self.pub.publish(make_joint_state(t, JOINTS, q, v))
        assert self.up.spin_until(until or (lambda: len(self.commands) > n), timeout), f"no answer to t = {t}"

    def close(self):
        self.up.executor.remove_node(self.node)
        self.node.destroy_node()


def _controller(context, overrides):
    entry = NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics")
    return Bringup([entry], context, config_file("panda"),
                   overrides={"inverse_dynamics": {"use_estimates": False, **overrides}})


def test_joint_states_stop_and_resume():
    """Stop: stale within state_timeout, zero torque reached by a ramp at max_torque_rate; resume: commands
    ramp back from zero at the rate limit (stamp-driven: rate x 1 ms per state) and control motion again."""
    timeout, rate = 0.25, 40.0
    with ros_context() as context, _controller(context, {"state_timeout": timeout, "stale_action": "zero",
                                                         "max_torque_rate": rate, "reference": "hold"}) as up:
        driver = Driver(up, context)
        up.activate()
        driver.wait_connected()
        ctrl = up.nodes["inverse_dynamics"]
        q = ctrl.robot.home.copy()
        t = 0.0
        for _ in range(10):
            driver.send(t, q, np.zeros(7))
            t += 0.001
        last_sent = time.monotonic()
        moving = driver.commands[-1][1]
        assert np.abs(moving).max() > 5.0                          # gravity hold of the arm: far from zero
        assert up.spin_until(lambda: ctrl.stale, 2.0)
        detected = time.monotonic()
        assert timeout * 0.9 <= detected - last_sent <= timeout * 1.25 + 0.15, detected - last_sent
        assert up.spin_until(lambda: len(driver.commands) and not driver.commands[-1][1].any(), 3.0), \
            "the watchdog never reached zero torque"
        stale = np.array([c for w, c in driver.commands if w > last_sent])
        # a monotone ramp towards zero: the rate limit, not a step (gravity on joint 2 exceeds rate x timeout)
        assert len(stale) >= 2 and np.all(np.diff(np.abs(stale), axis=0) <= 1e-12)
        first_wall = [w for w, c in driver.commands if w > last_sent][0]
        # the first step: at most rate x (wall time since the previous command), which was not all the way
        assert np.abs(moving - stale[0]).max() <= rate * (first_wall - last_sent + 0.01)
        assert np.abs(stale[0]).max() > 0.0
        # resume with later stamps: control comes back, ramped from zero at rate x 1 ms per state
        t += 0.5
        driver.send(t, q, np.zeros(7), until=lambda: not ctrl.stale)
        up.spin_until(lambda: False, 0.02)                         # a watchdog command already sent arrives
        n0 = len(driver.commands)
        for _ in range(20):
            t += 0.001
            driver.send(t, q, np.zeros(7))
        resumed = np.array([c for _, c in driver.commands[n0 - 1:]])
        steps = np.abs(np.diff(resumed, axis=0))
        assert steps.max() <= rate * 0.001 + 1e-9, steps.max()
        assert np.abs(resumed[-1]).max() >= 20 * rate * 0.001 - 1e-9   # still ramping up: motion commanded
        assert np.abs(resumed[-1]).max() < 20.0                      # ... not yet the full gravity torque
        assert ctrl.output.rate_limited > 0 and ctrl.non_finite_commands == 0
        driver.close()


def test_time_jumping_backwards_is_a_reset_and_the_reference_continues():
    """A bag loop: stamps 10.000..10.040 s then 0.000..0.040 s. One time reset, no stale period, every state
    answered by a finite command within the effort limits, and the desired motion continues across the
    jump (the reference time is re-based). A small jump back (< state_timeout) is dropped instead."""
    with ros_context() as context, _controller(context, {"state_timeout": 0.5}) as up:
        driver = Driver(up, context)
        up.activate()
        driver.wait_connected()
        ctrl = up.nodes["inverse_dynamics"]
        q = ctrl.robot.home + 0.02
        for k in range(41):
            driver.send(10.0 + 0.001 * k, q, np.zeros(7))
        desired_before = ctrl.loop.desired(10.04, q)[0]
        for k in range(41):
            driver.send(0.001 * k, q, np.zeros(7))
        assert ctrl.output.time_resets == 1
        assert_close(ctrl.loop.desired(0.0, q)[0], desired_before, rtol=1e-12)     # continues where it was
        assert not ctrl.stale and ctrl.output.dropped == {"duplicate": 0, "older": 0}
        commands = np.array([c for _, c in driver.commands])
        assert len(commands) == 82 and np.isfinite(commands).all()
        assert np.all(np.abs(commands) <= EFFORT + 1e-9)
        # the jump itself makes no torque step beyond what the rate limit allows for a 1 kHz loop
        assert np.abs(np.diff(commands, axis=0)).max() <= 1000.0 * 0.01
        # a jump back by less than state_timeout is an out-of-order stamp: dropped, no reset
        driver.send(0.040 - 0.2, q, np.zeros(7), until=lambda: ctrl.output.dropped["older"] == 1)
        assert ctrl.output.time_resets == 1
        driver.close()


def test_duplicated_and_out_of_order_stamps_are_dropped():
    """Slotine-Li (the mode with a time step in its law): duplicates and late stamps, even carrying absurd
    velocities, are counted and never acted on; the accepted stamps strictly increase, so neither the
    adaptation step nor the rate limiter ever sees dt <= 0."""
    with ros_context() as context, _controller(context, {"state_timeout": 5.0, "mode": "slotine_li",
                                                         "reference": "hold"}) as up:
        driver = Driver(up, context)
        up.activate()
        driver.wait_connected()
        ctrl = up.nodes["inverse_dynamics"]
        q = ctrl.robot.home.copy()
        out = ctrl.output
        for k in range(1, 31):
            t = 0.001 * k
            driver.send(t, q, np.zeros(7), timeout=60.0 if k == 1 else 2.0)   # the first Slotine-Li step is slow
            if k % 5 == 0:
                dup, old = out.dropped["duplicate"], out.dropped["older"]
                pi_hat = ctrl.controller.pi_hat.copy()
                driver.send(t, q, np.full(7, 50.0), until=lambda: out.dropped["duplicate"] == dup + 1)
                driver.send(t - 0.003, q, np.full(7, -50.0), until=lambda: out.dropped["older"] == old + 1)
                assert np.array_equal(ctrl.controller.pi_hat, pi_hat)    # no adaptation from a dropped state
        up.spin_until(lambda: len(driver.errors) >= 30, 2.0)
        assert out.dropped == {"duplicate": 6, "older": 6} and out.time_resets == 0
        assert len(driver.commands) == 30 and out.commands == 30                 # one per in-order state
        stamps = np.array(driver.errors)
        assert len(stamps) == 30 and np.all(np.diff(stamps) > 0)
        commands = np.array([c for _, c in driver.commands])
        assert np.isfinite(commands).all() and np.all(np.abs(commands) <= EFFORT + 1e-9)
        # the |v| = 50 rad/s of the dropped states would have driven K_D v far beyond the limits
        assert np.abs(commands).max() < 0.5 * EFFORT.max()
        driver.close()


def test_mpc_solver_timing_out_every_time_falls_back_within_limits():
    """time_limit 0.1 ms: every solve falls back (gravity of the MPC model at the measured state, K = 0);
    the commands are exactly that, finite and within the limits; the diagnostics say WARN fallback; when the
    states stop, the watchdog commands the stale action (zero) and solving pauses."""
    entry = NodeEntry("mpc", "mpc", "mpc")
    overrides = {"mpc": {"output": "commands", "time_limit": 1e-4, "use_estimates": False, "state_timeout": 0.2,
                         "compiled": False, "horizon": 5,
                         "stale_action": "zero", "max_torque_rate": 0.0}}
    with ros_context() as context, Bringup([entry], context, config_file("panda"), overrides=overrides) as up:
        driver = Driver(up, context)
        up.activate()
        driver.wait_connected()
        mpc = up.nodes["mpc"]
        q = mpc.robot.home + 0.05
        t, deadline = 0.0, time.monotonic() + 15.0
        while (mpc.solves < 4 or not driver.commands) and time.monotonic() < deadline:
            driver.pub.publish(make_joint_state(t, JOINTS, q, np.zeros(7)))
            up.spin_until(lambda: False, 0.01)
            t += 0.01
        assert mpc.solves >= 4, mpc.solves
        assert mpc.fallbacks == mpc.solves and mpc.solution[1].status == "fallback_gravity"
        n0 = len(driver.commands)
        for _ in range(5):
            driver.send(t, q, np.zeros(7))
            t += 0.01
        commands = np.array([c for _, c in driver.commands[n0:]])
        gravity = mpc.robot.to_command(mpc._gravity(q))
        assert np.abs(gravity).max() > 5.0
        for c in commands:
            assert_close(c, gravity, rtol=1e-9)
        assert np.all(np.abs(commands) <= EFFORT)
        assert up.spin_until(lambda: any(s.message.startswith("fallback") for d in driver.diagnostics
                                         for s in d.status), 5.0)
        status = [s for d in driver.diagnostics for s in d.status if s.message.startswith("fallback")][-1]
        values = {kv.key: kv.value for kv in status.values}
        assert status.level == b"\x01" or status.level == 1                     # WARN
        assert int(values["fallbacks"]) >= 1 and values["status"] == "fallback_gravity"
        # states stop: zero torque within the timeout, no more solves
        assert up.spin_until(lambda: mpc.output.stale, 2.0)
        solves = mpc.solves
        up.spin_until(lambda: False, 0.1)
        assert mpc.solves == solves and not driver.commands[-1][1].any()
        driver.close()
