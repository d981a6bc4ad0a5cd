"""``robodyn bench soak``: simulator, estimator and inverse_dynamics at 1 kHz for a long run.

Three node processes (``robodyn node ...`` with ``config/panda.yaml``, started as in
:mod:`robodyn_ros.benchmarks.nodes`) in an isolated ROS domain:

* ``simulator``: Panda, RK4, 1 kHz, ``real_time_factor`` 1.0; the config's 2 kg payload is attached at
  simulated ``PAYLOAD_ATTACH_TIME`` = 5 s (``payload.attach_time``) so the estimator has something to learn;
* ``inverse_dynamics``: computed torque on the config's generator reference, using the estimator's payload;
* ``estimator``: payload (wrist wrench) and base parameters (joint torques), decimation 10 (100 updates/s;
  ``NODE_PARAMS``; why 10: docs/SOAK.md).

The simulator and the controller ask for SCHED_FIFO 50 (the control path, as in ``bench nodes``); the
estimator SCHED_FIFO 30, below the control path and the monitor (an estimator that cannot keep up with 1 kHz
on a 2-core machine must not starve the control path) but ahead of the machine's other work: as SCHED_OTHER,
beside a second test worker on the 2 cores, it got 15-20 % of a core, ran 15 of its 100 updates a second and
never finished its effort check, so it published no base parameters in 20 s. This process runs
the monitor node (:class:`~robodyn_ros.benchmarks.soak_monitor.SoakMonitor`, SCHED_FIFO 40 when granted) on an
EventsExecutor, subscribed to ``/joint_states``, ``/effort_controller/commands``,
``/inverse_dynamics/tracking_error`` (published right after each command, carrying the state's stamp),
``/estimator/payload``, ``/estimator/base_parameters`` and ``/diagnostics``.

Per window (``window_seconds``, 60 s for the 30-minute run) it records
(:func:`~robodyn_ros.benchmarks.soak_report.window_record`): joint states received by the monitor vs.
expected (by wall time at 1 kHz and by the span of their stamps; the difference of the two is the simulator
falling behind real time, the stamp gaps are transport drops), states the controller answered, commands
received, NaN / |tau| > effort-limit commands, the controller latency (state callback -> command published,
p50/p99/max from the node's /diagnostics: a rolling window of its last 10 000 states, averaged over the
diagnostics messages of the window; max is the max), the monitor's round trip (joint state received here ->
the controller's answer to that stamp received here: two DDS hops plus the controller), the RSS of every
process and whether a node process exited, the largest |q - q_d| of the controller's tracking errors and the
estimator's payload mass; the CPU use of the three nodes and of the monitor (this process, all its threads:
DDS included) in % of one core, the machine's idle fraction and the monitor's CPU per message it received
(:mod:`robodyn_ros.benchmarks.process_stats`).

Verdict (:func:`~robodyn_ros.benchmarks.soak_report.verdict`):
1. ``no_bad_torques``: zero commands with a NaN or |tau_i| > effort_limit_i over the whole run;
2. ``no_crashes``: every node process still running at the end;
3. ``memory_growth``: each node's RSS growth from the first window after warm-up to the last window
   below ``memory_growth_limit`` (5 %); beside it (information, not tolerance) every window's growth from
   that first window, and the growth and RSS slope after a longer memory warm-up;
4. ``latency_no_worse``: the controller's p99 (node diagnostics) averaged over the last ``3`` windows is no
   worse than averaged over the first 3 windows after warm-up, up to ``latency_tolerance`` (20 %: the
   window-to-window spread of p99 on a shared 2-core machine; the strict comparison is reported too).

Usage: ``robodyn bench soak --minutes 30 --report soak_report.json`` (docs/SOAK.md);
``python -m robodyn_ros.benchmarks.soak 2 --report r.json --markdown`` (the table for docs/SOAK.md;
``--typed-monitor``: the deserialising monitor); ``run(minutes=...)`` from Python.
"""
from __future__ import annotations

import json as _json
import os
import platform
import sys
import tempfile
import time

import numpy as np

from .nodes import set_fifo, start_node_process, stop_node_process
from .process_stats import CLOCK_TICKS, CpuSampler, is_realtime
from .soak_monitor import FAST_DEPTH, POLL_SECONDS, RATE, SoakMonitor
from .soak_report import NODE_KINDS, cpu_summary, format_row, markdown_table, verdict, window_record

PAYLOAD_ATTACH_TIME = 5.0
PAYLOAD_MASS = 2.0         # kg, config/panda.yaml's payload
START_TIMEOUT = 240.0
MONITOR_PRIORITY = 40
PRIORITIES = {"simulator": True, "inverse_dynamics": True, "estimator": 30}   # SCHED_FIFO (True: RT_PRIORITY)
NODE_PARAMS = {
    "simulator": {"real_time_factor": 1.0, "rate": float(RATE), "payload.attach_time": PAYLOAD_ATTACH_TIME},
    "estimator": {"decimation": 10},   # every 10th joint state: 100 updates/s
    "inverse_dynamics": {},
}
_TOTALS = {"nan": "nan_commands", "over_limit": "over_limit_commands", "states": "states_received",
           "commands": "commands_received", "answers": "answers_received"}


def _start_node(kind, params, log_path, realtime):
    """``robodyn node kind`` as a child process (:func:`.nodes.start_node_process`); stderr to ``log_path``
    (a pipe would fill up and block the node over a long run). ``realtime``: True (SCHED_FIFO ``RT_PRIORITY``),
    a SCHED_FIFO priority, or False (back to SCHED_OTHER: it would inherit this process's SCHED_FIFO)."""
    with open(log_path, "w") as log:
        return start_node_process(kind, params, realtime=realtime, stderr=log)


def _tail(path, chars=1500):
    try:
        with open(path) as f:
            return f.read()[-chars:]
    except OSError:
        return ""


def _effort_limits_command_order():
    """The Panda's effort limits (7,) in command order (config's joints = the arm joints in chain order)."""
    from ..model.model import Model
    from ..robots import bundled_robot_info

    info = bundled_robot_info("panda")
    model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    return np.array([model.effort_limit[model.joint_names.index(j)] for j in info["arm_joints"]])


def _report_header(minutes, window_seconds, warmup_seconds, memory_warmup_seconds, monitor_mode, realtime):
    """The report's fields known before the nodes start: the run's settings and the machine."""
    return {
        "minutes": minutes, "rate_hz": RATE, "window_seconds": window_seconds,
        "warmup_seconds": warmup_seconds, "memory_warmup_seconds": memory_warmup_seconds,
        "monitor_mode": monitor_mode, "monitor_poll_seconds": POLL_SECONDS, "monitor_fast_depth": FAST_DEPTH,
        "cpu_clock_ticks_per_s": CLOCK_TICKS, "payload_attach_time_s": PAYLOAD_ATTACH_TIME,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release(),
                    "load_average_start": [round(x, 2) for x in os.getloadavg()]},
        "monitor_realtime": realtime, "node_params": NODE_PARAMS,
    }


def _start_nodes(monitor, executor, procs, logs):
    """Start the three nodes into ``procs``: controller and estimator first, the simulator once the
    controller is active (a simulator that steps before anyone commands it applies zero torque and the arm
    falls into its joint-limit stops). Returns the start-up fields of the report; RuntimeError with the
    nodes' log tails if they do not come up within ``START_TIMEOUT``."""
    t_launch = time.monotonic()
    exited = lambda: any(p.poll() is not None for p in procs.values())   # noqa: E731
    for kind in ("inverse_dynamics", "estimator"):
        procs[kind] = _start_node(kind, NODE_PARAMS[kind], logs[kind], PRIORITIES[kind])
    ready = monitor.spin_until(executor, lambda: "inverse_dynamics" in monitor.diagnostics or exited(),
                               START_TIMEOUT)
    if ready and not exited():
        procs["simulator"] = _start_node("simulator", NODE_PARAMS["simulator"], logs["simulator"],
                                         PRIORITIES["simulator"])
        ready = monitor.spin_until(executor, lambda: ("estimator" in monitor.diagnostics and monitor.w_commands > 100)
                                   or exited(), START_TIMEOUT)
    dead = {k: p.returncode for k, p in procs.items() if p.poll() is not None}
    if not ready or dead:
        raise RuntimeError(f"nodes did not come up in {START_TIMEOUT:.0f} s (exited: {dead}); logs: "
                           + "; ".join(f"{k}: {_tail(v, 600)}" for k, v in logs.items()))
    return {"startup_seconds": round(time.monotonic() - t_launch, 1),
            "realtime_granted": {k: is_realtime(p.pid) for k, p in procs.items()}}


def _measure(monitor, executor, procs, logs, total, window_seconds, warmup_seconds, windows, exits, echo):
    """Spin ``monitor`` through ``total`` seconds in windows, appending a record per window to ``windows``
    and each node's exit to ``exits``; ``echo`` prints a row per window."""
    monitor.reset_window()
    monitor.sent_ns.clear()
    sampler = CpuSampler({**{k: procs[k].pid for k in NODE_KINDS}, "monitor": os.getpid()})
    t0 = time.monotonic()
    for index in range(max(1, int(round(total / window_seconds)))):
        t_start = time.monotonic() - t0
        monitor.spin_for(executor, t0 + (index + 1) * window_seconds - time.monotonic())
        t_end = time.monotonic() - t0
        cpu = sampler.sample()
        unanswered = monitor.prune(monitor.clock_ns() - 500_000_000)   # older than 0.5 s
        rec = window_record(index, t_start, t_end, monitor, procs, unanswered,
                            warmup=t_start < warmup_seconds - 1e-6, cpu=cpu)   # began inside the warm-up
        for kind, alive in rec["alive"].items():
            if not alive and kind not in exits:
                exits[kind] = {"returncode": procs[kind].returncode, "window": index, "log_tail": _tail(logs[kind])}
        for key, field in _TOTALS.items():
            monitor.total[key] += rec[field]
        windows.append(rec)
        if echo:
            print(format_row(rec), flush=True)
        monitor.reset_window()


def _end_state(monitor, executor):
    """The estimator's state at the end (after one more second: a diagnostics and a payload message) and the
    nodes' last diagnostics."""
    monitor.spin_for(executor, 1.0)
    payload = monitor.payload
    return {
        "estimator_end": {
            "payload_estimate": payload, "payload_true_mass": PAYLOAD_MASS,
            "payload_mass_error": round(payload["mass"] - PAYLOAD_MASS, 4) if payload else None,
            "base_parameter_count": monitor.base_parameters["count"] if monitor.base_parameters else None,
            "diagnostics": monitor.diagnostics.get("estimator"),
        },
        "inverse_dynamics_end_diagnostics": monitor.diagnostics.get("inverse_dynamics"),
        "simulator_end_diagnostics": monitor.diagnostics.get("simulator"),
        "bad_command_examples": monitor.bad_examples,
        "totals": dict(monitor.total),
    }


def _shut_down(procs, logs, windows, exits, executor, monitor, context):
    """Stop the node processes (recording an exit not yet seen), the executor, the monitor and the context."""
    for kind, p in procs.items():
        if p.poll() is not None and kind not in exits and windows:
            exits[kind] = {"returncode": p.returncode, "window": len(windows), "log_tail": _tail(logs[kind])}
        stop_node_process(p)
    if executor is not None:
        if monitor is not None:
            executor.remove_node(monitor.node)
        executor.shutdown()
    if monitor is not None:
        monitor.destroy()
    context.try_shutdown()


def _print_summary(result):
    """The verdict, the memory information and the CPU summary, for the console."""
    v = result["verdict"]
    for name in ("no_bad_torques", "no_crashes", "memory_growth", "latency_no_worse"):
        print(f"{name:18s} {'PASS' if v[name]['pass'] else 'FAIL'}  "
              + ", ".join(f"{k}={val}" for k, val in v[name].items() if k != "pass" and not isinstance(val, dict)))
    info = v["memory_growth"]["information"]
    print(f"{'':18s} after the memory warm-up ({result['memory_warmup_seconds']:.0f} s, from window "
          f"{info['from_window_after_memory_warmup']}): growth {info['growth_after_memory_warmup']}, "
          f"slope KiB/min {info['rss_slope_kib_per_min_after_memory_warmup']}")
    print(f"cpu (mean % of one core over the measured windows): {result['cpu_summary']}")
    print(f"verdict: {'PASS' if v['pass'] else 'FAIL'}")


def run(minutes=30, json=False, report=None, window_seconds=None, warmup_seconds=None,
        memory_growth_limit=0.05, latency_tolerance=0.20, memory_warmup_seconds=None, monitor_mode="poll"):
    """Soak for ``minutes`` (after the nodes are up); returns the report dict, writes it to ``report`` (a
    path) when given, prints a table unless ``json``. Windows default to min(60 s, run / 10), warm-up to
    min(60 s, run / 5), the memory warm-up (information beside the memory rule, see
    :func:`~robodyn_ros.benchmarks.soak_report.memory_growth_details`) to min(300 s, run / 3).
    ``monitor_mode`` "typed": the monitor deserialises the 1 kHz topics in executor callbacks (to measure its
    cost, see :class:`~robodyn_ros.benchmarks.soak_monitor.SoakMonitor`)."""
    from ..ros.testing import init_context, isolated_ros_domain, make_executor

    total = float(minutes) * 60.0
    window_seconds = float(window_seconds or min(60.0, total / 10.0))
    warmup_seconds = float(warmup_seconds if warmup_seconds is not None else min(60.0, total / 5.0))
    memory_warmup_seconds = float(memory_warmup_seconds if memory_warmup_seconds is not None
                                  else min(300.0, total / 3.0))
    result = _report_header(minutes, window_seconds, warmup_seconds, memory_warmup_seconds, monitor_mode,
                            set_fifo(MONITOR_PRIORITY))
    effort_limit = _effort_limits_command_order()
    result["effort_limit"] = effort_limit.tolist()
    log_dir = tempfile.mkdtemp(prefix="robodyn_soak_")
    logs = {kind: os.path.join(log_dir, f"{kind}.log") for kind in NODE_KINDS}
    procs, windows, exits = {}, [], {}
    with isolated_ros_domain() as domain_id:
        result["ros_domain_id"] = domain_id
        context = init_context(domain_id)
        monitor = executor = None
        try:
            monitor = SoakMonitor(context, effort_limit, mode=monitor_mode)
            executor = make_executor("events", context)
            executor.add_node(monitor.node)
            result.update(_start_nodes(monitor, executor, procs, logs))
            _measure(monitor, executor, procs, logs, total, window_seconds, warmup_seconds, windows, exits,
                     echo=not json)
            result.update(_end_state(monitor, executor))
        finally:
            _shut_down(procs, logs, windows, exits, executor, monitor, context)
    result["windows"] = windows
    result["node_exits"] = exits
    result["node_log_tails"] = {k: _tail(v, 800) for k, v in logs.items()}
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["verdict"] = verdict(windows, exits, memory_growth_limit, latency_tolerance,
                                memory_warmup_seconds=memory_warmup_seconds)
    result["cpu_summary"] = cpu_summary(windows)
    if report:
        with open(report, "w") as f:
            _json.dump(result, f, indent=1)
            f.write("\n")
    if not json:
        _print_summary(result)
    return result


if __name__ == "__main__":
    argv = sys.argv[1:]
    report_path = argv[argv.index("--report") + 1] if "--report" in argv else None
    out = run(minutes=float(argv[0]) if argv and not argv[0].startswith("-") else 30,
              json="--json" in argv, report=report_path, monitor_mode="typed" if "--typed-monitor" in argv else "poll")
    if "--json" in argv:
        print(_json.dumps(out))
    if "--markdown" in argv:
        print(markdown_table(out))
