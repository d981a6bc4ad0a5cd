"""The estimator node's polled intake under load: joint states at --rate Hz for --duration s from a talker
process (reliable keep-last 10, as joint_state_broadcaster publishes) into the estimator node (its defaults,
wrench path, decimation 1), optionally beside a busy loop (--busy: ``python -c "while True: pass"``, killed
at the end). Prints sent, taken (joint states the estimator admitted), the node's ``lost_joint_states``
(/diagnostics) and ``skipped_overload``; taken + lost = sent when the counter sees every loss. --depth: the
polled queues' depth instead of the node's (what 50 did).

    python benchmarks/estimator_intake.py --busy
    python benchmarks/estimator_intake.py --busy --depth 50
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np


def talker(names, rate, duration):
    import rclpy
    from sensor_msgs.msg import JointState

    from robodyn_ros.ros import qos
    from robodyn_ros.ros.messages import make_joint_state
    rclpy.init()
    node = rclpy.create_node("intake_talker")
    pub = node.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
    deadline = time.monotonic() + 30.0
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)
    n, j = int(round(rate * duration)), np.arange(len(names))
    start = time.monotonic()
    for k in range(n):           # on a fixed schedule: a late sample goes out at once, as a driver catches up
        t = k / rate
        wait = start + t - time.monotonic()
        if wait > 0.0:
            time.sleep(wait)
        q, v = 0.3 * np.sin(np.pi * t + j), 0.3 * np.pi * np.cos(np.pi * t + j)
        pub.publish(make_joint_state(1.0 + t, names, q, v, np.sin(t + j)))
    print(json.dumps({"sent": n, "wall_s": round(time.monotonic() - start, 2)}), flush=True)
    time.sleep(1.0)
    node.destroy_node()
    rclpy.shutdown()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--busy", action="store_true", help="a busy loop beside the nodes")
    parser.add_argument("--depth", type=int, help="the polled queues' depth (default: the node's)")
    parser.add_argument("--talker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.talker:
        return talker(args.talker.split(","), args.rate, args.duration)
    from robodyn_ros.ros import qos
    from robodyn_ros.ros.bringup import Bringup
    from robodyn_ros.ros.launch_description_data import NodeEntry, config_file
    from robodyn_ros.ros.testing import ros_context
    if args.depth:
        qos.POLLED_SENSOR_INPUT_QOS = qos.with_depth(qos.POLLED_SENSOR_INPUT_QOS, args.depth)
    hog = None
    with ros_context() as context, Bringup([NodeEntry("estimator", "estimator", "estimator")], context,
                                           config_file("panda"), overrides={"estimator": {
                                               "base_parameters": False, "decimation": 1}}) as up:
        up.activate()
        node = up.nodes["estimator"]
        tk = subprocess.Popen([sys.executable, __file__, "--talker", ",".join(node.robot.joints), "--rate",
                               str(args.rate), "--duration", str(args.duration)], stdout=subprocess.PIPE, text=True)
        try:
            if args.busy:
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            while tk.poll() is None:
                up.executor.spin_once(timeout_sec=0.01)
            # late or lost: spin until nothing more arrives for 2 s
            last, quiet_since, end = -1, time.monotonic(), time.monotonic() + 30.0
            while time.monotonic() < end and time.monotonic() - quiet_since < 2.0:
                up.executor.spin_once(timeout_sec=0.01)
                if node.estimator.samples != last:
                    last, quiet_since = node.estimator.samples, time.monotonic()
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
        sent = json.loads(tk.stdout.read().strip().splitlines()[-1])
        values = node.diagnostic_status(node.estimator.last_t)[2]
        print(json.dumps({"busy": args.busy, "depth": node.state_sub.qos_profile.depth, **sent,
                          "taken": int(node.estimator.samples), "lost_joint_states": values["lost_joint_states"],
                          "skipped_overload": values["skipped_overload"], "updates": values["updates"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
