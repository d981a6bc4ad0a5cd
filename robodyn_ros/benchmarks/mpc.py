"""``robodyn bench mpc``: the MPC of :mod:`robodyn_ros.control.mpc` on the Panda (7 DoF, fingers locked),
N = 20 intervals of 10 ms, compiled problem functions, all three solvers in the same run.

1. SQP real-time iteration: a closed loop of 300 control periods (3 s) on our forward dynamics
   (RK4 at 1 kHz, ``τ = τ_ff + K (x - x_pred)`` between solves) tracking a 1 s minimum-jerk move to a
   target and holding it. Each period: the feedback phase (``solve`` with the measured state: the Riccati
   rollout, the bounded QP when a bound is hit, the solution) and, after the command, the preparation
   phase of the next period (``prepare``: shift, reference, linearisation of all stages, Riccati
   factorisation). ``rti_median_ms`` / ``rti_p95_ms``: wall time of both phases per period;
   ``rti_feedback_median_ms`` / ``rti_feedback_p95_ms``: the feedback phase alone (the delay of the
   command); the same loop with the bounded QP solved by hpipm every period (``rti_hpipm_*``), for
   reference.
2. fatrop and ipopt converged (tol 1e-6) on the same problem at every 10th state of that closed loop,
   each warm-started by shifting its own previous solution; median (and p95) wall time per solve,
   iterations, and where the time goes: the NLP functions' share from CasADi's solver stats
   (``fatrop_profile``, ``ipopt_profile``: median ms and calls of ``nlp_jac_g``, ``nlp_hess_l``, ...).

Wall times are what a control loop sees; the CPU time of the same calls is reported alongside, since on
a shared machine the difference is other processes' load (``load_average_1min``).

The first run compiles the problem functions (cached on disk by model, problem and package sources:
the stage Jacobians, the RTI's two phases and the stage functions in three translation units compiled in
parallel: the linearisation, the Riccati factorisation, the rest; then each NLP oracle linked against them; progress on stderr); ``compile_seconds`` says how
long building (or loading from the cache) the plant and the MPC of every solver took in this run: run
once with an empty ``ROBODYN_CACHE_DIR`` and once more for the cached figure.

Measured figures and their dates: docs/PERFORMANCE.md.
"""
from __future__ import annotations

import json as _json
import os
import site
import time

import numpy as np

from ..kernels.compiled_functions import DynamicsFunctions
from ..control.mpc import ModelPredictiveController, MPCConfig
from ..control.reference import QuinticTrajectory
from ..model.model import Model

PANDA_HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
PANDA_TARGET = PANDA_HOME + np.array([0.4, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5])
FINGERS = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}


def panda_model():
    """The Panda with fingers locked: the bundled URDF when present, else example-robot-data's."""
    try:
        from ..robots import bundled_urdf_path
        return Model.from_urdf(bundled_urdf_path("panda"), locked_joints=FINGERS)
    except (ImportError, FileNotFoundError, ValueError, KeyError):
        pass
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots",
                            "panda_description", "urdf", "panda.urdf")
        if os.path.isfile(path):
            return Model.from_urdf(path, locked_joints=FINGERS)
    raise FileNotFoundError("no Panda URDF: neither robodyn_ros.robots nor example-robot-data")


def closed_loop(model, mpc, plant, reference, periods, sim_dt=1e-3):
    """Run ``periods`` MPC periods on the plant; returns states at each solve, wall times of both RTI
    phases per period, CPU times, statuses and wall times of the feedback phase alone."""
    q, v = PANDA_HOME.copy(), np.zeros(model.nv)
    pi = model.inertial_parameters()
    steps = int(round(mpc.config.dt / sim_dt))
    states, times, cpu, statuses, feedback = [], [], [], [], []
    preparation, prep_cpu = 0.0, 0.0
    for k in range(periods):
        t = k * mpc.config.dt
        start, start_cpu = time.perf_counter(), time.process_time()
        sol = mpc.solve(q, v, reference, t)
        feedback.append(time.perf_counter() - start)
        times.append(feedback[-1] + preparation)
        cpu.append(time.process_time() - start_cpu + prep_cpu)
        states.append((t, q.copy(), v.copy()))
        statuses.append(sol.status)
        start, start_cpu = time.perf_counter(), time.process_time()
        mpc.prepare(reference, t + mpc.config.dt)                        # the next period's preparation
        preparation, prep_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        for j in range(steps):
            tau = sol.torque(np.concatenate([q, v]), j * sim_dt)
            q, v = plant.rk4_step(q, v, tau, pi, sim_dt)
    return states, np.array(times), np.array(cpu), statuses, np.array(feedback)


def evaluation_profile(stats_list):
    """Where a converged solve spends its time, from CasADi's solver stats of each solve: medians over
    the solves of the wall time (ms) and number of calls of each NLP function (``nlp_f``, ``nlp_g``,
    ``nlp_grad_f``, ``nlp_jac_g``, ``nlp_hess_l``) and of their sum ``functions_ms``; the rest of a solve
    is the solver's own linear algebra and bookkeeping."""
    names = sorted({k[len("t_wall_"):] for st in stats_list for k in st if k.startswith("t_wall_nlp_")})
    out = {"functions_ms": float(np.median([sum(st.get("t_wall_" + n, 0.0) for n in names)
                                            for st in stats_list]) * 1e3)}
    for n in names:
        out[n + "_ms"] = float(np.median([st.get("t_wall_" + n, 0.0) for st in stats_list]) * 1e3)
        out[n + "_calls"] = float(np.median([st.get("n_call_" + n, 0) for st in stats_list]))
    return out


def converged_solves(model, solver, states, reference, config, **options):
    """Wall times (s), CPU times (s), iterations, statuses of ``solver`` (and further :class:`MPCConfig`
    ``options``) on the given states (warm start by shift) and the :func:`evaluation_profile` of the
    solves."""
    mpc = ModelPredictiveController(model, MPCConfig(**{**vars(config), "solver": solver, **options}))
    mpc.solve(states[0][1], states[0][2], reference, states[0][0])        # first call: load, warm up
    times, cpu, iters, statuses, stats = [], [], [], [], []
    for t, q, v in states:
        start_cpu = time.process_time()
        sol = mpc.solve(q, v, reference, t)
        cpu.append(time.process_time() - start_cpu)
        times.append(sol.solve_time)
        iters.append(sol.iterations)
        statuses.append(sol.status)
        stats.append(dict(mpc.last_solver_stats))
    return np.array(times), np.array(cpu), np.array(iters), statuses, evaluation_profile(stats)


def _rti_figures(rti_times, rti_feedback, rti_status, hp_times, hp_feedback, hp_status):
    """The RTI entries of the result (ms) from the two closed loops' wall times and statuses."""
    return {
        "rti_median_ms": float(np.median(rti_times) * 1e3), "rti_p95_ms": float(np.percentile(rti_times, 95) * 1e3),
        "rti_max_ms": float(rti_times.max() * 1e3), "rti_solves": int(rti_times.size),
        "rti_feedback_median_ms": float(np.median(rti_feedback) * 1e3),
        "rti_feedback_p95_ms": float(np.percentile(rti_feedback, 95) * 1e3),
        "rti_preparation_median_ms": float(np.median(rti_times - rti_feedback) * 1e3),
        "rti_hpipm_median_ms": float(np.median(hp_times) * 1e3),
        "rti_hpipm_p95_ms": float(np.percentile(hp_times, 95) * 1e3),
        "rti_hpipm_feedback_median_ms": float(np.median(hp_feedback) * 1e3),
        "rti_hpipm_fallbacks": int(sum(s.startswith("fallback") for s in hp_status)),
        "rti_fallbacks": int(sum(s.startswith("fallback") for s in rti_status)),
    }


def _converged_figures(name, times, iters, statuses):
    """The entries of one converged solver (``name``: 'fatrop' | 'ipopt'): median and p95 wall time (ms),
    median iterations, converged solves."""
    return {f"{name}_median_ms": float(np.median(times) * 1e3), f"{name}_p95_ms": float(np.percentile(times, 95) * 1e3),
            f"{name}_median_iterations": float(np.median(iters)),
            f"{name}_converged": int(sum(s == "solved" for s in statuses)), f"{name}_solves": len(statuses)}


def print_table(result, model, config):
    """The figures of :func:`run` as a table on stdout."""
    r = result
    print(f"MPC on the Panda ({model.nv} DoF), N = {config.horizon}, dt = {config.dt * 1e3:.0f} ms, compiled")
    print(f"  SQP-RTI (Riccati) step: median {r['rti_median_ms']:.2f} ms, p95 {r['rti_p95_ms']:.2f} ms, "
          f"max {r['rti_max_ms']:.2f} ms over {r['rti_solves']} closed-loop periods "
          f"({r['rti_fallbacks']} fallbacks); final error {r['rti_final_max_error_rad']:.2e} rad")
    print(f"    feedback phase: median {r['rti_feedback_median_ms']:.3f} ms, p95 {r['rti_feedback_p95_ms']:.3f} ms; "
          f"preparation median {r['rti_preparation_median_ms']:.2f} ms")
    print(f"  SQP-RTI (hpipm every period): median {r['rti_hpipm_median_ms']:.2f} ms, "
          f"p95 {r['rti_hpipm_p95_ms']:.2f} ms, feedback phase {r['rti_hpipm_feedback_median_ms']:.2f} ms")
    for name in ("fatrop", "ipopt"):
        print(f"  {name + ' converged:':<21} median {r[name + '_median_ms']:.2f} ms, "
              f"{r[name + '_median_iterations']:.0f} iterations, "
              f"{r[name + '_converged']}/{r[name + '_solves']} converged")
    for name in ("fatrop", "ipopt"):
        prof = r[name + "_profile"]
        calls = ", ".join(f"{k[4:-3]} {prof[k]:.2f} ms ({prof[k[:-3] + '_calls']:.0f} calls)"
                          for k in prof if k.startswith("nlp_") and k.endswith("_ms"))
        print(f"  {name} in NLP functions: median {prof['functions_ms']:.2f} ms per solve: {calls}")
    print(f"  fatrop / ipopt: {r['fatrop_over_ipopt']:.2f}; building/loading took {r['compile_seconds']:.1f} s")
    print(f"  CPU time of the same calls (medians): RTI {r['rti_median_cpu_ms']:.2f} ms "
          f"(p95 {r['rti_p95_cpu_ms']:.2f}), fatrop {r['fatrop_median_cpu_ms']:.2f} ms, "
          f"ipopt {r['ipopt_median_cpu_ms']:.2f} ms; load average {r['load_average_1min']:.1f} "
          f"on {r['cpu_count']} CPUs")


def run(json: bool = False) -> dict:
    """Measure and return the figures (module docstring); print a table unless ``json``."""
    model = panda_model()
    reference = QuinticTrajectory(PANDA_HOME, PANDA_TARGET, 1.0, t_start=0.05)
    config = MPCConfig(horizon=20, dt=0.01, solver="rti", qp_solver="riccati", compiled=True, time_limit=1.0,
                       tol=1e-6, max_iter=200)
    start = time.perf_counter()
    plant = DynamicsFunctions(model, compiled=True)
    rti = ModelPredictiveController(model, config)
    rti.solve(PANDA_HOME, np.zeros(model.nv), reference, 0.0)             # load + warm-up
    rti._w, rti._solution = None, None
    build = time.perf_counter() - start
    states, rti_times, rti_cpu, rti_status, rti_feedback = closed_loop(model, rti, plant, reference, 300)
    hpipm = ModelPredictiveController(model, MPCConfig(**{**vars(config), "qp_solver": "hpipm"}))
    _, hp_times, _, hp_status, hp_feedback = closed_loop(model, hpipm, plant, reference, 300)
    sample = states[::10]
    start = time.perf_counter()
    fat_times, fat_cpu, fat_iters, fat_status, fat_prof = converged_solves(model, "fatrop", sample, reference, config)
    ipo_times, ipo_cpu, ipo_iters, ipo_status, ipo_prof = converged_solves(model, "ipopt", sample, reference, config)
    build += time.perf_counter() - start - fat_times.sum() - ipo_times.sum()
    result = {
        "robot": "panda", "dof": model.nv, "horizon": config.horizon, "dt_ms": config.dt * 1e3,
        **_rti_figures(rti_times, rti_feedback, rti_status, hp_times, hp_feedback, hp_status),
        "rti_final_max_error_rad": float(np.abs(states[-1][1] - PANDA_TARGET).max()),
        **_converged_figures("fatrop", fat_times, fat_iters, fat_status),
        **_converged_figures("ipopt", ipo_times, ipo_iters, ipo_status),
        "fatrop_over_ipopt": float(np.median(fat_times) / np.median(ipo_times)),
        "compile_seconds": build,
        # process CPU time of the same calls: wall minus what other processes took from us
        "rti_median_cpu_ms": float(np.median(rti_cpu) * 1e3), "rti_p95_cpu_ms": float(np.percentile(rti_cpu, 95) * 1e3),
        "fatrop_median_cpu_ms": float(np.median(fat_cpu) * 1e3), "ipopt_median_cpu_ms": float(np.median(ipo_cpu) * 1e3),
        "load_average_1min": float(os.getloadavg()[0]), "cpu_count": os.cpu_count(),
        # medians of the time spent in (and calls of) the NLP functions per converged solve
        "fatrop_profile": fat_prof, "ipopt_profile": ipo_prof,
    }
    if not json:
        print_table(result, model, config)
    return result


if __name__ == "__main__":  # pragma: no cover
    print(_json.dumps(run(json=True)))
