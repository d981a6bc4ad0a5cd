"""The robodyn command: info, config, excite, record, identify, replay, demo, node, bench.

Subcommands other than info live in their own modules and are imported only when used, so that robodyn
info starts fast and needs neither ROS nor a compiler.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import warnings

import numpy as np

from ..model.errors import ModelError


def resolve_urdf(name_or_path):
    """A URDF path from a path or the name of a bundled robot (``panda``, ``ur5``, ``iiwa``); an unknown
    name that is not a file is refused naming the bundled robots."""
    from ..model.robot_names import bundled_urdf_path, resolve_urdf as resolve
    path = resolve(name_or_path)
    if path == name_or_path and not os.path.exists(path) and os.sep not in path and not path.endswith(".urdf"):
        return bundled_urdf_path(name_or_path)   # raises, naming the bundled robots
    return path


def format_model_info(model):
    """Human-readable summary: joints with type, axis, limits and friction; bodies with masses."""
    lines = [f"robot: {model.name}  (root link {model.root_link}, {'floating' if model.floating_base else 'fixed'} base)",
             f"degrees of freedom: nq = {model.nq}, nv = {model.nv}, bodies = {model.nbodies}",
             f"gravity: {model.gravity.tolist()}", "",
             f"{'joint':<24} {'type':<10} {'axis':<18} {'lower':>9} {'upper':>9} {'vel':>8} {'effort':>8} {'visc':>6} {'coul':>6}"]
    for i, (name, joint) in enumerate(zip(model.joint_names, model.joints)):
        iq, iv = model.idx_q[i], model.idx_v[i]
        axis = np.round(getattr(joint, "axis", np.full(3, np.nan)), 3).tolist() if hasattr(joint, "axis") else "-"
        kind = joint.kind if not (joint.kind == "revolute" and np.isinf(model.lower[iq])) else "continuous"
        lines.append(f"{name:<24} {kind:<10} {str(axis):<18} {model.lower[iq]:>9.3f} {model.upper[iq]:>9.3f} "
                     f"{model.velocity_limit[iv]:>8.3f} {model.effort_limit[iv]:>8.2f} {model.viscous[iv]:>6.2f} {model.coulomb[iv]:>6.2f}")
    lines += ["", f"{'body (link)':<24} {'mass kg':>9}  {'com (body frame) m':<30} merged links"]
    for i, name in enumerate(model.body_names):
        pi = model.inertias[i]
        com = pi[1:4] / pi[0] if pi[0] > 0 else np.zeros(3)
        merged = [l for l in model.merged_links[i] if l != name]
        lines.append(f"{name:<24} {pi[0]:>9.4f}  {str(np.round(com, 4).tolist()):<30} {', '.join(merged)}")
    lines += ["", f"total moving mass: {model.inertias[:, 0].sum():.4f} kg"]
    if model.notes:
        lines.append(f"notes ({len(model.notes)}): parser warnings and loader remarks; first: {model.notes[0]}")
    return "\n".join(lines)


def cmd_info(args):
    from ..model.model import Model
    from ..model.robot_names import BUNDLED_ROBOTS
    from .command_inputs import robot_inputs
    if args.urdf in BUNDLED_ROBOTS and not os.path.exists(args.urdf):
        urdf, locked = resolve_urdf(args.urdf), dict(_parse_assignment(s) for s in args.lock_joint)
    else:
        robot = robot_inputs(args.urdf, args.lock_joint, option=None)
        urdf, locked = robot.urdf, robot.locks
    model = Model.from_urdf(urdf, floating_base=args.floating_base, locked_joints=locked or None, strict=args.strict)
    print(format_model_info(model))
    return 0


def _parse_assignment(text):
    name, sep, value = text.partition("=")
    if not sep:
        raise ModelError(f"--lock-joint expects NAME=VALUE, got '{text}'")
    try:
        return name, float(value)
    except ValueError:
        raise ModelError(f"--lock-joint {name}: '{value}' is not a number") from None


def cmd_node(args):
    from ..ros.node_main import run
    return run(args.name, args.rest)


def cmd_bench(args):
    mod = importlib.import_module(f"robodyn_ros.benchmarks.{args.which}")
    if args.which == "soak":
        result = mod.run(minutes=args.minutes, json=args.json, report=args.report)
    else:
        result = mod.run(json=args.json)
    if args.json:
        print(json.dumps(result))
    if args.record:
        from ..benchmarks.record import append_record
        append_record(args.record, args.which, result)
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="robodyn", description="Robot dynamics, identification and adaptive control. "
                                "'robodyn COMMAND --help' describes each command.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="print a robot model (joints, limits, masses)")
    info.add_argument("urdf", help="URDF path, a bundled robot (panda, ur5, iiwa) or a parameter file of robodyn "
                                   "config (its URDF and locked joints)")
    info.add_argument("--floating-base", action="store_true")
    info.add_argument("--lock-joint", action="append", default=[], metavar="NAME=VALUE")
    info.add_argument("--strict", action="store_true",
                      help="refuse non-physical inertias and moving bodies without inertia (default: load "
                           "them as Pinocchio does, with a note)")
    info.set_defaults(func=cmd_info)
    for name, help_ in DELEGATED_HELP:
        sub.add_parser(name, help=help_, add_help=False)   # dispatched in main() before parsing
    node = sub.add_parser("node", help="run one ROS 2 node (simulator, inverse_dynamics, estimator, mpc); "
                                       "robodyn node NAME --help lists its parameters",
                          description="Run one ROS 2 lifecycle node until Ctrl-C, as ros2 run robodyn_ros NAME does. "
                                      "robodyn node NAME --help lists the node's parameters.")
    node.add_argument("name", metavar="NAME", help="simulator, inverse_dynamics, estimator or mpc")
    node.add_argument("rest", nargs=argparse.REMAINDER, metavar="[--help] [--ros-args ...]",
                      help="ROS arguments, e.g. --ros-args --params-file FILE -p robot:=PATH")
    node.set_defaults(func=cmd_node)
    bench = sub.add_parser("bench", help="benchmark tables against Pinocchio")
    bench.add_argument("which", nargs="?", default="kernels", choices=["kernels", "mpc", "nodes", "soak", "tracking",
                                                                    "disturbance"])
    bench.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    bench.add_argument("--minutes", type=float, default=30.0, help="soak only: run length (default 30)")
    bench.add_argument("--report", metavar="PATH", help="soak only: write the JSON report to PATH")
    bench.add_argument("--record", metavar="FILE.md", help="append the figures, with the date and the machine's "
                       "load, as a section of this Markdown file (e.g. docs/PERFORMANCE.md)")
    bench.set_defaults(func=cmd_bench)
    return p


DELEGATED = {"identify": "cli.identify", "demo": "cli.demo", "replay": "cli.replay", "excite": "cli.excite",
             "record": "cli.record", "config": "cli.config"}
DELEGATED_HELP = (
    ("config", "write a starting parameter file of every node for a URDF"),
    ("excite", "an exciting trajectory for identification, within the URDF's limits"),
    ("record", "record live ROS 2 topics into a bag (no ros2 CLI needed)"),
    ("identify", "identify inertial and friction parameters from a bag"),
    ("replay", "run a bag through the online estimator as the estimator node would"),
    ("demo", "the simulated adaptive-control demo"),
)


def one_line_warnings(command):
    """Show Python warnings (e.g. a URDF loaded with non-physical inertias) as one line each,
    ``robodyn COMMAND: warning: ...``, without the file name and source line of the default format."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"robodyn {command}: warning: {' '.join(str(message).split())}", file=file or sys.stderr)
    warnings.showwarning = show


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv:
        one_line_warnings(argv[0])
    if argv and argv[0] in DELEGATED:  # the subcommand parses its own options, --help included
        module = importlib.import_module(f"robodyn_ros.{DELEGATED[argv[0]]}")
        try:
            return int(module.main(argv[1:]) or 0)
        except ModelError as exc:
            print(f"robodyn {argv[0]}: error: {exc}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ModelError as exc:
        print(f"robodyn {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
