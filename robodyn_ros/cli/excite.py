"""``robodyn excite --urdf URDF --output TRAJ.csv [--period S] [--harmonics K] [--plot PNG]``: an
optimised periodic exciting trajectory for identification (minimum condition number of the base-parameter
regressor, :mod:`robodyn_ros.identification.excitation`) within the URDF's position, velocity and effort
limits with a margin, starting and ending at rest.

The CSV has the header ``time,<joint name>,...`` and one row of joint positions (rad or m) per
millisecond from t = 0 to t = period inclusive (the last row equals the first: the motion is periodic
and at rest there). Bad input ends with one line on stderr and exit code 2; nothing is written then.
"""
from __future__ import annotations

import argparse
import io
import os
import sys

import numpy as np

from ..model.errors import ModelError
from .file_command import file_command_main, png_bytes


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn excite", description=__doc__.split("\n\n")[0])
    p.add_argument("--urdf", required=True, help="URDF path, or a bundled robot: panda, ur5, iiwa")
    p.add_argument("--output", required=True, help="CSV of joint positions to write (time,<joint>,...)")
    p.add_argument("--period", type=float, default=10.0, help="period T of the motion (s, default 10)")
    p.add_argument("--harmonics", type=int, default=5, help="harmonics K of the Fourier series (default 5)")
    p.add_argument("--margin", type=float, default=0.05,
                   help="fraction kept free of every limit: positions by margin x range, |v| and |tau| below "
                        "(1 - margin) x limit (default 0.05)")
    p.add_argument("--max-acceleration", type=float, help="also keep |a| below this (rad/s², all joints)")
    p.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="make a joint fixed at VALUE (bundled robots lock their fingers); repeatable")
    p.add_argument("--coulomb-width", type=float, default=0.05,
                   help="Coulomb friction column tanh(v / width) of the regressor, rad/s (as identify)")
    p.add_argument("--iterations", type=int, default=30, help="optimiser iterations (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random starting trajectory")
    p.add_argument("--start", metavar="Q1,Q2,...|home",
                   help="start (and end) at this configuration of the joints (rad or m, comma-separated), or at "
                        "a bundled robot's home; default: wherever the optimiser puts it")
    p.add_argument("--plot", help="PNG of positions, velocities and torques against their limits")
    return p


def trajectory_csv(names, t, q):
    """CSV text: header ``time,<names>`` then one row per sample (t (N,), q (N, n))."""
    buffer = io.StringIO()
    buffer.write(",".join(["time", *names]) + "\n")
    np.savetxt(buffer, np.column_stack([t, q]), delimiter=",", fmt="%.17g")
    return buffer.getvalue()


def _plot(model, t, q, v, tau, margin):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = model.nv
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for j in range(n):
        axes[0].plot(t, (q[:, j] - model.lower[j]) / (model.upper[j] - model.lower[j]), lw=0.8, label=model.joint_names[j])
        axes[1].plot(t, v[:, j] / model.velocity_limit[j], lw=0.8)
        axes[2].plot(t, tau[:, j] / model.effort_limit[j], lw=0.8)
    for ax, label, lo, hi in ((axes[0], "q (fraction of range)", margin, 1 - margin),
                              (axes[1], "v / v_max", -(1 - margin), 1 - margin),
                              (axes[2], "tau / effort", -(1 - margin), 1 - margin)):
        ax.axhline(lo, color="k", ls=":", lw=0.6)
        ax.axhline(hi, color="k", ls=":", lw=0.6)
        ax.set_ylabel(label, fontsize=8)
    axes[0].legend(fontsize=6, ncol=4, loc="upper right")
    axes[-1].set_xlabel("t (s)")
    fig.tight_layout()
    return png_bytes(fig)


def _start_configuration(args, model, bundled):
    """``--start`` as (nv,) or None; ModelError naming what is wrong."""
    if args.start is None:
        return None
    if args.start == "home":
        if not bundled:
            raise ModelError("--start home needs a bundled robot (panda, ur5, iiwa); give the coordinates instead")
        from ..robots import bundled_robot_info
        return np.asarray(bundled_robot_info(args.urdf)["home"], dtype=float)
    try:
        q = np.array([float(x) for x in args.start.split(",")])
    except ValueError:
        raise ModelError(f"--start {args.start}: expected {model.nv} comma-separated numbers or 'home'") from None
    if q.shape != (model.nv,):
        raise ModelError(f"--start has {q.size} values for {model.nv} joints ({', '.join(model.joint_names)})")
    return q


def run(args):
    """Returns ``(files {path: text or bytes}, summary lines)``."""
    from ..identification.base_parameters import compute_base_parameters
    from ..identification.batch import predict_torques
    from ..identification.excitation import design_for_model
    from ..model.model import Model
    from .command_inputs import parse_locks
    from .file_command import check_output_path
    from .main import resolve_urdf

    urdf = resolve_urdf(args.urdf)
    if not os.path.isfile(urdf):
        raise ModelError(f"--urdf {args.urdf}: no such file")
    for path, option in ((args.output, "--output"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    if not args.period > 0 or args.harmonics < 1 or args.iterations < 0:
        raise ModelError("--period must be positive, --harmonics and --iterations at least 1 and 0")
    if not 0.0 <= args.margin < 0.5:
        raise ModelError(f"--margin {args.margin}: must lie in [0, 0.5)")
    locks = parse_locks(args.lock_joint)
    if not locks and urdf != args.urdf:
        from ..robots import bundled_robot_info
        locks = dict(bundled_robot_info(args.urdf).get("locked_joints") or {})
    model = Model.from_urdf(urdf, locked_joints=locks or None)
    base = compute_base_parameters(model, coulomb_width=args.coulomb_width)
    a_max = None if args.max_acceleration is None else np.full(model.nv, args.max_acceleration)
    q_start = _start_configuration(args, model, urdf != args.urdf)
    trajectory, kappa = design_for_model(model, period=args.period, harmonics=args.harmonics, margin=args.margin,
                                         coulomb_width=args.coulomb_width, seed=args.seed, a_max=a_max,
                                         max_iterations=args.iterations, base=base, q_start=q_start)
    t = np.arange(int(round(args.period * 1000)) + 1) * 1e-3
    q, v, a = trajectory.evaluate(t)
    tau = predict_torques(model, q, v, a, args.coulomb_width)
    files = {args.output: trajectory_csv(model.joint_names, t, q)}
    if args.plot:
        files[args.plot] = _plot(model, t, q, v, tau, args.margin)
    use = lambda x, limit: float(np.max(np.abs(x) / limit))  # noqa: E731
    closest = float(np.min(np.minimum(q - model.lower, model.upper - q) / (model.upper - model.lower)))
    report = trajectory.design_report
    summary = [f"{model.nv} joints, {base.count} base parameters, period {args.period:g} s, {args.harmonics} harmonics",
               f"regressor condition number {kappa:.4g} (start {np.exp(report.initial_cost):.4g}; "
               f"{report.iterations} iterations, {report.seconds:.1f} s)",
               f"limits: closest approach to a position limit {100 * closest:.1f} % of the range; peak |v| "
               f"{100 * use(v, model.velocity_limit):.1f} % and peak |tau| {100 * use(tau, model.effort_limit):.1f} % "
               f"of the limits",
               "starts and ends at rest at q = " + " ".join(f"{x:.4f}" for x in q[0])]
    return files, summary


def main(argv=None):
    """Entry point of ``robodyn excite``; returns the exit code (0 ok, 2 bad input, 1 internal error)."""
    return file_command_main("excite", build_parser(), argv, run)


if __name__ == "__main__":
    sys.exit(main())
