"""robodyn config URDF --output FILE [--home Q1,...] [--lock-joint NAME=VALUE ...]: write a starting parameter
file for a robot, one section per node (simulator, estimator, inverse_dynamics, mpc).

The file holds the URDF path, the joints, a home inside the limits (given, or 0 where 0 is well inside the
limits, else mid-range), settings derived from the limits and gains scaled to the robot's inertia; values
that depend on hardware the URDF does not describe are marked CHECK. Every node takes it (robodyn node NAME
--ros-args --params-file FILE, or -p robot:=FILE), and so do the launch files (robot:=FILE). A home at which
the arm lies flat in its base's plane, or reaches below its base, is reported: give --home.
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
    from ..ros.robot_config import configuration_yaml, robot_configuration

    check_output_path(args.output, "--output")
    config = robot_configuration(args.urdf, home=_home(args.home), locked_joints=parse_locks(args.lock_joint))
    command = "robodyn config " + " ".join([args.urdf] + (["--home", args.home] if args.home else []) +
                                           [f"--lock-joint {lock}" for lock in args.lock_joint])
    summary = [f"{config.name}: {len(config.joints)} joints ({', '.join(config.joints)}), wrist link "
               f"{config.wrist_link}",
               f"home ({config.home_source}): [{', '.join(f'{x:g}' for x in config.home)}] rad",
               "values marked CHECK in the file depend on your hardware (torque and F/T sensor noise, sensor "
               "range, friction smoothing): set them before running on a real robot"]
    summary += [f"warning: {w}" for w in config.warnings]
    summary.append(f"run: robodyn node simulator --ros-args --params-file {args.output}   (likewise estimator, "
                   "inverse_dynamics, mpc)")
    return {args.output: configuration_yaml(config, command)}, summary


def main(argv=None):
    """Entry point of ``robodyn config``; returns the exit code (0 ok, 2 bad input)."""
    return file_command_main("config", build_parser(), argv, run)


if __name__ == "__main__":
    sys.exit(main())
