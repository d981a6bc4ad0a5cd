"""A starting parameter file for any URDF: one section per node (simulator, estimator, inverse_dynamics,
mpc) with the robot's joints, a home inside its limits, settings derived from its limits and gains scaled
to its inertia. ``robodyn config URDF --output FILE`` writes it; every node, the launch files and the
in-process bringup accept such a file (``--params-file FILE`` or ``robot:=FILE``), and ``robot:=URDF``
builds the same settings on the fly.

What is derived, and from what (nothing here is a number the user must know about their robot):

- ``joints``: the URDF's movable joints in chain order, without the locked ones (``--lock-joint``);
- ``home``: given (``--home``), else the bundled robot's, else per joint 0 where 0 lies inside the limits
  by 10 % of the range, else the middle of the range. A home at which the arm lies flat in its base's
  horizontal plane or reaches below its base (UR arms and Kinova's Jaco at zero) is flagged: that is where
  the floor or table the robot stands on is; the user gives ``--home``;
- ``wrist_link``: the flange frame merged into the last body (``tool0``, ``flange``, ...), else the last
  body;
- the generator's amplitude: at most 0.3 rad (the bundled robots'), within 80 % of the distance from home
  to every limit, and its peak velocity ``A w_f (K + 1) / 2`` (K equal harmonics) within 80 % of every
  velocity limit;
- gains: computed torque's ``kp``, ``kd`` act on accelerations (1/s², 1/s) and do not depend on the
  robot; Slotine-Li's ``K_D`` is derived by the node at ``home`` (``slotine_li.kd`` < 0: ``40 M_jj(home)``);
  the MPC's torque weight scales with the inertia, ``r_weight = 1e-3 (m_ref / m)²`` with ``m`` the mean
  diagonal of ``M(home)`` and ``m_ref`` the bundled Panda's at its home, on which the weights were tuned;
- the estimator learns the joint torque noise from the data (``effort_noise: 0``), and the controllers' gate
  judges estimates by how they predict the joint states they control from, so no noise level is written.

Every other setting is the node's own default, read from its schema (the simulator's ``integrator``
``rk4_implicit``, the controllers' ``state_timeout``, ``max_torque_rate``, rates, ...), so that the file never
runs a node less safely than the node runs without it; the one exception is the simulator's sensor noise
(``noise.*``, none by default), which makes the simulated measurements look like a robot's.

Settings that depend on hardware the URDF does not describe are marked ``CHECK`` in the file: the F/T
sensor's noise and range, the wrist link.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError

NODE_ORDER = ("simulator", "estimator", "inverse_dynamics", "mpc")
ROBOT_FILE_SECTION = "excite"
"""The section of a ``robodyn config`` file that no node reads: what ``robodyn excite`` (and ``config``'s
check of the home) keep the arm clear of, the floor or table height."""
HOME_MARGIN = 0.1          # fraction of a joint's range that a zero home keeps from its limits
MAX_AMPLITUDE = 0.3        # rad: the bundled robots' generator amplitude
LIMIT_FRACTION = 0.8       # of the distance to the position limits and of the velocity limits the generator uses
GENERATOR_PERIOD, GENERATOR_HARMONICS = 4.0, 2
REFERENCE_R_WEIGHT = 1e-3       # the MPC's torque weight tuned on the bundled Panda
FLANGE_NAMES = ("tool0", "flange", "tool", "ee_link", "end_effector", "ee")


@dataclass(frozen=True)
class RobotConfiguration:
    """``urdf_path`` (absolute), ``name``, ``joints`` (command order), ``home`` (joint order, rad),
    ``home_source`` (``given``, ``bundled`` or ``derived``), ``wrist_link``, ``locked_joints`` ({joint:
    value}), ``sections`` ({node: [(parameter, value, comment or None)]}), ``warnings`` (lines the user must
    act on, e.g. a home in the floor plane)."""

    urdf_path: str
    name: str
    joints: tuple
    home: np.ndarray
    home_source: str
    wrist_link: str
    locked_joints: dict
    sections: dict
    warnings: tuple
    table_height: float = 0.0
    floor_source: str = "the plane the base stands on"

    def parameters(self, node):
        """``{name: value}`` of node ``node``'s section (dotted names), e.g. for a launch file's ``parameters``."""
        return {name: value for name, value, _ in self.sections[node]}


def default_home(model):
    """(nv,) per joint: 0 where 0 lies inside the limits by HOME_MARGIN of the range (or the joint has no
    limits), else the middle of the range."""
    home = np.zeros(model.nv)
    for i in range(model.nv):
        lo, hi = model.lower[i], model.upper[i]
        if not (np.isfinite(lo) and np.isfinite(hi)):
            continue
        margin = HOME_MARGIN * (hi - lo)
        if not lo + margin <= 0.0 <= hi - margin:
            home[i] = 0.5 * (lo + hi)
    return home


def clearance_for(model, urdf_path, table_height=None, link_geometry=None):
    """``(ClearanceModel, floor height, where the floor comes from)``: what ``robodyn excite`` keeps the arm
    clear of with its defaults (clearance 0.05 m above the floor, 0.02 m between links, capsules of 0.06 m on
    links without geometry), the floor at ``table_height`` (m, base frame) or, when None, where the robot
    stands (:func:`robodyn_ros.model.collision_capsules.floor_height`: the pedestal's lowest point, else
    the base plane). Continuous joints are sampled over [-pi, pi] for the pairs in contact by construction."""
    from ..identification.collision_clearance import clearance_model
    from ..model.collision_capsules import floor_height, link_capsules

    if table_height is None:
        table_height, where = floor_height(model, urdf_path)
    else:
        where = "given"
    capsules, _ = link_capsules(model, urdf_path, link_geometry=link_geometry)
    lower = np.where(np.isfinite(model.lower), model.lower, -math.pi)
    upper = np.where(np.isfinite(model.upper), model.upper, math.pi)
    return clearance_model(model, capsules, floor=table_height, lower=lower, upper=upper), table_height, where


def home_problem(model, q, clearance):
    """Why ``robodyn excite --start`` would refuse the home ``q`` (nv,) (ranges with its margin, the torque
    that holds it against gravity, the floor and self-collision), as one line, or None."""
    from ..identification.excitation import start_problem
    lower = np.where(np.isfinite(model.lower), model.lower, -np.inf)
    return start_problem(model, q, lower, model.upper, clearance=clearance)


def _frame_position(model, q, link):
    from ..dynamics.kinematics import frame_placement
    return frame_placement(model, q, link)[1]


def flange_link(model):
    """The link a wrist sensor or payload sits on: a flange-like link merged into the last body, else it."""
    merged = model.merged_links[-1] if model.merged_links else ()
    for pattern in FLANGE_NAMES:
        for link in merged:
            if link == pattern or link.endswith(("_" + pattern, "/" + pattern)):
                return link
    return model.body_names[-1]


def generator_amplitude(model, home, period=GENERATOR_PERIOD, harmonics=GENERATOR_HARMONICS):
    """The generator amplitude (rad, module docstring): MAX_AMPLITUDE, or less where the limits need it."""
    amplitude = MAX_AMPLITUDE
    distance = np.minimum(home - model.lower, model.upper - home)
    finite = np.isfinite(distance)
    if np.any(finite):
        amplitude = min(amplitude, LIMIT_FRACTION * float(distance[finite].min()))
    peak_velocity_per_rad = (2.0 * math.pi / period) * (harmonics + 1) / 2.0
    limits = model.velocity_limit[np.isfinite(model.velocity_limit) & (model.velocity_limit > 0)]
    if limits.size:
        amplitude = min(amplitude, LIMIT_FRACTION * float(limits.min()) / peak_velocity_per_rad)
    return max(0.0, round(amplitude, 3))


def mean_inertia(model, q):
    """Mean diagonal of the mass matrix M(q), kg m² (or kg for prismatic joints)."""
    from ..dynamics.crba import crba
    return float(np.mean(np.diag(crba(model, q))))


def reference_inertia():
    """:func:`mean_inertia` of the bundled Panda at its home: the robot the default MPC weights were tuned on."""
    from ..model.model import Model
    from ..robots import bundled_robot_info
    info = bundled_robot_info("panda")
    return mean_inertia(Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"]), info["home"])


def robot_configuration(urdf, home=None, locked_joints=None, table_height=None):
    """:class:`RobotConfiguration` of ``urdf`` (a path or a bundled robot name); ``home`` (joint order, after
    the locks) or None; ``locked_joints``: {joint: value}; ``table_height``: the floor or table (m, base
    frame), None for where the robot stands (:func:`clearance_for`). A given home that ``robodyn excite``
    would refuse as its start (:func:`home_problem`) is refused; a derived one is reported with the nearest
    configuration that passes. ModelError naming what is wrong."""
    from ..dynamics.crba import crba
    from ..model.model import Model
    from ..model.robot_names import BUNDLED_ROBOTS, resolve_urdf
    from ..robots import bundled_robot_info

    info = bundled_robot_info(urdf) if urdf in BUNDLED_ROBOTS else None
    path = resolve_urdf(urdf)
    if not os.path.isfile(path):
        raise ModelError(f"{urdf}: no such URDF file (nor a bundled robot: {', '.join(BUNDLED_ROBOTS)})")
    locks = {**(info["locked_joints"] if info else {}), **(locked_joints or {})}
    full = Model.from_urdf(path)
    unknown = [name for name in locks if name not in full.joint_names]
    if unknown:
        raise ModelError(f"--lock-joint {unknown[0]}: not a movable joint of {path} ({', '.join(full.joint_names)})")
    model = Model.from_urdf(path, locked_joints=locks) if locks else full
    if model.nv == 0 or model.nq != model.nv:
        raise ModelError(f"{path}: the nodes need a fixed-base robot with one coordinate per joint")
    if table_height is not None and not math.isfinite(table_height):
        raise ModelError(f"--table-height {table_height}: must be a finite number")
    joints = tuple(model.joint_names)
    if home is not None:
        home = np.asarray(home, dtype=float)
        if home.shape != (model.nv,):
            raise ModelError(f"--home: {home.size} values for {model.nv} joints ({', '.join(joints)})")
        outside = [f"{n} {h:g} outside [{lo:g}, {hi:g}]" for n, h, lo, hi in zip(joints, home, model.lower, model.upper)
                   if not lo <= h <= hi]
        if outside:
            raise ModelError(f"--home: {'; '.join(outside)}")
        source = "given"
    elif info is not None and joints == tuple(info["arm_joints"]):
        home, source = np.asarray(info["home"], dtype=float), "bundled"
    else:
        home, source = default_home(model), "derived"
    wrist = info["wrist_link"] if info is not None else flange_link(model)
    clearance, floor, floor_source = clearance_for(model, path, table_height,
                                                   info["capsules"] if info is not None and info["capsules"] else None)
    warnings = []
    problem = home_problem(model, home, clearance)
    if problem is not None and source == "given":
        raise ModelError(f"--home {_numbers(home)}: robodyn excite would refuse it as its start: {problem}")
    if problem is not None:
        suggestion = _clear_home(model, home, clearance)
        warnings.append(f"at the home {_numbers(home)} {problem}: give --home Q1,..."
                        + (f" (e.g. {','.join(f'{x:.3f}' for x in suggestion)}, the nearest configuration clear of "
                           "the floor and of itself)" if suggestion is not None else ""))
    amplitude = generator_amplitude(model, home)
    if amplitude < 0.05:
        warnings.append(f"the home lies within {amplitude / LIMIT_FRACTION:.3f} rad of a joint limit: the generator's "
                        f"amplitude is {amplitude:g} rad; give --home away from the limits")
    M = crba(model, home)
    r_weight = REFERENCE_R_WEIGHT * (reference_inertia() / float(np.mean(np.diag(M)))) ** 2
    missing = [n for n, e in zip(joints, model.effort_limit) if not (np.isfinite(e) and e > 0)]
    if missing:
        warnings.append(f"no effort limit in the URDF for {missing}: no torque limit protects them; add "
                        "<limit effort=...>")
    sections = _sections(os.path.abspath(path), joints, home, wrist, locks, amplitude, r_weight,
                         40.0 * np.diag(M), source)
    sections[ROBOT_FILE_SECTION] = [("table_height", float(floor),
                                     f"m, base frame: the floor or table robodyn excite keeps the arm above "
                                     f"({floor_source})")]
    return RobotConfiguration(urdf_path=os.path.abspath(path), name=model.name, joints=joints, home=home,
                              home_source=source, wrist_link=wrist, locked_joints=locks, sections=sections,
                              warnings=tuple(warnings), table_height=floor, floor_source=floor_source)


def check_marked(config):
    """The parameter names (dotted, each once, in file order) whose comment in the file says CHECK."""
    names = []
    for node in NODE_ORDER:
        names += [name for name, _, comment in config.sections[node]
                  if comment and "CHECK" in comment and name not in names]
    return names


def _clear_home(model, home, clearance):
    """The configuration nearest ``home`` that :func:`home_problem` accepts (excite's seeded search), or None."""
    from ..identification.excitation import ANCHOR_ROOM
    from ..identification.collision_clearance import clear_configuration
    lower = np.where(np.isfinite(model.lower), model.lower, -math.pi)
    upper = np.where(np.isfinite(model.upper), model.upper, math.pi)
    inner_lower, inner_upper = lower + 0.0505 * (upper - lower), upper - 0.0505 * (upper - lower)
    try:
        q = clear_configuration(clearance, inner_lower, inner_upper, np.clip(home, inner_lower, inner_upper),
                                room=ANCHOR_ROOM)[0]
    except ModelError:
        return None
    return q if home_problem(model, q, clearance) is None else None


def _sections(path, joints, home, wrist, locks, amplitude, r_weight, slotine_kd, home_source):
    home_comment = {"given": "rad, joint order (--home)", "bundled": "rad, joint order (the bundled robot's)",
                    "derived": "rad, joint order: 0 inside the limits, else mid-range; CHECK it is clear of the "
                               "floor, or give --home"}[home_source]
    robot = [("urdf_path", path, None), ("joints", list(joints), None),
             ("home", [float(x) for x in home], home_comment),
             ("wrist_link", wrist, "CHECK: the link of the F/T sensor frame and payload")]
    if locks:
        robot.append(("locked_joints", [f"{name}={value:g}" for name, value in locks.items()], None))
    generator = [("generator.amplitude", amplitude, "rad: within the limits and velocity limits around home"),
                 _default("inverse_dynamics", "generator.period"), _default("inverse_dynamics", "generator.harmonics")]
    tracking = [_default("inverse_dynamics", "tracking_error.threshold",
                         "rad RMS per joint over tracking_error.window: WARN above"),
                _default("inverse_dynamics", "tracking_error.window")]
    base_parameters = [
        _default("inverse_dynamics", "use_base_parameters", "true: control from the estimator's base parameters "
                                                            "(its publish_covariance: true)"),
        _default("inverse_dynamics", "base_parameters.coulomb_width", "the estimator's coulomb_width"),
        _default("inverse_dynamics", "base_parameters.cutoff", "the estimator's filter.cutoff")]
    blend = [_default("inverse_dynamics", "base_parameters.blend_time",
                      "s: a newly applied set enters the law over a ramp this long")]
    adaptation = [_default("inverse_dynamics", "adaptation_timeout",
                           "s: WARN while no estimate has been applied this long")]

    def defaults(node, names):
        return [_default(node, name) for name in names]

    sections = {
        "simulator": robot + defaults("simulator", ("rate", "real_time_factor", "command_timeout")) + [
            _default("simulator", "integrator", "stable for any URDF damping; rk4 and semi_implicit_euler (explicit) "
                                                "diverge on light joints with stiff damping or friction"),
            _default("simulator", "friction"),
            ("noise.position", 1e-5, "simulated sensor noise (the node's default: none)"),
            ("noise.velocity", 1e-3, None), ("noise.effort", 0.01, None),
            ("noise.force", 0.1, None), ("noise.torque", 0.01, None), _default("simulator", "noise.seed"),
            _default("simulator", "payload.mass",
                     "kg, attached by ~/attach_payload or at payload.attach_time (< 0: never)")]
            + defaults("simulator", ("payload.com", "payload.size", "payload.attach_time")),
        "estimator": robot + defaults("estimator", ("decimation",)) + [
            _default("estimator", "use_wrench", "false without a wrist F/T sensor")]
            + defaults("estimator", ("estimate_bias", "base_parameters", "filter.cutoff", "filter.order")) + [
            _default("estimator", "force_noise", "CHECK: the F/T sensor's force noise, N"),
            _default("estimator", "torque_noise", "CHECK: the F/T sensor's torque noise, N m"),
            _default("estimator", "effort_noise", "N m; 0: the joint torque noise is learnt from the data, per "
                                                  "joint"),
            _default("estimator", "coulomb_width", "rad/s: tanh(v / width) of the Coulomb friction column"),
            _default("estimator", "publish_covariance", "true for controllers with use_base_parameters"),
            _default("estimator", "publish_rate"),
            _default("estimator", "wrench_saturation.force", "CHECK: the F/T sensor's range, N (0: not checked)"),
            _default("estimator", "wrench_saturation.torque",
                     "CHECK: the F/T sensor's range, N m (0: not checked)")]
            + defaults("estimator", ("effort_saturation", "time_jump_threshold", "change_alarms.count",
                                     "change_alarms.window")),
        "inverse_dynamics": robot + defaults("inverse_dynamics", ("mode",)) + [
            _default("inverse_dynamics", "kp", "1/s^2: acts on accelerations, any robot"),
            _default("inverse_dynamics", "kd", "1/s"), _default("inverse_dynamics", "slotine_li.lambda"),
            _default("inverse_dynamics", "slotine_li.kd",
                     "< 0: 40 M_jj(home) per joint, here " + _numbers(slotine_kd) + " N m s/rad"),
            _default("inverse_dynamics", "reference", "or file with trajectory_file (robodyn excite's CSV)")]
            + generator + defaults("inverse_dynamics", ("state_timeout", "stale_action")) + [
            _default("inverse_dynamics", "max_torque_rate", "< 0: each joint's effort limit per 10 ms"),
            _default("inverse_dynamics", "use_estimates")] + tracking + base_parameters + blend + adaptation,
        "mpc": robot + defaults("mpc", ("rate",)) + [
            _default("mpc", "output", "feedforward: for inverse_dynamics in mode mpc")]
            + defaults("mpc", ("horizon", "dt", "solver", "q_weight", "v_weight")) + [
            ("r_weight", _round(r_weight), "1e-3 (Panda's mean M_jj(home) / this robot's)^2")] + generator
            + tracking + base_parameters + adaptation,
    }
    return sections


def _default(node, name, comment=None):
    """``(name, node's default, comment)``: a setting written at the node's own default (its schema,
    :data:`robodyn_ros.ros.node_parameters.SCHEMAS`), so that the file never runs a node less safely than the
    node runs without it."""
    from .node_parameters import SCHEMAS
    default = next(spec.default for spec in SCHEMAS[node] if spec.name == name)
    return name, list(default) if isinstance(default, (list, tuple)) else default, comment


def _round(x, digits=3):
    """``x`` to ``digits`` significant digits."""
    return float(f"{x:.{digits}g}")


def _numbers(values):
    return "[" + ", ".join(f"{_round(float(v), 4):g}" for v in values) + "]"


def yaml_value(value):
    """A value as ROS's parameter-file parser types it back: floats always with a decimal point (rcl reads
    ``1`` as an integer, PyYAML reads ``1e-05`` as a string), strings double-quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        if "." not in mantissa and "inf" not in mantissa and "nan" not in mantissa:
            mantissa += ".0"
        return mantissa + e + exponent
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(yaml_value(v) for v in value) + "]"


def configuration_yaml(config, command=None):
    """The parameter file of ``config`` (:class:`RobotConfiguration`): a header saying how to use it, then
    ``<node>: ros__parameters:`` per node, groups nested, comments on the derived and the CHECK values."""
    lines = [f"# robodyn_ros parameters for {config.name} ({config.urdf_path}), every node in one file"
             + (f", written by: {command}" if command else "") + ".",
             "#   robodyn node simulator --ros-args --params-file THIS_FILE     (likewise estimator, "
             "inverse_dynamics, mpc)",
             "#   ros2 launch robodyn_ros simulation.launch.py robot:=THIS_FILE",
             "# Values marked CHECK depend on hardware the URDF does not describe. Floats need a decimal point."]
    for warning in config.warnings:
        lines.append(f"# WARNING: {warning}")
    for node in NODE_ORDER + (ROBOT_FILE_SECTION,):
        if node == ROBOT_FILE_SECTION:
            lines.append("# read by robodyn excite and the commands that take this file as --urdf, not by a node")
        lines += [f"{node}:", "  ros__parameters:"]
        opened = []
        for name, value, comment in config.sections[node]:
            *groups, leaf = name.split(".")
            common = 0
            while common < min(len(groups), len(opened)) and groups[common] == opened[common]:
                common += 1
            opened = opened[:common]
            for group in groups[common:]:
                lines.append("    " + "  " * len(opened) + f"{group}:")
                opened.append(group)
            note = f"   # {comment}" if comment else ""
            lines.append("    " + "  " * len(opened) + f"{leaf}: {yaml_value(value)}{note}")
    return "\n".join(lines) + "\n"


def write_temporary_configuration(urdf, directory=None):
    """The configuration of URDF file ``urdf`` (defaults: derived home, no locks) written to a new file in
    ``directory`` (default: the system's temporary directory); returns ``(path, RobotConfiguration)``. For
    ``robot:=URDF`` in nodes and launch files: the same settings as ``robodyn config URDF`` writes."""
    import tempfile

    config = robot_configuration(urdf)
    handle, path = tempfile.mkstemp(prefix=f"robodyn_{config.name}_", suffix=".yaml", dir=directory)
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(configuration_yaml(config))
    return path, config


@dataclass(frozen=True)
class RobotFile:
    """What a parameter file of ``robodyn config`` says about the robot, for the commands that take it in
    place of a URDF (``--urdf FILE.yaml``): ``path`` (the file), ``urdf_path``, ``locked_joints`` ({joint:
    value}: the file's ``locked_joints`` and the URDF's movable joints it does not list in ``joints``, at 0),
    ``joints``, ``home`` (joint order, rad), ``table_height`` (m, base frame; None in a file without it)."""

    path: str
    urdf_path: str
    locked_joints: dict
    joints: tuple
    home: tuple
    table_height: float | None


def is_robot_file(path):
    """Whether ``path`` is a file that is not XML (a URDF starts with ``<``): a candidate parameter file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            head = stream.read(4096).lstrip()
    except OSError:
        return False
    return not head.startswith("<")


def read_robot_file(path, option="--urdf"):
    """:class:`RobotFile` of the parameter file ``path``; ModelError in one line naming the file and what was
    expected (a URDF, or a parameter file of ``robodyn config`` with ``urdf_path`` and ``joints``)."""
    from ..model.model import Model
    from .node_parameters import parse_locked_joints
    from .parameters import load_params_yaml

    label = f"{option} {path}" if option else path
    expected = (f"{label}: expected a URDF (XML, <robot ...>) or a parameter file written by "
                "'robodyn config URDF --output FILE.yaml'")
    try:
        section = load_params_yaml(path, "estimator")
        extra = load_params_yaml(path, ROBOT_FILE_SECTION)
    except Exception as exc:   # YAML errors of any kind: the file is neither
        raise ModelError(f"{expected}; it is neither ({' '.join(str(exc).split())[:160]})") from None
    urdf = section.get("urdf_path")
    joints = section.get("joints")
    if not isinstance(urdf, str) or not urdf or not isinstance(joints, list) or not joints:
        raise ModelError(f"{expected}; it has no estimator section with urdf_path and joints")
    if not os.path.isfile(urdf):
        raise ModelError(f"{label}: its urdf_path {urdf} does not exist")
    locks = parse_locked_joints(section.get("locked_joints") or [])
    full = Model.from_urdf(urdf)
    unknown = [j for j in list(joints) + list(locks) if j not in full.joint_names]
    if unknown:
        raise ModelError(f"{label}: names {unknown[0]}, not a movable joint of {urdf}")
    locks.update({j: 0.0 for j in full.joint_names if j not in joints and j not in locks})
    home = section.get("home") or None
    if home is not None and len(home) != len(joints):
        raise ModelError(f"{label}: home has {len(home)} values for {len(joints)} joints")
    height = extra.get("table_height")
    if height is not None and not (isinstance(height, (int, float)) and math.isfinite(height)):
        raise ModelError(f"{label}: {ROBOT_FILE_SECTION}.table_height {height!r} is not a number")
    return RobotFile(os.path.abspath(path), urdf, locks, tuple(joints), None if home is None else tuple(home),
                     None if height is None else float(height))
