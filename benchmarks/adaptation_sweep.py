"""Adaptation on robots it was not tuned on: the library loop of ``robodyn demo --scenario twin --library`` on
seeded perturbed plants (robodyn_ros.simulation.perturbed_plant) of each robot, for each controller, with the
estimator's and the gate's defaults. Prints per robot and controller the tracking ratio (nominal / adapted RMS
over the last third before the payload: median, worst, how many at least 3), how many runs were never worse
than the nominal loop (every second from t = 1 s, RMS and peak at most 1.2 times), how many found the 2 kg
payload from joint torques within 5 % in 3 s, and the non-finite commands; against the oracle (the same loop on
the plant's exact model, :class:`robodyn_ros.simulation.adaptive_loop.OracleLoop`): the oracle's tracking RMS
(median), the adapted loop's worst one-second RMS ratio to it, and how many runs came within 2 x the oracle's
RMS in every second to the end (``time_to_oracle``: median of those, s); against the Cramér–Rao bound of the
motion's joint torques (:mod:`robodyn_ros.estimation.cramer_rao_bound`): the seconds of motion before any
estimate could track within 2 x the oracle (median), and how far the estimator's estimate and the applied model
are from the bound at the last second before the payload; --json writes every run's report.

    python benchmarks/adaptation_sweep.py                          # panda, ur5, iiwa; 10 plants; all controllers
    python benchmarks/adaptation_sweep.py --robots ur5 --controllers mpc --plants 3 --jobs 2
    python benchmarks/adaptation_sweep.py --plant twin --robots panda   # the Panda twin instead
    python benchmarks/adaptation_sweep.py --plants 5 --first-plant 5 --json b.json    # seeds 5 .. 9
    python benchmarks/adaptation_sweep.py --summarise a.json b.json    # one table from runs saved with --json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

CONTROLLERS = ("computed_torque", "slotine_li", "mpc")


def one_run(robot, plant, controller, duration):
    from robodyn_ros.cli.demo import run_twin
    from robodyn_ros.identification.blas_threads import limit_blas_threads
    limit_blas_threads()
    start = time.monotonic()
    report, _ = run_twin(duration=duration, controller=controller, robot=robot, plant=plant)
    report = {k: v for k, v in report.items() if k not in ("window_ratios", "oracle_window_ratios")}
    report["sweep_wall_seconds"] = round(time.monotonic() - start, 1)
    return report


def summarise(reports):
    import numpy as np
    ratios = np.array([r["tracking_ratio"] for r in reports])
    return {"runs": len(reports), "median_ratio": float(np.median(ratios)), "worst_ratio": float(ratios.min()),
            "ratio_at_least_3": int(np.sum(ratios >= 3.0)),
            "never_worse": int(sum(r["worst_window_ratio"] <= 1.2 for r in reports)),
            "worst_window_ratio": float(max(r["worst_window_ratio"] for r in reports)),
            "payload_within_5_percent_in_3_s": int(sum(r["payload_time_to_5_percent"] is not None
                                                       and r["payload_time_to_5_percent"] <= 3.0 for r in reports)),
            "non_finite_commands": int(sum(r["non_finite_commands"] for r in reports)),
            **oracle_summary(reports)}


def oracle_summary(reports):
    """The runs against their oracle: median ``tracking_rms_oracle``, the largest ``worst_oracle_window_ratio``,
    how many reached the oracle (a ``time_to_oracle``) and the median of those times (NaN for reports saved
    before the oracle was run)."""
    import numpy as np
    with_oracle = [r for r in reports if "tracking_rms_oracle" in r]
    reached = [r["time_to_oracle"] for r in with_oracle if r["time_to_oracle"] is not None]
    return {"oracle_runs": len(with_oracle),
            "median_rms_oracle": float(np.median([r["tracking_rms_oracle"] for r in with_oracle]))
            if with_oracle else float("nan"),
            "worst_oracle_window_ratio": float(max(r["worst_oracle_window_ratio"] for r in with_oracle))
            if with_oracle else float("nan"),
            "reached_oracle": len(reached),
            "median_time_to_oracle": float(np.median(reached)) if reached else float("nan"),
            **bound_summary(reports)}


def bound_summary(reports):
    """The runs against the Cramér–Rao bound of their motion (:mod:`robodyn_ros.simulation.learning_limit`): the
    median ``time_to_oracle_bound`` (s of the motion before any estimate from these torques can track within 2 x
    the oracle), and at the last second before the payload the medians of the estimator's and of the applied
    model's error over the bound (NaN for reports without it)."""
    import numpy as np
    bounds = [r["learning_bound"].get("time_to_oracle_bound") for r in reports if r.get("learning_bound")]
    bounds = [b for b in bounds if b is not None]
    last = [r["model_error_seconds"][-1] for r in reports if r.get("model_error_seconds")]
    return {"median_time_to_oracle_bound": float(np.median(bounds)) if bounds else float("nan"),
            "median_estimate_over_bound": float(np.median([row[2] / row[1] for row in last])) if last else float("nan"),
            "median_applied_over_bound": float(np.median([row[3] / row[1] for row in last])) if last else float("nan")}


def bound_words(report):
    """`` (no estimate before N s)``: the run's ``time_to_oracle_bound``, or nothing (the MPC has none)."""
    bound = (report.get("learning_bound") or {}).get("time_to_oracle_bound")
    return "" if bound is None else f" (no estimate before {bound:.0f} s)"


def print_table(groups):
    """The Markdown table of runs grouped by (robot, controller)."""
    print("| robot | controller | runs | tracking ratio: median | worst | >= 3 | never worse (<= 1.2 x any second) "
          "| payload within 5 % in 3 s | non-finite commands | oracle RMS (median) | worst second, adapted / oracle "
          "| within 2 x the oracle to the end: runs (median time_to_oracle) | time_to_oracle bound (median, s) "
          "| estimate / bound, applied / bound (medians, last second before the payload) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (robot, controller), reports in groups.items():
        s = summarise(reports)
        reached = (f"{s['reached_oracle']}/{s['oracle_runs']}"
                   + (f" ({s['median_time_to_oracle']:.0f} s)" if s["reached_oracle"] else ""))
        print(f"| {robot} | {controller} | {s['runs']} | {s['median_ratio']:.1f} | {s['worst_ratio']:.1f} | "
              f"{s['ratio_at_least_3']}/{s['runs']} | {s['never_worse']}/{s['runs']} (worst "
              f"{s['worst_window_ratio']:.2f}) | {s['payload_within_5_percent_in_3_s']}/{s['runs']} | "
              f"{s['non_finite_commands']} | {s['median_rms_oracle']:.2e} | {s['worst_oracle_window_ratio']:.1f} | "
              f"{reached} | {s['median_time_to_oracle_bound']:.0f} | {s['median_estimate_over_bound']:.1f}, "
              f"{s['median_applied_over_bound']:.1f} |")


def print_saved(paths):
    """The table of the runs in JSON files written by --json; a plant run twice counts once (the last)."""
    runs = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                saved = json.load(fh)
        except (OSError, ValueError) as exc:
            print(f"adaptation_sweep: {path}: not a report file written by --json ({exc})", file=sys.stderr)
            return 2
        for report in saved:
            runs[(report["robot"], report["controller"], report["plant"])] = report
    groups = {}
    for (robot, controller, _), report in runs.items():
        groups.setdefault((robot, controller), []).append(report)
    print_table(dict(sorted(groups.items())))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robots", nargs="+", default=["panda", "ur5", "iiwa"])
    p.add_argument("--controllers", nargs="+", default=list(CONTROLLERS), choices=CONTROLLERS)
    p.add_argument("--plants", type=int, default=10, help="N plants: seeds K .. K+N-1 of perturbed:SEED")
    p.add_argument("--first-plant", type=int, default=0, help="K, the first seed (default 0)")
    p.add_argument("--plant", help="one plant for every robot instead (e.g. twin)")
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--jobs", type=int, default=1, help="processes in parallel")
    p.add_argument("--json", help="write every run's report here")
    p.add_argument("--summarise", nargs="+", metavar="JSON",
                   help="print the table of runs saved with --json; run nothing")
    args = p.parse_args(argv)
    if args.summarise:
        return print_saved(args.summarise)
    plants = [args.plant] if args.plant else [f"perturbed:{s}" for s in
                                              range(args.first_plant, args.first_plant + args.plants)]
    jobs = [(robot, plant, controller) for robot in args.robots for controller in args.controllers for plant in plants]
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(one_run, *job, args.duration): job for job in jobs}
        for future, job in futures.items():
            report = future.result()
            results[job] = report
            print(f"{job[0]:6s} {job[2]:16s} {job[1]:13s} ratio {report['tracking_ratio']:7.1f}  worst second "
                  f"{report['worst_window_ratio']:.2f}  payload {report['payload_mass_estimated']:.3f} kg after "
                  f"{report['payload_time_to_5_percent']} s  changes {len(report['payload_changes_detected'])}  "
                  f"oracle {report['tracking_rms_oracle']:.2e} rad, worst second {report['worst_oracle_window_ratio']:.1f} "
                  f"x it, within 2 x from {report['time_to_oracle']} s{bound_words(report)}  "
                  f"({report['sweep_wall_seconds']} s)", flush=True)
    print()
    print_table({(r, c): [results[(r, plant, c)] for plant in plants]
                 for r in args.robots for c in args.controllers})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([{"robot": r, "plant": p_, "controller": c, **rep} for (r, p_, c), rep in results.items()], fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
