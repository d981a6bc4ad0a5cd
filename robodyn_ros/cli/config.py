"""robodyn config URDF --output FILE [--home Q1,...] [--lock-joint NAME=VALUE ...] [--table-height Z]: write a
starting parameter file for a robot, one section per node (simulator, estimator, inverse_dynamics, mpc).

The file holds the URDF path, the joints and locked joints, a home inside the limits (given, or 0 where 0 is
well inside the limits, else mid-range), the floor or table height, settings derived from the limits and
gains scaled to the robot's inertia; values that depend on hardware the URDF does not describe are marked
CHECK. Every node takes it (robodyn node NAME --ros-args --params-file FILE, or -p robot:=FILE), and so do
the launch files (robot:=FILE) and the commands that take a URDF (--urdf FILE: excite, identify, replay,
info; demo --robot FILE). The home is checked as robodyn excite checks its start (inside the ranges with a
margin, the torque holding it against gravity within the effort limits, clear of the floor and of itself):
a given home that fails is refused, a derived one reported with the nearest one that passes.
"""
from __future__ import annotations

import sys

import numpy as np

from ..model.errors import ModelError
from .command_inputs import VectorOptionParser, parse_locks
from .file_command import check_output_path, file_command_main


def build_parser():
    p = VectorOptionParser(prog="robodyn config", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("urdf", help="URDF of the robot, or a bundled robot: panda, ur5, iiwa")
    p.add_argument("--output", required=True, help="parameter file (YAML) to write")
    p.add_vector_argument("--home", metavar="Q1,Q2,...",
                          help="home configuration, rad, one value per joint in chain order (after --lock-joint); "
                               "default: 0 inside the limits, else mid-range (a bundled robot: its home)")
    p.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE",
                   help="hold a joint fixed at VALUE (e.g. a gripper's fingers); repeatable")
    p.add_argument("--table-height", type=float, metavar="Z",
                   help="height of the floor or table plane in the base frame (m; default: the lowest point of "
                        "the URDF's fixed base, a pedestal, when it reaches below the base, else 0)")
    return p


def _home(text):
    if text is None:
        return None
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ModelError(f"--home {text}: expected comma-separated numbers") from None
    if not values or not np.all(np.isfinite(values)):
        raise ModelError(f"--home {text}: expected comma-separated finite numbers")
    return values


def run(args):
    """``(files, summary lines)`` of the command."""
    from ..ros.robot_config import check_marked, configuration_yaml, robot_configuration

    check_output_path(args.output, "--output")
    config = robot_configuration(args.urdf, home=_home(args.home), locked_joints=parse_locks(args.lock_joint),
                                 table_height=args.table_height)
    command = "robodyn config " + " ".join([args.urdf] + (["--home", args.home] if args.home else []) +
                                           [f"--lock-joint {lock}" for lock in args.lock_joint] +
                                           ([f"--table-height {args.table_height:g}"]
                                            if args.table_height is not None else []))
    summary = [f"{config.name}: {len(config.joints)} joints ({', '.join(config.joints)}), wrist link "
               f"{config.wrist_link}" + (f", {len(config.locked_joints)} locked" if config.locked_joints else ""),
               f"home ({config.home_source}): [{', '.join(f'{x:g}' for x in config.home)}] rad",
               f"floor or table at z = {config.table_height:.3f} m in the base frame ({config.floor_source})",
               f"values marked CHECK in the file ({', '.join(check_marked(config))}) depend on what the URDF does "
               "not describe: set them before running on a real robot",
               f"the commands that take a URDF take this file: robodyn excite --urdf {args.output} ..."]
    summary += [f"warning: {w}" for w in config.warnings]
    summary.append(f"run: robodyn node simulator --ros-args --params-file {args.output}   (likewise estimator, "
                   "inverse_dynamics, mpc)")
    return {args.output: configuration_yaml(config, command)}, summary


def main(argv=None):
    """Entry point of ``robodyn config``; returns the exit code (0 ok, 2 bad input)."""
    return file_command_main("config", build_parser(), argv, run)


if __name__ == "__main__":
    sys.exit(main())
