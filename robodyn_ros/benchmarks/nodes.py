"""``robodyn bench nodes``: the nodes at 1 kHz, measured over real DDS in an isolated ROS domain.

1. inverse_dynamics: the node runs in ANOTHER process (``robodyn node inverse_dynamics`` with
   ``config/panda.yaml``, computed torque on the compiled regressor, reference held); this process
   publishes ``/joint_states`` at 1 kHz from a thread (stamp = CLOCK_MONOTONIC send time) for
   ``ID_SECONDS``. Reported: ``id_node_p99_latency_ms`` (inside the node: state callback entry -> command
   published, p99 over the run, from the node's /diagnostics), ``id_loop_round_trip_p99_ms`` (send -> the
   node's answer received here, both DDS hops), ``id_node_dropped`` (states sent without an answer: the
   node's ``~/tracking_error``, published right after each command, carries the state's stamp).
   Both processes ask for SCHED_FIFO 50 (a robot PC's control process; ``realtime`` says whether it was
   granted), which benchmarks/bench_rclpy_loop.py found necessary for a 1 ms p99 on a busy machine.
2. estimator: another process, fed joint states with efforts and the wrist wrench at 1 kHz for
   ``ESTIMATOR_SECONDS``, once with ``decimation`` 1 and once with 5; reported: the update rate it
   achieved (from its /diagnostics) and whether it kept up (>= 95 % of 1000 / decimation).
3. simulator: the simulator node of the Panda (7 DoF, rk4_implicit, 1 kHz steps, publishing joint states,
   wrench and /clock every step) running as fast as possible without a controller for ``SIM_SECONDS`` wall
   seconds: ``simulator_realtime_factor`` = simulated / wall time, ``..._per_cpu_second`` = simulated
   time / CPU time of the process (its stepping thread and the executor thread: what the node does with a
   core to itself; on the shared 2-core machine the wall figure mostly measures the other jobs); ``simulator_step_realtime_factor`` is
   the library's ``Simulator.step`` alone with the node's compiled whole step (rk4_implicit, one C call per
   step; ``..._python``: the Python step on the compiled ABA), ``..._explicit_rk4`` and
   ``..._semi_implicit_euler`` the same with the explicit integrators (best of 5 runs of 1000 steps each).
   The same node with ``engine: mujoco`` (when the mujoco package is installed): the keys with the suffix
   ``_mujoco`` (the step: MuJoCo's implicitfast step and the forward pass at the new state).
4. mpc: the ``mpc`` node (RTI, ``config/panda.yaml``: 100 Hz, N = 20, compiled, ``output: feedforward``)
   beside the simulator (1 kHz, real time), the estimator (decimation 10) and the inverse_dynamics node in
   mode ``mpc``, each its own process (simulator and controller SCHED_FIFO 50, the mpc node
   SCHED_FIFO 40: below the 1 kHz control path, above the estimator's normal priority). After the mpc node
   has built its functions (it serves gravity fallbacks meanwhile; ``mpc_node_ready_seconds``), its
   /diagnostics over ``MPC_SECONDS``: ``mpc_node_rate_hz`` (solves per wall second),
   ``mpc_node_fallbacks_per_1000`` (fallback solutions per 1 000 solves), and its ``~/solve_time``: the
   median, p99 and largest solve time, and the node's state -> solution latency (p50, p99, largest: the arrival of
   the joint state a solve started from to its solution published, over the node's last 10 000 solves). The
   node's ``rate`` is ``ROBODYN_BENCH_MPC_RATE`` (default the config's 100 Hz), its ``trigger``
   ``ROBODYN_BENCH_MPC_TRIGGER`` (default ``timer``; ``joint_state``: a solve on every joint state).
Measured figures and their dates: docs/PERFORMANCE.md.

Bounded: about 40-60 s including process start-up; child processes are stopped by SIGINT (killed by pid
if they overstay).
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

ID_SECONDS = 10.0
ESTIMATOR_SECONDS = 4.0
SIM_SECONDS = 3.0
MPC_SECONDS = 10.0
MPC_PRIORITY = 40
RATE = 1000
START_TIMEOUT = 90.0
RT_PRIORITY = 50


def _now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def set_fifo(priority=RT_PRIORITY):
    """Ask for SCHED_FIFO ``priority`` for the calling process; True when granted."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (PermissionError, OSError, AttributeError):
        return False


def set_other():
    """Back to SCHED_OTHER (a child inherits its parent's SCHED_FIFO)."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (PermissionError, OSError, AttributeError):
        pass


def node_process_args(kind, params, robot="panda", log_level="warn"):
    """The argv and environment of ``robodyn node kind`` as a child process: ``config/<robot>.yaml`` as
    params file, every ``params`` item as ``-p name:=value``, this checkout first on PYTHONPATH and one
    OpenBLAS thread (the nodes are single-threaded; a BLAS thread pool per process oversubscribes 2 cores).
    Returns ``(argv, env)``; the one definition used by ``bench nodes``, ``bench soak`` and the process tests."""
    from ..ros.launch_description_data import config_file

    args = [sys.executable, "-m", "robodyn_ros.ros.node_main", kind, "--ros-args", "--params-file",
            config_file(robot)]
    if log_level:
        args += ["--log-level", log_level]
    for name, value in params.items():
        args += ["-p", f"{name}:={value}"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1")
    return args, env


def start_node_process(kind, params, realtime=None, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       robot="panda", log_level="warn"):
    """``subprocess.Popen`` of :func:`node_process_args`; ``realtime`` True asks the child for SCHED_FIFO
    ``RT_PRIORITY``, an int for SCHED_FIFO at that priority, False puts it to SCHED_OTHER (it would inherit a
    FIFO parent's policy), None leaves the inherited policy. Text mode (a pipe's output is ``str``)."""
    args, env = node_process_args(kind, params, robot, log_level)
    if realtime is None:
        preexec = None
    elif realtime is False:
        preexec = set_other
    else:
        preexec = functools.partial(set_fifo, RT_PRIORITY if realtime is True else int(realtime))
    return subprocess.Popen(args, env=env, stdout=stdout, stderr=stderr, text=True, preexec_fn=preexec)


def _start_node(kind, params):
    return start_node_process(kind, params, realtime=True)


def stop_node_process(proc, timeout=15.0):
    """SIGINT (the node shuts down cleanly), SIGKILL after ``timeout`` s; returns ``(exit code, output)``,
    what it wrote to its pipes (stdout, then stderr; "" without pipes). Reads the pipes while waiting, so a
    chatty node cannot block on a full pipe."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return proc.returncode, (out or "") + (err or "")


def close_monitor(executor, node, procs):
    """The end of a bench that watched node processes: its monitoring ``node`` off ``executor``, both shut
    down, every process of ``procs`` (a dict) stopped (:func:`stop_node_process`)."""
    executor.remove_node(node)
    node.destroy_node()
    executor.shutdown()
    for proc in procs.values():
        stop_node_process(proc)


def _diagnostic_values(msg, name_part):
    for status in msg.status:
        if name_part in status.name:
            return {kv.key: kv.value for kv in status.values}
    return None


class _Driver:
    """This process's side: a 1 kHz publisher thread and subscriptions to the node's answers."""

    def __init__(self, context, with_wrench):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from ..ros import messages as rm
        from ..ros import qos
        from ..ros.testing import plain_node

        self.node = plain_node("bench_driver", context)
        self.joint_pub = self.node.create_publisher(JointState, "/joint_states", qos.JOINT_STATE_OUTPUT_QOS)
        self.wrench_pub = self.node.create_publisher(WrenchStamped, "/force_torque_sensor_broadcaster/wrench",
                                                     qos.WRENCH_OUTPUT_QOS) if with_wrench else None
        self.round_trip = []
        self.commands = 0
        self.counting = False
        self.diagnostics = {}
        self.node.create_subscription(Float64MultiArray, "/effort_controller/commands", self._on_command,
                                      qos.COMMAND_QOS)
        self.node.create_subscription(Float64MultiArray, "/inverse_dynamics/tracking_error", self._on_error,
                                      qos.ESTIMATE_QOS)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.rm = rm
        self.sent = 0
        self.count_start_ns = 1 << 62

    def _on_command(self, msg):
        if self.counting:
            self.commands += 1

    def _on_error(self, msg):
        now = _now_ns()
        sent = int(round(msg.data[0] * 1e9))
        if self.counting and sent >= self.count_start_ns:   # an answer to a counted state
            self.round_trip.append(now - sent)

    def _on_diagnostics(self, msg):
        for status in msg.status:
            self.diagnostics[status.name.split(":")[0]] = {kv.key: kv.value for kv in status.values}

    def publish_loop(self, seconds, stop, count=True):
        """Publish at RATE for ``seconds`` (stamp = monotonic send time); counts when ``count``."""
        joints = [f"panda_joint{i}" for i in range(1, 8)]
        q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
        v, tau = np.zeros(7), np.linspace(-1.0, 1.0, 7)
        wrench = np.array([0.0, 0.0, 19.6, 0.0, 0.0, 0.0])
        period = 1_000_000_000 // RATE
        next_ns = _now_ns()
        end_ns = next_ns + int(seconds * 1e9)
        k = 0
        while not stop.is_set() and next_ns < end_ns:
            while (wait := next_ns - _now_ns()) > 0:
                time.sleep(wait / 1e9 if wait > 200_000 else 0)
            t = _now_ns() * 1e-9
            q_k = q + 0.01 * np.sin(2.0 * t)
            self.joint_pub.publish(self.rm.make_joint_state(t, joints, q_k, v + 0.02 * np.cos(2.0 * t), tau))
            if self.wrench_pub is not None:
                self.wrench_pub.publish(self.rm.array_to_wrench_stamped(t, "panda_link8", wrench))
            k += 1
            next_ns += period
        if count:
            self.sent += k


def _run_phase(context, kind, params, seconds, with_wrench, ready):
    """Start node ``kind`` in a child process, wait for ``ready(driver)``, warm up 1 s, publish for
    ``seconds``; returns the driver (its counters) and the child's stderr tail."""
    from ..ros.testing import make_executor, spin_until

    proc = _start_node(kind, params)
    driver = _Driver(context, with_wrench)
    executor = make_executor("events", context)
    executor.add_node(driver.node)
    stop = threading.Event()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        warm = threading.Thread(target=driver.publish_loop, args=(START_TIMEOUT, stop, False))
        warm.start()   # keep publishing until the node answers (it configures for a few seconds)
        if not spin_until(executor, lambda: ready(driver) or proc.poll() is not None,
                          max(1.0, deadline - time.monotonic())) or proc.poll() is not None:
            raise RuntimeError(f"node {kind} did not start: {proc.stderr.read()[-1500:] if proc.poll() is not None else 'timeout'}")
        spin_until(executor, lambda: False, 1.0)
        stop.set()
        warm.join()
        stop.clear()
        driver.counting = True
        driver.count_start_ns = _now_ns()
        publisher = threading.Thread(target=driver.publish_loop, args=(seconds, stop))
        publisher.start()
        spin_until(executor, lambda: not publisher.is_alive(), seconds + 10.0)
        publisher.join()
        spin_until(executor, lambda: False, 1.5)   # late answers and one more diagnostics message
        driver.counting = False
    finally:
        stop.set()
        executor.remove_node(driver.node)
        driver.node.destroy_node()
        executor.shutdown()
        stop_node_process(proc)
    return driver


def _percentile_ms(values_ns, p):
    return round(float(np.percentile(np.asarray(values_ns) / 1e6, p)), 3) if len(values_ns) else None


def bench_inverse_dynamics(context):
    params = {"reference": "hold", "state_timeout": 0.5, "use_estimates": False}
    driver = _run_phase(context, "inverse_dynamics", params, ID_SECONDS, False,
                        lambda d: len(d.diagnostics.get("inverse_dynamics", {})) > 0 or d.commands > 0)
    diag = driver.diagnostics.get("inverse_dynamics", {})
    return {
        "id_node_p99_latency_ms": round(float(diag.get("latency_p99_us", "nan")) / 1e3, 3),
        "id_node_p50_latency_ms": round(float(diag.get("latency_p50_us", "nan")) / 1e3, 3),
        "id_node_max_latency_ms": round(float(diag.get("latency_max_us", "nan")) / 1e3, 3),
        "id_node_dropped": int(driver.sent - len(driver.round_trip)),
        "id_commands_received": int(driver.commands),
        "id_states_sent": int(driver.sent),
        "id_loop_round_trip_p50_ms": _percentile_ms(driver.round_trip, 50),
        "id_loop_round_trip_p99_ms": _percentile_ms(driver.round_trip, 99),
    }


def bench_estimator(context, decimation):
    params = {"decimation": decimation, "publish_rate": 10.0}
    driver = _run_phase(context, "estimator", params, ESTIMATOR_SECONDS, True,
                        lambda d: "estimator" in d.diagnostics)
    diag = driver.diagnostics.get("estimator", {})
    rate = float(diag.get("update_rate_hz", "nan"))
    return rate


def bench_simulator(context, engine="robodyn"):
    """Section 3 of the module docstring for one ``engine``: the node's real-time factor (keys with the
    suffix ``_mujoco`` for MuJoCo) and the library step's."""
    from ..control.kernel_dynamics import KernelDynamics
    from ..ros.bringup import Bringup
    from ..ros.launch_description_data import NodeEntry, config_file
    from ..ros.node_main import bring_up

    entry = NodeEntry("simulator", "simulator", "simulator")
    with Bringup([entry], context, config_file("panda"),
                 overrides={"simulator": {"real_time_factor": 0.0, "lockstep": False, "payload.mass": 0.0,
                                          "command_timeout": 1e6, "engine": engine}}) as up:
        node = up.nodes["simulator"]
        node.trigger_configure()
        # hold the arm with its gravity torque: under zero torque it falls into the joint-limit stops
        model = node.robot.model
        node.runtime.command = KernelDynamics(model, node.kernels).gravity(node.sim.q, model.inertial_parameters())
        if not bring_up(node):
            raise RuntimeError("simulator did not configure")
        up.spin_until(lambda: node.sim.t > 0.05, 30.0)
        t0, wall0, cpu0 = node.sim.t, time.monotonic(), time.process_time()
        up.spin_until(lambda: False, SIM_SECONDS)
        node_factor = (node.sim.t - t0) / (time.monotonic() - wall0)
        node_cpu_factor = (node.sim.t - t0) / (time.process_time() - cpu0)
        steps = node.steps
        from dataclasses import replace

        from ..simulation.simulator import Simulator
        from ..simulation.simulation_step import CompiledStep
        tau = KernelDynamics(model, node.kernels).gravity(node.robot.home, model.inertial_parameters())
        factors = {}
        if engine == "mujoco":
            from ..simulation.mujoco_engine import MujocoEngine   # its own: the node's steps in its thread
            sim = Simulator(model, node.sim.config, node.robot.home, step_function=MujocoEngine(model))
            factors["mujoco"] = round(_steps_per_real_second(sim, tau), 2)
        else:
            for integrator in ("rk4_implicit", "rk4", "semi_implicit_euler"):
                config = replace(node.sim.config, integrator=integrator)
                for name, step_function in (("python", None), ("compiled", CompiledStep(model, integrator))):
                    sim = Simulator(model, config, node.robot.home, forward_dynamics=node.runtime.robot_dynamics,
                                    step_function=step_function)
                    factors[integrator, name] = round(_steps_per_real_second(sim, tau), 2)
    if engine == "mujoco":
        return {"simulator_realtime_factor_mujoco": round(node_factor, 2),
                "simulator_realtime_factor_per_cpu_second_mujoco": round(node_cpu_factor, 2),
                "simulator_step_realtime_factor_mujoco": factors["mujoco"],
                "simulator_steps_mujoco": steps}
    return {"simulator_realtime_factor": round(node_factor, 2),
            "simulator_realtime_factor_per_cpu_second": round(node_cpu_factor, 2),
            "simulator_compiled_step": node.sim.step_function is not None,
            "simulator_step_realtime_factor": factors["rk4_implicit", "compiled"],
            "simulator_step_realtime_factor_python": factors["rk4_implicit", "python"],
            "simulator_step_realtime_factor_explicit_rk4": factors["rk4", "compiled"],
            "simulator_step_realtime_factor_explicit_rk4_python": factors["rk4", "python"],
            "simulator_step_realtime_factor_semi_implicit_euler": factors["semi_implicit_euler", "compiled"],
            "simulator_step_realtime_factor_semi_implicit_euler_python": factors["semi_implicit_euler", "python"],
            "simulator_steps": steps}


def bench_mpc_node(context):
    """Section 4 of the module docstring: the rate and fallbacks of the mpc node beside the others."""
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import Float64

    from ..ros.testing import make_executor, plain_node, spin_until

    def start(kind, params, priority):
        args, env = node_process_args(kind, params)
        preexec = (lambda: set_fifo(priority)) if priority else set_other
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=preexec)

    procs = {}
    node = plain_node("bench_mpc_monitor", context)
    seen = []                                       # (monotonic time, values) of the mpc node's diagnostics

    def on_diagnostics(msg):
        values = _diagnostic_values(msg, "model predictive control")
        if values is not None:
            seen.append((time.monotonic(), values))
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    solve_times = []                                # s, every solve's (the node's ~/solve_time)
    node.create_subscription(Float64, "/mpc/solve_time", lambda msg: solve_times.append(msg.data), 1000)
    executor = make_executor("events", context)
    executor.add_node(node)
    start_wall = time.monotonic()
    try:
        procs["simulator"] = start("simulator", {"real_time_factor": 1.0, "rate": float(RATE)}, RT_PRIORITY)
        procs["estimator"] = start("estimator", {"decimation": 10}, None)
        procs["inverse_dynamics"] = start("inverse_dynamics", {"mode": "mpc"}, RT_PRIORITY)
        rate, trigger = os.environ.get("ROBODYN_BENCH_MPC_RATE"), os.environ.get("ROBODYN_BENCH_MPC_TRIGGER")
        procs["mpc"] = start("mpc", {**({"rate": float(rate)} if rate else {}),
                                     **({"trigger": trigger} if trigger else {})}, MPC_PRIORITY)

        def ready():
            return bool(seen) and seen[-1][1].get("solver_status") != "building"
        if not spin_until(executor, lambda: ready() or any(p.poll() is not None for p in procs.values()),
                          START_TIMEOUT + 120.0) or not ready():
            dead = [k for k, p in procs.items() if p.poll() is not None]
            raise RuntimeError(f"mpc node not solving (exited: {dead or 'none'})")
        ready_seconds = time.monotonic() - start_wall
        spin_until(executor, lambda: False, 1.0)                         # settle
        first = seen[-1]
        times_from = len(solve_times)
        spin_until(executor, lambda: False, MPC_SECONDS)
        last = seen[-1]
        window = [1e3 * x for x in solve_times[times_from:]]
        solves = int(last[1]["solves"]) - int(first[1]["solves"])
        fallbacks = int(last[1]["fallbacks"]) - int(first[1]["fallbacks"])
        alive = all(p.poll() is None for p in procs.values())
    finally:
        close_monitor(executor, node, procs)
    latency = {f"mpc_node_state_to_solution_{p}_ms": round(float(last[1][f"state_to_solution_{p}_us"]) / 1e3, 3)
               for p in ("p50", "p99", "max") if f"state_to_solution_{p}_us" in last[1]}
    return {"mpc_node_rate_setting_hz": float(rate) if rate else None, "mpc_node_trigger": trigger or "timer",
            **latency,
            "mpc_node_rate_hz": round(solves / (last[0] - first[0]), 1),
            "mpc_node_fallbacks_per_1000": round(1000.0 * fallbacks / max(solves, 1), 2),
            "mpc_node_solves": solves, "mpc_node_fallbacks": fallbacks,
            "mpc_node_solve_time_median_ms": round(float(np.nanmedian(window)), 3) if window else None,
            "mpc_node_solve_time_p99_ms": round(float(np.nanpercentile(window, 99)), 3) if window else None,
            "mpc_node_solve_time_max_ms": round(float(np.nanmax(window)), 3) if window else None,
            "mpc_node_ready_seconds": round(ready_seconds, 1), "mpc_node_processes_alive": alive}


def _steps_per_real_second(sim, tau, steps=1000, repeats=5):
    """Simulated seconds per wall second of ``sim.step`` (best of ``repeats`` runs of ``steps``, as timeit
    does: the other runs measure the machine's other jobs)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(tau)
        best = min(best, time.perf_counter() - start)
    return steps * sim.config.dt / best


def mujoco_available():
    from ..model.errors import ModelError
    from ..simulation.mujoco_engine import import_mujoco
    try:
        import_mujoco()
    except ModelError:
        return False
    return True


def run(json=False):
    """All three measurements; returns the dict (prints a table unless ``json``)."""
    from ..ros.testing import init_context, isolated_ros_domain

    realtime = set_fifo()
    result = {"rate_hz": RATE, "realtime": realtime, "load_average_1min_start": round(os.getloadavg()[0], 2)}
    with isolated_ros_domain() as domain_id:
        context = init_context(domain_id)
        try:
            result.update(bench_inverse_dynamics(context))
            for decimation in (1, 5):
                rate = bench_estimator(context, decimation)
                result[f"estimator_rate_hz_decimation_{decimation}"] = round(rate, 1)
                result[f"estimator_keeps_up_decimation_{decimation}"] = bool(rate >= 0.95 * RATE / decimation)
            result["estimator_rate_hz"] = max(result["estimator_rate_hz_decimation_1"],
                                              result["estimator_rate_hz_decimation_5"])
            result.update(bench_simulator(context))
            if mujoco_available():
                result.update(bench_simulator(context, "mujoco"))
            if "--no-mpc" not in sys.argv:
                result.update(bench_mpc_node(context))
        finally:
            context.try_shutdown()
    result["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    if not json:
        width = max(len(k) for k in result)
        for key, value in result.items():
            print(f"{key:{width}s}  {value}")
    return result


if __name__ == "__main__":
    out = run(json="--json" in sys.argv)
    if "--json" in sys.argv:
        import json as _json
        print(_json.dumps(out))
