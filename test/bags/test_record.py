"""`robodyn record` over real DDS (each test in its own isolated ROS domain): a JointState stream published
by another node is recorded losslessly (reliable publishers are subscribed reliably) and `robodyn identify`
reads the recorded bag to the same parameters as a bag written directly from the same samples; the command
in another process stops on SIGINT with a complete bag, and leaves nothing behind when nothing arrives."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
import yaml
from sensor_msgs.msg import JointState

from conftest import CHECKOUT
from robodyn_ros.bags import DEFAULT_T0_NS, read_joint_states, write_joint_states_bag
from robodyn_ros.identification.batch import predict_torques
from robodyn_ros.identification.exciting_trajectory import design_exciting_trajectory
from robodyn_ros.model.model import Model
from robodyn_ros.robots import bundled_robot_info
from robodyn_ros.ros import qos
from robodyn_ros.ros.recorder import TopicRecorder
from robodyn_ros.ros.testing import isolated_ros_domain, ros_session, spin_until

ROOT = CHECKOUT


@pytest.fixture(scope="module")
def motion():
    """20 s of an exciting trajectory at 200 Hz with the nominal Panda's torques plus noise."""
    info = bundled_robot_info("panda")
    model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    traj = design_exciting_trajectory(model.nv, model.lower, model.upper, 0.6 * model.velocity_limit,
                                      a_max=np.full(model.nv, 4.0), period=10.0, harmonics=5, seed=1, max_iterations=4)
    t, Q, V, A = (x[::5] for x in traj.sample(0.001, 2))
    tau = predict_torques(model, Q, V, A, 0.05) + np.random.default_rng(2).normal(size=Q.shape) * 0.05
    return info["urdf"], list(model.joint_names), t, Q, V, tau


def _message(names, t, q, v, tau):
    msg = JointState()
    stamp = DEFAULT_T0_NS + int(round(t * 1e9))
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
    msg.name, msg.position, msg.velocity, msg.effort = names, q.tolist(), v.tolist(), tau.tolist()
    return msg


def _identify(bag, urdf, out):
    from robodyn_ros.cli.identify import main
    assert main([str(bag), "--urdf", urdf, "--lock-joint", "panda_finger_joint1=0", "--lock-joint",
                 "panda_finger_joint2=0", "--output", str(out), "--quiet", "--no-consistent"]) == 0
    return yaml.safe_load(open(out))


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_recorded_stream_identifies_like_a_directly_written_bag(motion, tmp_path, storage):
    urdf, names, t, Q, V, tau = motion
    with ros_session() as ros:
        talker, listener = ros.node("talker"), ros.node("recorder")
        publisher = talker.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        recorder = TopicRecorder(listener, tmp_path / "recorded", ["/joint_states"], storage=storage)
        assert spin_until(ros.executor, lambda: not recorder.discover(), 10.0)
        assert spin_until(ros.executor, lambda: publisher.get_subscription_count() > 0, 10.0)
        for start in range(0, len(t), 100):
            for k in range(start, min(len(t), start + 100)):
                publisher.publish(_message(names, t[k], Q[k], V[k], tau[k]))
            assert spin_until(ros.executor, lambda: recorder.counts["/joint_states"] >= min(len(t), start + 100), 10.0)
        assert not os.path.exists(tmp_path / "recorded")            # nothing at the target until finished
        recorder.finish()
    assert recorder.types == {"/joint_states": "sensor_msgs/msg/JointState"}
    series = read_joint_states(tmp_path / "recorded", joint_names=names)
    assert len(series.t) == len(t) and series.report.kept == len(t)
    write_joint_states_bag(tmp_path / "direct", t, names, Q, V, tau)
    recorded = _identify(tmp_path / "recorded", urdf, tmp_path / "r.yaml")
    direct = _identify(tmp_path / "direct", urdf, tmp_path / "d.yaml")
    assert recorded["base_parameters"]["values"] == direct["base_parameters"]["values"]
    assert sorted(os.listdir(tmp_path)) == ["d.yaml", "direct", "r.yaml", "recorded"]   # no staging left


def test_joint_states_no_joint_has_are_left_out_and_counted(motion, tmp_path):
    """A stream with a NaN position, an infinite velocity and a velocity of 1e35 rad/s (a diverged simulator's)
    among sound states: those three are not recorded but counted with the first one's reason; a NaN effort
    (ros2_control's missing interface) is recorded."""
    urdf, names, t, Q, V, tau = motion
    bad = {10: ("q", 0, np.nan), 20: ("v", 3, np.inf), 30: ("v", 5, 1e35)}
    with ros_session() as ros:
        talker, listener = ros.node("talker"), ros.node("recorder")
        publisher = talker.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        recorder = TopicRecorder(listener, tmp_path / "recorded", ["/joint_states"])
        assert spin_until(ros.executor, lambda: not recorder.discover(), 10.0)
        assert spin_until(ros.executor, lambda: publisher.get_subscription_count() > 0, 10.0)
        for k in range(50):
            q, v, effort = Q[k].copy(), V[k].copy(), tau[k].copy()
            if k in bad:
                field, j, value = bad[k]
                (q if field == "q" else v)[j] = value
            if k == 40:
                effort[:] = np.nan
            publisher.publish(_message(names, t[k], q, v, effort))
        assert spin_until(ros.executor, lambda: recorder.counts["/joint_states"]
                          + recorder.dropped.get("/joint_states", [0])[0] >= 50, 10.0)
        recorder.finish()
    assert recorder.counts["/joint_states"] == 47
    assert recorder.dropped == {"/joint_states": [3, "position of panda_joint1 is nan"]}
    series = read_joint_states(tmp_path / "recorded", joint_names=names)
    kept = [k for k in range(50) if k not in bad and k != 40]       # the NaN effort is recorded, the reader drops it
    np.testing.assert_array_equal(series.q, Q[kept])
    assert series.report.messages == 47 and np.isfinite(series.v).all()


def _command(bag, *extra):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "robodyn_ros.cli", "record", str(bag), "--topics",
                             "/joint_states", "/ft", "--quiet", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_command_stops_on_sigint_with_a_complete_bag(motion, tmp_path):
    urdf, names, t, Q, V, tau = motion
    with isolated_ros_domain():
        process = _command(tmp_path / "bag")
        try:
            context = rclpy.Context()
            rclpy.init(context=context)
            try:
                node = rclpy.create_node("talker", context=context)
                publisher = node.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
                deadline = time.monotonic() + 30.0
                while publisher.get_subscription_count() == 0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert publisher.get_subscription_count() > 0, "the recorder never subscribed"
                for k in range(200):
                    publisher.publish(_message(names, t[k], Q[k], V[k], tau[k]))
                    if k in (50, 60):      # a diverged simulator's states: not recorded, counted
                        value = np.nan if k == 50 else 1e35
                        publisher.publish(_message(names, t[k] + 5e-4, np.full(7, value), np.full(7, value), tau[k]))
                    time.sleep(0.002)
                time.sleep(0.5)
                node.destroy_node()
            finally:
                context.try_shutdown()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert "/joint_states 200 messages" in out and "nothing was received on /ft" in err
    warnings = [line for line in err.splitlines() if "not recorded" in line]
    assert warnings == ["warning: not recorded, joint states with non-finite or absurd values: /joint_states 2 "
                        "(the first: position of panda_joint1 is nan)"], err
    series = read_joint_states(tmp_path / "bag", joint_names=names)
    np.testing.assert_array_equal(series.q, Q[:200])
    assert os.listdir(tmp_path) == ["bag"]


def test_nothing_received_leaves_nothing(tmp_path):
    with isolated_ros_domain():
        process = _command(tmp_path / "bag", "--duration", "1.0")
        out, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "no message received on /joint_states, /ft" in err and "nothing was written" in err
    assert os.listdir(tmp_path) == []


def _publish_until_done(process, kind, topic, publisher_qos, messages, period=0.002):
    """From a node in this process's domain (that of ``isolated_ros_domain``), publish ``messages`` of type ``kind``
    on ``topic`` once the recorder ``process`` subscribed, ``period`` s apart, until it ends; returns how many
    were published."""
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        publisher = rclpy.create_node("talker", context=context).create_publisher(kind, topic, publisher_qos)
        deadline = time.monotonic() + 30.0
        while publisher.get_subscription_count() == 0 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert publisher.get_subscription_count() > 0 or process.poll() is not None, "the recorder never subscribed"
        sent = 0
        for message in messages:
            if process.poll() is not None:
                break
            publisher.publish(message)
            sent += 1
            time.sleep(period)
        return sent
    finally:
        context.try_shutdown()


def test_span_ends_the_recording_after_so_much_of_the_robots_time(motion, tmp_path):
    """``--span 0.5`` on joint states stamped 5 ms apart and published 2 ms apart (a simulator at 2.5 x real
    time): the command ends by itself once the recorded stamps span 0.5 s, long before the stream does; the bag
    holds those 0.5 s (and what was in flight)."""
    urdf, names, t, Q, V, tau = motion
    with isolated_ros_domain():
        process = _command(tmp_path / "bag", "--span", "0.5")
        try:
            sent = _publish_until_done(process, JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS,
                                       (_message(names, t[k], Q[k], V[k], tau[k]) for k in range(2000)))
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert sent < 2000                                         # it ended before the stream did
    series = read_joint_states(tmp_path / "bag", joint_names=names)
    span = series.t[-1] - series.t[0]
    assert 0.5 - 1e-9 <= span and len(series.t) < sent, (span, len(series.t), sent)
    np.testing.assert_array_equal(series.q, Q[:len(series.t)])


def test_span_needs_a_topic_with_a_header_stamp(tmp_path):
    from std_msgs.msg import Float64MultiArray
    with isolated_ros_domain():
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        process = subprocess.Popen([sys.executable, "-m", "robodyn_ros.cli", "record", str(tmp_path / "bag"),
                                    "--topics", "/effort_controller/commands", "--span", "1", "--quiet"], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _publish_until_done(process, Float64MultiArray, "/effort_controller/commands", qos.COMMAND_QOS,
                                (Float64MultiArray(data=[0.0]) for _ in range(5000)))
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 2, err
    assert "topic /effort_controller/commands (std_msgs/msg/Float64MultiArray) has no header stamp" in err, err
    assert os.listdir(tmp_path) == []
