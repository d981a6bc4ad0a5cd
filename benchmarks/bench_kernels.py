"""Compiled kernels against Pinocchio on Panda, UR5, Talos (44 DoF) and a generated 48-joint arm: per call
and per sample in batch.

    python benchmarks/bench_kernels.py [--json] [--robots panda,ur5,chain96] [--fresh panda,ur5,chain96|all|none]

Same as ``robodyn bench kernels [--json]`` (robodyn_ros.benchmarks.kernels.run); ``--robots`` (or
``$ROBODYN_BENCH_ROBOTS``) restricts the robots measured (``chain<N>``: a generated arm of N joints), ``--fresh`` (or ``$ROBODYN_BENCH_FRESH_BUILD``)
the robots whose first build is timed in a fresh process with an empty cache. Batch threads: ``$ROBODYN_THREADS``."""
import json
import sys

from robodyn_ros.benchmarks.kernels import run

if __name__ == "__main__":
    argv = sys.argv[1:]
    as_json = "--json" in argv
    robots = None
    if "--robots" in argv:
        robots = argv[argv.index("--robots") + 1].split(",")
    fresh = argv[argv.index("--fresh") + 1] if "--fresh" in argv else None
    result = run(json=as_json, robots=robots, fresh=fresh)
    if as_json:
        print(json.dumps(result, indent=2))
