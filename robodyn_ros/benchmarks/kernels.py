"""``robodyn bench kernels``: our compiled kernels against Pinocchio, per call and per sample in batch,
on Panda, UR5 and Talos (fixed base, 44 DoF: ``talos_full_v2.urdf``), all measured in one run.

Per call: the best of 7 interleaved repeats (ours, Pinocchio's, ours, ...) of a timed loop of each function from Python on one random state
(ours: ``Kernels.<name>(q, v, a)``; Pinocchio: ``pinocchio.<algorithm>(model, data, q, v, a)``).
Batch: ours is ``Kernels.<name>_batch`` over N samples in one call, writing into preallocated output
arrays (as Pinocchio's loop writes into its ``Data``; the time with freshly allocated outputs, which adds
the page faults of up to 400 MB, is reported too); Pinocchio's is a Python loop over the same rows
(timed on the first ``min(N, 20 000)`` rows, the per-sample cost of a loop being flat).
N is 100 000 unless the outputs would exceed 400 MB (matrix outputs of Talos), then as many as fit.
Ratio ``ours / pinocchio`` (below 1: we are faster); batch ``speedup = pinocchio / ours``.
Pinocchio is optional: without it, our times alone and a note.
"""
from __future__ import annotations

import json as _json
import os
import site
import subprocess
import sys
import timeit

import numpy as np

from ..kernels import compile_kernels
from ..model import Model

ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "talos": "talos_data/robots/talos_full_v2.urdf",
}
PER_CALL = ("rnea", "aba", "crba", "nonlinear_effects", "gravity_torque", "coriolis_matrix", "regressor",
            "rnea_derivatives", "aba_derivatives", "rnea_time_derivatives")
BATCH = ("rnea", "regressor", "rnea_derivatives")
BATCH_N = 100_000
BATCH_BYTES = 400e6
PIN_LOOP_MAX = 20_000


def robots_root():
    """example-robot-data's robots folder, or None."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    return None


def _pinocchio():
    try:
        import pinocchio
    except ImportError:
        return None
    return pinocchio


def _calls_for(fn, target):
    """How many calls of ``fn`` take about ``target`` seconds."""
    number = 1
    while True:
        elapsed = timeit.timeit(fn, number=number)
        if elapsed > target / 5 or number > 1_000_000:
            break
        number *= 4
    return max(1, int(number * target / max(elapsed, 1e-9)))


def _per_call_seconds(*fns, target=0.03, repeat=7):
    """Best-of-``repeat`` seconds per call of each function, the repeats interleaved so that a change of
    machine load affects all of them alike."""
    numbers = [_calls_for(fn, target) for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, (fn, number) in enumerate(zip(fns, numbers)):
            best[i] = min(best[i], timeit.timeit(fn, number=number) / number)
    return best


def _pin_calls(pin, pm, pd):
    return {
        "rnea": lambda q, v, a: pin.rnea(pm, pd, q, v, a),
        "aba": lambda q, v, a: pin.aba(pm, pd, q, v, a),
        "crba": lambda q, v, a: pin.crba(pm, pd, q),
        "nonlinear_effects": lambda q, v, a: pin.nonLinearEffects(pm, pd, q, v),
        "gravity_torque": lambda q, v, a: pin.computeGeneralizedGravity(pm, pd, q),
        "coriolis_matrix": lambda q, v, a: pin.computeCoriolisMatrix(pm, pd, q, v),
        "regressor": lambda q, v, a: pin.computeJointTorqueRegressor(pm, pd, q, v, a),
        "rnea_derivatives": lambda q, v, a: pin.computeRNEADerivatives(pm, pd, q, v, a),
        "aba_derivatives": lambda q, v, a: pin.computeABADerivatives(pm, pd, q, v, a),
    }


def _our_calls(k):
    return {
        "rnea": lambda q, v, a: k.rnea(q, v, a),
        "aba": lambda q, v, a: k.aba(q, v, a),
        "crba": lambda q, v, a: k.crba(q),
        "nonlinear_effects": lambda q, v, a: k.nonlinear_effects(q, v),
        "gravity_torque": lambda q, v, a: k.gravity_torque(q),
        "coriolis_matrix": lambda q, v, a: k.coriolis_matrix(q, v),
        "regressor": lambda q, v, a: k.regressor(q, v, a),
        "rnea_derivatives": lambda q, v, a: k.rnea_derivatives(q, v, a),
        "aba_derivatives": lambda q, v, a: k.aba_derivatives(q, v, a),
        "rnea_time_derivatives": lambda q, v, a: k.rnea_time_derivatives(q, v, a, a),
    }


def _pin_permutation(model, pm):
    """Index map from our q/v order to Pinocchio's, or None when the two differ beyond a permutation
    (continuous joints, floating base)."""
    if pm.nq != model.nq or pm.nv != model.nv or model.nq != model.nv:
        return None
    perm = np.empty(model.nv, dtype=int)
    for i, name in enumerate(model.joint_names):
        if pm.joints[pm.getJointId(name)].nq != 1:
            return None
        perm[model.idx_v[i]] = pm.joints[pm.getJointId(name)].idx_v
    return perm


def _load_seconds(path):
    """Seconds for a fresh process to get the (cached) kernels of the robot at ``path``."""
    code = ("import json, sys; from robodyn_ros import Model; from robodyn_ros.kernels import compile_kernels; "
            "m = Model.from_urdf(sys.argv[1]); k = compile_kernels(m); "
            "print(json.dumps([k.seconds, k.from_cache]))")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    seconds, from_cache = _json.loads(out.stdout.strip().splitlines()[-1])
    return seconds if from_cache else None


def bench_robot(name, path, pin, rng):
    model = Model.from_urdf(path)
    k = compile_kernels(model)
    entry = {"nv": model.nv, "compiled": k.compiled, "from_cache": k.from_cache, "compile_kernels_seconds": k.seconds,
             "build": k.build_report, "cache_load_seconds": _load_seconds(path), "sources": k.sources,
             "instruction_counts": k.instruction_counts, "per_call_us": {}, "batch": {}}
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    pin_calls, perm = {}, None
    if pin is not None:
        pm = pin.buildModelFromUrdf(path)
        perm = _pin_permutation(model, pm)
        if perm is not None:
            pin_calls = _pin_calls(pin, pm, pm.createData())
    qp, vp, ap = (np.zeros(model.nv) for _ in range(3))
    if perm is not None:
        qp[perm], vp[perm], ap[perm] = q, v, a
    for fn, call in _our_calls(k).items():
        if fn in pin_calls:
            ours, theirs = (t * 1e6 for t in _per_call_seconds(lambda: call(q, v, a), lambda: pin_calls[fn](qp, vp, ap)))
            entry["per_call_us"][fn] = {"ours": ours, "pinocchio": theirs, "ratio": ours / theirs}
        else:
            entry["per_call_us"][fn] = {"ours": _per_call_seconds(lambda: call(q, v, a))[0] * 1e6}
    for fn in BATCH:
        out_size = {"rnea": model.nv, "regressor": model.nv * 10 * model.nbodies,
                    "rnea_derivatives": 3 * model.nv * model.nv}[fn]
        n = int(min(BATCH_N, BATCH_BYTES // (8 * out_size)))
        Q = np.array([model.random_configuration(rng) for _ in range(n)])
        V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
        batch = getattr(k, fn + "_batch")
        fresh = timeit.timeit(lambda: batch(Q, V, A), number=1) / n * 1e6
        outs = batch(Q, V, A)
        outs = outs if isinstance(outs, tuple) else (outs,)
        ours = min(timeit.repeat(lambda: batch(Q, V, A, *outs), number=1, repeat=3)) / n * 1e6
        outs = None  # free the preallocated outputs before the next function
        row = {"N": n, "ours_per_sample_us": ours, "ours_fresh_output_per_sample_us": fresh}
        if fn in pin_calls:
            m = min(n, PIN_LOOP_MAX)
            Qp, Vp, Ap = (np.zeros((m, model.nv)) for _ in range(3))
            Qp[:, perm], Vp[:, perm], Ap[:, perm] = Q[:m], V[:m], A[:m]
            call = pin_calls[fn]

            def loop():
                for i in range(m):
                    call(Qp[i], Vp[i], Ap[i])
            theirs = timeit.timeit(loop, number=1) / m * 1e6
            row.update(pinocchio_loop_samples=m, pinocchio_loop_per_sample_us=theirs, speedup=theirs / ours)
        entry["batch"][fn] = row
    return entry


def run(json: bool = False) -> dict:
    """Measure everything, print a table unless ``json``, and return the results as a dict."""
    pin = _pinocchio()
    result = {"pinocchio": getattr(pin, "__version__", None), "notes": [], "robots": {}}
    if pin is None:
        result["notes"].append("pinocchio is not installed: our times only (pip install pin)")
    root = robots_root()
    if root is None:
        result["notes"].append("example-robot-data is not installed: no robots to measure")
        if not json:
            print("\n".join(result["notes"]))
        return result
    rng = np.random.default_rng(0)
    for name, rel in ROBOTS.items():
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            result["notes"].append(f"{name}: {path} missing")
            continue
        result["robots"][name] = bench_robot(name, path, pin, rng)
    if not json:
        print(format_table(result))
    return result


def format_table(result):
    lines = [f"robodyn_ros compiled kernels vs Pinocchio {result['pinocchio'] or '(not installed)'}"]
    lines += [f"note: {n}" for n in result["notes"]]
    for name, r in result["robots"].items():
        build = r["build"]
        lines.append("")
        lines.append(f"{name} (nv = {r['nv']}): derivative sources {r['sources']}; build "
                     f"{build.get('symbolic_seconds', float('nan')) + build.get('compile_wall_seconds', float('nan')):.1f} s"
                     f" (symbolic {build.get('symbolic_seconds', float('nan')):.1f} s + gcc "
                     f"{build.get('compile_wall_seconds', float('nan')):.1f} s), cache load "
                     + (f"{r['cache_load_seconds']:.3f} s" if r["cache_load_seconds"] is not None else "n/a"))
        lines.append(f"  {'function':24s} {'ours µs':>10s} {'pinocchio µs':>13s} {'ratio':>7s}")
        for fn, row in r["per_call_us"].items():
            theirs = f"{row['pinocchio']:13.3f} {row['ratio']:7.2f}" if "pinocchio" in row else f"{'n/a':>13s} {'':>7s}"
            lines.append(f"  {fn:24s} {row['ours']:10.3f} {theirs}")
        lines.append(f"  {'batch (per sample)':24s} {'N':>8s} {'ours µs':>10s} {'pin loop µs':>12s} {'speedup':>8s}")
        for fn, row in r["batch"].items():
            theirs = (f"{row['pinocchio_loop_per_sample_us']:12.3f} {row['speedup']:8.1f}"
                      if "speedup" in row else f"{'n/a':>12s} {'':>8s}")
            lines.append(f"  {fn + '_batch':24s} {row['N']:8d} {row['ours_per_sample_us']:10.3f} {theirs}")
    return "\n".join(lines)
