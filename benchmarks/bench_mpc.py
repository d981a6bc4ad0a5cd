"""Benchmark of the MPC (Panda, N = 20, dt = 10 ms): SQP-RTI, fatrop and ipopt in one run.

Usage: python benchmarks/bench_mpc.py [--json]   (the same as `robodyn bench mpc [--json]`)
"""
import json
import sys

from robodyn_ros.benchmarks.mpc import run

if __name__ == "__main__":
    as_json = "--json" in sys.argv[1:]
    result = run(json=as_json)
    if as_json:
        print(json.dumps(result))
