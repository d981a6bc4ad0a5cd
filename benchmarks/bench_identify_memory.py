#!/usr/bin/env python3
"""Peak memory and time of ``robodyn identify`` against the number of joint states in the bag.

For each size (default 100 000, 1 000 000 and 5 000 000 samples at 1 kHz) it writes a simulated Panda
bag with ``tools/write_long_bag.py`` into a temporary folder, runs ``robodyn identify BAG --urdf panda
--holdout 0.3 --plot`` in a fresh Python process and reports that process's peak resident set size
(``getrusage(RUSAGE_SELF).ru_maxrss``) and its wall and CPU time, with the ratio of each to the smallest
size measured in the same run. Bounded memory means the RSS ratio stays near 1 while the samples grow
fifty-fold. The bags are deleted afterwards (5 million samples take about 2 GB).

    python benchmarks/bench_identify_memory.py [--sizes 100000 1000000 5000000] [--keep DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, os.pardir))

CHILD = r"""
import resource, sys, time
from robodyn_ros.cli.identify import main
wall, cpu = time.perf_counter(), time.process_time()
code = main(sys.argv[1:])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print("RESULT", code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, wall, cpu, flush=True)
"""


def measure(bag, out):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [bag, "--urdf", "panda", "--lock-joint", "panda_finger_joint1=0", "--lock-joint",
            "panda_finger_joint2=0", "--output", os.path.join(out, "p.yaml"), "--holdout", "0.3",
            "--plot", os.path.join(out, "p.png"), "--quiet"]
    run = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True)
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT")]
    if run.returncode or not line or line[0].split()[1] != "0":
        raise SystemExit(f"identify failed on {bag}: {run.stderr.strip()[-500:]}")
    _, _, rss_kb, wall, cpu = line[0].split()
    held_out = [x for x in run.stdout.splitlines() if x.strip().startswith("identified")]
    return {"peak_rss_mb": int(rss_kb) / 1024, "wall_s": float(wall), "cpu_s": float(cpu),
            "held_out": held_out[0].strip() if held_out else ""}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    p.add_argument("--keep", help="write the bags here and keep them")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    folder = args.keep or tempfile.mkdtemp(prefix="robodyn-bench-")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    try:
        for n in sorted(args.sizes):
            bag = os.path.join(folder, f"bag_{n}")
            if not os.path.exists(bag):
                subprocess.run([sys.executable, os.path.join(ROOT, "tools", "write_long_bag.py"), bag,
                                "--samples", str(n)], env=env, check=True, capture_output=True)
            rows.append({"samples": n, **measure(bag, folder)})
            if not args.keep:
                subprocess.run(["rm", "-rf", bag], check=True)
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", folder], check=True)
    anchor = rows[0]
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'samples':>10} {'peak RSS MB':>12} {'x anchor':>9} {'wall s':>8} {'cpu s':>8} {'cpu x anchor':>13}")
    for r in rows:
        print(f"{r['samples']:>10} {r['peak_rss_mb']:>12.0f} {r['peak_rss_mb'] / anchor['peak_rss_mb']:>9.2f} "
              f"{r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['cpu_s'] / anchor['cpu_s']:>13.1f}")
    print(f"(anchor: {anchor['samples']} samples measured in this run; wall time includes waiting for a shared CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
