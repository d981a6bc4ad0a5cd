"""Write a joint-state log kept as text columns (one file each for time, positions, velocities and
torques, as in Gaz et al. 2019's Panda data set: ``exciting_traj_{time,positions,velocity,torques}.txt``)
as a rosbag2 bag, whole or a part of it, so that ``robodyn identify`` can read it.

    python tools/text_log_to_bag.py DATA_DIR OUT_BAG [--from 0.0] [--to 0.7] [--storage sqlite3|mcap]

``--from/--to`` select samples by fraction of the count: ``int(from * N) .. int(to * N) - 1``.
Joints are named panda_joint1..7.
"""
import argparse
import os
import sys

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="folder with exciting_traj_{time,positions,velocity,torques}.txt")
    p.add_argument("bag", help="bag directory to create")
    p.add_argument("--from", dest="start", type=float, default=0.0)
    p.add_argument("--to", dest="stop", type=float, default=1.0)
    p.add_argument("--storage", default="sqlite3", choices=("sqlite3", "mcap"))
    args = p.parse_args(argv)
    from robodyn_ros.bags.bag_io import write_joint_states_bag
    load = lambda name: np.loadtxt(os.path.join(args.data, f"exciting_traj_{name}.txt"))  # noqa: E731
    t = load("time")
    q, v, tau = (load(n).reshape(len(t), -1) for n in ("positions", "velocity", "torques"))
    a, b = int(args.start * len(t)), int(args.stop * len(t))
    names = [f"panda_joint{i}" for i in range(1, q.shape[1] + 1)]
    write_joint_states_bag(args.bag, t[a:b], names, q[a:b], v[a:b], tau[a:b], storage=args.storage)
    print(f"wrote {b - a} samples ({t[b - 1] - t[a]:.2f} s) to {args.bag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
