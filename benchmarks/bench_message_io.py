"""The nodes' 1 kHz message paths against rclpy's typed ones, measured in the same run (CPU time of this thread).

Usage::

    python benchmarks/bench_message_io.py [--json]

For the Panda's 7 joints, on one DDS participant with a listening subscription:

* publish: a typed ``JointState`` / ``WrenchStamped`` / ``Float64MultiArray`` refilled in place against the
  bytes of :class:`~robodyn_ros.ros.messages.SerializedJointState`, ``SerializedWrenchStamped`` and
  ``SerializedFloat64MultiArray`` (what the simulator and the controllers publish);
* take and read: a polled subscription taking typed messages and reading them with
  :func:`~robodyn_ros.ros.messages.joint_state_to_arrays` against a raw one taking CDR bytes read in place
  (:class:`~robodyn_ros.ros.messages.RawJointState`; the estimator, the controllers' joint states).

Prints microseconds per message and the ratio typed / ours (above 1: ours is cheaper).
"""
import json
import sys
import time

import numpy as np


def _per_message_us(fn, count):
    start = time.thread_time()
    for _ in range(count):
        fn()
    return 1e6 * (time.thread_time() - start) / count


def main(argv=None):
    import rclpy
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from robodyn_ros.ros import messages as rm
    from robodyn_ros.ros import qos
    from robodyn_ros.ros.testing import init_context, isolated_ros_domain

    argv = sys.argv[1:] if argv is None else argv
    names = [f"panda_joint{i}" for i in range(1, 8)]
    stamp = Time(sec=12, nanosec=345_000_000)
    count, rows = 2000, {}
    with isolated_ros_domain() as domain_id:
        context = init_context(domain_id)
        node = rclpy.create_node("bench_message_io", context=context)
        try:
            pubs = {t: node.create_publisher(t, f"/bench_{t.__name__}", qos.SENSOR_INPUT_QOS)
                    for t in (JointState, WrenchStamped, Float64MultiArray)}
            for t in pubs:   # a listener on each topic: the middleware delivers what is published
                node.create_subscription(t, f"/bench_{t.__name__}", lambda m: None, qos.POLLED_SENSOR_INPUT_QOS,
                                         raw=True)
            time.sleep(0.5)
            typed_state = rm.make_joint_state(stamp, names, np.ones(7), np.ones(7), np.ones(7))
            raw_state = rm.SerializedJointState(names)
            typed_wrench = rm.array_to_wrench_stamped(stamp, "panda_link8", np.ones(6))
            raw_wrench = rm.SerializedWrenchStamped("panda_link8")
            typed_command = rm.make_float64_multiarray(np.ones(7))
            raw_command = rm.SerializedFloat64MultiArray(np.ones(7))
            command = np.ones(7)
            pairs = {
                "publish JointState": (lambda: pubs[JointState].publish(typed_state),
                                       lambda: pubs[JointState].publish(raw_state.serialize(stamp))),
                "publish WrenchStamped": (lambda: pubs[WrenchStamped].publish(typed_wrench),
                                          lambda: pubs[WrenchStamped].publish(raw_wrench.serialize(stamp, command[:6]))),
                "publish Float64MultiArray": (lambda: pubs[Float64MultiArray].publish(typed_command),
                                              lambda: pubs[Float64MultiArray].publish(raw_command.serialize(command))),
            }
            for label, (typed, ours) in pairs.items():
                rows[label] = (_per_message_us(typed, count), _per_message_us(ours, count))
            rows["take and read JointState"] = _take_and_read(node, pubs[JointState], typed_state, names)
        finally:
            node.destroy_node()
            context.try_shutdown()
    result = {label: {"typed_us": round(a, 2), "ours_us": round(b, 2), "ratio": round(a / b, 2)}
              for label, (a, b) in rows.items()}
    if "--json" in argv:
        print(json.dumps(result))
    else:
        for label, r in result.items():
            print(f"{label:28s} typed {r['typed_us']:7.2f} us  ours {r['ours_us']:7.2f} us  ratio {r['ratio']:.2f}")
    return result


def _take_and_read(node, pub, msg, names, batches=20, batch=80):
    """(typed, ours) microseconds per message to take a batch of waiting joint states and read them."""
    from sensor_msgs.msg import JointState

    from robodyn_ros.ros import messages as rm
    from robodyn_ros.ros import qos
    from robodyn_ros.ros.entities import take_pending

    out = []
    for raw in (False, True):
        sub = node.create_subscription(JointState, "/bench_JointState", lambda m: None,
                                       qos.POLLED_SENSOR_INPUT_QOS, raw=raw)
        time.sleep(0.3)
        take_pending(sub, 10_000)
        cache, layouts, cpu, taken = {}, {}, 0.0, 0
        for _ in range(batches):
            for _ in range(batch):
                pub.publish(msg)
            time.sleep(0.05)   # delivered (shared memory); what has not arrived is taken with the next batch
            start = time.thread_time()
            for m in take_pending(sub, 10_000):
                rm.joint_state_to_arrays(rm.RawJointState(m, layouts) if raw else m, names, cache)
                taken += 1
            cpu += time.thread_time() - start
        node.destroy_subscription(sub)
        out.append(1e6 * cpu / max(taken, 1))
    return tuple(out)


if __name__ == "__main__":
    main()
