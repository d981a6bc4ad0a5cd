"""What tracking the Cramér–Rao bound allows: computed torque on a perturbed plant given the plant's exact base
parameters plus an error drawn from the bound's covariance after T s of the motion (what an efficient estimator
could know by then), against the oracle (no error) and against the prediction ``sqrt(1 + (ε / k_P e_o)²)`` from
the draw's own RMS acceleration error ε (robodyn_ros/estimation/cramer_rao_bound.py). The draws are made in the
directions the motion excites most (``--rcond``, of the information per sample's largest eigenvalue): a draw of
the bound's size in the barely excited ones leaves the mass matrix indefinite, which an estimator's prior and
the gate's plausibility check keep from happening.

    python benchmarks/learning_bound_tracking.py                      # the Panda, perturbed:0, T = 4, 16, 64 s
    python benchmarks/learning_bound_tracking.py --robot ur5 --draws 3 --seconds 4 16 64
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robot", default="panda")
    p.add_argument("--plant", default="perturbed:0")
    p.add_argument("--seconds", nargs="+", type=float, default=[4.0, 16.0, 64.0], help="T: s of motion")
    p.add_argument("--draws", type=int, default=2)
    p.add_argument("--rcond", type=float, default=1e-6)
    p.add_argument("--duration", type=float, default=8.0, help="simulated s; tracking RMS from 3 s")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    import numpy as np

    from robodyn_ros.cli.demo_robot import demo_robot, plant_source
    from robodyn_ros.estimation.cramer_rao_bound import fisher_information, learning_bound, model_error
    from robodyn_ros.simulation.adaptive_loop import AdaptiveLoopConfig, OracleLoop, rms
    from robodyn_ros.simulation.learning_limit import plant_beta, reference_samples
    from robodyn_ros.simulation.plant import load_plant

    setup = demo_robot(args.robot)
    plant = load_plant(plant_source(args.plant, setup), setup.model)
    config = AdaptiveLoopConfig(duration=args.duration, attach_time=None, payload_link=setup.robot.wrist_link,
                                kp=setup.config["kp"], kd=setup.config["kd"])
    base = OracleLoop(setup.model, plant, setup.reference, config).base
    beta = plant_beta(base, plant)
    Y, Minv = reference_samples(setup.model, plant.model, base, setup.reference, float(setup.reference.period))
    rate = 1000.0
    bound = learning_bound(Y, Minv, plant.effort_noise, rate, rcond=args.rcond)
    w, U = np.linalg.eigh(fisher_information(Y, plant.effort_noise) / len(Y))
    keep = w > args.rcond * w.max()

    def tracking(beta_used):
        loop = OracleLoop(setup.model, plant, setup.reference, config, base)
        loop.controller.set_parameters(beta_used)
        out = loop.run()
        return rms(out["error"], out["t"], 3.0, np.inf)

    oracle = tracking(beta)
    print(f"{args.robot} {args.plant}: bound eps_1s {bound.epsilon_1s:.3g} rad/s² in {bound.directions} of "
          f"{bound.parameters} directions; oracle tracking RMS from 3 s {oracle:.3g} rad (k_P {config.kp:g})")
    rng = np.random.default_rng(args.seed)
    for T in args.seconds:
        L = U[:, keep] / np.sqrt(w[keep] * rate * T)
        cells = []
        for _ in range(args.draws):
            delta = L @ rng.standard_normal(int(keep.sum()))
            eps = model_error(Y, Minv, delta)
            ratio = tracking(beta + delta) / oracle
            predicted = float(np.sqrt(1.0 + (eps / (config.kp * oracle)) ** 2))
            cells.append(f"eps {eps:.3g}: {ratio:.1f} x the oracle (predicted {predicted:.1f})")
        print(f"after {T:g} s of motion (bound {bound.model_error(T):.3g} rad/s²): " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
