"""Fault injection (issue #9; docs/FAULTS.md): a node killed (SIGKILL, no clean shutdown) and
restarted mid-run. The simulator, the estimator and the inverse_dynamics controller run as three
``robodyn node`` processes (config/panda.yaml) in an isolated ROS domain; this process listens. The
estimator is killed and restarted, then the controller: the other nodes keep running (the simulator keeps
publishing joint states, the controller keeps commanding, nobody exits), and the restarted node
resynchronises by itself (the estimator publishes payload estimates again, the controller commands again,
finite and within the URDF effort limits)."""
import signal
import time

import numpy as np
import pytest
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robodyn_ros.benchmarks.nodes import start_node_process, stop_node_process
from robodyn_ros.ros import qos
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.ros.testing import make_executor, ros_context, spin_until

# light settings for a shared 2-core machine: 500 Hz real-time simulation, 100 Hz estimator updates
PARAMS = {
    "simulator": {"rate": 500.0, "real_time_factor": 1.0, "publish_clock": False},
    "estimator": {"decimation": 5, "base_parameters": False},
    "inverse_dynamics": {"state_timeout": 0.5},
}
START_TIMEOUT = 60.0   # s for a node process to come up (imports, URDF, cached kernels); ~3-5 s on an idle machine, a minute when other processes hog the CPU
OUTAGE = 2.0           # s that the killed node stays down; the others must still publish in its second half
# what each node publishes (a Listener series), how many messages of each series must arrive in the second
# half of another node's outage (500 Hz nominal; lenient for a loaded machine), and how many the restarted
# node must publish again
OUTPUT = {"simulator": "states", "inverse_dynamics": "commands", "estimator": "payloads"}
MIN_DURING_OUTAGE = {"states": 20, "commands": 20, "payloads": 5}
MIN_AFTER_RESTART = {"estimator": 10, "inverse_dynamics": 100}
LISTENER_DEPTH = 2000  # messages: 4 s at 500 Hz


def start(kind):
    return start_node_process(kind, PARAMS[kind])


def stop(proc):
    """SIGINT, then SIGKILL if the process overstays; returns (exit code, stderr tail)."""
    code, err = stop_node_process(proc, timeout=10.0)
    return code, err[-1500:]


class Listener:
    """Arrival times (monotonic) of joint states, commands and payload estimates, and the commands."""

    def __init__(self, context):
        self.node = rclpy.create_node("fault_listener", context=context)
        self.states, self.commands, self.payloads = [], [], []
        # deep queues: a listener that the other test processes starve for a moment (pytest-xdist on 2 cores)
        # takes the backlog when it runs again instead of losing it to a depth-10 queue; a CI run once
        # counted 1 joint state in a second with the 10-deep profiles
        self.node.create_subscription(JointState, "/joint_states", lambda m: self.states.append(time.monotonic()),
                                      QoSProfile(depth=LISTENER_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                      lambda m: self.commands.append((time.monotonic(), np.array(m.data))),
                                      qos.COMMAND_QOS)
        self.node.create_subscription(InertiaStamped, "/estimator/payload",
                                      lambda m: self.payloads.append((time.monotonic(), m.inertia.m)),
                                      qos.ESTIMATE_QOS)

    @staticmethod
    def since(series, t0):
        return [x for x in series if (x[0] if isinstance(x, tuple) else x) > t0]


def kill_and_restart(kind, procs, listener, spin):
    """SIGKILL node ``kind``; during the second half of its ``OUTAGE`` the other nodes keep publishing
    (``MIN_DURING_OUTAGE``) and stay alive, and nothing comes from ``kind`` (the listener stamps a message
    when its executor takes it: on a loaded machine one sent before the kill can be taken a little after it,
    so the killed node is judged over the same second half); restarted, it publishes again
    (``MIN_AFTER_RESTART``, finite). Returns what it published after the restart ((monotonic time, message
    value) pairs)."""
    others = [k for k in procs if k != kind]
    series = lambda k: getattr(listener, OUTPUT[k])  # noqa: E731
    procs[kind].send_signal(signal.SIGKILL)
    procs[kind].wait()
    t_kill = time.monotonic()
    spin(lambda: False, OUTAGE)
    late = {k: len(Listener.since(series(k), t_kill + OUTAGE / 2)) for k in others}
    print(f"{kind} down, its last {OUTAGE / 2} s: {late} received")
    assert all(procs[k].poll() is None for k in others), {k: procs[k].poll() for k in others}
    assert all(n >= MIN_DURING_OUTAGE[OUTPUT[k]] for k, n in late.items()), late
    assert not Listener.since(series(kind), t_kill + OUTAGE / 2)
    procs[kind] = start(kind)
    t_restart = time.monotonic()
    assert spin(lambda: len(Listener.since(series(kind), t_restart)) >= MIN_AFTER_RESTART[kind], START_TIMEOUT), \
        stop(procs[kind])
    back = Listener.since(series(kind), t_restart)
    print(f"{kind} publishing again {back[0][0] - t_restart:.2f} s after its restart")
    assert all(np.isfinite(value).all() for _, value in back)
    assert all(p.poll() is None for p in procs.values())
    return back


@pytest.mark.xdist_group("processes")   # three node processes: one after another with the other such tests
def test_killed_estimator_and_controller_restart_while_the_others_keep_running():
    # Over UDP only (config/fastdds_udp.xml). Over Fast DDS's shared memory a node SIGKILLed while it writes
    # into a peer's port leaves that port's lock held: the simulator's next publish waited on it, and the
    # simulator and the controller published nothing for the rest of the outage (seen in full-suite runs and
    # under load with py-spy on the simulator: blocked in SharedMemManager::Port::try_push). That stall is
    # Fast DDS's; docs/FAULTS.md says how to avoid it. This test is about the nodes surviving and resynchronising.
    robot = load_robot(resolve_node_config("inverse_dynamics", {"robot": "panda"}))
    limit = np.abs(robot.to_command(robot.model.effort_limit))
    procs = {}
    with ros_context(udp_only=True) as context:
        listener = Listener(context)
        executor = make_executor("single", context)
        executor.add_node(listener.node)
        spin = lambda predicate, timeout: spin_until(executor, predicate, timeout)  # noqa: E731
        try:
            for kind in ("simulator", "estimator", "inverse_dynamics"):
                procs[kind] = start(kind)
            assert spin(lambda: listener.states and listener.commands and listener.payloads, START_TIMEOUT), \
                {k: (p.poll(), len(x)) for (k, p), x in zip(procs.items(), (listener.states, listener.payloads,
                                                                           listener.commands))}
            spin(lambda: False, 0.5)

            for kind in ("estimator", "inverse_dynamics"):
                back = kill_and_restart(kind, procs, listener, spin)
            # the restarted controller commands finite torques within the effort limits
            back = np.array([c for _, c in back])
            print(f"max |command| / limit after the restart {np.max(np.abs(back) / limit):.3f}")
            assert back.shape[1] == 7 and np.isfinite(back).all() and np.all(np.abs(back) <= limit * (1 + 1e-9))
            assert all(p.poll() is None for p in procs.values())
        finally:
            results = {kind: stop(proc) for kind, proc in procs.items()}
            executor.remove_node(listener.node)
            listener.node.destroy_node()
            executor.shutdown()
    for kind, (code, err) in results.items():   # every live node stops cleanly on SIGINT
        assert code == 0, (kind, code, err)
