"""``robodyn bench kernels``: our compiled kernels against Pinocchio, per call and per sample in batch,
on Panda, UR5, Talos (fixed base, 44 DoF: ``talos_full_v2.urdf``) and a generated 48-joint arm, all
measured in one run.

Per call: the best of 7 interleaved repeats (ours, Pinocchio's, ours, ...) of a timed loop of each function from Python on one random state
(ours: ``Kernels.<name>(q, v, a)``; Pinocchio: ``pinocchio.<algorithm>(model, data, q, v, a)``).
Batch: both sides produce the same N stored results in preallocated (N, ...) arrays. Ours is
``Kernels.<name>_batch(Q, V, A, out=...)`` over N samples in one call (rows split over
``threads`` POSIX threads, default ``$ROBODYN_THREADS`` or the CPUs available; the time with freshly
allocated outputs, which adds the page faults of up to 1.5 GB, and the single-thread time are reported
too). Pinocchio's is the loop a user writes to get N results: ``OUT[i] = pinocchio.<algorithm>(model,
data, Q[i], V[i], A[i])``, copying each result out of ``Data`` before the next call overwrites it (for
``rnea_derivatives`` the three matrices ``dtau_dq, dtau_dv, M``; Pinocchio fills only ``M``'s upper
triangle, which we do not charge it for completing). The loop is timed on the first
``min(N, 20 000)`` rows (its per-sample cost is flat) and ours on all N rows; the two are repeated
alternately ``BATCH_REPEAT`` times and the best of each kept, so that load changes hit both alike.
N is 100 000 unless the outputs would exceed ``BATCH_BYTES`` (1.5 GB; less when a sixth of the
available memory is less): Panda's regressor at N = 100 000 takes 648 MB, Talos's matrix outputs are cut
to as many rows as fit.
First build: for the robots in ``fresh`` (or ``$ROBODYN_BENCH_FRESH_BUILD``, comma-separated, ``all`` or
``none``; default ``panda,ur5``) a fresh process builds the kernels into an empty private cache
directory (:func:`fresh_build`), reporting wall time, the symbolic and gcc CPU seconds and the load
average, because the report stored with a cached library describes whatever build made it, possibly on
a loaded machine.
Ratio ``ours / pinocchio`` (below 1: we are faster); batch ``speedup = pinocchio / ours``.
Pinocchio is optional: without it, our times alone and a note. ``robots`` (or ``$ROBODYN_BENCH_ROBOTS``,
comma-separated) restricts the robots measured.
Generated serial chains: a robot named ``chain<N>`` (``chain48`` is measured by default; ``chain96`` with
``$ROBODYN_BENCH_ROBOTS``) is an arm of ``N`` revolute joints written as a URDF (:func:`chain_urdf`) and then
measured like the others: each joint turns about its frame's z axis (Pinocchio's fastest joint model,
``JointModelRZ``), the frames alternate by ±90° about x like a typical arm's, offsets and inertias are
seeded random.
"""
from __future__ import annotations

import json as _json
import os
import site
import subprocess
import sys
import tempfile
import timeit

import numpy as np

from ..kernels import compile_kernels
from ..model.model import Model

ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "talos": "talos_data/robots/talos_full_v2.urdf",
}
CHAINS = ("chain48",)   # generated chains measured by default (module docstring)
PER_CALL = ("rnea", "aba", "crba", "nonlinear_effects", "gravity_torque", "coriolis_matrix", "regressor",
            "rnea_derivatives", "aba_derivatives", "rnea_time_derivatives")
BATCH = ("rnea", "regressor", "rnea_derivatives")
BATCH_N = 100_000
BATCH_BYTES = 1.5e9
PIN_LOOP_MAX = 20_000
BATCH_REPEAT = 3


def robots_root():
    """example-robot-data's ``robots`` folder (installed by the ``test`` extra), or None."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    return None


def chain_urdf(n, seed=0):
    """URDF text of a serial arm of ``n`` revolute joints (module docstring)."""
    rng = np.random.default_rng(seed)
    parts = ['<?xml version="1.0"?>', f'<robot name="chain{n}">', '  <link name="link0"/>']
    for i in range(1, n + 1):
        mass, com = rng.uniform(0.5, 2.0), rng.uniform(-0.05, 0.05, size=3)
        x, y, z = rng.uniform(0.05, 0.3, size=3)       # a solid box: physical principal moments
        ixx, iyy, izz = mass / 12 * (y * y + z * z), mass / 12 * (x * x + z * z), mass / 12 * (x * x + y * y)
        xyz, roll = rng.uniform(-0.1, 0.1, size=3) + (0.0, 0.0, 0.1), (np.pi / 2) * (1 if i % 2 else -1)
        parts += [f'  <link name="link{i}"><inertial><mass value="{mass:.6f}"/>'
                  f'<origin xyz="{com[0]:.6f} {com[1]:.6f} {com[2]:.6f}"/>'
                  f'<inertia ixx="{ixx:.6f}" ixy="0" ixz="0" iyy="{iyy:.6f}" iyz="0" izz="{izz:.6f}"/></inertial></link>',
                  f'  <joint name="joint{i}" type="revolute"><parent link="link{i - 1}"/><child link="link{i}"/>'
                  f'<origin xyz="{xyz[0]:.6f} {xyz[1]:.6f} {xyz[2]:.6f}" rpy="{roll:.17g} 0 0"/><axis xyz="0 0 1"/>'
                  f'<limit lower="-3.14" upper="3.14" effort="100" velocity="3"/></joint>']
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


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


def fresh_build(path):
    """A first build of the robot at ``path`` in a fresh process with an empty private cache directory
    (so neither an earlier build nor another process's lock is involved): wall seconds of
    ``compile_kernels`` (every part), the build report (symbolic and gcc wall and CPU seconds, load
    averages), the cache-load seconds of a second fresh process, and the wall seconds of a first build of
    the ``dynamics`` part alone (what a controller, estimator or simulator node waits for) in a third."""
    code = ("import json, sys, time; from robodyn_ros import Model; from robodyn_ros.kernels import compile_kernels; "
            "m = Model.from_urdf(sys.argv[1]); t = time.perf_counter(); "
            "k = compile_kernels(m, parts=sys.argv[2].split(',') if len(sys.argv) > 2 else None); "
            "print(json.dumps([time.perf_counter() - t, k.from_cache, k.build_report]))")
    with tempfile.TemporaryDirectory(prefix="robodyn-bench-cache-") as cache:
        env = dict(os.environ, ROBODYN_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True, env=env)
        seconds, from_cache, report = _json.loads(out.stdout.strip().splitlines()[-1])
        load = _load_seconds(path, env)
    with tempfile.TemporaryDirectory(prefix="robodyn-bench-cache-") as cache:
        env = dict(os.environ, ROBODYN_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code, path, "dynamics"], capture_output=True, text=True, check=True,
                             env=env)
        dynamics_seconds = _json.loads(out.stdout.strip().splitlines()[-1])[0]
    return dict(report, first_build_wall_seconds=seconds, cache_load_seconds=load, from_cache=from_cache,
                dynamics_first_build_wall_seconds=dynamics_seconds)


def _load_seconds(path, env=None):
    """Seconds for a fresh process to get the (cached) kernels of the robot at ``path``."""
    code = ("import json, sys; from robodyn_ros import Model; from robodyn_ros.kernels import compile_kernels; "
            "m = Model.from_urdf(sys.argv[1]); k = compile_kernels(m); "
            "print(json.dumps([k.seconds, k.from_cache]))")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True, env=env)
    seconds, from_cache = _json.loads(out.stdout.strip().splitlines()[-1])
    return seconds if from_cache else None


def bench_robot(name, path, pin, rng, fresh=False):
    model = Model.from_urdf(path)
    k = compile_kernels(model)
    entry = {"nv": model.nv, "compiled": k.compiled, "from_cache": k.from_cache, "compile_kernels_seconds": k.seconds,
             "build": k.build_report, "cache_load_seconds": _load_seconds(path), "sources": k.sources,
             "instruction_counts": k.instruction_counts, "per_call_us": {}, "batch": {}}
    if fresh:
        entry["fresh_build"] = fresh_build(path)
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
        entry["batch"][fn] = _bench_batch(model, k, fn, pin_calls.get(fn), perm, rng)
    return entry


def _bench_batch(model, k, fn, pin_call, perm, rng):
    """Per-sample µs of ``<fn>_batch`` and of Pinocchio's storing Python loop (module docstring)."""
    shapes = {"rnea": ((model.nv,),), "regressor": ((model.nv, 10 * model.nbodies),),
              "rnea_derivatives": ((model.nv, model.nv),) * 3}[fn]
    out_size = sum(int(np.prod(s)) for s in shapes)
    n = int(min(BATCH_N, batch_bytes() // (8 * out_size)))
    Q = np.array([model.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))
    batch = getattr(k, fn + "_batch")
    fresh = timeit.timeit(lambda: batch(Q, V, A), number=1) / n * 1e6
    outs = tuple(np.empty((n,) + s) for s in shapes)
    out = outs if len(outs) > 1 else outs[0]
    single = min(timeit.repeat(lambda: batch(Q, V, A, out=out, threads=1), number=1, repeat=BATCH_REPEAT)) / n * 1e6
    row = {"N": n, "threads": _default_threads(), "ours_fresh_output_per_sample_us": fresh,
           "ours_one_thread_per_sample_us": single}
    ours, theirs = float("inf"), float("inf")
    loop = None
    if pin_call is not None:
        m = min(n, PIN_LOOP_MAX)
        Qp, Vp, Ap = (np.zeros((m, model.nv)) for _ in range(3))
        Qp[:, perm], Vp[:, perm], Ap[:, perm] = Q[:m], V[:m], A[:m]
        stored = tuple(np.empty((m,) + s) for s in shapes)

        if len(shapes) == 1:
            (OUT,) = stored

            def loop():
                for i in range(m):
                    OUT[i] = pin_call(Qp[i], Vp[i], Ap[i])
        else:
            D_Q, D_V, D_A = stored

            def loop():
                for i in range(m):
                    D_Q[i], D_V[i], D_A[i] = pin_call(Qp[i], Vp[i], Ap[i])
    for _ in range(BATCH_REPEAT):
        ours = min(ours, timeit.timeit(lambda: batch(Q, V, A, out=out), number=1) / n * 1e6)
        if loop is not None:
            theirs = min(theirs, timeit.timeit(loop, number=1) / m * 1e6)
    outs = out = None  # free the preallocated outputs before the next function
    row["ours_per_sample_us"] = ours
    if loop is not None:
        row.update(pinocchio_loop_samples=m, pinocchio_loop_per_sample_us=theirs, speedup=theirs / ours,
                   speedup_one_thread=theirs / single)
    return row


def batch_bytes():
    """Bytes the outputs of one batch may take: ``BATCH_BYTES``, or a sixth of the memory available
    now when that is less (the bench holds the outputs, Pinocchio's stored rows and transient copies)."""
    try:
        with open("/proc/meminfo") as fh:
            info = {ln.split(":")[0]: ln.split()[1] for ln in fh}
        return min(BATCH_BYTES, int(info["MemAvailable"]) * 1024 / 6)
    except (OSError, KeyError, ValueError, IndexError):  # pragma: no cover - not Linux
        return BATCH_BYTES


def _default_threads():
    """Threads a batch call uses by default (mirrors the binding's rdk_default_threads)."""
    env = os.environ.get("ROBODYN_THREADS", "")
    if env.strip().isdigit() and int(env) >= 1:
        return min(int(env), 64)
    try:
        return min(len(os.sched_getaffinity(0)), 64)
    except AttributeError:  # pragma: no cover - not Linux
        return min(os.cpu_count() or 1, 64)


def run(json: bool = False, robots=None, fresh=None) -> dict:
    """Measure everything (or only ``robots``, names of ``ROBOTS``), print a table unless ``json``, and
    return the results as a dict. ``fresh``: robots whose first build is measured (module docstring)."""
    if robots is None and os.environ.get("ROBODYN_BENCH_ROBOTS"):
        robots = [r.strip() for r in os.environ["ROBODYN_BENCH_ROBOTS"].split(",") if r.strip()]
    if fresh is None:
        fresh = os.environ.get("ROBODYN_BENCH_FRESH_BUILD", "panda,ur5")
    if isinstance(fresh, str):
        fresh = list(ROBOTS) if fresh.strip() == "all" else [r.strip() for r in fresh.split(",") if r.strip()]
    pin = _pinocchio()
    result = {"pinocchio": getattr(pin, "__version__", None), "notes": [], "robots": {}}
    if pin is None:
        result["notes"].append("pinocchio is not installed: our times only (pip install pin)")
    root = robots_root()
    if root is None:
        result["notes"].append("example-robot-data is not installed: generated chains only")
    rng = np.random.default_rng(0)
    chains = [r for r in (robots or CHAINS) if r.startswith("chain") and r[5:].isdigit()]
    for name, rel in ROBOTS.items():
        if (robots is not None and name not in robots) or root is None:
            continue
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            result["notes"].append(f"{name}: {path} missing")
            continue
        result["robots"][name] = bench_robot(name, path, pin, rng, fresh=name in fresh)
    with tempfile.TemporaryDirectory(prefix="robodyn-bench-chains-") as folder:
        for name in chains:
            path = os.path.join(folder, name + ".urdf")
            with open(path, "w") as fh:
                fh.write(chain_urdf(int(name[5:])))
            result["robots"][name] = bench_robot(name, path, pin, rng, fresh=name in fresh)
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
        if "fresh_build" in r:
            lines.append("  first build (fresh process, empty cache): " + _build_line(r["fresh_build"], r["fresh_build"]["first_build_wall_seconds"])
                         + ", then cache load " + (f"{r['fresh_build']['cache_load_seconds']:.3f} s"
                                                   if r["fresh_build"]["cache_load_seconds"] is not None else "n/a")
                         + f"; the dynamics part alone {r['fresh_build']['dynamics_first_build_wall_seconds']:.1f} s")
        if "compile_cpu_seconds" in build:
            lines.append("  build of the cached library: " + _build_line(build, None))
        lines.append(f"  {'function':24s} {'ours µs':>10s} {'pinocchio µs':>13s} {'ratio':>7s}")
        for fn, row in r["per_call_us"].items():
            theirs = f"{row['pinocchio']:13.3f} {row['ratio']:7.2f}" if "pinocchio" in row else f"{'n/a':>13s} {'':>7s}"
            lines.append(f"  {fn:24s} {row['ours']:10.3f} {theirs}")
        lines.append(f"  {'batch (per sample)':24s} {'N':>8s} {'ours µs':>10s} {'1 thread':>9s} {'pin loop µs':>12s}"
                     f" {'speedup':>8s} {'1 thread':>9s}")
        for fn, row in r["batch"].items():
            theirs = (f"{row['pinocchio_loop_per_sample_us']:12.3f} {row['speedup']:8.1f} {row['speedup_one_thread']:9.1f}"
                      if "speedup" in row else f"{'n/a':>12s} {'':>8s} {'':>9s}")
            lines.append(f"  {fn + '_batch':24s} {row['N']:8d} {row['ours_per_sample_us']:10.3f} "
                         f"{row['ours_one_thread_per_sample_us']:9.3f} {theirs}")
        lines.append(f"  (batch: ours with {next(iter(r['batch'].values()), {}).get('threads', '?')} thread(s) and with 1;"
                     " Pinocchio's Python loop stores every result into an (N, ...) array, as ours does)")
    return "\n".join(lines)


def _build_line(report, wall):
    """``W s wall (symbolic s wall / c CPU, gcc s wall / c CPU on j jobs), load average before -> after``."""
    nan = float("nan")
    wall = report.get("symbolic_seconds", nan) + report.get("compile_wall_seconds", nan) if wall is None else wall
    before, after = report.get("load_average_before") or [nan], report.get("load_average_after") or [nan]
    return (f"{wall:.1f} s wall (symbolic {report.get('symbolic_seconds', nan):.1f} s wall / "
            f"{report.get('symbolic_cpu_seconds', nan):.1f} s CPU, gcc {report.get('compile_wall_seconds', nan):.1f} s wall / "
            f"{report.get('compile_cpu_seconds', nan):.1f} s CPU on {report.get('compile_jobs', '?')} jobs), "
            f"1-min load average {before[0]:.2f} -> {after[0]:.2f}")
