"""Can an rclpy node close a 1 kHz loop with p99 <= 1 ms? Measured, per executor.

Two processes on one machine, in an isolated ROS domain (localhost discovery):

* the DRIVER (this process) stands in for the robot: a thread publishes ``sensor_msgs/JointState`` on
  ``/joint_states`` at ``--rate`` Hz (reliable, like joint_state_broadcaster), its header stamp the
  CLOCK_MONOTONIC send time; its executor receives the echoes.
* the ECHO process is the node under test: it subscribes best-effort (``SENSOR_INPUT_QOS``), maps the
  joints by name (``joint_state_to_arrays``), computes a PD torque and publishes a
  ``std_msgs/Float64MultiArray`` on ``/effort_controller/commands`` (reliable) carrying the stamp back.

Reported per executor of the echo node: round-trip latency percentiles (driver send -> driver receipt of
the answer), one-way latency into the node (send -> callback start, CLOCK_MONOTONIC is system-wide),
the node's callback time, drops on the way in (sent - received by the node) and on the way back, and the
driver's own send-period jitter (a Python publisher is part of what is measured).

Bounded: each run lasts ``--duration`` seconds plus discovery (<= 15 s); the echo process exits by itself
(idle 2 s after the traffic stops, or a hard deadline) and is killed by its pid if it overstays.

    PYTHONPATH=. python benchmarks/bench_rclpy_loop.py --duration 10 --executors events,single
    PYTHONPATH=. python benchmarks/bench_rclpy_loop.py --duration 10 --rt-priority 50   # SCHED_FIFO

Measured 2026-11-23 on the project machine (2 cores, rclpy 9.1.2 Kilted wheels, rmw_fastrtps_cpp 9.3.3,
7 joints, 10 s = 10 000 messages per run) while other jobs kept the 1-minute load average at 4..8:

    node executor      RT p50   RT p99   RT p99.9  drops     node CPU/msg
    events              0.4-4 ms  0.8-11 ms  4-18 ms  0-8 %    ~0.3 ms
    single              0.6-8 ms  10-20 ms  12-25 ms  3-46 %   ~0.6-0.7 ms
    events + FIFO 50    0.39-0.58  0.62-0.86  1.2-1.5   0        ~0.3-0.4 ms
    single + FIFO 50    0.45-0.56  0.68-0.75  1.2-2.9   0        ~0.55-0.73 ms

Reading: under CPU contention a normal-priority rclpy node misses 1 kHz (SingleThreadedExecutor
badly: its per-message CPU cost is twice EventsExecutor's); with SCHED_FIFO both executors keep every
message and p99 < 1 ms round trip; EventsExecutor halves the CPU per message.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
DISCOVERY_TIMEOUT = 15.0


def _now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


# -------------------------------------------------------------------------------------------- echo side
def set_realtime(priority):
    """SCHED_FIFO at ``priority`` (1..99) for this process, as a control process on a PREEMPT_RT robot PC
    runs; returns False (and changes nothing) if not permitted."""
    if not priority:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (PermissionError, OSError):
        return False


def run_echo(executor_kind, duration, rt_priority=0):
    """The node under test; prints one JSON line with its counts and timings, then exits."""
    realtime = set_realtime(rt_priority)
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from robodyn_ros.ros import messages as rm
    from robodyn_ros.ros import qos
    from robodyn_ros.ros.testing import make_executor

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("echo", context=context)
    pub = node.create_publisher(Float64MultiArray, "/effort_controller/commands", qos.COMMAND_QOS)
    cache, kp, kd = {}, 100.0, 20.0
    n_max = int(duration * 2000) + 10000
    one_way = np.zeros(n_max, dtype=np.int64)
    callback = np.zeros(n_max, dtype=np.int64)
    state = {"count": 0, "last": None, "rejected": 0, "cpu_first": None, "cpu_last": None}
    out = np.zeros(len(JOINTS) + 2)

    def on_state(msg):
        start = _now_ns()
        try:
            _, q, v, _ = rm.joint_state_to_arrays(msg, JOINTS, cache)
        except rm.MessageRejected:
            state["rejected"] += 1
            return
        stamp = msg.header.stamp
        measured = msg.header.frame_id == "measure"  # warm-up messages say "warmup"
        out[0], out[1] = stamp.sec, stamp.nanosec
        out[2:] = -kp * q - kd * v
        pub.publish(rm.make_float64_multiarray(out))
        if not measured:
            return
        k = state["count"]
        if k < n_max:
            one_way[k] = start - (stamp.sec * 1_000_000_000 + stamp.nanosec)
            callback[k] = _now_ns() - start
        state["count"] = k + 1
        state["last"] = time.monotonic()
        cpu = time.process_time()
        if state["cpu_first"] is None:
            state["cpu_first"] = cpu
        state["cpu_last"] = cpu

    node.create_subscription(JointState, "/joint_states", on_state, qos.SENSOR_INPUT_QOS)
    executor = make_executor(executor_kind, context)
    executor.add_node(node)
    hard_deadline = time.monotonic() + duration + DISCOVERY_TIMEOUT + 10.0
    while time.monotonic() < hard_deadline:
        executor.spin_once(timeout_sec=0.2)
        last = state["last"]
        if last is not None and time.monotonic() - last > 2.0:
            break
    n = min(state["count"], n_max)
    cpu_per_message = (state["cpu_last"] - state["cpu_first"]) / max(1, state["count"] - 1) \
        if state["cpu_first"] is not None else None
    print(json.dumps({"received": state["count"], "rejected": state["rejected"], "realtime": realtime,
                      "cpu_us_per_message": None if cpu_per_message is None else round(cpu_per_message * 1e6, 1),
                      "one_way_us": _percentiles(one_way[:n] / 1e3), "callback_us": _percentiles(callback[:n] / 1e3)}),
          flush=True)
    executor.remove_node(node)
    node.destroy_node()
    executor.shutdown()
    context.try_shutdown()


# ------------------------------------------------------------------------------------------ driver side
def run_driver(echo_executor, rate, duration, driver_executor, rt_priority=0):
    """One measurement: start the echo process, publish for ``duration`` s, collect; returns a dict."""
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from robodyn_ros.ros import qos
    from robodyn_ros.ros.testing import make_executor, spin_until

    echo = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--role", "echo", "--executors",
                             echo_executor, "--duration", str(duration), "--rt-priority", str(rt_priority)],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    realtime = set_realtime(rt_priority)
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("driver", context=context)
    pub = node.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
    n_max = int(duration * rate) + 1000
    round_trip = np.zeros(n_max, dtype=np.int64)
    got = {"count": 0, "counting": False}

    def on_command(msg):
        now = _now_ns()
        if not got["counting"]:
            return
        sent = int(msg.data[0]) * 1_000_000_000 + int(msg.data[1])
        k = got["count"]
        if k < n_max:
            round_trip[k] = now - sent
        got["count"] = k + 1

    sub = node.create_subscription(Float64MultiArray, "/effort_controller/commands", on_command, qos.COMMAND_QOS)
    executor = make_executor(driver_executor, context)
    executor.add_node(node)
    try:
        matched = spin_until(executor, lambda: pub.get_subscription_count() >= 1 and sub.get_publisher_count() >= 1,
                             DISCOVERY_TIMEOUT)
        if not matched:
            raise RuntimeError("the echo process was not discovered in time")
        msg = JointState(name=JOINTS + ["gripper"])
        q = np.linspace(-1.0, 1.0, len(JOINTS) + 1)
        stop = threading.Event()
        sent = {"count": 0, "warm": 0}
        periods = np.zeros(n_max + 100, dtype=np.int64)

        def publish_loop(seconds, count):
            msg.header.frame_id = "measure" if count else "warmup"
            period = 1_000_000_000 // rate
            next_ns = _now_ns()
            end_ns = next_ns + int(seconds * 1e9)
            last = None
            k = 0
            while not stop.is_set() and next_ns < end_ns:
                while (wait := next_ns - _now_ns()) > 0:
                    # sleep coarse, yield for the last 0.2 ms (not under SCHED_FIFO: it would starve others)
                    time.sleep(wait / 1e9 if wait > 200_000 or realtime else 0)
                now = _now_ns()
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
                msg.position = q + 1e-3 * k
                msg.velocity = q
                pub.publish(msg)
                if count and last is not None and k < len(periods):
                    periods[k] = now - last
                last = now
                k += 1
                next_ns += period
            sent["count" if count else "warm"] = k

        # warm-up (not counted): the first messages pay for lazy allocations on both sides
        warm = threading.Thread(target=publish_loop, args=(0.5, False))
        warm.start()
        spin_until(executor, lambda: not warm.is_alive(), 5.0)
        warm.join()
        spin_until(executor, lambda: False, 0.2)
        got["counting"] = True
        publisher = threading.Thread(target=publish_loop, args=(duration, True))
        publisher.start()
        spin_until(executor, lambda: not publisher.is_alive(), duration + 5.0)
        stop.set()
        publisher.join()
        spin_until(executor, lambda: False, 0.5)  # late answers
        got["counting"] = False
    finally:
        executor.remove_node(node)
        node.destroy_node()
        executor.shutdown()
        context.try_shutdown()
    try:
        out, _ = echo.communicate(timeout=duration + 30.0)
    except subprocess.TimeoutExpired:
        echo.kill()
        out, _ = echo.communicate()
    echo_report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    n_sent = sent["count"]
    received_by_echo = echo_report.get("received", 0)
    n = min(got["count"], n_max)
    return {
        "echo_executor": echo_executor, "driver_executor": driver_executor, "rate_hz": rate,
        "duration_s": duration, "sent": n_sent, "answered": got["count"],
        "dropped_total": n_sent - got["count"],
        "dropped_in": n_sent - received_by_echo,
        "round_trip_us": _percentiles(round_trip[:n] / 1e3),
        "one_way_in_us": echo_report.get("one_way_us"), "node_callback_us": echo_report.get("callback_us"),
        "send_period_us": _percentiles(periods[1:n_sent] / 1e3),
        "over_1ms_fraction": float(np.mean(round_trip[:n] > 1_000_000)) if n else None,
        "load_average_1min": os.getloadavg()[0], "realtime": realtime and echo_report.get("realtime", False),
        "node_cpu_us_per_message": echo_report.get("cpu_us_per_message"),
    }


def _percentiles(x):
    if len(x) == 0:
        return None
    p = np.percentile(x, [50, 90, 99, 99.9])
    return {"p50": round(float(p[0]), 1), "p90": round(float(p[1]), 1), "p99": round(float(p[2]), 1),
            "p99.9": round(float(p[3]), 1), "max": round(float(np.max(x)), 1)}


def run(executors=("events", "single"), duration=10.0, rate=1000, driver_executor="events", rt_priority=0):
    """One isolated-domain measurement per echo executor; returns ``{label: result dict}``."""
    from robodyn_ros.ros.testing import isolated_ros_domain

    results = {}
    for kind in executors:
        with isolated_ros_domain():
            result = run_driver(kind, rate, duration, driver_executor, rt_priority)
        results[kind + ("+fifo" if result["realtime"] else "")] = result
    return results


def _print_table(results):
    loads = ", ".join(f"{r['load_average_1min']:.1f}" for r in results.values())
    print(f"load average (1 min) after each run: {loads} on {os.cpu_count()} cores")
    print(f"{'node executor':14s} {'sent':>6s} {'drops in/tot':>12s} {'RT p50':>7s} {'RT p90':>7s} {'RT p99':>7s} "
          f"{'RT p99.9':>8s} {'RT max':>8s} {'in p50':>7s} {'in p99':>7s} {'cb p50':>7s} {'cb p99':>7s} "
          f"{'period p99':>10s} {'cpu/msg':>7s}  (us)")
    for kind, r in results.items():
        rt, one, cb, per = r["round_trip_us"] or {}, r["one_way_in_us"] or {}, r["node_callback_us"] or {}, \
            r["send_period_us"] or {}
        print(f"{kind:14s} {r['sent']:6d} {r['dropped_in']:5d}/{r['dropped_total']:<6d} "
              f"{rt.get('p50', 0):7.0f} {rt.get('p90', 0):7.0f} {rt.get('p99', 0):7.0f} {rt.get('p99.9', 0):8.0f} "
              f"{rt.get('max', 0):8.0f} {one.get('p50', 0):7.0f} {one.get('p99', 0):7.0f} {cb.get('p50', 0):7.0f} "
              f"{cb.get('p99', 0):7.0f} {per.get('p99', 0):10.0f} {r['node_cpu_us_per_message'] or 0:7.0f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=("bench", "echo"), default="bench")
    parser.add_argument("--executors", default="events,single", help="echo node executors to compare")
    parser.add_argument("--driver-executor", default="events", choices=("events", "single"))
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--rt-priority", type=int, default=0,
                        help="run both processes SCHED_FIFO at this priority (needs root or CAP_SYS_NICE)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.role == "echo":
        run_echo(args.executors, args.duration, args.rt_priority)
        return 0
    results = run(tuple(args.executors.split(",")), args.duration, args.rate, args.driver_executor,
                  args.rt_priority)
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        _print_table(results)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
