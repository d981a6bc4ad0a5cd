"""What the file commands (``identify``, ``replay``, ``excite``, ``config``, ``info``) read besides their own
options: the robot (``--urdf``: a URDF, a bundled robot or a parameter file of ``robodyn config``), vector
options whose value starts with a negative number, the ``--lock-joint`` values, the estimator's parameters
(``--config``, ``--driver``), a bag's joint states repaired, and the progress bar they show while reading."""
from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError

NEGATIVE_VECTOR = re.compile(r"-\.?[0-9]")
"""What a vector option's value looks like when its first component is negative (``-0.16,0.86``,
``-.5,1``), which argparse would take for an option."""


class VectorOptionParser(argparse.ArgumentParser):
    """An ArgumentParser whose comma-separated vector options (:meth:`add_vector_argument`) take a value that
    starts with a negative number in both spellings, ``--home -0.16,0.86,...`` and ``--home=-0.16,0.86,...``
    (argparse alone reads ``-0.16,0.86`` as an unknown option and says ``expected one argument``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.vector_options = set()

    def add_vector_argument(self, *names, **kwargs):
        """``add_argument`` of a comma-separated vector option (one string value)."""
        self.vector_options.update(name for name in names if name.startswith("--"))
        return self.add_argument(*names, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        joined, k = [], 0
        while k < len(args):
            if args[k] in self.vector_options and k + 1 < len(args) and NEGATIVE_VECTOR.match(args[k + 1]):
                joined.append(f"{args[k]}={args[k + 1]}")
                k += 2
            else:
                joined.append(args[k])
                k += 1
        return super().parse_known_args(joined, namespace)


class ProgressBar:
    """A one-line text progress bar on stderr: ``reading bag   [##########----------]  50%``."""

    def __init__(self, stream=None, width=30, quiet=False):
        self.stream, self.width, self.quiet = stream or sys.stderr, width, quiet
        self._last = None
        self._open = False

    def __call__(self, stage, done, total):
        if self.quiet:
            return
        fraction = 1.0 if total <= 0 else min(1.0, done / total)
        filled = int(round(self.width * fraction))
        text = f"\r{stage:<14} [{'#' * filled}{'-' * (self.width - filled)}] {100 * fraction:5.1f}%"
        if text != self._last:
            self.stream.write(text + ("\n" if fraction >= 1.0 else ""))
            self.stream.flush()
            self._last, self._open = text, fraction < 1.0

    def close(self):
        """End an unfinished bar's line (before an error message)."""
        if self._open:
            self.stream.write("\n")
            self._open = False

    def stage(self, name):
        return lambda done, total: self(name, done, total)


def parse_locks(items):
    """``{joint: value}`` of the ``--lock-joint NAME=VALUE`` options; a malformed one raises ModelError."""
    locks = {}
    for text in items:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise ModelError(f"--lock-joint expects NAME=VALUE, got '{text}'")
        try:
            locks[name] = float(value)
        except ValueError:
            raise ModelError(f"--lock-joint {name}: '{value}' is not a number") from None
    return locks


@dataclass(frozen=True)
class RobotInputs:
    """The robot a command's ``--urdf`` names: ``urdf`` (a path), ``locks`` ({joint: value}: the file's or
    the bundled robot's, then the ``--lock-joint`` options), ``bundled`` (the bundled robot's name or None),
    ``robot_file`` (a :class:`~robodyn_ros.ros.robot_config.RobotFile` or None): its ``home`` and
    ``table_height`` stand in for the options that were not given."""

    urdf: str
    locks: dict
    bundled: str | None = None
    robot_file: object = None

    @property
    def home(self):
        return None if self.robot_file is None or self.robot_file.home is None else np.asarray(self.robot_file.home)

    @property
    def table_height(self):
        return None if self.robot_file is None else self.robot_file.table_height


def robot_inputs(value, lock_options=(), option="--urdf"):
    """:class:`RobotInputs` of ``value``: a bundled robot's name (its URDF and usual locks), a parameter file
    of ``robodyn config`` (its URDF, locks, home and table height: the same as giving them as options) or
    a URDF. ``--lock-joint`` options are added to the file's or bundled robot's locks. ModelError in one
    line naming the option and the file."""
    from ..model.robot_names import BUNDLED_ROBOTS
    from ..robots import bundled_robot_info
    from ..ros.robot_config import is_robot_file, read_robot_file

    given = parse_locks(lock_options)
    if value in BUNDLED_ROBOTS and not os.path.exists(value):
        info = bundled_robot_info(value)
        return RobotInputs(info["urdf"], given or dict(info.get("locked_joints") or {}), bundled=value)
    if not os.path.isfile(value):
        label = f"{option} {value}" if option else value
        raise ModelError(f"{label}: no such file (nor a bundled robot: {', '.join(BUNDLED_ROBOTS)})")
    if is_robot_file(value):
        robot_file = read_robot_file(value, option)
        if set(given) & set(robot_file.joints):   # fewer joints than the file's: its home no longer fits
            from dataclasses import replace
            robot_file = replace(robot_file, home=None)
        return RobotInputs(robot_file.urdf_path, {**robot_file.locked_joints, **given}, robot_file=robot_file)
    return RobotInputs(value, given)


def config_or_robot_file(config, urdf):
    """The estimator's parameter file of a command: ``--config`` when given, else ``--urdf`` when it is a file of
    ``robodyn config`` (every node's parameter file, the estimator's too), else None."""
    from ..ros.robot_config import is_robot_file
    if config is None and os.path.isfile(urdf) and is_robot_file(urdf):
        return urdf
    return config


def estimator_configuration(path, node_name, driver=None):
    """The estimator node's validated parameters from its parameter file ``path`` (the section of ``node_name``,
    as ``--params-file`` gives it to the node; None: the node's defaults), with ``driver`` (one of the driver
    profiles, :mod:`robodyn_ros.model.driver_profiles`) in place of the file's when given. ModelError in one
    line naming ``--config`` or ``--driver``."""
    from ..ros.node_parameters import resolve_node_config
    from ..ros.parameters import load_params_yaml
    overrides = {}
    if path is not None:
        if not os.path.isfile(path):
            raise ModelError(f"--config {path}: no such file")
        try:
            overrides = load_params_yaml(path, node_name)
        except (ValueError, OSError) as exc:
            raise ModelError(f"--config {path}: {exc}") from None
        except Exception as exc:   # a YAML syntax error
            raise ModelError(f"--config {path}: not a ROS parameter file ({type(exc).__name__}: {exc})") from None
    if driver is not None:
        overrides = {**overrides, "driver": driver}
    try:
        return resolve_node_config("estimator", overrides)
    except (ValueError, OSError) as exc:
        label = f"--config {path}" if path is not None else f"--driver {driver}"
        raise ModelError(f"{label}: {exc}") from None


def read_repaired_joint_states(args, model, bag, progress):
    """``(series, q, v, tau)`` of the ``--joint-states`` topic of ``bag`` in the joint order of ``model``: the
    whole topic in memory, NaN samples dropped and stamps sorted (``--repair``); ``v`` None when the bag has
    no complete velocities."""
    from ..bags import read_joint_states
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        series = read_joint_states(bag, args.joint_states, joint_names=model.joint_names, progress=progress)
    columns = list(range(len(model.joint_names)))
    if series.tau is None or np.isnan(series.tau[:, columns]).all(axis=0).any():
        raise ModelError(f"{args.joint_states} has no effort (torque) values: nothing to identify from")
    v = None
    if series.v is not None and not np.isnan(series.v[:, columns]).any():
        v = series.v[:, columns]
    return series, series.q[:, columns], v, series.tau[:, columns]
