"""Compiled kernels against Pinocchio on Panda, UR5 and Talos (44 DoF): per call and per sample in batch.

    python benchmarks/bench_kernels.py [--json] [--robots panda,ur5]

Same as ``robodyn bench kernels [--json]`` (robodyn_ros.benchmarks.kernels.run); ``--robots`` (or
``$ROBODYN_BENCH_ROBOTS``) restricts the robots measured. Batch threads: ``$ROBODYN_THREADS``."""
import json
import sys

from robodyn_ros.benchmarks.kernels import run

if __name__ == "__main__":
    argv = sys.argv[1:]
    as_json = "--json" in argv
    robots = None
    if "--robots" in argv:
        robots = argv[argv.index("--robots") + 1].split(",")
    result = run(json=as_json, robots=robots)
    if as_json:
        print(json.dumps(result, indent=2))
