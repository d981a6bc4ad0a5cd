"""Fault injection (issue #9; README "Fault injection"): a node killed (SIGKILL, no clean shutdown) and
restarted mid-run. The simulator, the estimator and the inverse_dynamics controller run as three
``robodyn node`` processes (config/panda.yaml) in an isolated ROS domain; this process listens. The
estimator is killed and restarted, then the controller: the other nodes keep running (the simulator keeps
publishing joint states, the controller keeps commanding, nobody exits), and the restarted node
resynchronises by itself (the estimator publishes payload estimates again, the controller commands again,
finite and within the URDF effort limits)."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import rclpy
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robodyn_ros.ros import qos
from robodyn_ros.ros.launch_description_data import config_file
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.ros.testing import make_executor, ros_context, spin_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# light settings for a shared 2-core machine: 500 Hz real-time simulation, 100 Hz estimator updates
PARAMS = {
    "simulator": {"rate": 500.0, "real_time_factor": 1.0, "publish_clock": False},
    "estimator": {"decimation": 5, "base_parameters": False},
    "inverse_dynamics": {"state_timeout": 0.5},
}
START_TIMEOUT = 60.0   # s for a node process to come up (imports, URDF, cached kernels); ~3-5 s on an idle machine, a minute when other processes hog the CPU
OUTAGE = 2.0           # s that the killed node stays down; the others must still publish in its second half


def start(kind):
    args = [sys.executable, "-m", "robodyn_ros.ros.node_main", kind, "--ros-args", "--params-file",
            config_file("panda"), "--log-level", "warn"]
    for name, value in PARAMS[kind].items():
        args += ["-p", f"{name}:={value}"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop(proc):
    """SIGINT, then SIGKILL by pid if the process overstays; returns (exit code, stderr tail)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, (err or "")[-1500:]


class Listener:
    """Arrival times (monotonic) of joint states, commands and payload estimates, and the commands."""

    def __init__(self, context):
        self.node = rclpy.create_node("fault_listener", context=context)
        self.states, self.commands, self.payloads = [], [], []
        self.node.create_subscription(JointState, "/joint_states", lambda m: self.states.append(time.monotonic()),
                                      qos.SENSOR_INPUT_QOS)
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                      lambda m: self.commands.append((time.monotonic(), np.array(m.data))),
                                      qos.COMMAND_QOS)
        self.node.create_subscription(InertiaStamped, "/estimator/payload",
                                      lambda m: self.payloads.append((time.monotonic(), m.inertia.m)),
                                      qos.ESTIMATE_QOS)

    @staticmethod
    def since(series, t0):
        return [x for x in series if (x[0] if isinstance(x, tuple) else x) > t0]


def test_killed_estimator_and_controller_restart_while_the_others_keep_running():
    robot = load_robot(resolve_node_config("inverse_dynamics", {"robot": "panda"}))
    limit = np.abs(robot.to_command(robot.model.effort_limit))
    procs = {}
    with ros_context() as context:
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
            alive = lambda *kinds: all(procs[k].poll() is None for k in kinds)  # noqa: E731

            # --- the estimator is killed: simulator and controller carry on
            procs["estimator"].send_signal(signal.SIGKILL)
            procs["estimator"].wait()
            t_kill = time.monotonic()
            spin(lambda: False, OUTAGE)
            states, commands = (Listener.since(listener.states, t_kill + OUTAGE / 2),
                                Listener.since(listener.commands, t_kill + OUTAGE / 2))
            print(f"estimator down, its last {OUTAGE / 2} s: {len(states)} joint states, {len(commands)} commands received")
            assert alive("simulator", "inverse_dynamics")
            assert len(states) >= 20 and len(commands) >= 20      # 500 Hz nominal; lenient for a loaded machine
            assert not Listener.since(listener.payloads, t_kill + 0.2)
            # --- restarted: it publishes estimates again (resynchronised on the live joint states)
            procs["estimator"] = start("estimator")
            t_restart = time.monotonic()
            assert spin(lambda: len(Listener.since(listener.payloads, t_restart)) >= 10, START_TIMEOUT), \
                stop(procs["estimator"])
            back = Listener.since(listener.payloads, t_restart)
            print(f"estimator publishing again {back[0][0] - t_restart:.2f} s after its restart")
            assert all(np.isfinite(m) for _, m in back) and alive("simulator", "inverse_dynamics", "estimator")

            # --- the controller is killed: the simulator (zero torque after its command timeout) and the
            # estimator carry on
            procs["inverse_dynamics"].send_signal(signal.SIGKILL)
            procs["inverse_dynamics"].wait()
            t_kill = time.monotonic()
            spin(lambda: False, OUTAGE)
            states, payloads = (Listener.since(listener.states, t_kill + OUTAGE / 2),
                                Listener.since(listener.payloads, t_kill + OUTAGE / 2))
            print(f"controller down, its last {OUTAGE / 2} s: {len(states)} joint states, {len(payloads)} estimates received")
            assert alive("simulator", "estimator") and len(states) >= 20 and len(payloads) >= 5
            assert not Listener.since(listener.commands, t_kill + 0.2)
            # --- restarted: it commands again, finite and within the effort limits
            procs["inverse_dynamics"] = start("inverse_dynamics")
            t_restart = time.monotonic()
            assert spin(lambda: len(Listener.since(listener.commands, t_restart)) >= 100, START_TIMEOUT), \
                stop(procs["inverse_dynamics"])
            back = np.array([c for _, c in Listener.since(listener.commands, t_restart)])
            print(f"controller commanding again {Listener.since(listener.commands, t_restart)[0][0] - t_restart:.2f} s "
                  f"after its restart; max |command| / limit {np.max(np.abs(back) / limit):.3f}")
            assert back.shape[1] == 7 and np.isfinite(back).all() and np.all(np.abs(back) <= limit * (1 + 1e-9))
            assert alive("simulator", "estimator", "inverse_dynamics")
        finally:
            results = {kind: stop(proc) for kind, proc in procs.items()}
            executor.remove_node(listener.node)
            listener.node.destroy_node()
            executor.shutdown()
    for kind, (code, err) in results.items():   # every live node stops cleanly on SIGINT
        assert code == 0, (kind, code, err)
