"""Benchmark (not a test): τ̇ and τ̈ of a 7-DoF arm, compiled, next to rnea in the same run.

Müller and Kumar (2021) report 1.6 ms per evaluation of the second-order inverse dynamics of the KUKA
LBR iiwa. We time, on the bundled iiwa (and Panda with fingers locked):
  * the interpreted O(n) recursion (robodyn_ros.dynamics.time_derivatives, NumPy),
  * the same recursion generated as C by CasADi and compiled, evaluated over a batch of N states with
    ``Function.map`` (per-evaluation time = batch time / N, so Python's call overhead is amortised),
  * rnea, interpreted and compiled the same way, for the ratio.
Run: python benchmarks/bench_time_derivatives.py
"""
import time

import casadi as ca
import numpy as np

import robodyn_ros as rd
from robodyn_ros.kernels.compiled_functions import compile_casadi_functions
from robodyn_ros.dynamics.rnea import rnea
from robodyn_ros.robots import bundled_robot_info
from robodyn_ros.dynamics.time_derivatives import rnea_time_derivatives

PAPER_MS = 1.6
N = 2000


def best_of(fn, repeats=7):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench(robot):
    info = bundled_robot_info(robot)
    model = rd.Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"] or None)
    n = model.nv
    X = [ca.SX.sym(f"x{k}", n) for k in range(5)]
    f_dd = ca.Function(f"tau_ddot_{robot}", X, list(rnea_time_derivatives(model, *X)))
    f_id = ca.Function(f"rnea_{robot}", X[:3], [rnea(model, *X[:3])])
    fm_dd, fm_id = f_dd.map(N), f_id.map(N)
    lib = compile_casadi_functions([fm_dd, fm_id], key=f"bench_time_derivatives:{model.fingerprint()}:{N}")
    c_dd, c_id = lib[fm_dd.name()], lib[fm_id.name()]
    rng = np.random.default_rng(0)
    states = [np.array([model.random_configuration(rng) for _ in range(N)]).T] + [rng.normal(size=(n, N)) for _ in range(4)]
    x0 = [s[:, 0] for s in states]
    # compiled values equal the interpreted recursion
    td, tdd = (np.array(r)[:, 0] for r in c_dd(*states))
    ref_td, ref_tdd = rnea_time_derivatives(model, *x0)
    assert np.allclose(td, ref_td, rtol=1e-10, atol=1e-9) and np.allclose(tdd, ref_tdd, rtol=1e-10, atol=1e-9)
    t_dd = best_of(lambda: c_dd(*states)) / N
    t_id = best_of(lambda: c_id(*states[:3])) / N
    t_dd_py = best_of(lambda: rnea_time_derivatives(model, *x0), 3)
    t_id_py = best_of(lambda: rnea(model, *x0[:3]), 3)
    return {"robot": robot, "nv": n, "tau_ddot_compiled_us": t_dd * 1e6, "rnea_compiled_us": t_id * 1e6,
            "tau_ddot_numpy_us": t_dd_py * 1e6, "rnea_numpy_us": t_id_py * 1e6,
            "speedup_vs_paper": PAPER_MS * 1e-3 / t_dd, "tau_ddot_over_rnea": t_dd / t_id}


if __name__ == "__main__":
    print(f"{'robot':<7} {'nv':>3} {'tau_ddot C us':>14} {'rnea C us':>10} {'ratio':>6} {'x paper 1.6 ms':>15} "
          f"{'tau_ddot numpy us':>18} {'rnea numpy us':>14}")
    for robot in ("iiwa", "panda"):
        r = bench(robot)
        print(f"{r['robot']:<7} {r['nv']:>3} {r['tau_ddot_compiled_us']:>14.2f} {r['rnea_compiled_us']:>10.2f} "
              f"{r['tau_ddot_over_rnea']:>6.1f} {r['speedup_vs_paper']:>15.0f} {r['tau_ddot_numpy_us']:>18.0f} "
              f"{r['rnea_numpy_us']:>14.0f}")
