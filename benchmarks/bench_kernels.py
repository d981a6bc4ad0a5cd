"""Compiled kernels against Pinocchio on Panda, UR5 and Talos (44 DoF): per call and per sample in batch.

    python benchmarks/bench_kernels.py [--json]

Same as ``robodyn bench kernels [--json]`` (robodyn_ros.benchmarks.kernels.run)."""
import json
import sys

from robodyn_ros.benchmarks.kernels import run

if __name__ == "__main__":
    as_json = "--json" in sys.argv[1:]
    result = run(json=as_json)
    if as_json:
        print(json.dumps(result, indent=2))
