#!/usr/bin/env python3
"""Write a long simulated joint-state bag (default 5 million samples at 1 kHz, 83 minutes) for the
bounded-memory benchmark of ``robodyn identify``, in bounded memory itself (one period at a time).

The robot is the bundled Panda (fingers locked at 0) with every body's inertial parameters scaled by a
random factor in [0.85, 1.15] (a positive scale keeps them physically consistent) plus armature and
friction; it follows one optimised exciting trajectory (10 s period, 5 harmonics) over and over. Each
period gets fresh noise: positions quantised to an 18-bit encoder, torques plus Gaussian noise of 1 %
of each joint's range.

    python tools/write_long_bag.py OUT_BAG [--samples 5000000] [--storage sqlite3|mcap] [--seed 1]

Then: ``robodyn identify OUT_BAG --urdf panda --lock-joint panda_finger_joint1=0
--lock-joint panda_finger_joint2=0 --output params.yaml --holdout 0.3``.
"""
import argparse
import sys
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bag")
    p.add_argument("--samples", type=int, default=5_000_000)
    p.add_argument("--storage", default="sqlite3", choices=("sqlite3", "mcap"))
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)

    from rosbags.rosbag2 import Writer
    from rosbags.rosbag2.enums import StoragePlugin
    from robodyn_ros.bags import DEFAULT_T0_NS, JOINT_STATE_TYPE
    from robodyn_ros.bags.cdr import encode_joint_states
    from robodyn_ros.bags.storage import ros2_typestore
    from robodyn_ros.identification.base_parameters import smooth_sign
    from robodyn_ros.identification.batch import predict_torques
    from robodyn_ros.identification.exciting_trajectory import design_exciting_trajectory
    from robodyn_ros.identification.signal_filters import encoder_resolution, quantize
    from robodyn_ros.model.model import Model
    from robodyn_ros.robots import bundled_urdf_path

    rng = np.random.default_rng(args.seed)
    nominal = Model.from_urdf(bundled_urdf_path("panda"),
                              locked_joints={"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0})
    scale = rng.uniform(0.85, 1.15, nominal.nbodies)[:, None]
    nv = nominal.nv
    true = (nominal.with_inertial_parameters((np.asarray(nominal.inertias) * scale).reshape(-1))
            .with_armature(rng.uniform(0.05, 0.3, nv))
            .with_friction(rng.uniform(0.1, 0.6, nv), rng.uniform(0.2, 1.0, nv), rng.uniform(-0.2, 0.2, nv)))
    traj = design_exciting_trajectory(nv, nominal.lower, nominal.upper, 0.6 * nominal.velocity_limit,
                                      a_max=np.full(nv, 4.0), period=10.0, harmonics=5, seed=1, max_iterations=4)
    t, Q, V, A = traj.sample(0.001, 1)
    tau = predict_torques(true.with_friction(np.zeros(nv), np.zeros(nv), np.zeros(nv)), Q, V, A)
    sigma = 0.01 * (tau.max(axis=0) - tau.min(axis=0))
    names = tuple(nominal.joint_names)
    start = time.perf_counter()
    with Writer(args.bag, version=9, storage_plugin={"sqlite3": StoragePlugin.SQLITE3,
                                                      "mcap": StoragePlugin.MCAP}[args.storage]) as writer:
        connection = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=ros2_typestore())
        written = 0
        while written < args.samples:
            n = min(len(t), args.samples - written)
            stamps = DEFAULT_T0_NS + np.round((written + np.arange(n)) * 1e6).astype(np.int64)
            v = V[:n]
            friction = true.viscous * v + true.coulomb * smooth_sign(v, 0.05) + true.friction_offset
            measured = tau[:n] + friction + rng.normal(size=(n, nv)) * sigma
            q = quantize(Q[:n], encoder_resolution(2 ** 18))
            for stamp, message in zip(stamps.tolist(), encode_joint_states(stamps, "", [names] * n, [q, v, measured])):
                writer.write(connection, stamp, message)
            written += n
            print(f"\r{written}/{args.samples} samples", end="", file=sys.stderr, flush=True)
    print(f"\nwrote {args.samples} samples ({args.samples / 1000:.0f} s at 1 kHz) to {args.bag} in "
          f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
