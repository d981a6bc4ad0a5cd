"""robodyn demo: the whole loop in one command, with nothing but pip packages.

``--scenario twin`` (the default for the Panda, a URDF or a config file): the plant is not the controllers'
model (``--plant``): the Panda identified from a real robot's log (``robodyn_ros/robots/panda_twin.yaml``,
with the real log's joint-torque noise; the Panda's default), a plausible real robot drawn around the URDF
(``perturbed[:SEED]``, :mod:`robodyn_ros.simulation.perturbed_plant`), a parameter file of ``robodyn identify``
or a URDF. The controller (``--controller computed_torque|slotine_li|mpc``) starts from the nominal model, the
estimator runs from the start on joint torques only with its defaults, and a 2 kg payload is attached halfway
on the wrist link. Base parameters and friction are estimated online, gated
(:class:`robodyn_ros.control.parameter_gate.ParameterGate`), made physically consistent and used by the
controller; the same run without adaptation (same noise) gives ``tracking_rms_nominal``, and every second's
tracking error of the two runs is compared (``worst_window_ratio``). With ``--library`` (or over the nodes with
``--oracle``) a third run, the oracle (the same loop on the plant's exact model, the payload added to it at the
instant it is attached, :class:`robodyn_ros.simulation.adaptive_loop.OracleLoop`,
:class:`robodyn_ros.cli.demo_twin_nodes.NodeOracle`, :class:`~robodyn_ros.cli.demo_twin_nodes.NodeMpcOracle`), gives ``tracking_rms_oracle``, the adapted loop's
per-second ratios to it (``oracle_window_ratios``, worst ``worst_oracle_window_ratio``) and ``time_to_oracle``
(from when every second is within 2 x the oracle's RMS; null if the last is not). This scenario runs the ROS nodes over DDS
(:mod:`robodyn_ros.cli.demo_twin_nodes`: the simulator node on the plant, the estimator on joint torques, the
inverse_dynamics node, or with mpc the mpc node, with ``use_base_parameters``); with ``--library`` the library
loop (:mod:`robodyn_ros.simulation.adaptive_loop`), without ROS.

``--scenario payload``: the Panda (or another bundled robot) in the simulator follows the inverse_dynamics node's built-in
trajectory (computed torque on the compiled regressor); at ``--attach-time`` (5 s) a 2 kg payload is
attached to the flange; the estimator finds it from the wrist force/torque sensor and publishes it; the
controller adds it to its model (certainty-equivalence adaptation) and the tracking error recovers.

The real nodes run over DDS in one process (the in-process bringup of ``launch/simulation.launch.py``
with ``config/<robot>.yaml``), in a private ROS domain so a live robot on the default domain is not
disturbed, as fast as possible: the simulator steps in lockstep with the controller's commands and
publishes ``/clock`` (every node uses sim time); the process asks for SCHED_FIFO when permitted
(:func:`realtime_scheduling`, ``--no-realtime`` to opt out). A recorder node listens to the tracking error, the
payload estimate and the commands; the report holds

    payload_mass_true, payload_mass_estimated (kg); payload_time_to_5_percent (s after attachment until
    the estimate stays within 5 %); tracking_rms_before_payload (1 s .. attachment) and
    tracking_rms_after_adaptation (attachment + 3 s .. end), rad, over all joints;
    tracking_peak_before_payload (largest |q_j - q_d,j| from 1 s to attachment, rad); non_finite_commands;
    and ``acceptance``: absolute bounds (RMS before and after <= 2e-4 rad, peak before <= 1e-3 rad, the
    payload within 5 % in 2 s, no non-finite command) besides the relative one (after <= 2 x before).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import contextmanager

import numpy as np

from ..simulation.adaptive_loop import rms, time_to_within
from ..model.driver_profiles import with_driver
from .demo_recorder import DemoRecorder

ADAPTATION_DELAY = 3.0      # s after attachment at which "after adaptation" starts
SETTLE_BEFORE = 1.0         # s from the start before "before payload" starts (initial transient)
# rad: absolute acceptance bounds. Measured tracking RMS on an idle machine: 1.6-2.1e-5 rad before the payload
# and 1.6-3.0e-5 rad after adaptation (Panda, UR5, iiwa); at load 5.8 without real-time scheduling 4.9e-5
# and 1.0e-4 rad (Panda); the iiwa's friction chatter gave 4.4e-3 rad with 5e-2 rad peaks.
TRACKING_RMS_BOUND = 2e-4   # on the RMS before the payload and after adaptation
TRACKING_PEAK_BOUND = 1e-3  # on any joint's error before the payload


def _parse(argv):
    p = argparse.ArgumentParser(prog="robodyn demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=("twin", "payload"), default=None,
                   help="twin: a plant that is not the model (--plant), adaptation from joint torques (default for "
                        "the Panda, a URDF or a config file, or with --plant); payload: the model as plant, a "
                        "payload seen by the wrist sensor, over the ROS nodes (default for ur5 and iiwa)")
    p.add_argument("--plant", default=None,
                   help="twin scenario: the simulated robot: twin (the Panda identified from a real robot's log, "
                        "the Panda's default), perturbed[:SEED] (a plausible real robot drawn around the URDF, "
                        "default perturbed:0 for the others), a parameter YAML of robodyn identify, or a URDF")
    p.add_argument("--controller", choices=("computed_torque", "slotine_li", "mpc"), default="computed_torque",
                   help="twin scenario: the controller (default computed_torque)")
    p.add_argument("--seed", type=int, default=0, help="twin scenario: sensor-noise seed")
    p.add_argument("--library", action="store_true",
                   help="twin scenario: the library loop instead of the ROS nodes")
    p.add_argument("--oracle", action="store_true",
                   help="twin scenario over the nodes: a third run, the controller given the plant's exact model "
                        "(tracking_rms_oracle, time_to_oracle; the library loop always has it)")
    p.add_argument("--engine", choices=("robodyn", "mujoco"), default="robodyn",
                   help="what integrates the plant: robodyn (this package's dynamics, default) or mujoco (MuJoCo "
                        "on the plant written as MJCF; pip install \"robodyn_ros[mujoco]\")")
    p.add_argument("--driver", choices=("generic", "franka", "ur", "lbr"), default="generic",
                   help="the robot's driver the simulator emulates (gravity and friction compensation added, efforts as "
                        "it reports them, its rate and watchdogs); every node gets the same driver profile "
                        "(default generic: full torques)")
    p.add_argument("--duration", type=float, default=15.0, help="simulated seconds (default 15)")
    p.add_argument("--headless", action="store_true", help="no window (the plot is only written with --plot)")
    p.add_argument("--report", help="write the JSON report here")
    p.add_argument("--plot", help="write the PNG plot here")
    p.add_argument("--robot", default="panda",
                   help="panda, ur5, iiwa, a URDF, or a parameter file written by robodyn config")
    p.add_argument("--attach-time", type=float, default=None,
                   help="payload attachment time, s (default: halfway for twin, 5 s for payload)")
    p.add_argument("--payload-mass", type=float, default=2.0, help="payload mass, kg")
    p.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit, s")
    p.add_argument("--no-realtime", action="store_true",
                   help="do not ask for SCHED_FIFO (by default the demo asks for it, when permitted)")
    return p.parse_args(argv)


def demo_overrides(attach_time, payload_mass, engine="robodyn", driver="generic"):
    """Parameters the demo changes on top of the robot's YAML (as fast as possible, the payload event, the
    plant's engine, the driver profile on every node)."""
    return with_driver(_demo_overrides(attach_time, payload_mass, engine), driver)


def _demo_overrides(attach_time, payload_mass, engine):
    return {
        "simulator": {"real_time_factor": 0.0, "lockstep": True, "lockstep_timeout": 0.2,
                      "payload.mass": float(payload_mass), "payload.attach_time": float(attach_time),
                      "clock_rate": 100.0, "engine": engine},
        # the simulated sensor is tared (zero bias, as a real one is before a payload is picked up): estimating
        # a bias too lets the vertical force bias trade off against the mass while the wrist keeps a similar
        # orientation (measured: -0.0035 kg / -0.037 N drift, tracking 5.4e-5 vs 3.6e-5 rad after adaptation)
        # every joint state (decimation 1): the simulation waits for the slowest node (lockstep), so the
        # estimator cannot fall behind, and five times the samples give a payload estimate whose residual
        # error no longer dominates the tracking (measured, 9-s run: 3.9e-5 rad after adaptation at
        # decimation 1, 5.2-6.8e-5 at 5, limit 2 x 2.09e-5; 15-s run 3.0e-5)
        "estimator": {"decimation": 1, "estimate_bias": False},
        "inverse_dynamics": {"state_timeout": 0.5},
    }


def peak(errors, t, lo, hi):
    rows = errors[(t >= lo) & (t < hi)]
    return float(np.abs(rows).max()) if len(rows) else float("nan")


REALTIME_PRIORITY = 10


@contextmanager
def realtime_scheduling(enabled=True, priority=REALTIME_PRIORITY):
    """SCHED_FIFO at a low real-time ``priority`` for this process and the DDS threads it starts while
    inside (as a robot PC runs its control process), restored on exit; yields whether it was granted.

    Why: the lockstep loop is a chain of DDS hand-offs between nodes, and on a busy machine each wake-up
    waits for a CPU slice; measured here, 6 s of the demo took 29 s of wall time under SCHED_OTHER and
    11 s under SCHED_FIFO (benchmarks/bench_rclpy_loop.py shows the same for 1 kHz latency). Linux's
    real-time throttling keeps 5 % of each CPU for everything else. Without permission: unchanged."""
    granted = False
    if enabled:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            granted = True
        except (PermissionError, OSError, AttributeError):
            granted = False
    try:
        yield granted
    finally:
        if granted:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def run_demo(duration=15.0, robot="panda", attach_time=5.0, payload_mass=2.0, timeout=600.0, executor="events",
             realtime=True, engine="robodyn", driver="generic"):
    """Run the scenario; returns ``(report dict, recorded series dict)``."""
    with realtime_scheduling(realtime) as granted:
        report, series = _run_demo(duration, robot, attach_time, payload_mass, timeout, executor, engine, driver)
    report["realtime_scheduling"] = granted
    return report, series


def _run_demo(duration, robot, attach_time, payload_mass, timeout, executor, engine="robodyn", driver="generic"):
    from ..ros.bringup import Bringup
    from ..ros.testing import ros_context

    wall_start = time.monotonic()
    with ros_context() as context:
        with Bringup.from_launch("simulation", context, robot=robot, use_sim_time=True, executor=executor,
                                 overrides=demo_overrides(attach_time, payload_mass, engine, driver)) as up:
            setup_start = time.monotonic()
            recorder_node = up.plain_node("demo_recorder")
            sim_node = up.nodes["simulator"]
            up.activate()
            setup_seconds = time.monotonic() - setup_start
            recorder = DemoRecorder(recorder_node, sim_node.config["command_topic"],
                                    up.nodes["estimator"].config["payload_topic"], sim_node.robot.model.nv)
            run_start = time.monotonic()
            finished = up.spin_until(lambda: recorder.t >= duration, max(1.0, timeout - (run_start - wall_start)))
            run_seconds = time.monotonic() - run_start
            steps = sim_node.steps
            rejected = {name: dict(node.rejected) for name, node in up.nodes.items()}
            controller_non_finite = up.nodes["inverse_dynamics"].non_finite_commands
            driver_events = {"stops": sim_node.driver_stops, "reflexes": sim_node.driver_reflexes}
    errors = np.array(recorder.errors) if recorder.errors else np.zeros((0, 1 + recorder.nv))
    t_e, e = errors[:, 0], errors[:, 1:]
    payload = np.array(recorder.payload) if recorder.payload else np.zeros((0, 2))
    t_p, m_p = payload[:, 0], payload[:, 1]
    settle = time_to_within(t_p, m_p, payload_mass, attach_time)
    report = {
        "robot": robot,
        "engine": engine,
        "driver": driver,
        "driver_events": driver_events,
        "duration": float(duration),
        "simulated_time": float(recorder.t),
        "completed": bool(finished),
        "payload_attach_time": float(attach_time),
        "payload_mass_true": float(payload_mass),
        "payload_mass_estimated": float(m_p[-1]) if len(m_p) else float("nan"),
        "payload_time_to_5_percent": settle,
        "tracking_rms_before_payload": rms(e, t_e, SETTLE_BEFORE, attach_time),
        "tracking_peak_before_payload": peak(e, t_e, SETTLE_BEFORE, attach_time),
        "tracking_rms_after_payload_uncompensated": rms(e, t_e, attach_time, attach_time + 0.5),
        "tracking_rms_after_adaptation": rms(e, t_e, attach_time + ADAPTATION_DELAY, math.inf),
        "non_finite_commands": int(recorder.non_finite_commands + controller_non_finite),
        "commands_received": int(recorder.commands),
        "simulator_steps": int(steps),
        "rejected_messages": rejected,
        "setup_seconds": round(setup_seconds, 2),
        "run_wall_seconds": round(run_seconds, 2),
        "realtime_factor": round(float(recorder.t) / max(run_seconds, 1e-9), 3),
    }
    before, after = report["tracking_rms_before_payload"], report["tracking_rms_after_adaptation"]
    report["acceptance"] = {
        "payload_within_5_percent_in_2_s": settle is not None and settle <= 2.0,
        "tracking_after_within_2x_before": bool(after <= 2.0 * before),
        f"tracking_rms_before_payload_below_{TRACKING_RMS_BOUND:g}_rad": bool(before <= TRACKING_RMS_BOUND),
        f"tracking_rms_after_adaptation_below_{TRACKING_RMS_BOUND:g}_rad": bool(after <= TRACKING_RMS_BOUND),
        f"tracking_peak_before_payload_below_{TRACKING_PEAK_BOUND:g}_rad":
            bool(report["tracking_peak_before_payload"] <= TRACKING_PEAK_BOUND),
        "no_non_finite_commands": report["non_finite_commands"] == 0,
    }
    return report, {"t_error": t_e, "error": e, "t_payload": t_p, "mass": m_p}


def plot(series, report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    err = np.linalg.norm(series["error"], axis=1) if len(series["error"]) else np.zeros(0)
    ax1.semilogy(series["t_error"], np.maximum(err, 1e-9), lw=0.8)
    ax1.axvline(report["payload_attach_time"], color="k", ls="--", lw=0.8, label="payload attached")
    ax1.set_ylabel("|q - q_d| (rad)")
    ax1.set_title(f"robodyn demo ({report['robot']}): computed torque + online payload estimation")
    ax1.legend(loc="upper right")
    ax2.plot(series["t_payload"], series["mass"], label="estimated")
    t_end = max(report["simulated_time"], report["payload_attach_time"])
    ax2.plot([0.0, report["payload_attach_time"], report["payload_attach_time"], t_end],
             [0.0, 0.0, report["payload_mass_true"], report["payload_mass_true"]], "k--", label="true")
    ax2.set_xlabel("simulated time (s)")
    ax2.set_ylabel("payload mass (kg)")
    ax2.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(report):
    settle = report["payload_time_to_5_percent"]
    lines = [
        f"robodyn demo: {report['robot']}, {report['simulated_time']:.2f} s simulated in "
        f"{report['run_wall_seconds']:.1f} s wall (setup {report['setup_seconds']:.1f} s)",
        f"  payload: true {report['payload_mass_true']:.3f} kg, estimated {report['payload_mass_estimated']:.3f} kg, "
        f"within 5 % after {'never' if settle is None else f'{settle:.3f} s'}",
        f"  tracking RMS: before payload {report['tracking_rms_before_payload']:.2e} rad, just after "
        f"{report['tracking_rms_after_payload_uncompensated']:.2e} rad, after adaptation "
        f"{report['tracking_rms_after_adaptation']:.2e} rad; peak before payload "
        f"{report['tracking_peak_before_payload']:.2e} rad",
        f"  non-finite commands: {report['non_finite_commands']}",
        "  acceptance: " + ", ".join(f"{k} {'OK' if v else 'FAILED'}" for k, v in report["acceptance"].items()),
    ]
    return "\n".join(lines)


def run_twin(duration=15.0, attach_time=None, payload_mass=2.0, controller="computed_torque", seed=0, progress=None,
             robot="panda", plant="twin", engine="robodyn", driver="generic", oracle=True):
    """The adaptive scenario (module docstring) on the library loop for ``robot`` (a bundled name, a URDF or a
    ``robodyn config`` file) simulated as ``plant`` (``--plant``), integrated by ``engine``, with the oracle run
    (``oracle``); returns ``(report, series)``."""
    from ..simulation.adaptive_loop import AdaptiveLoopConfig, twin_experiment
    from ..simulation.plant import load_plant
    from .demo_robot import carried_payload, demo_robot, plant_description, plant_source

    setup = demo_robot(robot)
    source = plant_source(plant, setup)
    plant_model = load_plant(source, setup.model)
    # the demo trajectory: the inverse_dynamics node's generator (config/panda.yaml: amplitude 0.3 rad, period
    # 4 s, 2 harmonics around home); its gains (kp 400, kd 40)
    payload_mass, payload_note = carried_payload(setup, payload_mass, duration)
    attach_time = None if payload_mass <= 0.0 else duration / 2.0 if attach_time is None else attach_time
    config = AdaptiveLoopConfig(controller=controller, duration=duration, attach_time=attach_time,
                                payload_mass=payload_mass, payload_link=setup.robot.wrist_link,
                                kp=setup.config["kp"], kd=setup.config["kd"], seed=seed, engine=engine, driver=driver)
    report, adapted, nominal = twin_experiment(setup.model, plant_model, setup.reference, config, progress=progress,
                                               oracle=oracle)
    report = {"scenario": "twin", "robot": robot, "plant": plant_description(plant, source),
              "model": f"nominal {os.path.basename(setup.model.name or robot)}", "runtime": "library loop (no ROS)",
              "engine": engine, "driver": driver, **report}
    report["simulated_time"] = float(duration)
    if payload_note is not None:
        report["payload_note"] = payload_note
    report["acceptance"] = twin_acceptance(report)
    return report, {"adapted": adapted, "nominal": nominal}


NEVER_WORSE = 1.2    # the adapted loop's RMS and peak tracking error over any second, at most this times the nominal's


def twin_acceptance(report):
    """The bounds on an adaptive report: the tracking ratio (at least 3, or the adapted loop within 2 times the
    oracle's RMS: a URDF that already is the robot leaves nothing to learn), never worse than the nominal loop
    (RMS and peak over every second from t = 1 s at most 1.2 times), the payload within 5 % in 3 s (when one was
    attached), no non-finite command."""
    return {
        # or, when the URDF already is the robot (nothing to learn), as close to the exact model as the oracle's
        "tracking_ratio_at_least_3_or_within_2_x_oracle": bool(
            report["tracking_ratio"] >= 3.0
            or report["tracking_rms_adapted"] <= 2.0 * (report.get("tracking_rms_oracle") or -np.inf)),
        f"never_worse_than_{NEVER_WORSE:g}_x_nominal_over_any_second":
            bool(report.get("worst_window_ratio", np.inf) <= NEVER_WORSE),
        **({} if not report["payload_mass_true"] > 0.0 else {   # none attached: nothing to find
            "payload_within_5_percent_in_3_s": report["payload_time_to_5_percent"] is not None
                                               and report["payload_time_to_5_percent"] <= 3.0}),
        "no_non_finite_commands": report["non_finite_commands"] == 0,
    }


def plot_twin(series, report, path):
    """Tracking errors of both runs, the payload estimate, and the applied Coulomb friction per joint."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ad, nom = series["adapted"], series["nominal"]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    runs = [(nom, "nominal model, no adaptation"), (ad, "adaptation from joint torques")]
    if "oracle" in ad:
        runs.append((ad["oracle"], "oracle: the plant's exact model"))
    for run, label in runs:
        ax1.semilogy(run["t"], np.maximum(np.linalg.norm(run["error"], axis=1), 1e-9), lw=0.7, label=label)
    attach = report["payload_attach_time"]
    t_end = report["simulated_time"]
    for ax in (ax1, ax2, ax3) if attach is not None else ():
        ax.axvline(attach, color="k", ls="--", lw=0.8)
    lo, hi = report["tracking_window"]
    ax1.axvspan(lo, hi, color="0.9", label="window of tracking_rms_*")
    ax1.set_ylabel("|q - q_d| (rad)")
    payload = "none attached" if attach is None else f"{report['payload_mass_estimated']:.3f} kg"
    ax1.set_title(f"robodyn demo --scenario twin --controller {report['controller']}: ratio "
                  f"{report['tracking_ratio']:.1f}, payload {payload}")
    ax1.legend(loc="upper right", fontsize=8)
    ax2.plot(ad["t_estimate"], ad["payload_mass"], label="estimated (joint torques)")
    switch = attach if attach is not None else t_end
    ax2.plot([0.0, switch, switch, t_end], [0.0, 0.0, report["payload_mass_true"], report["payload_mass_true"]],
             "k--", label="true")
    ax2.set_ylabel("payload mass (kg)")
    ax2.legend(loc="lower right", fontsize=8)
    plot_friction(ax3, ad, report)
    ax3.set_xlabel("simulated time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_friction(ax, adapted, report):
    """The applied Coulomb friction per joint over time (solid) and the simulated robot's (dotted, the same
    colour), one legend entry per joint; the dotted lines are called the twin's only on the Panda twin."""
    if len(adapted["coulomb"]):
        names = report.get("joints") or [f"joint {j + 1}" for j in range(len(report["coulomb_true"]))]
        lines = ax.plot(adapted.get("t_coulomb", adapted["t_estimate"]), adapted["coulomb"], lw=0.8)
        for line, true, name in zip(lines, report["coulomb_true"], names):
            line.set_label(name)
            ax.axhline(true, color=line.get_color(), ls=":", lw=0.8)
        ax.legend(loc="upper right", fontsize=6, ncol=min(4, len(lines)))
    plant = "twin" if str(report.get("plant", "")).startswith("panda_twin") else "simulated robot"
    ax.set_ylabel(f"Coulomb friction (N m)\nestimate (solid), {plant} (dotted)")


def oracle_line(report):
    """The summary's line on the oracle run (none without one: the nodes' twin run without ``--oracle``)."""
    if "tracking_rms_oracle" not in report:
        return []
    reached = report["time_to_oracle"]
    last = report["oracle_window_ratios"][-1][1] if report["oracle_window_ratios"] else float("nan")
    return [f"  oracle (the plant's exact model, no adaptation): {report['tracking_rms_oracle']:.2e} rad, adapted / "
            f"oracle {report['tracking_rms_adapted'] / report['tracking_rms_oracle']:.1f}; per second (RMS) worst "
            f"{report['worst_oracle_window_ratio']:.1f} x, last {last:.1f} x; every second within 2 x the oracle's from "
            + ("never (not in the last second)" if reached is None else f"{reached:.0f} s")]


def learning_line(report):
    """The summary's line on the Cramér–Rao bound of the run (none without it: the nodes' twin run)."""
    bound = report.get("learning_bound")
    if not bound:
        return []
    seconds = report.get("model_error_seconds") or []
    line = (f"  learning bound (Cramér-Rao, these joint torques along this motion): no model from them is nearer the "
            f"robot than {bound['model_error_1s']:.3g} / sqrt(t) rad/s2 of acceleration error")
    if bound.get("time_to_oracle_bound") is not None:
        line += (f"; within 2 x the oracle needs {bound['model_error_for_2x_oracle']:.3g}: "
                 f"{bound['time_to_oracle_bound']:.0f} s of this motion at the least")
    if seconds:
        t, limit, estimate, applied = seconds[-1]
        line += (f"; at {t:.0f} s the estimate is {estimate / limit:.1f} x the bound, the applied model "
                 f"{applied / limit:.1f} x")
    return [line]


def summary_twin(report):
    settle = report["payload_time_to_5_percent"]
    runs = "three times (nominal, adapted, oracle)" if "tracking_rms_oracle" in report else "twice (nominal, adapted)"
    return "\n".join([
        f"robodyn demo --scenario twin: {report['robot']} simulated as {report['plant']} (driver "
        f"{report.get('driver', 'generic')}), under "
        f"{report['controller']} with the nominal model, {report['simulated_time']:.1f} s simulated {runs} in "
        f"{report['wall_seconds']:.1f} s wall, {report['runtime']}",
        f"  tracking RMS {report['tracking_window'][0]:.1f}-{report['tracking_window'][1]:.1f} s: nominal model "
        f"{report['tracking_rms_nominal']:.2e} rad, adapted {report['tracking_rms_adapted']:.2e} rad "
        f"(ratio {report['tracking_ratio']:.1f})",
        *oracle_line(report),
        *learning_line(report),
        *([f"  payload: {report['payload_note']}"] if "payload_note" in report else []),
        *([] if not report["payload_mass_true"] > 0.0 else [
            f"  payload from joint torques: true {report['payload_mass_true']:.3f} kg, estimated "
            f"{report['payload_mass_estimated']:.3f} kg, within 5 % after "
            f"{'never' if settle is None else f'{settle:.3f} s'}",
            f"  after the payload (+3 s to the end): nominal {report['tracking_rms_after_payload_nominal']:.2e} rad, "
            f"adapted {report['tracking_rms_after_payload_adapted']:.2e} rad"]),
        f"  worst second against the nominal loop: {report['worst_window_ratio']:.2f} x (RMS or peak, from "
        f"{report['worst_window_start']} s)",
        f"  non-finite commands: {report['non_finite_commands']}; gate: {report['gate']}",
        "  acceptance: " + ", ".join(f"{k} {'OK' if v else 'FAILED'}" for k, v in report["acceptance"].items()),
    ])


def main(argv=None):
    args = _parse(argv)
    # the loops' matrices are small: OpenBLAS's threads would spin beside them (0.58 x the CPU seconds and 0.91 x
    # the wall time of a 10-s twin run with one thread, measured on two cores), as in the nodes and file commands
    from ..identification.blas_threads import limit_blas_threads
    limit_blas_threads()
    from ..model.errors import ModelError
    from ..model.robot_names import BUNDLED_ROBOTS
    if args.engine == "mujoco":     # one line now (ModelError) rather than from inside a node
        from ..simulation.mujoco_engine import import_mujoco
        try:
            import_mujoco()
        except ModelError as exc:
            print(f"robodyn demo: {exc}", file=sys.stderr)
            return 2
    if args.scenario is None:
        adaptive = args.robot == "panda" or args.plant is not None or args.robot not in BUNDLED_ROBOTS
        args.scenario = "twin" if adaptive else "payload"
    if args.scenario == "twin":
        plant = args.plant or ("twin" if args.robot == "panda" else "perturbed:0")
        if args.oracle and args.library:
            print("robodyn demo: --oracle is for the runs over the nodes (the library loop, --library, always runs "
                  "its oracle)", file=sys.stderr)
            return 2
        if args.attach_time is not None and not 0 < args.attach_time < args.duration:
            print("robodyn demo: --attach-time must be inside the run (0, --duration)", file=sys.stderr)
            return 2
        try:
            if args.library:
                report, series = run_twin(args.duration, args.attach_time, args.payload_mass, args.controller,
                                          args.seed, robot=args.robot, plant=plant, engine=args.engine,
                                          driver=args.driver)
            else:
                from .demo_twin_nodes import run_twin_nodes
                report, series = run_twin_nodes(args.duration, args.attach_time, args.payload_mass, args.controller,
                                                args.seed, max(args.timeout, 1200.0), robot=args.robot, plant=plant,
                                                engine=args.engine, driver=args.driver, oracle=args.oracle)
                report["acceptance"] = twin_acceptance(report)
        except ModelError as exc:
            print(f"robodyn demo: {exc}", file=sys.stderr)
            return 2
        _print_and_write(report, series, args, summary_twin, plot_twin)
        return 0
    if args.plant is not None or args.oracle:
        print(f"robodyn demo: {'--plant' if args.plant is not None else '--oracle'} is for the adaptive scenario "
              "(--scenario twin); the payload scenario simulates the model itself", file=sys.stderr)
        return 2
    if args.attach_time is None:
        args.attach_time = 5.0
    if args.attach_time >= args.duration:
        print("robodyn demo: --attach-time must be before the end (--duration)", file=sys.stderr)
        return 2
    report, series = run_demo(args.duration, args.robot, args.attach_time, args.payload_mass, args.timeout,
                              realtime=not args.no_realtime, engine=args.engine, driver=args.driver)
    _print_and_write(report, series, args, summary, plot)
    return 0 if report["completed"] else 1


def _print_and_write(report, series, args, summary_of, plot_to):
    """Print the run's summary, write its JSON report (``--report``) and its plot (``--plot``)."""
    print(summary_of(report))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    if args.plot:
        plot_to(series, report, args.plot)


if __name__ == "__main__":
    sys.exit(main())
