"""robodyn excite --urdf URDF --output TRAJ.csv: an optimised periodic exciting trajectory for
identification (minimum condition number of the base-parameter regressor, robodyn_ros.identification.excitation)
within the URDF's position, velocity and effort limits with a margin, starting and ending at rest, that
keeps the whole arm clear of the floor and of itself.

The arm is modelled by capsules bounding the URDF's collision geometry (links without any: capsules of
``--link-radius`` on their frames; the bundled robots carry capsules fitted to their original meshes).
Every moving part stays ``--clearance`` above the floor plane (``--table-height`` in the base frame,
default the plane the base stands on) and inside the ``--workspace`` box if one is given; links that
are not parent and child stay ``--self-clearance`` apart. The written trajectory is checked at every
millisecond: if any limit or clearance is violated, nothing is written.

The CSV has the header ``time,<joint name>,...`` and one row of joint positions (rad or m) per
millisecond from t = 0 to t = period inclusive (the last row equals the first: the motion is periodic
and at rest there). Bad input ends with one line on stderr and exit code 2; nothing is written then.
"""
from __future__ import annotations

import io
import sys

import numpy as np

from ..model.errors import ModelError
from .command_inputs import ProgressBar, VectorOptionParser
from .file_command import file_command_main, png_bytes


def build_parser():
    p = VectorOptionParser(prog="robodyn excite", description=__doc__.split("\n\n")[0])
    p.add_argument("--urdf", required=True, help="URDF path, a bundled robot (panda, ur5, iiwa) or a parameter file "
                                                 "of robodyn config (its URDF, locked joints, home and table height)")
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
    p.add_vector_argument("--start", metavar="Q1,Q2,...|home",
                          help="start (and end) at this configuration of the joints (rad or m, comma-separated), "
                               "or 'home': a bundled robot's or the --urdf parameter file's; default: wherever the "
                               "optimiser puts it")
    p.add_argument("--range", action="append", default=[], metavar="JOINT=LO:HI",
                   help="keep JOINT within [LO, HI] (rad or m, within the URDF's limits; needed for continuous "
                        "joints); repeatable")
    p.add_argument("--clearance", type=float, default=0.05,
                   help="distance every moving part keeps above the floor or table (m, default 0.05)")
    p.add_argument("--table-height", type=float,
                   help="height of the floor or table plane in the base frame (m; default: the --urdf parameter "
                        "file's, else the lowest point of the URDF's fixed base when it reaches below the base (a "
                        "pedestal), else 0: the plane the base stands on)")
    p.add_vector_argument("--workspace", metavar="XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX",
                          help="also keep the moving links inside this box of the base frame (m)")
    p.add_argument("--self-clearance", type=float, default=0.02,
                   help="distance between links that are not parent and child (m, default 0.02)")
    p.add_argument("--link-radius", type=float, default=0.06,
                   help="radius of the capsules of links without collision geometry (m, default 0.06)")
    p.add_argument("--package-dir", action="append", default=[], metavar="DIR",
                   help="folder holding the packages of package:// mesh names; repeatable")
    p.add_argument("--plot", help="PNG of positions, velocities, torques and clearances over the period")
    p.add_argument("--quiet", action="store_true", help="no progress bar (shown only on a terminal)")
    return p


def trajectory_csv(names, t, q):
    """CSV text: header ``time,<names>`` then one row per sample (t (N,), q (N, n))."""
    buffer = io.StringIO()
    buffer.write(",".join(["time", *names]) + "\n")
    np.savetxt(buffer, np.column_stack([t, q]), delimiter=",", fmt="%.17g")
    return buffer.getvalue()


def _plot(model, t, q, v, tau, margin, distances, clearance):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = model.nv
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True)
    for j in range(n):
        axes[0].plot(t, q[:, j], lw=0.8, label=model.joint_names[j])
        axes[1].plot(t, v[:, j] / model.velocity_limit[j], lw=0.8)
        axes[2].plot(t, tau[:, j] / model.effort_limit[j], lw=0.8)
    for ax, label in ((axes[1], "v / v_max"), (axes[2], "tau / effort")):
        ax.axhline(-(1 - margin), color="k", ls=":", lw=0.6)
        ax.axhline(1 - margin, color="k", ls=":", lw=0.6)
        ax.set_ylabel(label, fontsize=8)
    axes[0].set_ylabel("q (rad or m)", fontsize=8)
    axes[0].legend(fontsize=6, ncol=4, loc="upper right")
    for (name, distance), colour in zip(distances.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        required = clearance.self_clearance if name == "self" else \
            next(p.clearance for p in clearance.planes if p.name == name)
        axes[3].plot(t, distance, lw=0.8, color=colour, label="between links" if name == "self" else name)
        axes[3].axhline(required, color=colour, ls=":", lw=0.6)
    axes[3].set_ylabel("clearance (m)", fontsize=8)
    axes[3].set_ylim(bottom=0.0)
    axes[3].legend(fontsize=6, loc="upper right")
    axes[-1].set_xlabel("t (s)")
    fig.tight_layout()
    return png_bytes(fig)


def _ranges(items, model):
    """``(lower, upper)`` (nv,) of the URDF narrowed by the ``--range JOINT=LO:HI`` options."""
    lower, upper = model.lower.copy(), model.upper.copy()
    for text in items:
        name, sep, span = text.partition("=")
        low, colon, high = span.partition(":")
        try:
            low, high = float(low), float(high)
        except ValueError:
            low = high = None
        if not sep or not colon or low is None or not np.isfinite(low) or not np.isfinite(high):
            raise ModelError(f"--range expects JOINT=LO:HI with two numbers, got '{text}'")
        if name not in model.joint_names:
            raise ModelError(f"--range {text}: no movable joint '{name}' (joints: {', '.join(model.joint_names)})")
        j = model.joint_names.index(name)
        if not low < high:
            raise ModelError(f"--range {text}: LO must be below HI")
        if low < model.lower[j] or high > model.upper[j]:
            raise ModelError(f"--range {text}: outside the URDF's limits [{model.lower[j]:g}, {model.upper[j]:g}] "
                             f"of joint '{name}'")
        lower[j], upper[j] = low, high
    return lower, upper


def _workspace(text):
    if text is None:
        return None
    try:
        values = np.array([float(x) for x in text.split(",")])
    except ValueError:
        values = np.zeros(0)
    if values.shape != (6,) or not np.all(np.isfinite(values)):
        raise ModelError(f"--workspace {text}: expected six numbers XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX")
    if not np.all(values[:3] < values[3:]):
        raise ModelError(f"--workspace {text}: each minimum must be below its maximum")
    return values[:3], values[3:]


def _check_limits(model, lower, upper, t, q, v, tau):
    """One line naming the first limit the written samples break, or None."""
    for j, name in enumerate(model.joint_names):
        checks = ((np.min(q[:, j]) < lower[j] or np.max(q[:, j]) > upper[j], "position range"),
                  (np.max(np.abs(v[:, j])) > model.velocity_limit[j], "velocity limit"),
                  (np.max(np.abs(tau[:, j])) > model.effort_limit[j], "effort limit"))
        for broken, what in checks:
            if broken:
                return f"joint {name} exceeds its {what}"
    return None


def _start_configuration(args, model, robot):
    """``--start`` as (nv,) or None; ModelError naming what is wrong. ``robot``: the command's
    :class:`~robodyn_ros.cli.command_inputs.RobotInputs`."""
    if args.start is None:
        return None
    if args.start == "home":
        if robot.bundled:
            from ..robots import bundled_robot_info
            return np.asarray(bundled_robot_info(robot.bundled)["home"], dtype=float)
        if robot.home is not None and len(robot.home) == model.nv:
            return np.asarray(robot.home, dtype=float)
        raise ModelError("--start home needs a bundled robot (panda, ur5, iiwa) or a parameter file of robodyn config "
                         "with a home as --urdf; give the coordinates instead")
    try:
        q = np.array([float(x) for x in args.start.split(",")])
    except ValueError:
        raise ModelError(f"--start {args.start}: expected {model.nv} comma-separated numbers or 'home'") from None
    if q.shape != (model.nv,):
        raise ModelError(f"--start has {q.size} values for {model.nv} joints ({', '.join(model.joint_names)})")
    return q


def run(args, progress=None):
    """Returns ``(files {path: text or bytes}, summary lines)``; ``progress``: a
    :class:`~robodyn_ros.cli.command_inputs.ProgressBar` (default: none shown)."""
    from ..identification.base_parameters import compute_base_parameters
    from ..identification.batch import predict_torques
    from ..identification.collision_clearance import clearance_model
    from ..identification.excitation import design_for_model
    from ..model.collision_capsules import floor_height, link_capsules
    from ..model.model import Model
    from .command_inputs import robot_inputs
    progress = progress or ProgressBar(quiet=True)
    from .file_command import check_output_path

    robot = robot_inputs(args.urdf, args.lock_joint)
    urdf, bundled = robot.urdf, robot.bundled is not None
    for path, option in ((args.output, "--output"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    if not args.period > 0 or args.harmonics < 1 or args.iterations < 0:
        raise ModelError("--period must be positive, --harmonics and --iterations at least 1 and 0")
    if not 0.0 <= args.margin < 0.5:
        raise ModelError(f"--margin {args.margin}: must lie in [0, 0.5)")
    for option, value in (("--clearance", args.clearance), ("--self-clearance", args.self_clearance),
                          ("--table-height", 0.0 if args.table_height is None else args.table_height)):
        if not np.isfinite(value) or (option != "--table-height" and value < 0):
            raise ModelError(f"{option} {value}: must be a finite number" + ("" if option == "--table-height" else " >= 0"))
    if not args.link_radius > 0:
        raise ModelError(f"--link-radius {args.link_radius}: must be positive")
    box = _workspace(args.workspace)
    info = None
    if bundled:
        from ..robots import bundled_robot_info
        info = bundled_robot_info(robot.bundled)
    model = Model.from_urdf(urdf, locked_joints=robot.locks or None)
    lower, upper = _ranges(args.range, model)
    base = compute_base_parameters(model, coulomb_width=args.coulomb_width)
    a_max = None if args.max_acceleration is None else np.full(model.nv, args.max_acceleration)
    q_start = _start_configuration(args, model, robot)
    progress("collision model", 0, 2)
    capsules, notes = link_capsules(model, urdf, package_dirs=args.package_dir, default_radius=args.link_radius,
                                    link_geometry=info["capsules"] if bundled and info["capsules"] else None)
    if any(not (np.isfinite(lo) and np.isfinite(hi)) for lo, hi in zip(lower, upper)):
        bad = [n for n, lo, hi in zip(model.joint_names, lower, upper) if not (np.isfinite(lo) and np.isfinite(hi))]
        raise ModelError(f"joint(s) {', '.join(bad)} have no position limits in the URDF: give each a --range JOINT=LO:HI")
    table_height = args.table_height if args.table_height is not None else robot.table_height
    if table_height is None:
        table_height = floor_height(model, urdf, args.package_dir)[0]
    progress("collision model", 1, 2)
    clearance = clearance_model(model, capsules, floor=table_height, clearance=args.clearance, box=box,
                                self_clearance=args.self_clearance, lower=lower, upper=upper, seed=args.seed)
    progress("collision model", 2, 2)
    preferred = None
    if bundled and q_start is None:
        preferred = np.asarray(info["home"], dtype=float) if len(info["home"]) == model.nv else None
    progress("optimising", 0, max(args.iterations, 1))
    trajectory, kappa = design_for_model(
        model, period=args.period, harmonics=args.harmonics, margin=args.margin, coulomb_width=args.coulomb_width,
        seed=args.seed, a_max=a_max, max_iterations=args.iterations, base=base, q_start=q_start, lower=lower,
        upper=upper, clearance=clearance, preferred=preferred, progress=progress.stage("optimising"))
    progress("optimising", 1, 1)
    t = np.arange(int(round(args.period * 1000)) + 1) * 1e-3
    q, v, a = trajectory.evaluate(t)
    tau = predict_torques(model, q, v, a, args.coulomb_width)
    problem = clearance.violation(q, t) or _check_limits(model, lower, upper, t, q, v, tau)
    if problem:
        raise ModelError(f"refusing to write a trajectory that violates a constraint: {problem}")
    files = {args.output: trajectory_csv(model.joint_names, t, q)}
    if args.plot:
        files[args.plot] = _plot(model, t, q, v, tau, args.margin, clearance.distances(q), clearance)
    use = lambda x, limit: float(np.max(np.abs(x) / limit))  # noqa: E731
    closest = float(np.min(np.minimum(q - lower, upper - q) / (upper - lower)))
    report = trajectory.design_report
    summary = [f"{model.nv} joints, {base.count} base parameters, period {args.period:g} s, {args.harmonics} harmonics",
               f"regressor condition number {kappa:.4g} (start {np.exp(report.initial_cost):.4g}; "
               f"{report.iterations} iterations, {report.seconds:.1f} s)",
               f"limits: closest approach to a position limit {100 * closest:.1f} % of the range; peak |v| "
               f"{100 * use(v, model.velocity_limit):.1f} % and peak |tau| {100 * use(tau, model.effort_limit):.1f} % "
               f"of the limits"]
    summary += _clearance_summary(clearance, capsules, notes, t, q)
    # rounded first: a coordinate of -1e-17 (the optimiser's rounding, which differs between BLAS kernels)
    # prints as 0.0000, not -0.0000
    summary.append("starts and ends at rest at q = " + ",".join(f"{round(float(x), 4) + 0.0:.4f}" for x in q[0])
                   + " (rad or m, as --start takes it)")
    return files, summary


def _clearance_summary(clearance, capsules, notes, t, q):
    """Summary lines: the geometry used and the smallest clearances reached (checked every millisecond)."""
    report = clearance.report(q)
    lines = [f"geometry: {len(capsules)} capsules on {len({c.link for c in capsules})} links; "
             f"{len(clearance.pairs)} capsule pairs checked"
             + (f", not checked (in contact in most configurations): "
                f"{', '.join(f'{a}-{b}' for a, b in clearance.unchecked_pairs)}" if clearance.unchecked_pairs else "")]
    lines += [f"  {note}" for note in notes]
    floor = report.planes.get("floor")
    if floor is not None:
        distance, link, n = floor
        required = next(p.clearance for p in clearance.planes if p.name == "floor")
        lines.append(f"minimum clearance to the floor {distance:.3f} m ({link}, t = {t[n]:.3f} s; required "
                     f"{required:.3f} m)")
    faces = {name: value for name, value in report.planes.items() if name.startswith("workspace")}
    if faces:
        face = min(faces, key=lambda name: faces[name][0])
        distance, link, n = faces[face]
        lines.append(f"minimum distance to the workspace box {distance:.3f} m ({link}, {face[len('workspace '):]} face, "
                     f"t = {t[n]:.3f} s)")
    if clearance.pairs:
        a, b = report.self_pair
        lines.append(f"minimum distance between links {report.self_distance:.3f} m ({a} and {b}, "
                     f"t = {t[report.self_index]:.3f} s; required {clearance.self_clearance:.3f} m)")
    return lines


def main(argv=None):
    """Entry point of ``robodyn excite``; returns the exit code (0 ok, 2 bad input, 1 internal error)."""
    return file_command_main("excite", build_parser(), argv, run,
                             lambda args: ProgressBar(quiet=args.quiet or not sys.stderr.isatty()))


if __name__ == "__main__":
    sys.exit(main())
