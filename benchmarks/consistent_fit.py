"""What the online consistent-parameter fit costs (``control/consistent_parameters.py``): the estimates a twin run
hands it (its ``(β̂, P)`` at every fit, recorded from a library run of ``robodyn demo``'s scenario), fitted again in
order, warm-started as the run does, and from the nominal start each. Printed per checkout: the fit's wall time
(median, max), IPOPT's iterations and statuses, and the objective ``(Kπ - β̂)ᵀ P⁻¹ (Kπ - β̂) + λ ‖(π - π_nom)/s‖²``
it reached, evaluated here with NumPy. With ``--vs DIR`` the same estimates go through the fit of another checkout
(``DIR`` first on PYTHONPATH: the anchor, e.g. a ``git worktree`` of an earlier commit), in turn A B A B, and the
ratios (time, objective) are printed pair by pair.

    python benchmarks/consistent_fit.py                          # the Panda's perturbed:0, 10 s
    python benchmarks/consistent_fit.py --robot ur5 --plant perturbed:1 --vs ../before
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(robot, plant, duration, path):
    """Run the twin scenario (library loop, computed torque, a 2-kg payload at half time, no oracle) and pickle
    ``(model, base, [(β̂, P), ...])`` of its consistent fits to ``path``."""
    import numpy as np

    from robodyn_ros.cli.demo import run_twin
    from robodyn_ros.control import consistent_parameters as module
    calls, owner = [], []
    fit = module.ConsistentParameters.fit

    def recording(self, beta_hat, P):
        calls.append((np.array(beta_hat, dtype=float), np.array(P, dtype=float)))
        owner[:] = [self.model, self.base]
        return fit(self, beta_hat, P)

    module.ConsistentParameters.fit = recording
    try:
        run_twin(duration=duration, payload_mass=2.0, robot=robot, plant=plant, oracle=False)
    finally:
        module.ConsistentParameters.fit = fit
    if not calls:
        raise SystemExit("consistent_fit: the run made no consistent fit")
    with open(path, "wb") as fh:
        pickle.dump((owner[0], owner[1], calls), fh)


def replay(path):
    """The fits of the pickled run through this interpreter's ``ConsistentParameters``: a dict of lists."""
    import time

    import numpy as np

    from robodyn_ros.control.consistent_parameters import ConsistentParameters
    from robodyn_ros.identification.least_squares import parameter_scales
    with open(path, "rb") as fh:
        model, base, calls = pickle.load(fh)
    scales = parameter_scales(model, 0.1)
    out = {}
    for mode in ("warm", "cold"):
        cp = ConsistentParameters(model, base)
        start = cp._x0.copy()
        seconds, iterations, statuses, objective = [], [], [], []
        for beta_hat, P in calls:
            if mode == "cold":
                cp._x0 = start.copy()
            t = time.perf_counter()
            fit = cp.fit(beta_hat, P)
            seconds.append(time.perf_counter() - t)
            iterations.append(int(cp._solver.stats()["iter_count"]))
            statuses.append(fit.solver)
            w, V = np.linalg.eigh(0.5 * (P + P.T))
            P_inv = (V / np.maximum(w, 1e-12 * w.max())) @ V.T
            d = fit.beta - beta_hat
            objective.append(float(d @ P_inv @ d + np.sum(((fit.pi_full - cp.prior) / scales) ** 2)))
        out[mode] = {"seconds": seconds, "iterations": iterations, "statuses": statuses, "objective": objective}
    return out


def measure(source, path):
    """:func:`replay` in a fresh interpreter with ``source`` first on PYTHONPATH (one BLAS thread, as the nodes)."""
    env = dict(os.environ, PYTHONPATH=source, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--replay", path], env=env,
                          stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(name, result):
    import numpy as np
    for mode, r in result.items():
        s = np.array(r["seconds"]) * 1e3
        kinds = {k: r["statuses"].count(k) for k in sorted(set(r["statuses"]))}
        print(f"  {name} {mode}: {np.median(s):.1f} ms median, {s.max():.0f} max, iterations {r['iterations']}, "
              f"{kinds}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robot", default="panda")
    p.add_argument("--plant", default="perturbed:0")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--vs", help="another checkout (the anchor)")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--replay", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.replay:
        print(json.dumps(replay(args.replay)))
        return
    import numpy as np
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fits.pkl")
        record(args.robot, args.plant, args.duration, path)
        with open(path, "rb") as fh:
            count = len(pickle.load(fh)[2])
        print(f"{args.robot} {args.plant}, {args.duration:g} s: {count} consistent fits recorded")
        for pair in range(args.pairs if args.vs else 1):
            this = measure(ROOT, path)
            summary("this checkout", this)
            if not args.vs:
                break
            other = measure(os.path.abspath(args.vs), path)
            summary("anchor", other)
            for mode in ("warm", "cold"):
                t = np.median(this[mode]["seconds"]) / np.median(other[mode]["seconds"])
                ratio = np.array(this[mode]["objective"]) / np.array(other[mode]["objective"])
                print(f"  pair {pair + 1} {mode}: time (median) this / anchor {t:.3f}; objective this / anchor "
                      f"median {np.median(ratio):.6f}, range {ratio.min():.6f}-{ratio.max():.6f}")


if __name__ == "__main__":
    main()
