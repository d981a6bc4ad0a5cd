#!/usr/bin/env python3
"""Convert the real Panda log of Gaz et al. 2019 (plain-text time, positions, velocities, torques: see the
data set's README) into a ROS 2 bag of sensor_msgs/JointState on /joint_states (joints panda_joint1..7),
optionally only a leading or trailing fraction of it:

    python tools/panda_log_to_bag.py DATA_DIR BAG [--first 0.7 | --last 0.3] [--storage sqlite3|mcap]

The bag can then go through ``robodyn identify`` or ``robodyn replay``.
"""
import argparse
import os
import sys

import numpy as np

JOINTS = [f"panda_joint{i}" for i in range(1, 8)]


def load_log(directory):
    """``(t (N,), q, v, tau (N, 7))`` of the log in ``directory`` (files ``exciting_traj_<name>.txt``)."""
    def load(name):
        path = os.path.join(directory, f"exciting_traj_{name}.txt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file (is {directory} the panda-gaz2019 data set?)")
        return np.loadtxt(path)
    t = load("time")
    q, v, tau = (load(name) for name in ("positions", "velocity", "torques"))
    for name, x in (("positions", q), ("velocity", v), ("torques", tau)):
        if x.size != 7 * len(t):
            raise ValueError(f"exciting_traj_{name}.txt has {x.size} values, expected 7 per time stamp ({7 * len(t)})")
    return t, q.reshape(len(t), 7), v.reshape(len(t), 7), tau.reshape(len(t), 7)


def split(n, first=None, last=None):
    """The sample slice of a leading ``first`` or trailing ``last`` fraction of n samples (the split
    point ``int(first * n)``, as the identification tests use)."""
    if first is not None:
        return slice(0, int(first * n))
    if last is not None:
        return slice(int((1.0 - last) * n), n)
    return slice(0, n)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory of the panda-gaz2019 log")
    p.add_argument("bag", help="bag directory to create (must not exist)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--first", type=float, help="keep the first fraction (0, 1] of the samples")
    group.add_argument("--last", type=float, help="keep the trailing fraction (0, 1] of the samples")
    p.add_argument("--storage", default="sqlite3", choices=("sqlite3", "mcap"))
    args = p.parse_args(argv)
    from robodyn_ros.bags import write_joint_states_bag
    from robodyn_ros.model.errors import ModelError
    for value in (args.first, args.last):
        if value is not None and not 0.0 < value <= 1.0:
            print(f"panda_log_to_bag: error: fraction {value} is not in (0, 1]", file=sys.stderr)
            return 2
    try:
        t, q, v, tau = load_log(args.data)
        part = split(len(t), args.first, args.last)
        write_joint_states_bag(args.bag, t[part], JOINTS, q[part], v[part], tau[part], storage=args.storage)
    except (OSError, ValueError, ModelError) as exc:
        print(f"panda_log_to_bag: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.bag}: {len(t[part])} joint states, {t[part][-1] - t[part][0]:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
