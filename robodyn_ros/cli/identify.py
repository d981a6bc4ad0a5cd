"""``robodyn identify BAG --urdf URDF --output PARAMS.yaml ...``: identify a robot's inertial, armature and
friction parameters (and optionally a payload from a wrist F/T sensor) from a ROS 2 bag.

Every bad input ends with one clear message on stderr and exit code 2, before anything is written:
outputs are produced in memory and written atomically at the very end (results.write_atomically).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

from ..model.errors import ModelError


class ProgressBar:
    """A one-line text progress bar on stderr: ``reading bag   [##########----------]  50%``."""

    def __init__(self, stream=None, width=30, quiet=False):
        self.stream, self.width, self.quiet = stream or sys.stderr, width, quiet
        self._last = None
        self._open = False

    def __call__(self, stage, done, total):
        if self.quiet:
            return
        fraction = 1.0 if total <= 0 else min(1.0, done / total)
        filled = int(round(self.width * fraction))
        text = f"\r{stage:<14} [{'#' * filled}{'-' * (self.width - filled)}] {100 * fraction:5.1f}%"
        if text != self._last:
            self.stream.write(text + ("\n" if fraction >= 1.0 else ""))
            self.stream.flush()
            self._last, self._open = text, fraction < 1.0

    def close(self):
        """End an unfinished bar's line (before an error message)."""
        if self._open:
            self.stream.write("\n")
            self._open = False

    def stage(self, name):
        return lambda done, total: self(name, done, total)


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn identify", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="rosbag2 directory (sqlite3 or mcap) or a .db3/.mcap file")
    p.add_argument("--urdf", required=True, help="URDF of the robot (nominal parameters, prior), or a bundled "
                                                 "robot: panda, ur5, iiwa")
    p.add_argument("--output", required=True, help="YAML file of identified parameters to write")
    p.add_argument("--urdf-out", help="also write the URDF with the identified inertials and friction")
    p.add_argument("--joint-states", default="/joint_states", help="sensor_msgs/JointState topic")
    p.add_argument("--wrench", help="geometry_msgs/WrenchStamped topic of a wrist F/T sensor (payload)")
    p.add_argument("--wrench-link", help="URDF link of the F/T sensor frame (needed with --wrench)")
    p.add_argument("--plot", help="PNG of measured against predicted torques")
    p.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="make a joint fixed at VALUE (e.g. fingers not in the bag); repeatable")
    p.add_argument("--cutoff", type=float, default=5.0, help="low-pass cutoff (Hz) of q, v, tau (default 5)")
    p.add_argument("--coulomb-width", type=float, default=0.05,
                   help="Coulomb friction as tanh(v / width), rad/s; 0 for sign(v) (default 0.05)")
    p.add_argument("--repair", action="store_true",
                   help="drop NaN samples and sort out-of-order ones instead of stopping")
    p.add_argument("--no-consistent", action="store_true", help="skip the physically consistent fit")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def _parse_locks(items):
    locks = {}
    for text in items:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ModelError(f"--lock-joint expects NAME=VALUE, got '{text}'")
        try:
            locks[name] = float(value)
        except ValueError:
            raise ModelError(f"--lock-joint {name}: '{value}' is not a number") from None
    return locks


def _check_output_path(path, option):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ModelError(f"{option} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise ModelError(f"{option} {path}: directory {directory} is not writable")


DATA_MAGNITUDE = 1e50
"""Largest |q|, |v|, |tau| accepted from a bag: anything near it is corruption, and the regressor (v^2)
and least squares (squares again) would overflow above about 1e77."""


def _read_joint_states(args, model, progress):
    from ..bags.bag_io import read_joint_states
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            series = read_joint_states(args.bag, args.joint_states, joint_names=model.joint_names, progress=progress)
        except ModelError as exc:
            if "not found on" not in str(exc):
                raise
            raise ModelError(f"joint names do not match the URDF: {exc}; lock URDF joints that were not "
                             "recorded with --lock-joint NAME=VALUE") from None
    report = series.report
    problems = []
    if report.dropped_nan:
        problems.append(f"{report.dropped_nan} sample(s) with NaN position/velocity/effort")
    if report.reordered:
        problems.append(f"{report.reordered} out-of-order sample(s) (stamps going backwards)")
    if report.duplicates:
        problems.append(f"{report.duplicates} sample(s) with a repeated stamp")
    if problems and not args.repair:
        raise ModelError(f"{args.joint_states} in {args.bag} has {', '.join(problems)}; "
                         "rerun with --repair to drop or sort them")
    columns = list(range(len(model.joint_names)))
    for field, x in (("position", series.q), ("velocity", series.v), ("effort", series.tau)):
        bad = np.argwhere(np.abs(x) > DATA_MAGNITUDE) if x is not None else ()  # inf too; NaN was handled
        if len(bad):
            k, j = bad[0]
            raise ModelError(f"{args.joint_states} in {args.bag}: the {field} of '{series.names[j]}' is {x[k, j]:g} "
                             f"at sample {k}, beyond {DATA_MAGNITUDE:g}: the bag is corrupt")
    if series.tau is None or np.isnan(series.tau[:, columns]).all(axis=0).any():
        absent = model.joint_names if series.tau is None else \
            [n for n, c in zip(model.joint_names, columns) if np.isnan(series.tau[:, c]).all()]
        raise ModelError(f"{args.joint_states} has no effort (torque) values for {list(absent)}: nothing to identify from")
    v = None
    if series.v is not None and not np.isnan(series.v[:, columns]).any():
        v = series.v[:, columns]
    return series, series.q[:, columns], v, series.tau[:, columns]


def _payload_section(args, model, identified, series, Q, V, A, T):
    from ..bags.bag_io import read_wrenches
    from ..identification.payload import payload_from_wrench
    if not args.wrench_link:
        raise ModelError("--wrench needs --wrench-link LINK (the URDF link of the sensor frame)")
    model.body_index(args.wrench_link)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrenches = read_wrenches(args.bag, args.wrench, t0_ns=series.t0_ns)
    inside = (T >= wrenches.t[0]) & (T <= wrenches.t[-1])
    if inside.sum() < 10:
        raise ModelError(f"{args.wrench}: its samples do not overlap the joint states in time")
    W = np.stack([np.interp(T[inside], wrenches.t, wrenches.w[:, k]) for k in range(6)], axis=1)
    est = payload_from_wrench(model, args.wrench_link, Q[inside], V[inside], A[inside], W)
    return {"payload": {"link": args.wrench_link, "mass": float(est.mass), "com": est.com.tolist(),
                        "inertia": [float(est.inertia[i, j]) for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))],
                        "sensor_bias": est.bias.tolist(), "mass_std": float(est.std[0]),
                        "relative_error": float(est.relative_error)}}


def _plot(path, t, measured, predicted, names):
    import io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = measured.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.8 * n), sharex=True, squeeze=False)
    for j in range(n):
        ax = axes[j, 0]
        ax.plot(t, measured[:, j], lw=0.8, label="measured (filtered)")
        ax.plot(t, predicted[:, j], lw=0.8, ls="--", label="identified model")
        ax.set_ylabel(f"{names[j]}\nN·m", fontsize=7)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("t (s)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def run(args, progress):
    """The identification; returns ``(files {path: text or bytes}, summary lines)``."""
    from ..model.model import Model
    from ..identification.base_parameters import compute_base_parameters, identifiability_explanation
    from ..identification.batch import identify, predict_torques
    from ..identification.results import identified_urdf, result_document, yaml_text

    from ..model.robot_names import BUNDLED_ROBOTS, resolve_urdf
    args.urdf = resolve_urdf(args.urdf)
    if not os.path.isfile(args.urdf):
        raise ModelError(f"--urdf {args.urdf}: no such file (nor a bundled robot: {', '.join(BUNDLED_ROBOTS)})")
    for path, option in ((args.output, "--output"), (args.urdf_out, "--urdf-out"), (args.plot, "--plot")):
        if path:
            _check_output_path(path, option)
    if args.wrench and not args.wrench_link:
        raise ModelError("--wrench needs --wrench-link LINK (the URDF link of the sensor frame)")
    if args.cutoff <= 0 or args.coulomb_width < 0:
        raise ModelError("--cutoff must be positive and --coulomb-width non-negative")
    locks = _parse_locks(args.lock_joint)
    model = Model.from_urdf(args.urdf, locked_joints=locks or None)
    series, q, v, tau = _read_joint_states(args, model, progress.stage("reading bag"))
    progress("base parameters", 0, 1)
    base = compute_base_parameters(model, coulomb_width=args.coulomb_width)
    progress("base parameters", 1, 1)
    result = identify(model, series.t, q, v, tau, cutoff_hz=args.cutoff, coulomb_width=args.coulomb_width,
                      base=base, consistent=not args.no_consistent, progress=progress.stage("regressor"))
    progress("fit", 1, 1)
    T, Q, V, A, TAU = result.samples
    least_squares = np.concatenate([base.regressor(model, Q[s:s + 8192], V[s:s + 8192], A[s:s + 8192])
                                    for s in range(0, len(Q), 8192)]) @ result.fit.beta
    predicted = predict_torques(result.identified, Q, V, A, args.coulomb_width) if result.consistent else least_squares
    nominal = predict_torques(model, Q, V, A, args.coulomb_width)
    err = float(np.linalg.norm(TAU - predicted) / np.linalg.norm(TAU))
    err_nominal = float(np.linalg.norm(TAU - nominal) / np.linalg.norm(TAU))
    err_ls = float(np.linalg.norm(TAU - least_squares) / np.linalg.norm(TAU))
    extra = {"prediction": {"relative_error_identified_model": err, "relative_error_least_squares": err_ls, "relative_error_nominal_urdf": err_nominal,
                            "samples": int(len(T)), "locked_joints": locks,
                            "note": "on the filtered regression samples (in-sample)"}}
    if args.wrench:
        extra.update(_payload_section(args, model, result.identified, series, Q, V, A, T))
    doc = result_document(result, identifiability=identifiability_explanation(model, base), extra=extra)
    files = {args.output: yaml_text(doc)}
    if args.urdf_out:
        with open(args.urdf) as stream:
            files[args.urdf_out] = identified_urdf(stream.read(), result.identified, locks)
    if args.plot:
        files[args.plot] = _plot(args.plot, T, TAU, predicted, model.joint_names)
    summary = [f"{series.report.kept} joint-state samples, {result.samples_used} in the regression, "
               f"{base.count} base parameters",
               f"fit: relative error {result.fit.relative_error:.4f}, condition number {result.fit.condition_number:.4g}",
               f"torque prediction on the (filtered) data: least-squares base parameters {100 * err_ls:.2f} %, "
               f"{'consistent model' if result.consistent else 'no consistent fit'} {100 * err:.2f} %, "
               f"nominal URDF {100 * err_nominal:.2f} %"]
    if args.wrench:
        summary.append(f"payload at {args.wrench_link}: {doc['payload']['mass']:.4f} kg")
    return files, summary


def _write(files):
    from ..identification.results import write_atomically
    write_atomically(files)   # YAML, URDF and PNG: all or nothing, with the user's umask


def _one_line(exc):
    """The error on one line: causes quoted from other libraries (YAML, sqlite) may span several."""
    return " ".join(str(exc).split())


def main(argv=None):
    """Entry point of ``robodyn identify``; returns the exit code (0 ok, 2 bad input, 1 internal error)."""
    from ..identification.blas_threads import limit_blas_threads
    limit_blas_threads()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    start = time.perf_counter()
    progress = ProgressBar(quiet=args.quiet)
    try:
        files, summary = run(args, progress)
        _write(files)
    except ModelError as exc:
        progress.close()
        print(f"robodyn identify: error: {_one_line(exc)}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return 2
    except OSError as exc:
        progress.close()
        print(f"robodyn identify: error: cannot write the outputs: {_one_line(exc)}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return 2
    except Exception as exc:   # a bug, not bad input: still one line and no partial output (exit 1)
        progress.close()
        print(f"robodyn identify: internal error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        print("nothing was written", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        progress.close()
        print("robodyn identify: interrupted; nothing was written", file=sys.stderr)
        return 130
    for line in summary:
        print(line)
    print(f"wrote {', '.join(files)} in {time.perf_counter() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
