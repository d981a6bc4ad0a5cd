#!/usr/bin/env python3
"""Writes ``robodyn_ros/robots/panda_twin.yaml``: the digital twin of a real Franka Emika Panda, identified by
``robodyn identify`` from the measurements of Gaz et al. 2019 (a 21-s exciting trajectory logged on a real
Panda: joint positions, velocities and link-side torques at about 1 kHz).

Steps:

1. the first 70 % of the log is written as a ROS 2 bag (``sensor_msgs/JointState`` on ``/joint_states``);
2. ``robodyn identify BAG --urdf <bundled panda.urdf> --lock-joint panda_finger_joint{1,2}=0`` fits the
   inertias (physically consistent), armature and friction ``viscous v + coulomb tanh(v / 0.05) + offset``
   (defaults: 5 Hz zero-phase low-pass on q, q̇, τ);
3. held-out check: the identified model and the nominal URDF predict the last 30 % (the same 5 Hz
   low-pass on the measured and on the predicted side: q̈ comes from the filtered q̇), relative error
   ``||τ_f - τ̂|| / ||τ_f||`` overall and per joint;
4. joint-torque noise: the part of the measured torques above the identification band, ``τ - F τ`` with
   ``F`` the same 5 Hz low-pass, per joint (its standard deviation, N m) over the whole log; the simulator
   adds it as white noise to the efforts it reports (``sensor_noise.effort``);
5. the YAML of step 2 plus a ``twin:`` section (source, held-out errors, noise) and ``sensor_noise:``.

The log itself is not shipped (GPL-3.0): the script needs it, the package needs only its result.

Usage: ``python tools/make_panda_twin.py DATA_DIR [--out robodyn_ros/robots/panda_twin.yaml] [--check]``
(DATA_DIR holds ``exciting_traj_{time,positions,velocity,torques}.txt``); ``--check`` regenerates into a
temporary file and compares the numbers with the shipped file (exit 1 when they differ by more than 1e-6
relative).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))

from robodyn_ros.bags import write_joint_states_bag  # noqa: E402
from robodyn_ros.cli.identify import main as identify_main  # noqa: E402
from robodyn_ros.identification.batch import filtered_samples, predict_torques  # noqa: E402
from robodyn_ros.identification.results import model_from_parameters, yaml_text  # noqa: E402
from robodyn_ros.identification.signal_filters import filter_joint_signals  # noqa: E402
from robodyn_ros.model.model import Model  # noqa: E402
from robodyn_ros.robots import bundled_robot_info  # noqa: E402

sys.path.insert(0, HERE)
from panda_log_to_bag import JOINTS, load_log  # noqa: E402  (the same reading of the log)

DEFAULT_OUT = os.path.join(HERE, os.pardir, "robodyn_ros", "robots", "panda_twin.yaml")
TRAIN_FRACTION = 0.7
CUTOFF_HZ = 5.0
COULOMB_WIDTH = 0.05


def relative(err, ref, axis=None):
    return np.linalg.norm(err, axis=axis) / np.linalg.norm(ref, axis=axis)


def held_out_errors(model, nominal, t, q, v, tau):
    """Relative torque errors of ``model`` and ``nominal`` on ``(t, q, v, tau)`` (5 Hz low-pass both sides)."""
    _, Q, V, A, TAU = filtered_samples(t, q, v, tau, CUTOFF_HZ, decimate=1)
    ours = predict_torques(model, Q, V, A, COULOMB_WIDTH)
    theirs = predict_torques(nominal, Q, V, A, COULOMB_WIDTH)
    return {"samples": int(len(Q)),
            "relative_error_twin": float(relative(TAU - ours, TAU)),
            "relative_error_nominal_urdf": float(relative(TAU - theirs, TAU)),
            "relative_error_twin_per_joint": [float(x) for x in relative(TAU - ours, TAU, axis=0)],
            "relative_error_nominal_urdf_per_joint": [float(x) for x in relative(TAU - theirs, TAU, axis=0)]}


def torque_noise(t, q, v, tau):
    """Per joint std (7,) of ``tau - F tau`` (F the 5 Hz zero-phase low-pass) and its overall relative level."""
    signals = filter_joint_signals(t, q, v, tau, cutoff_hz=CUTOFF_HZ)
    keep = np.flatnonzero(signals.valid)
    raw = tau[np.searchsorted(t, signals.t[keep])]
    above = raw - signals.tau[keep]
    return above.std(axis=0), float(relative(above, raw))


def make_twin(data_dir):
    """The twin's YAML document (dict)."""
    try:
        t, q, v, tau = load_log(data_dir)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"make_panda_twin: {exc}") from None
    n = int(TRAIN_FRACTION * len(t))
    info = bundled_robot_info("panda")
    locks = [f"--lock-joint={name}={value}" for name, value in info["locked_joints"].items()]
    with tempfile.TemporaryDirectory() as tmp:
        write_joint_states_bag(os.path.join(tmp, "bag"), t[:n], JOINTS, q[:n], v[:n], tau[:n], storage="sqlite3")
        params = os.path.join(tmp, "params.yaml")
        code = identify_main([os.path.join(tmp, "bag"), "--urdf", info["urdf"], "--output", params,
                              "--cutoff", str(CUTOFF_HZ), "--coulomb-width", str(COULOMB_WIDTH), "--quiet", *locks])
        if code != 0:
            raise SystemExit("make_panda_twin: robodyn identify failed")
        with open(params) as stream:
            doc = yaml.safe_load(stream)
    nominal = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    twin = model_from_parameters(nominal, doc)
    # the nominal URDF's own <dynamics damping> is friction the controllers' model already has: kept
    held_out = held_out_errors(twin, nominal, t[n:], q[n:], v[n:], tau[n:])
    std, level = torque_noise(t, q, v, tau)
    doc["twin"] = {
        "source": "Gaz et al. 2019, real Franka Emika Panda, 5-harmonic exciting trajectory, 20544 samples over "
                  "21 s (link-side joint torques)",
        "identified_on": f"first {int(100 * TRAIN_FRACTION)} % of the log ({n} samples), robodyn identify",
        "held_out": dict(held_out, data=f"last {int(100 * (1 - TRAIN_FRACTION))} % of the log",
                         filter=f"{CUTOFF_HZ} Hz zero-phase Butterworth on measured and predicted (from filtered q, "
                                "q_dot, q_ddot) torques"),
        "torque_noise_relative": level,
        "regenerate": "python tools/make_panda_twin.py DATA_DIR",
    }
    doc["sensor_noise"] = {"effort": [float(x) for x in std],
                           "note": "std (N m) of the measured torques above the 5 Hz identification band, per joint"}
    return doc


def _numbers(x):
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _numbers(x[k])]
    if isinstance(x, list):
        return [y for item in x for y in _numbers(item)]
    return [float(x)] if isinstance(x, (int, float)) and not isinstance(x, bool) else []


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", help="directory of the Gaz et al. 2019 log (exciting_traj_*.txt)")
    p.add_argument("--out", default=DEFAULT_OUT, help="YAML to write")
    p.add_argument("--check", action="store_true", help="compare with --out instead of writing")
    args = p.parse_args(argv)
    doc = make_twin(args.data_dir)
    h = doc["twin"]["held_out"]
    print(f"held-out ({h['data']}): twin {100 * h['relative_error_twin']:.2f} %, nominal URDF "
          f"{100 * h['relative_error_nominal_urdf']:.2f} %; torque noise above {CUTOFF_HZ} Hz "
          f"{100 * doc['twin']['torque_noise_relative']:.2f} % of the signal")
    if args.check:
        with open(args.out) as stream:
            shipped = yaml.safe_load(stream)
        a, b = np.array(_numbers(doc)), np.array(_numbers(shipped))
        same = a.shape == b.shape and np.allclose(a, b, rtol=1e-6, atol=1e-9)
        print("panda_twin.yaml is " + ("up to date" if same else "OUT OF DATE"))
        return 0 if same else 1
    header = ("# Digital twin of a real Franka Emika Panda: written by tools/make_panda_twin.py from the log of\n"
              "# Gaz et al. 2019 (robodyn identify on 70 % of it). Load with robodyn_ros.simulation.plant.load_plant.\n")
    with open(args.out, "w") as stream:
        stream.write(header + yaml_text(doc))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
