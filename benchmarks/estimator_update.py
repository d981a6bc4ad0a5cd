"""What one joint state costs the estimator: µs per ``OnlineEstimator.step`` on a robot's base parameters (a
Fourier motion, its RNEA torques plus noise, the estimator the twin and the nodes run) with the small solves of
``estimation/dense_solves.py`` (LAPACK called directly), against the same estimator with the general solves in
their place (``scipy.linalg`` Cholesky and triangular solves, ``numpy.linalg.solve`` and ``inv``, ``numpy.median``:
the anchor, measured in the same run, A B A B); and the wrist sensor's wrench regressor through its C entry point
against CasADi's call of the same compiled function. Both paths must give the same estimate (checked).

    python benchmarks/estimator_update.py                  # the Panda, 8 s of joint states at 1 kHz, 3 pairs
    python benchmarks/estimator_update.py --robot ur5 --pairs 5
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@contextlib.contextmanager
def general_solves():
    """The estimators' dense solves replaced by the general ``scipy.linalg`` / ``numpy`` ones (the anchor)."""
    import numpy as np
    import scipy.linalg

    from robodyn_ros.estimation import base_parameter_estimator as bpe
    from robodyn_ros.estimation import recursive
    general = {"cholesky_lower": lambda A: scipy.linalg.cho_factor(A, lower=True, check_finite=False)[0],
               "cholesky_solve": lambda c, b: scipy.linalg.cho_solve((c, True), b, check_finite=False),
               "lower_solve": lambda c, B: scipy.linalg.solve_triangular(c, B, lower=True, check_finite=False),
               "spd_solve": np.linalg.solve, "median": lambda x: float(np.median(x))}
    saved = {name: getattr(bpe, name) for name in general}
    saved_inverse = recursive.spd_inverse
    try:
        for name, function in general.items():
            setattr(bpe, name, function)
        recursive.spd_inverse = np.linalg.inv
        yield
    finally:
        for name, function in saved.items():
            setattr(bpe, name, function)
        recursive.spd_inverse = saved_inverse


def estimator_run(model, t, Q, V, TAU):
    """(µs per step, the final base-parameter estimate) of a new estimator over the samples."""
    from robodyn_ros.simulation.adaptive_loop import joint_torque_estimator
    est = joint_torque_estimator(model, effort_std=0.05)
    start = time.perf_counter()
    for k in range(len(t)):
        if est.admit(t[k], Q[k], V[k], TAU[k]):
            est.step(t[k], Q[k], V[k], TAU[k])
    return 1e6 * (time.perf_counter() - start) / len(t), est.base_estimator.beta.copy()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robot", default="panda", help="bundled robot name or URDF")
    p.add_argument("--seconds", type=float, default=8.0, help="s of joint states at 1 kHz")
    p.add_argument("--pairs", type=int, default=3)
    args = p.parse_args(argv)

    import numpy as np

    import robodyn_ros as rd
    from robodyn_ros.identification.blas_threads import limit_blas_threads
    from robodyn_ros.identification.exciting_trajectory import FourierTrajectory
    from robodyn_ros.identification.sensor_wrench import SensorWrenchRegressor
    limit_blas_threads()

    model = rd.Model.from_urdf(args.robot)
    n = model.nv
    rng = np.random.default_rng(1)
    motion = FourierTrajectory(q0=model.neutral_configuration(), a=rng.uniform(-.3, .3, (n, 3)),
                               b=rng.uniform(-.3, .3, (n, 3)), period=4.0)
    t = np.arange(0.0, args.seconds, 1e-3)
    Q, V, A = motion.evaluate(t)
    TAU = rd.compile_kernels(model).rnea_batch(Q, V, A) + rng.normal(0.0, 0.05, (len(t), n))
    estimator_run(model, t[:500], Q, V, TAU)        # imports and caches warm

    direct, general = [], []
    for _ in range(args.pairs):
        us, beta_direct = estimator_run(model, t, Q, V, TAU)
        direct.append(us)
        with general_solves():
            us, beta_general = estimator_run(model, t, Q, V, TAU)
        general.append(us)
        difference = np.abs(beta_direct - beta_general).max() / np.abs(beta_general).max()
        assert difference < 1e-9, f"the two paths' estimates differ by {difference:.1e} (relative)"
    ratios = [a / b for a, b in zip(direct, general)]
    print(f"{model.name}: OnlineEstimator.step, {len(t)} joint states, r = {len(beta_direct)} base parameters")
    print(f"  direct LAPACK  median {np.median(direct):7.1f} us  ({', '.join(f'{x:.1f}' for x in direct)})")
    print(f"  general solves median {np.median(general):7.1f} us  ({', '.join(f'{x:.1f}' for x in general)})")
    print(f"  direct / general median {np.median(ratios):.3f}; estimates equal to {difference:.1e} (relative)")

    link = [name for name in model.frames if model.body_index(name) == model.nbodies - 1][-1]
    regressor = SensorWrenchRegressor(model, link)
    external = rd.kernels.compiled_functions.compile_casadi_functions(
        [regressor._fn], f"sensor_wrench:{link}:" + model.fingerprint())[regressor._fn.name()]
    x = np.concatenate([Q[0], V[0], A[0]])
    assert np.array_equal(regressor(Q[0], V[0], A[0]), external(x).full())
    calls = 20000
    times = {}
    for name, call in (("C entry point", lambda: regressor(Q[0], V[0], A[0])),
                       ("CasADi call", lambda: external(np.concatenate([Q[0], V[0], A[0]])).full())):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times[name] = 1e6 * (time.perf_counter() - start) / calls
    print(f"  wrench regressor of {link}: C entry point {times['C entry point']:.1f} us, CasADi call "
          f"{times['CasADi call']:.1f} us, ratio {times['C entry point'] / times['CasADi call']:.3f}")


if __name__ == "__main__":
    main()
