"""What the nodes cost the machine: the CPU each of ``simulator``, ``inverse_dynamics`` and ``estimator`` uses
(CPU seconds per wall second, from ``/proc``) while they run the Panda at 1 kHz with their defaults (the
simulation launch's three nodes, ``config/panda.yaml``), in an isolated ROS domain. With ``--vs DIR`` the same
nodes from another checkout (``DIR`` first on PYTHONPATH: the anchor, e.g. a ``git worktree`` of an earlier
commit) are measured in turn, A B A B, and the ratios printed pair by pair.

    python benchmarks/node_cpu.py                                  # this checkout, 2 runs
    git worktree add ../before <commit> && python benchmarks/node_cpu.py --vs ../before --runs 3
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

NODES = ("simulator", "inverse_dynamics", "estimator")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(source, settle, window):
    """{node: cores used} of the three nodes started from the checkout ``source``."""
    from robodyn_ros.benchmarks.process_stats import cpu_seconds
    from robodyn_ros.ros.testing import isolated_ros_domain
    with isolated_ros_domain():
        env = dict(os.environ, PYTHONPATH=source, OPENBLAS_NUM_THREADS="1")
        config = os.path.join(source, "config", "panda.yaml")
        processes = {kind: subprocess.Popen([sys.executable, "-m", "robodyn_ros.ros.node_main", kind, "--ros-args",
                                             "--params-file", config, "--log-level", "warn"], env=env,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for kind in NODES}
        try:
            time.sleep(settle)       # imports, configure, the loop closed (the nodes' start is not measured)
            for kind, process in processes.items():
                if process.poll() is not None:
                    raise SystemExit(f"node_cpu: the {kind} node from {source} ended with {process.returncode}")
            before = {kind: cpu_seconds(p.pid) for kind, p in processes.items()}
            start = time.monotonic()
            time.sleep(window)       # the measurement window
            elapsed = time.monotonic() - start
            return {kind: (cpu_seconds(p.pid) - before[kind]) / elapsed for kind, p in processes.items()}
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGINT)
            for process in processes.values():
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vs", help="another checkout (the anchor)")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--settle", type=float, default=20.0, help="s after the start before measuring")
    p.add_argument("--window", type=float, default=10.0, help="s measured")
    args = p.parse_args(argv)
    sources = [ROOT] + ([os.path.abspath(args.vs)] if args.vs else [])
    results = {source: [] for source in sources}
    for _ in range(args.runs):
        for source in sources:
            results[source].append(measure(source, args.settle, args.window))
    for source in sources:
        runs = results[source]
        print(f"{source}: cores used " + "; ".join(", ".join(f"{k} {r[k]:.2f}" for k in NODES) for r in runs))
    if args.vs:
        a, b = results[ROOT], results[sources[1]]
        for kind in NODES + ("all",):
            ratios = [(sum(x.values()) / sum(y.values())) if kind == "all" else x[kind] / y[kind] for x, y in zip(a, b)]
            print(f"  {kind}: this / anchor " + ", ".join(f"{r:.2f}" for r in ratios))


if __name__ == "__main__":
    main()
