"""robodyn identify BAG --urdf URDF --output PARAMS.yaml ...: identify a robot's inertial, armature and
friction parameters (and optionally a payload from a wrist F/T sensor) from a ROS 2 bag.

The efforts are read as the robot's driver reports them (``--driver``, or the estimator section of ``--config``
or of a file of ``robodyn config`` given as ``--urdf``: gravity-compensated torques, motor currents, torques the
driver filtered; :class:`~robodyn_ros.estimation.effort_measurement.MeasuredTorqueSamples`) and checked against
the URDF before the fit (:class:`~robodyn_ros.estimation.effort_check.EffortCheck`).

Every bad input ends with one clear message on stderr and exit code 2, before anything is written:
outputs are produced in memory and written atomically at the very end (results.write_atomically).
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

from ..model.driver_profiles import DRIVERS
from ..model.errors import ModelError
from .command_inputs import ProgressBar, read_repaired_joint_states
from .file_command import check_output_path, file_command_main, png_bytes


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn identify", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="rosbag2 directory (sqlite3 or mcap) or a .db3/.mcap file")
    p.add_argument("--urdf", required=True,
                   help="URDF of the robot (nominal parameters, prior), a bundled robot (panda, ur5, iiwa) or a "
                        "parameter file of robodyn config (its URDF and locked joints)")
    p.add_argument("--output", required=True, help="YAML file of identified parameters to write")
    p.add_argument("--urdf-out", help="also write the URDF with the identified inertials and friction")
    p.add_argument("--joint-states", default="/joint_states", help="sensor_msgs/JointState topic")
    p.add_argument("--wrench", help="geometry_msgs/WrenchStamped topic of a wrist F/T sensor (payload)")
    p.add_argument("--wrench-link", help="URDF link of the F/T sensor frame (needed with --wrench)")
    p.add_argument("--plot", help="PNG of measured, nominal and identified torques and their residuals "
                                  "(on the held-out data with --validate/--holdout)")
    held_out = p.add_mutually_exclusive_group()
    held_out.add_argument("--validate", metavar="BAG2", help="a second bag to validate the identified model on")
    held_out.add_argument("--holdout", type=float, metavar="FRACTION",
                          help="fit on the first 1 - FRACTION of the samples, validate on the rest (e.g. 0.3)")
    p.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="make a joint fixed at VALUE (e.g. fingers not in the bag); repeatable")
    p.add_argument("--cutoff", type=float, default=5.0, help="low-pass cutoff (Hz) of q, v, tau (default 5)")
    p.add_argument("--coulomb-width", type=float, default=0.05,
                   help="Coulomb friction as tanh(v / width), rad/s; 0 for sign(v) (default 0.05)")
    p.add_argument("--repair", action="store_true",
                   help="drop NaN samples and sort out-of-order ones instead of stopping")
    p.add_argument("--no-consistent", action="store_true", help="skip the physically consistent fit")
    p.add_argument("--driver", choices=DRIVERS,
                   help="the robot driver that recorded the bag: what its efforts are (its estimator profile, "
                        "docs/DRIVERS.md: ur gravity-compensated, lbr filtered at 10 Hz); replaces the --config "
                        "file's driver")
    p.add_argument("--config", help="a parameter file whose estimator section says what the efforts are: "
                                    "driver, effort.kind, effort.torque_constants, effort.filter_cutoff, "
                                    "effort.payload_mass/com (default: --urdf's, when it is a file of robodyn "
                                    "config; else joint torques with gravity)")
    p.add_argument("--node-name", default="estimator",
                   help="node name whose section --config gives (default estimator)")
    p.add_argument("--no-effort-check", action="store_true",
                   help="skip the check that the efforts are joint torques in the URDF's scale and sign, and not "
                        "motor currents, gravity-compensated or filtered torques (first 2 s of motion)")
    p.add_argument("--inertia-margin", type=float, default=None, metavar="EPS",
                   help="every link's pseudo-inertia J satisfies lambda_min(D J D) >= EPS trace(D J D), "
                        "D = diag(10, 10, 10, 1) (default 1e-3: rms thickness >= 3 mm)")
    p.add_argument("--nominal-warning", type=float, default=NOMINAL_WARNING, metavar="FRACTION",
                   help="warn when the nominal URDF predicts the bag's torques worse than this relative error "
                        f"(default {NOMINAL_WARNING:g}: a wrong URDF; 0: never)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


DATA_MAGNITUDE = 1e50
"""Largest |q|, |v|, |tau| accepted from a bag: anything near it is corruption, and the regressor (v^2)
and least squares (squares again) would overflow above about 1e77."""


def _samples(args, model, bag, progress):
    """A sample source over the bag's joint states: streamed from the bag when it needs no repair (memory
    bounded by one block), else read whole, repaired (--repair) and held in memory. Returns
    ``(source, t0_ns)``; raises ModelError naming what is wrong."""
    from ..bags import BagJointStates, scan_joint_states
    from ..identification.chunked_filter import ArraySamples
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            scan = scan_joint_states(bag, args.joint_states, model.joint_names, magnitude=DATA_MAGNITUDE,
                                     progress=progress)
        except ModelError as exc:
            if "not found on" not in str(exc):
                raise
            raise ModelError(f"joint names do not match the URDF: {exc}; lock URDF joints that were not "
                             "recorded with --lock-joint NAME=VALUE") from None
    if scan.huge is not None:
        field, joint, k, value = scan.huge
        raise ModelError(f"{args.joint_states} in {bag}: the {field} of '{joint}' is {value:g} "
                         f"at sample {k}, beyond {DATA_MAGNITUDE:g}: the bag is corrupt")
    if scan.effort_absent:
        raise ModelError(f"{args.joint_states} has no effort (torque) values for {list(scan.effort_absent)}: "
                         "nothing to identify from")
    if scan.clean:
        return BagJointStates(bag, args.joint_states, model.joint_names, scan), scan.t0_ns
    if not args.repair:
        problems = []
        if scan.nan_values:
            problems.append(f"{scan.nan_values} NaN position/velocity/effort value(s)")
        if scan.reordered:
            problems.append(f"{scan.reordered} out-of-order sample(s) (stamps going backwards)")
        if scan.duplicates:
            problems.append(f"{scan.duplicates} sample(s) with a repeated stamp")
        raise ModelError(f"{args.joint_states} in {bag} has {', '.join(problems)}; "
                         "rerun with --repair to drop or sort them")
    series, q, v, tau = read_repaired_joint_states(args, model, bag, progress)
    return ArraySamples(series.t, q, v, tau), series.t0_ns


def _payload_section(args, model, bag, t0_ns, blocks):
    from ..bags import read_wrenches
    from ..identification.payload import payload_from_wrench
    if not args.wrench_link:
        raise ModelError("--wrench needs --wrench-link LINK (the URDF link of the sensor frame)")
    model.body_index(args.wrench_link)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrenches = read_wrenches(bag, args.wrench, t0_ns=t0_ns)
    blocks = list(blocks)   # the payload fit holds its samples (one wrench per joint state)
    T, Q, V, A = (np.concatenate([getattr(b, k) for b in blocks]) for k in ("t", "q", "v", "a"))
    inside = (T >= wrenches.t[0]) & (T <= wrenches.t[-1])
    if inside.sum() < 10:
        raise ModelError(f"{args.wrench}: its samples do not overlap the joint states in time")
    W = np.stack([np.interp(T[inside], wrenches.t, wrenches.w[:, k]) for k in range(6)], axis=1)
    est = payload_from_wrench(model, args.wrench_link, Q[inside], V[inside], A[inside], W)
    return {"payload": {"link": args.wrench_link, "mass": float(est.mass), "com": est.com.tolist(),
                        "inertia": [float(est.inertia[i, j]) for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))],
                        "sensor_bias": est.bias.tolist(), "mass_std": float(est.std[0]),
                        "relative_error": float(est.relative_error)}}


LABELS = {"identified": "identified", "least_squares": "least squares", "nominal": "nominal URDF"}


def _plot(validation, title, cutoff_hz):
    """PNG bytes: per joint, measured (raw and filtered), nominal and identified torques (left) and the
    residuals model - measured (right), each panel titled with its relative errors."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data, names = validation.plot, validation.joint_names
    n = len(names)
    fig, axes = plt.subplots(n, 2, figsize=(14, 1.9 * n + 0.8), sharex=True, squeeze=False)
    errors = {p: validation.relative(p) for p in ("identified", "nominal")}
    for j in range(n):
        left, right = axes[j, 0], axes[j, 1]
        left.plot(data["t"], data["tau_raw"][:, j], lw=0.4, color="0.75", label="measured (raw)")
        left.plot(data["t"], data["tau"][:, j], lw=0.8, color="k", label="measured (filtered)")
        left.plot(data["t"], data["nominal"][:, j], lw=0.8, ls=":", color="tab:red", label="nominal URDF")
        left.plot(data["t"], data["identified"][:, j], lw=0.8, ls="--", color="tab:blue", label="identified")
        left.set_ylabel(f"{names[j]}\nN·m", fontsize=7)
        for p, color in (("nominal", "tab:red"), ("identified", "tab:blue")):
            right.plot(data["t"], data[p][:, j] - data["tau"][:, j], lw=0.7, color=color, label=LABELS[p])
        right.axhline(0.0, color="0.5", lw=0.5)
        right.set_title(f"residual: identified {100 * errors['identified'][0][j]:.2f} %, "
                        f"nominal {100 * errors['nominal'][0][j]:.2f} %", fontsize=7)
        right.set_ylabel("N·m", fontsize=7)
    axes[0, 0].legend(fontsize=6, loc="upper right", ncol=2)
    axes[0, 1].legend(fontsize=6, loc="upper right")
    axes[-1, 0].set_xlabel("t (s)")
    axes[-1, 1].set_xlabel("t (s)")
    raw = {p: validation.relative(p, raw=True)[1] for p in ("identified", "nominal")}
    fig.suptitle(f"{title}: relative torque error ({cutoff_hz:g} Hz-filtered / raw) identified "
                 f"{100 * errors['identified'][1]:.2f} % / {100 * raw['identified']:.2f} %, nominal URDF "
                 f"{100 * errors['nominal'][1]:.2f} % / {100 * raw['nominal']:.2f} %", fontsize=9)
    fig.tight_layout()
    return png_bytes(fig)


def _validation_lines(validation, where):
    lines = [f"held-out validation on {where} ({validation.samples} samples), relative torque error "
             "(filtered / raw, friction included):"]
    for p in validation.predictors:
        overall = validation.relative(p)[1]
        raw = validation.relative(p, raw=True)[1]
        lines.append(f"  {LABELS[p]:<14} {100 * overall:6.2f} % / {100 * raw:6.2f} %")
    floor = validation.to_dict()["noise_floor_raw"]
    lines.append(f"  noise floor of the raw torques (||tau - F tau|| / ||tau||): {100 * floor:.2f} %")
    width = max(len(name) for name in validation.joint_names)
    lines.append("  per joint, filtered (%):")
    lines.append(f"    {'joint':<{width}} " + " ".join(f"{LABELS[p]:>14}" for p in validation.predictors))
    per_joint = {p: validation.relative(p)[0] for p in validation.predictors}
    for j, name in enumerate(validation.joint_names):
        errors = " ".join(f"{100 * per_joint[p][j]:>14.2f}" for p in validation.predictors)
        lines.append(f"    {name:<{width}} {errors}")
    return lines


NOMINAL_WARNING = 0.3
"""Relative torque error of the nominal URDF on the bag above which identify asks whether the URDF is the
robot's: the real Panda's URDF predicts its torques within 18 %, the UR5's those of a UR10 (the same joint
names) with 51 %."""


def nominal_model_warning(err_nominal, limit, urdf):
    """A line when the nominal model ``urdf`` predicts the recorded torques with a relative error above
    ``limit`` (a fraction), else None."""
    if limit <= 0 or not err_nominal > limit:
        return None
    return (f"warning: the nominal URDF predicts the recorded torques with {100 * err_nominal:.1f} % relative error "
            f"(more than {100 * limit:g} %, --nominal-warning): is {urdf} the robot of this bag? A URDF of another "
            "robot with the same joint names loads without complaint, and the identified model then starts from the "
            "wrong prior")


def _checked_options(args):
    """Resolve ``--urdf`` (a bundled robot's name to its file) and check every option before anything is
    read; returns ``(urdf as given, inertia margin)``. ModelError naming the option at fault."""
    from ..identification.least_squares import INERTIA_MARGIN
    from .command_inputs import config_or_robot_file, robot_inputs
    robot = robot_inputs(args.urdf, args.lock_joint)
    args.config = config_or_robot_file(args.config, args.urdf)
    bundled, args.urdf, args.locks, args.bundled = args.urdf, robot.urdf, robot.locks, robot.bundled
    for path, option in ((args.output, "--output"), (args.urdf_out, "--urdf-out"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    if args.wrench and not args.wrench_link:
        raise ModelError("--wrench needs --wrench-link LINK (the URDF link of the sensor frame)")
    if not np.isfinite(args.nominal_warning) or args.nominal_warning < 0:
        raise ModelError(f"--nominal-warning {args.nominal_warning}: expected a non-negative fraction, e.g. 0.3")
    if args.cutoff <= 0 or args.coulomb_width < 0:
        raise ModelError("--cutoff must be positive and --coulomb-width non-negative")
    margin = INERTIA_MARGIN if args.inertia_margin is None else args.inertia_margin
    if not 0.0 <= margin < 0.25:
        raise ModelError(f"--inertia-margin {margin}: must lie in [0, 0.25)")
    if args.holdout is not None and not 0.0 < args.holdout < 1.0:
        raise ModelError(f"--holdout {args.holdout}: the held-out fraction must lie in (0, 1)")
    return bundled, margin


def _nominal_model(args, bundled):
    """``(Model of --urdf, locked joints)``: a parameter file's locks and the ``--lock-joint`` values, or a
    bundled robot's usual locks (the Panda's fingers at 0) when none are given
    (:func:`~robodyn_ros.cli.command_inputs.robot_inputs`)."""
    from ..model.model import Model
    return Model.from_urdf(args.urdf, locked_joints=args.locks or None), args.locks


def _held_out_split(args, model, source, progress, measurement=None):
    """``(stop, held_out, where)``: the fit uses samples ``[0, stop)`` of ``source``; ``held_out`` is
    ``(source, start, end)`` of the validation samples (the tail with --holdout, BAG2 with --validate) or
    None, ``where`` describes it."""
    if args.holdout is not None:
        stop = int((1.0 - args.holdout) * source.count)
        return stop, (source, stop, source.count), f"the last {100 * args.holdout:g} % of {args.bag}"
    if args.validate:
        other, _ = _samples(args, model, args.validate, progress.stage("scanning BAG2"))
        if measurement is not None:
            from ..estimation.effort_measurement import MeasuredTorqueSamples
            other = MeasuredTorqueSamples(other, measurement)
        return source.count, (other, 0, other.count), args.validate
    return source.count, None, None


def _base_parameters(args, model, progress):
    """The base parameters of ``model`` with the Coulomb width of ``args``."""
    from ..identification.base_parameters import compute_base_parameters
    progress("base parameters", 0, 1)
    base = compute_base_parameters(model, coulomb_width=args.coulomb_width)
    progress("base parameters", 1, 1)
    return base


def _fit(args, model, base, source, stop, margin, progress):
    """The batch identification of ``model``'s base parameters ``base`` on the first ``stop`` samples
    (:func:`~robodyn_ros.identification.batch.identify_samples`)."""
    from ..identification.batch import identify_samples
    result = identify_samples(model, source, stop=stop, cutoff_hz=args.cutoff, coulomb_width=args.coulomb_width,
                              base=base, consistent=not args.no_consistent, progress=progress.stage("regressor"),
                              margin=margin, statistics_progress=progress.stage("time base"))
    progress("fit", 1, 1)
    return result


def _effort_measurement(args, model):
    """The :class:`~robodyn_ros.estimation.effort_measurement.EffortMeasurement` of the estimator parameters
    ``--config`` and ``--driver`` give (the efforts as the robot's driver reports them), or None when they
    are joint torques as they are."""
    from ..estimation.effort_measurement import EffortMeasurement
    from ..robots import bundled_robot_info
    from .command_inputs import estimator_configuration
    if args.config is None and args.driver is None:
        return None
    config = estimator_configuration(args.config, args.node_name, args.driver)
    wrist = config["wrist_link"] or (bundled_robot_info(args.bundled)["wrist_link"] if args.bundled
                                     else model.body_names[-1])
    try:
        model.body_index(wrist)
        measurement = EffortMeasurement(model, config, wrist)
    except ValueError as exc:
        raise ModelError(f"{args.config or '--driver ' + args.driver}: {exc}") from None
    return measurement if measurement.converts else None


def _check_efforts(args, model, base, source, stop, measurement):
    """ModelError when the bag's efforts, turned into joint torques by ``measurement`` (None: as they are), do
    not look like joint torques over its first seconds of motion
    (:class:`~robodyn_ros.estimation.effort_check.EffortCheck` against the URDF, on the filtered samples):
    motor currents, gravity-compensated torques or whole torques read as such would otherwise be fitted into a
    model with plausible-looking numbers."""
    from ..estimation.effort_check import BATCH, EffortCheck
    from ..identification.base_parameters import full_parameters
    from ..identification.chunked_filter import chunked_filtered_samples
    kind, cutoff = ("torque", 0.0) if measurement is None else (measurement.kind, measurement.cutoff)
    check = EffortCheck(model.joint_names, kind, cutoff, bounds=BATCH)
    beta = base.from_full(full_parameters(model))
    for block in chunked_filtered_samples(source, args.cutoff, stop=stop, decimate=1, chunk=8192):
        tau_nominal = base.regressor(model, block.q, block.v, block.a) @ beta
        for t, tau_n, tau, q, v in zip(block.t, tau_nominal, block.tau, block.q, block.v):
            reported = tau - measurement.compensation(q) if kind == "gravity_compensated" else None
            if check.observe(t, tau_n, tau, v, reported) != "pending":
                break
        if check.verdict != "pending":
            break
    if check.verdict == "mismatch":
        raise ModelError(f"{args.bag}: {check.reason}. robodyn identify read the efforts as "
                         f"{args.efforts_read_as}; say what they are with --driver or the estimator's effort.* "
                         "parameters (--config), or use --no-effort-check if the URDF is far from the robot")
    return check


def _in_sample_errors(model, base, result):
    """Relative torque errors ``||tau - Y beta|| / ||tau||`` on the regression samples, keyed
    ``identified``, ``least_squares`` and ``nominal`` (the URDF's own parameters)."""
    from ..identification.base_parameters import full_parameters
    acc = result.accumulator
    norm = acc.joint_torque_norms().sum()

    def relative(beta):
        return float(np.sqrt(acc.joint_residuals(beta).sum() / norm))

    least_squares = relative(result.fit.beta)
    identified = relative(result.consistent.beta) if result.consistent is not None else least_squares
    return {"identified": identified, "least_squares": least_squares,
            "nominal": relative(base.from_full(full_parameters(model)))}


def _predictors(model, result):
    """The parameter sets the torques are predicted with: full parameters, or ``("base", beta)``."""
    from ..identification.base_parameters import full_parameters
    beta = result.fit.beta
    return {"identified": full_parameters(result.identified) if result.consistent is not None else ("base", beta),
            "least_squares": ("base", beta), "nominal": full_parameters(model)}


def _validate_held_out(args, model, base, predictors, held_out, progress):
    """Torque prediction of every predictor on the held-out samples ``(source, start, end)``."""
    from ..identification.chunked_filter import chunked_filtered_samples, range_statistics
    from ..identification.validation import validate_torques
    other, start, end = held_out
    stats = range_statistics(other, start, end, progress.stage("held-out time"))
    blocks = chunked_filtered_samples(other, args.cutoff, start=start, stop=end, decimate=1,
                                      progress=progress.stage("validating"), statistics=stats)
    return validate_torques(model, blocks, predictors, args.coulomb_width, base, expected_samples=end - start)


def _torque_plot(args, model, base, predictors, source, stop, validation, where):
    """PNG bytes of the torque plot: on the held-out validation when there is one, else in-sample."""
    if validation is not None:
        return _plot(validation, f"held out: {where}", args.cutoff)
    from ..identification.chunked_filter import chunked_filtered_samples
    from ..identification.validation import validate_torques
    shown = validate_torques(model, chunked_filtered_samples(source, args.cutoff, stop=stop), predictors,
                             args.coulomb_width, base, expected_samples=stop)
    return _plot(shown, "training data (in-sample)", args.cutoff)


def _summary(source, base, result, errors):
    """The lines printed after every identification: sample counts, fit and in-sample torque errors."""
    return [f"{source.count} joint-state samples, {result.samples_used} in the regression, "
            f"{base.count} base parameters",
            f"fit: relative error {result.fit.relative_error:.4f}, regressor condition number "
            f"{result.fit.condition_number:.4g} (sigma_max / sigma_min of the base regressor stacked over the "
            "recorded, filtered motion: the measure robodyn excite prints for its planned motion, higher where "
            "the robot did not follow the plan or rested)",
            f"torque prediction on the (filtered) data: least-squares base parameters "
            f"{100 * errors['least_squares']:.2f} %, "
            f"{'consistent model' if result.consistent else 'no consistent fit'} {100 * errors['identified']:.2f} %, "
            f"nominal URDF {100 * errors['nominal']:.2f} %"]


def run(args, progress):
    """The identification; returns ``(files {path: text or bytes}, summary lines)``."""
    from ..estimation.effort_measurement import MeasuredTorqueSamples
    from ..identification.base_parameters import identifiability_explanation
    from ..identification.chunked_filter import chunked_filtered_samples
    from ..identification.results import identified_urdf, result_document, yaml_text
    bundled, margin = _checked_options(args)
    model, locks = _nominal_model(args, bundled)
    measurement = _effort_measurement(args, model)
    args.efforts_read_as = measurement.reading() if measurement is not None else "joint torques with gravity"
    source, t0_ns = _samples(args, model, args.bag, progress.stage("scanning bag"))
    if measurement is not None:
        source = MeasuredTorqueSamples(source, measurement)
    stop, held_out, where = _held_out_split(args, model, source, progress, measurement)
    base = _base_parameters(args, model, progress)
    if not args.no_effort_check:
        _check_efforts(args, model, base, source, stop, measurement)
    result = _fit(args, model, base, source, stop, margin, progress)
    errors = _in_sample_errors(model, base, result)
    mismatch = nominal_model_warning(errors["nominal"], args.nominal_warning, bundled)
    extra = {"efforts": {"read_as": args.efforts_read_as, "driver": args.driver or "generic"},
             "prediction": {"relative_error_identified_model": errors["identified"],
                            "relative_error_least_squares": errors["least_squares"],
                            "relative_error_nominal_urdf": errors["nominal"], "samples": int(result.samples_used),
                            "locked_joints": locks, "note": "on the filtered regression samples (in-sample)"}}
    if mismatch is not None:
        extra["prediction"]["warning"] = mismatch[len("warning: "):]
    predictors = _predictors(model, result)
    validation = None
    if held_out is not None:
        validation = _validate_held_out(args, model, base, predictors, held_out, progress)
        extra["validation"] = {"data": where, "cutoff_hz": float(args.cutoff), **validation.to_dict()}
    if args.wrench:
        extra.update(_payload_section(args, model, args.bag, t0_ns,
                                      chunked_filtered_samples(source, args.cutoff, stop=stop)))
    doc = result_document(result, identifiability=identifiability_explanation(model, base), extra=extra)
    files = {args.output: yaml_text(doc)}
    if args.urdf_out:
        with open(args.urdf) as stream:
            files[args.urdf_out] = identified_urdf(stream.read(), result.identified, locks)
    if args.plot:
        files[args.plot] = _torque_plot(args, model, base, predictors, source, stop, validation, where)
    summary = _summary(source, base, result, errors)
    if measurement is not None:
        summary.insert(0, f"efforts read as {args.efforts_read_as}")
    if validation is not None:
        from ..identification.validation import nothing_learned
        summary += _validation_lines(validation, where)
        summary += [line for line in (nothing_learned(validation),) if line]
    if args.wrench:
        summary.append(f"payload at {args.wrench_link}: {doc['payload']['mass']:.4f} kg")
    if mismatch is not None:
        summary.append(mismatch)
    return files, summary


def main(argv=None):
    """Entry point of ``robodyn identify``; returns the exit code (0 ok, 2 bad input, 1 internal error)."""
    return file_command_main("identify", build_parser(), argv, run, lambda args: ProgressBar(quiet=args.quiet))


if __name__ == "__main__":
    sys.exit(main())
