"""``robodyn bench disturbance``: how the ``mpc`` node rejects a disturbance, solving on a 100-Hz timer against
solving on the joint states, over real DDS in an isolated ROS domain.

Each run starts three processes with ``config/panda.yaml``: the ``simulator`` (1 kHz, real time, its sensor
noise, the plant below), the ``estimator`` (decimation 10; its payload estimate reaches the MPC's model) and the
``mpc`` node (RTI, N = 20, ``output: commands``: it commands the robot itself), either ``trigger: timer`` at
``rate: 100`` or ``trigger: joint_state`` at ``rate: 1000`` (every joint state it gets to; on two cores beside
the others about 500 a second: ``robodyn bench nodes``). At ``DISTURBANCE_TIME`` simulated seconds, long after
the MPC is built, one of:

- ``payload``: a 2-kg box attached at the wrist (the simulator's ``payload.attach_time``), unknown to the MPC
  until the estimator finds it;
- ``push``: ``PUSH_TORQUE`` N m on the elbow (panda_joint4) for 0.1 s (``push.*``: the joint torque of
  a force on the links, not in the reported effort).

The plants: the Panda twin (identified from a real Panda's log, with its joint-torque noise) and two perturbed
Pandas (``perturbed:1``, ``perturbed:2``: :mod:`robodyn_ros.simulation.perturbed_plant`), none of them the
MPC's model. This process records the joint states; the tracking error is ``e(t) = max_j |q_j - q_d,j(t)|``
against the node's reference (its time origin from the node's diagnostics). Reported per plant, disturbance
and trigger (:func:`disturbance_response`): ``undisturbed_mrad``, the largest error over the same window one
reference period earlier (the same reference phase, no disturbance yet); ``peak_mrad``, the largest error in
the ``WINDOW`` s from the disturbance; ``recovery_s``, from the disturbance to the last time the error exceeds
twice the undisturbed level (None: still above at the window's end); and the node's solves per second.

What it cannot show: a real robot's delays (its driver, its network) and pushes that are not joint torques.
Bounded: about 21 s a run, 12 runs.
"""
from __future__ import annotations

import os
import time

import numpy as np

PLANTS = ("panda_twin", "perturbed:1", "perturbed:2")
DISTURBANCES = ("payload", "push")
TRIGGERS = (("timer", 100.0), ("joint_state", 500.0))
DISTURBANCE_TIME = 14.0          # simulated s: after the MPC's build and 3 reference periods
WINDOW = 3.0                     # s after the disturbance
PUSH_JOINT, PUSH_TORQUE, PUSH_DURATION = 3, 50.0, 0.1
PAYLOAD_MASS = 2.0
START_TIMEOUT = 120.0


def disturbance_response(t, e, t_disturbance, period, window=WINDOW):
    """``(undisturbed, peak, recovery)`` of the tracking error ``e`` (n,) at times ``t`` (n,), s: ``undisturbed``
    the largest error over ``[t_d - period, t_d - period + window)`` (the same reference phase one period
    earlier), ``peak`` the largest over ``[t_d, t_d + window)``, ``recovery`` the time from ``t_d`` to the last
    sample in that window above ``2 undisturbed`` (0 when none is; None when the window's last sample still
    is). ValueError when either window has no samples."""
    t, e = np.asarray(t, dtype=float), np.asarray(e, dtype=float)
    before = (t >= t_disturbance - period) & (t < t_disturbance - period + window)
    after = (t >= t_disturbance) & (t < t_disturbance + window)
    if not before.any() or not after.any():
        raise ValueError(f"no joint states in the windows around t = {t_disturbance} s")
    undisturbed, peak = float(e[before].max()), float(e[after].max())
    above = np.flatnonzero(e[after] > 2.0 * undisturbed)
    if above.size == 0:
        return undisturbed, peak, 0.0
    if above[-1] == after.sum() - 1:
        return undisturbed, peak, None
    return undisturbed, peak, float(t[after][above[-1]] - t_disturbance)


def _simulator_params(plant, disturbance):
    params = {"real_time_factor": 1.0, "plant": plant, "payload.mass": 0.0}
    if disturbance == "payload":
        params.update({"payload.mass": PAYLOAD_MASS, "payload.attach_time": DISTURBANCE_TIME})
    else:
        torque = [0.0] * 7
        torque[PUSH_JOINT] = PUSH_TORQUE
        params.update({"push.torque": str(torque), "push.time": DISTURBANCE_TIME, "push.duration": PUSH_DURATION})
    return params


def mpc_node_config():
    """The mpc node's parameters of ``config/panda.yaml``, as ``--params-file`` gives them to the node."""
    from ..ros.launch_description_data import config_file
    from ..ros.node_parameters import resolve_node_config
    from ..ros.parameters import load_params_yaml

    return resolve_node_config("mpc", load_params_yaml(config_file("panda"), "mpc"))


def build_mpc_functions():
    """Compile (or find in the cache) the mpc node's problem functions before the runs: a run's node then
    loads them in about a second, long before the disturbance."""
    from ..control.mpc.compile_cache import ocp_functions
    from ..control.mpc_loop import node_mpc_config
    from ..ros.node_parameters import load_robot

    config = mpc_node_config()
    ocp_functions(load_robot(config).model, node_mpc_config(config))


def run_case(context, plant, disturbance, trigger, rate):
    """One run (module docstring): a dict of its figures."""
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState

    from ..control.reference import fourier_reference, sample_reference
    from ..ros import qos
    from ..ros.node_parameters import load_robot
    from ..ros.entities import take_pending
    from ..ros.testing import make_executor, plain_node, spin_until
    from .nodes import RT_PRIORITY, _diagnostic_values, close_monitor, start_node_process

    def start(kind, params, priority):
        return start_node_process(kind, params, realtime=priority or False)

    config = mpc_node_config()
    robot = load_robot(config)
    names = list(robot.model.joint_names)
    node = plain_node("bench_disturbance", context)
    states, seen = [], []

    order = {}
    # polled at 20 Hz from a deep queue (robodyn's estimator does the same): a callback per state would make
    # this process a 1-kHz load beside the nodes it measures
    state_sub = node.create_subscription(JointState, "/joint_states", lambda msg: None, qos.POLLED_SENSOR_INPUT_QOS)
    node._subscriptions.remove(state_sub)         # served by take_states, not by the executor (polled_sub)

    def take_states():
        for msg in take_pending(state_sub, 1000):
            if "index" not in order:
                order["index"] = [list(msg.name).index(name) for name in names]
            states.append((msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                           np.asarray(msg.position)[order["index"]]))
    node.create_timer(0.05, take_states)

    def on_diagnostics(msg):
        values = _diagnostic_values(msg, "model predictive control")
        if values is not None:
            seen.append(values)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    executor = make_executor("events", context)
    executor.add_node(node)
    procs = {}
    try:
        procs["mpc"] = start("mpc", {"output": "commands", "trigger": trigger, "rate": rate, "state_timeout": 0.5},
                             RT_PRIORITY - 10)
        procs["estimator"] = start("estimator", {"decimation": 10}, None)
        procs["simulator"] = start("simulator", _simulator_params(plant, disturbance), RT_PRIORITY)

        def sim_time():
            return states[-1][0] if states else 0.0
        end = DISTURBANCE_TIME + WINDOW + 0.2
        if not spin_until(executor, lambda: sim_time() >= end or any(p.poll() is not None for p in procs.values()),
                          START_TIMEOUT + end) or sim_time() < end:
            dead = [k for k, p in procs.items() if p.poll() is not None]
            raise RuntimeError(f"{plant} {disturbance} {trigger}: the run stopped at t = {sim_time():.2f} s "
                               f"(exited: {dead or 'none'})")
        built = [v for v in seen if v.get("solver_status") not in ("building", None)]
        if not built:
            raise RuntimeError(f"{plant} {disturbance} {trigger}: the MPC was not built by the end of the run "
                               f"({len(seen)} diagnostics: {seen[-1:]})")
        last = built[-1]
    finally:
        close_monitor(executor, node, procs)
    t0 = float(last["reference_t0"])
    reference = fourier_reference(robot.home, config["generator.amplitude"], config["generator.period"],
                                  config["generator.harmonics"])
    t = np.array([s[0] for s in states])
    q = np.array([s[1] for s in states])
    q_d = sample_reference(reference, t - t0)[0]
    e = np.abs(q - q_d).max(axis=1)
    undisturbed, peak, recovery = disturbance_response(t, e, DISTURBANCE_TIME, config["generator.period"])
    return {"undisturbed_mrad": round(1e3 * undisturbed, 3), "peak_mrad": round(1e3 * peak, 3),
            "recovery_s": None if recovery is None else round(recovery, 3),
            "solves_per_s": round(float(last["solves"]) / max(t[-1] - t0, 1e-9), 1),
            "fallbacks": int(last["fallbacks"])}


def run(json=False):
    """Every plant, disturbance and trigger (module docstring); returns the dict (prints a table unless
    ``json``)."""
    from ..ros.testing import init_context, isolated_ros_domain
    from .nodes import set_fifo

    result = {"realtime": set_fifo(), "load_average_1min_start": round(os.getloadavg()[0], 2),
              "disturbance_time_s": DISTURBANCE_TIME, "window_s": WINDOW,
              "push": f"{PUSH_TORQUE} N m on joint {PUSH_JOINT + 1} for {PUSH_DURATION} s",
              "payload_kg": PAYLOAD_MASS}
    rows = []
    started = time.monotonic()
    build_mpc_functions()
    result["mpc_functions_ready_s"] = round(time.monotonic() - started, 1)
    with isolated_ros_domain() as domain_id:
        context = init_context(domain_id)
        try:
            for plant in PLANTS:
                for disturbance in DISTURBANCES:
                    for trigger, rate in TRIGGERS:
                        started = time.monotonic()
                        row = {"plant": plant, "disturbance": disturbance, "trigger": trigger, "rate": rate,
                               **run_case(context, plant, disturbance, trigger, rate),
                               "wall_s": round(time.monotonic() - started, 1)}
                        rows.append(row)
                        if not json:
                            print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        finally:
            context.try_shutdown()
    result["runs"] = {f"{row['plant']}.{row['disturbance']}.{row['trigger']}": row for row in rows}   # --record
    result["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    return result
