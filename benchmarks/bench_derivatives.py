"""Time per call of our analytical derivatives (NumPy path) next to Pinocchio's, in the same run.

Usage: python benchmarks/bench_derivatives.py [--json] [--crossover]

For Panda, UR5 and Talos (fixed base, example-robot-data URDFs, the same file for both libraries):
``rnea_derivatives`` vs ``pinocchio.computeRNEADerivatives`` and ``aba_derivatives`` (``'solve'``, which
is what ``'auto'`` does on NumPy; DMM; AZA) vs ``pinocchio.computeABADerivatives``: best-of-repeats time
per call and the ratio ours / Pinocchio.
``--crossover`` also measures DMM against AZA on random revolute chains of growing size, for the NumPy
path (time per call) and the CasADi SX path (instructions of the generated function, what the compiled
kernels execute), which is how ``aba_derivatives.AZA_CROSSOVER_NV`` was chosen.
"""
import json
import os
import site
import sys
import timeit

import numpy as np

import robodyn_ros as rd
from robodyn_ros.dynamics.aba_derivatives import aba_derivatives
from robodyn_ros.model.model_builder import random_tree_model
from robodyn_ros.dynamics.rnea_derivatives import rnea_derivatives

ROBOTS = {"panda": "panda_description/urdf/panda.urdf", "ur5": "ur_description/urdf/ur5_robot.urdf",
          "talos": "talos_data/robots/talos_reduced.urdf"}


def erd_path(relative):
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots", relative)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"example-robot-data URDF {relative} not found")


def per_call(fn, min_time=0.1, repeats=11):
    """Best-of-``repeats`` seconds per call, each repeat running at least ``min_time``."""
    n = max(1, int(min_time / max(timeit.timeit(fn, number=1), 1e-7)))
    return min(timeit.repeat(fn, number=n, repeat=repeats)) / n


def bench_robot(name):
    import pinocchio as pin
    path = erd_path(ROBOTS[name])
    ours, pm = rd.Model.from_urdf(path), pin.buildModelFromUrdf(path)
    pd = pm.createData()
    rng = np.random.default_rng(0)
    q, v, a = ours.random_configuration(rng), rng.normal(size=ours.nv), rng.normal(size=ours.nv)
    # Pinocchio's state for the same configuration (continuous joints would be (cos, sin); none here)
    order = [pm.joints[pm.getJointId(n)].idx_v for n in ours.joint_names]
    qp, vp, ap = (np.zeros(pm.nv) for _ in range(3))
    qp[order], vp[order], ap[order] = q, v, a
    row = {"nv": ours.nv}
    row["rnea_derivatives_us"] = 1e6 * per_call(lambda: rnea_derivatives(ours, q, v, a))
    row["pin_rnea_derivatives_us"] = 1e6 * per_call(lambda: pin.computeRNEADerivatives(pm, pd, qp, vp, ap))
    for method in ("solve", "dmm", "aza"):
        row[f"aba_derivatives_{method}_us"] = 1e6 * per_call(lambda: aba_derivatives(ours, q, v, a, method=method))
    row["pin_aba_derivatives_us"] = 1e6 * per_call(lambda: pin.computeABADerivatives(pm, pd, qp, vp, ap))
    row["rnea_ratio"] = row["rnea_derivatives_us"] / row["pin_rnea_derivatives_us"]
    row["aba_ratio"] = row["aba_derivatives_solve_us"] / row["pin_aba_derivatives_us"]
    return row


def crossover(sizes=(3, 6, 9, 16, 32, 64, 72, 80)):
    """DMM vs AZA on random revolute chains: NumPy time per call and SX instruction counts."""
    import casadi as ca
    rows = []
    for n in sizes:
        model = random_tree_model(np.random.default_rng(n), ["revolute"] * n)
        rng = np.random.default_rng(1)
        q, v, tau = model.random_configuration(rng), rng.normal(size=n), rng.normal(size=n)
        row = {"nv": n}
        for method in ("dmm", "aza"):
            row[f"{method}_numpy_us"] = 1e6 * per_call(lambda: aba_derivatives(model, q, v, tau, method=method), 0.1, 3)
            qs, vs, ts = ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("t", n)
            f = ca.Function("f", [qs, vs, ts], list(aba_derivatives(model, qs, vs, ts, method=method)))
            row[f"{method}_sx_instructions"] = f.n_instructions()
        rows.append(row)
    return rows


def run(as_json=False, with_crossover=False):
    result = {"robots": {name: bench_robot(name) for name in ROBOTS}}
    if with_crossover:
        result["crossover"] = crossover()
    if not as_json:
        print(f"{'robot':8} {'nv':>3} | {'rnea_derivatives us':>20} {'pinocchio':>10} {'ratio':>7} | "
              f"{'aba_derivatives us':>19} {'(dmm':>8} {'aza)':>8} {'pinocchio':>10} {'ratio':>7}")
        for name, r in result["robots"].items():
            print(f"{name:8} {r['nv']:3d} | {r['rnea_derivatives_us']:20.1f} {r['pin_rnea_derivatives_us']:10.2f} "
                  f"{r['rnea_ratio']:7.1f} | {r['aba_derivatives_solve_us']:19.1f} {r['aba_derivatives_dmm_us']:8.1f} "
                  f"{r['aba_derivatives_aza_us']:8.1f} {r['pin_aba_derivatives_us']:10.2f} {r['aba_ratio']:7.1f}")
        for r in result.get("crossover", []):
            print(f"chain nv={r['nv']:3d}: NumPy dmm {r['dmm_numpy_us']:8.1f} us, aza {r['aza_numpy_us']:8.1f} us; "
                  f"SX instructions dmm {r['dmm_sx_instructions']:7d}, aza {r['aza_sx_instructions']:7d}")
    return result


if __name__ == "__main__":
    as_json = "--json" in sys.argv[1:]
    out = run(as_json, "--crossover" in sys.argv[1:])
    if as_json:
        print(json.dumps(out))
