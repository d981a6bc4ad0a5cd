"""How much command delay the ``mpc`` node's loop tolerates: the loop of the node (``MpcLoop``, ``output:
commands``, the parameters of ``config/panda.yaml``) without ROS, on the simulator's runtime at 1 kHz, each
command reaching the robot ``d`` joint-state periods after its state (what a robot's driver, a busy core or a
ros2_control cycle adds). For each plant (the URDF itself, the Panda twin, perturbed Pandas), delay and trigger
(``timer`` at 100 Hz, ``joint_state`` at 500 Hz) it prints the largest tracking error ``max_j |q_j - q_d,j|``
from t = 1 s on and the fallbacks; a run whose error passes ``UNSTABLE`` rad is marked unstable.

What it shows: the delay margin of the MPC's feedback gains on plants other than its model. What it cannot
show: a real driver's delay distribution (here every command is late by exactly ``d`` periods).

    python benchmarks/mpc_command_delay.py                               # 4 plants, delays 0-3 ms, both triggers
    python benchmarks/mpc_command_delay.py --plants panda_twin --delays 1 2 --seconds 8 --jobs 2
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

UNSTABLE = 0.2        # rad
TRIGGERS = {"timer": 100.0, "joint_state": 500.0}


def run(plant, delay, trigger, seconds):
    """One run: ``(largest error from t = 1 s (rad), fallbacks, solves, wall s)``."""
    import numpy as np

    from robodyn_ros.benchmarks.disturbance import build_mpc_functions, mpc_node_config
    from robodyn_ros.control.mpc_loop import MpcLoop
    from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
    from robodyn_ros.simulation.runtime import SimulationRuntime

    build_mpc_functions()
    config = {**mpc_node_config(), "output": "commands", "trigger": trigger, "rate": TRIGGERS[trigger],
              "state_timeout": 1e6}
    robot = load_robot(config)
    loop = MpcLoop(robot, config, publish=lambda command: None)
    if not loop.mpc.wait(600):
        raise RuntimeError(f"the MPC did not build: {loop.mpc.error}")
    sim_config = resolve_node_config("simulator", {"real_time_factor": 0.0, "lockstep": False, "plant": plant,
                                                   "payload.mass": 0.0, "command_timeout": 1e6})
    runtime = SimulationRuntime(load_robot(sim_config), sim_config, lambda: None, lambda *entry: None)
    runtime.start()
    nv = robot.model.nv
    q, v, effort = np.empty(nv), np.empty(nv), np.empty(nv)
    in_flight, command, worst = [], np.zeros(nv), 0.0
    period = round(1000.0 / TRIGGERS[trigger])
    started = time.perf_counter()
    for step in range(int(seconds * 1000)):
        t = runtime.measure_joints_into(q, v, effort)
        out = loop.on_state(t, q.copy(), v.copy(), effort.copy())
        if trigger == "joint_state" and loop.take_solution() is not None:
            loop.prepare()
        elif trigger == "timer" and step % period == 0:
            loop.solve()
        if out is not None:
            in_flight.append((step + delay, out))
        while in_flight and in_flight[0][0] <= step:
            command = in_flight.pop(0)[1]
        runtime.set_command(np.asarray(command, dtype=float))
        runtime.step_and_publish()
        if runtime.fault is not None:
            worst = np.inf
            break
        if runtime.sim.t >= 1.0:
            error = np.abs(runtime.sim.q - loop.reference.evaluate(runtime.sim.t - loop.t0)[0]).max()
            worst = max(worst, float(error))
    loop.close()
    return worst, loop.fallbacks, loop.solves, time.perf_counter() - started


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plants", nargs="+", default=["", "panda_twin", "perturbed:1", "perturbed:2"],
                        help="simulator plant values ('' the URDF itself)")
    parser.add_argument("--delays", nargs="+", type=int, default=[0, 1, 2, 3], help="joint-state periods")
    parser.add_argument("--triggers", nargs="+", default=list(TRIGGERS), choices=list(TRIGGERS))
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    from robodyn_ros.benchmarks.disturbance import build_mpc_functions
    build_mpc_functions()                        # once, before the workers
    cases = [(p, d, trig) for p in args.plants for trig in args.triggers for d in args.delays]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(run, *zip(*cases), [args.seconds] * len(cases)))
    print(f"{'plant':12s} {'trigger':12s} {'delay_ms':>8s} {'max_error_mrad':>15s} {'fallbacks':>9s} "
          f"{'solves':>7s}  verdict")
    for (plant, delay, trigger), (worst, fallbacks, solves, _) in zip(cases, results):
        verdict = "unstable" if worst > UNSTABLE else "stable"
        print(f"{plant or 'urdf':12s} {trigger:12s} {delay:8d} {1e3 * worst:15.1f} {fallbacks:9d} {solves:7d}  "
              f"{verdict}")


if __name__ == "__main__":
    main()
