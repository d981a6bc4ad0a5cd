"""robodyn replay BAG --urdf URDF --output PARAMS.yaml: run a recorded bag through the online estimator
(robodyn_ros.estimation.online_estimator.OnlineEstimator) as the estimator node would run it and write its
final estimate in the format of robodyn identify.

The configuration is the node's: ``--config`` names the parameter file the node is started with (its
``estimator:`` section is read as ``--params-file`` gives it to the node, validated against the node's
schema; without it the file of ``robodyn config`` given as ``--urdf``, else the node's defaults), ``--driver``
replaces its ``driver``. Every joint state of ``--joint-states`` goes through the
estimator in stamp order, the wrenches of the configured ``wrench_topic`` (when ``use_wrench`` and the bag
has that topic) each before the first joint state stamped at or after it, as the node's polled input pairs
them; decimation, filters, settling, saturation and change detection are the node's.

Output: the final base-parameter estimate and its covariance P give the physically consistent inertials
and friction of :func:`~robodyn_ros.identification.least_squares.consistent_fit` (weighted by P⁻¹, the
information the estimator accumulated, prior included), written as ``robodyn identify`` writes them
(``--urdf-out`` too); ``replay:`` in the YAML adds what the estimator saw and the final payload. ``--plot``
draws the estimates over time. A bad input is one line on stderr (exit 2) and nothing is written.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..model.driver_profiles import DRIVERS
from ..model.errors import ModelError
from .command_inputs import (ProgressBar, config_or_robot_file, estimator_configuration, parse_locks,
                             read_repaired_joint_states)
from .file_command import check_output_path, file_command_main, png_bytes


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn replay", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="rosbag2 directory (sqlite3 or mcap) or a .db3/.mcap file")
    p.add_argument("--urdf", required=True, help="URDF of the robot, a bundled robot name (panda, ur5, iiwa) or a "
                                                 "parameter file of robodyn config (its URDF and locked joints)")
    p.add_argument("--output", required=True, help="YAML file of the final estimate to write")
    p.add_argument("--urdf-out", help="also write the URDF with the estimated inertials and friction")
    p.add_argument("--plot", help="PNG of the estimates over time")
    p.add_argument("--config", help="the estimator node's parameter file (its 'estimator' section is used; "
                                    "default: --urdf's, when it is a file of robodyn config)")
    p.add_argument("--driver", choices=DRIVERS, help="the robot driver that recorded the bag (its estimator "
                   "profile, docs/DRIVERS.md); replaces the --config file's driver")
    p.add_argument("--node-name", default="estimator", help="node name whose section --config gives (default "
                   "estimator)")
    p.add_argument("--joint-states", default="/joint_states", help="sensor_msgs/JointState topic")
    p.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="make a joint fixed at VALUE (e.g. fingers not in the bag); repeatable")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def load_model(urdf, lock_options):
    """``(model, urdf path, locked joints, bundled info or None)`` of ``--urdf``: a path, a parameter file of
    ``robodyn config`` or a bundled robot's name (its usual locks, and the ``--lock-joint`` ones)."""
    from ..model.model import Model
    from ..robots import bundled_robot_info
    from .command_inputs import robot_inputs
    robot = robot_inputs(urdf, lock_options)
    info, locks = None, robot.locks
    if robot.bundled:
        info = bundled_robot_info(robot.bundled)
        locks = {**info["locked_joints"], **parse_locks(lock_options)}
    return Model.from_urdf(robot.urdf, locked_joints=locks or None), robot.urdf, locks, info


def _wrenches(args, config, series):
    """The wrench series of the configured topic, or None (no wrench path, or the topic is not in the bag)."""
    import warnings
    from ..bags import read_wrenches
    if not config["use_wrench"]:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return read_wrenches(args.bag, config["wrench_topic"], t0_ns=series.t0_ns)
    except ModelError as exc:
        if f"topic {config['wrench_topic']!r} not found" in str(exc):
            return None
        raise


def replay(estimator, t, q, v, tau, wrenches=None, progress=None):
    """Feed a recorded series through ``estimator`` (t (N,), q, v (N, nv) or v None, tau (N, nv); wrenches
    a WrenchSeries on the same clock or None). Returns ``(history, regression)``: history a dict of arrays
    at the published estimates (``t``, ``beta`` (K, r), ``payload`` (K, 10) as published (physical),
    ``payload_estimate`` (K, 10) the live estimate), regression the filtered
    samples ``(Q, V, A, TAU)`` the base-parameter RLS accepted."""
    k, n_w = 0, 0 if wrenches is None else len(wrenches.t)
    times, betas, payloads, live, regression = [], [], [], [], []
    for i in range(len(t)):
        ti = float(t[i])
        while k < n_w and wrenches.t[k] <= ti:
            estimator.admit_wrench(float(wrenches.t[k]), wrenches.w[k])
            k += 1
        vi = None if v is None else v[i]
        if estimator.admit(ti, q[i], vi, tau[i]):
            if estimator.step(ti, q[i], vi, tau[i]):
                payload = estimator.publish()
                times.append(ti)
                betas.append(estimator.base_estimator.beta.copy())
                payloads.append(np.full(10, np.nan) if payload is None else payload)
                live.append(estimator.payload_parameters())
            if estimator.base_updated:
                regression.append(np.concatenate([np.asarray(x, dtype=float) for x in estimator.filtered]))
        if progress is not None and (i % 2048 == 0 or i == len(t) - 1):
            progress(i + 1, len(t))
    nv = estimator.model.nv
    R = np.array(regression).reshape(-1, 4 * nv)
    history = {"t": np.array(times), "beta": np.array(betas).reshape(len(times), -1),
               "payload": np.array(payloads).reshape(len(times), 10),
               "payload_estimate": np.array(live).reshape(len(times), 10)}
    return history, (R[:, :nv], R[:, nv:2 * nv], R[:, 2 * nv:3 * nv], R[:, 3 * nv:])


def rls_fit(estimator, regression):
    """A :class:`~robodyn_ros.identification.least_squares.LeastSquaresFit` of the final RLS estimate: beta,
    P (cov), ``R_w`` with ``R_w^T R_w = P^-1``; residuals over the samples the RLS took (in-sample)."""
    from ..identification.least_squares import LeastSquaresFit
    rls, base, model = estimator.base_estimator, estimator.base, estimator.model
    P = 0.5 * (rls.P + rls.P.T)
    R_w = np.linalg.cholesky(np.linalg.inv(P)).T
    Q, V, A, TAU = regression
    if len(Q) == 0:
        raise ModelError("the base-parameter estimator took no sample (recording too short for the filters to "
                         "settle, or every torque saturated)")
    Y = base.regressor(model, Q, V, A)
    residual = TAU - Y @ rls.beta
    sigma = np.sqrt(np.mean(residual ** 2, axis=0))
    return LeastSquaresFit(beta=rls.beta.copy(), std=rls.std, cov=P, weights=1.0 / np.maximum(sigma, 1e-12) ** 2,
                           sigma=sigma, R_w=R_w, condition_number=float(np.linalg.cond(Y.reshape(-1, base.count))),
                           relative_error=float(np.linalg.norm(residual) / np.linalg.norm(TAU)), samples=len(Q))


def check_converged(identified, estimator, fit, regression, min_mass=1e-6, max_com=10.0):
    """ModelError when the estimator did not converge on the bag: its final base parameters predict the torques
    it learnt from (in-sample, filtered) worse than the nominal model it started from, or the consistent fit
    gives a body that no URDF can hold (a mass below ``min_mass`` kg, a centre of mass beyond ``max_com`` m)."""
    from ..identification.base_parameters import full_parameters
    from ..model.spatial import numpy_inertia_split
    Q, V, A, TAU = regression
    model, base = estimator.model, estimator.base
    nominal = base.regressor(model, Q, V, A) @ base.from_full(full_parameters(model))
    nominal_error = float(np.linalg.norm(TAU - nominal) / np.linalg.norm(TAU))
    advice = (f"the estimator did not converge on this bag (in-sample torque error {100 * fit.relative_error:.1f} %, "
              f"nominal model {100 * nominal_error:.1f} %, {estimator.base_estimator.changes} change alarms); tune its "
              "configuration (e.g. filter.cutoff, change_ratio) with --config")
    if not fit.relative_error < nominal_error:
        raise ModelError(f"the final estimate predicts the torques worse than the nominal model: {advice}")
    for name, pi_b in zip(identified.body_names, identified.inertias):
        m, c, _ = numpy_inertia_split(pi_b) if pi_b[0] > 0 else (pi_b[0], np.full(3, np.inf), None)
        if m < min_mass or not np.all(np.abs(c) <= max_com):
            raise ModelError(f"the final estimate gives {name} a mass of {m:.3g} kg: {advice}")


def _plot(history, names, payload_frame):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t, beta = history["t"], history["beta"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    scale = np.maximum(np.abs(beta[-1]), 1e-6) if len(beta) else 1.0
    axes[0].plot(t, beta / scale, lw=0.6)
    axes[0].set_ylabel("base parameters /\n|final value|", fontsize=8)
    axes[0].set_ylim(-3.0, 3.0)
    axes[0].set_title(f"online estimates ({len(names)} base parameters)", fontsize=9)
    axes[1].plot(t, history["payload_estimate"][:, 0], lw=0.8, label="estimate")
    axes[1].plot(t, history["payload"][:, 0], lw=0.8, ls="--", label="published (physical)")
    axes[1].legend(fontsize=7, loc="upper right")
    axes[1].set_ylabel(f"payload mass at\n{payload_frame} (kg)", fontsize=8)
    axes[1].set_xlabel("t (s, bag time)")
    fig.tight_layout()
    return png_bytes(fig)


def run(args, progress):
    """The replay; returns ``(files {path: text or bytes}, summary lines)``."""
    from ..estimation.estimator_parameters import COULOMB_WIDTH
    from ..estimation.online_estimator import OnlineEstimator
    from ..identification.batch import IdentificationResult, model_with_full_parameters
    from ..identification.least_squares import consistent_fit
    from ..identification.results import identified_urdf, result_document, yaml_text

    for path, option in ((args.output, "--output"), (args.urdf_out, "--urdf-out"), (args.plot, "--plot")):
        if path:
            check_output_path(path, option)
    args.config = config_or_robot_file(args.config, args.urdf)
    config = estimator_configuration(args.config, args.node_name, args.driver)
    if not config["base_parameters"]:
        raise ModelError("the configuration has base_parameters: false: the estimator would estimate no "
                         "inertial parameters to write")
    model, urdf, locks, info = load_model(args.urdf, args.lock_joint)
    wrist = config["wrist_link"] or (info["wrist_link"] if info else None)
    args.repair = False
    series, q, v, tau = read_repaired_joint_states(args, model, args.bag, progress.stage("reading bag"))
    wrenches = _wrenches(args, config, series)
    estimator = OnlineEstimator(model, config, wrist_link=wrist)
    history, regression = replay(estimator, series.t, q, v, tau, wrenches, progress.stage("replaying"))
    if estimator.effort_check is not None and estimator.effort_check.verdict == "mismatch":
        raise ModelError(f"{args.bag}: {estimator.effort_check.reason} (the estimator's effort.* parameters, "
                         "--config; effort.check: false to skip the check)")
    fit = rls_fit(estimator, regression)
    progress("consistent fit", 0, 1)
    cfit = consistent_fit(model, estimator.base, fit)
    progress("consistent fit", 1, 1)
    result = IdentificationResult(nominal=model, identified=model_with_full_parameters(model, cfit.pi_full),
                                  base=estimator.base, fit=fit, consistent=cfit,
                                  cutoff_hz=config["filter.cutoff"], coulomb_width=COULOMB_WIDTH,
                                  samples_used=fit.samples)
    check_converged(result.identified, estimator, fit, regression)
    payload = estimator.publish() if estimator.wrench_rls is not None else None
    extra = {"replay": {"bag": os.path.basename(os.path.normpath(args.bag)), "samples": int(len(series.t)),
                        "updates": int(estimator.updates), "base_parameter_updates": int(fit.samples),
                        "wrenches": 0 if wrenches is None else int(len(wrenches.t)),
                        "decimation": int(config["decimation"]), "payload_changes": len(estimator.payload_events),
                        "time_jumps": int(estimator.time_jumps), "effort_saturated": int(estimator.effort_saturated),
                        "payload_frame": estimator.payload_frame,
                        "payload": None if payload is None else [float(x) for x in payload],
                        "note": "fit: the estimator's residuals on the samples it took (in-sample); "
                                "signal_processing: the causal Butterworth filter of the estimator"}}
    doc = result_document(result, extra=extra)
    doc["signal_processing"] = {"lowpass_cutoff_hz": float(config["filter.cutoff"]),
                                "filter": f"causal Butterworth of order {config['filter.order']} "
                                          "(robodyn_ros.identification.signal_filters), same on q, v, tau"}
    files = {args.output: yaml_text(doc)}
    if args.urdf_out:
        with open(urdf) as stream:
            files[args.urdf_out] = identified_urdf(stream.read(), result.identified, locks)
    if args.plot:
        files[args.plot] = _plot(history, estimator.base.names, estimator.payload_frame)
    summary = [f"{len(series.t)} joint-state samples, {estimator.updates} estimator updates, {fit.samples} taken by "
               f"the base-parameter estimator ({estimator.base.count} base parameters)",
               f"final estimate: in-sample relative torque error {100 * fit.relative_error:.2f} %; consistent fit "
               f"{cfit.solver}"]
    return files, summary


def main(argv=None):
    """Entry point of ``robodyn replay``; returns the exit code (0 ok, 2 bad input, 1 internal error)."""
    return file_command_main("replay", build_parser(), argv, run, lambda args: ProgressBar(quiet=args.quiet))


if __name__ == "__main__":
    sys.exit(main())
