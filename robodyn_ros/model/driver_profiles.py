"""What a robot's own ROS 2 driver adds to the torques it receives and reports as joint effort, as defaults of
the nodes' parameters: one ``driver`` parameter (:data:`DRIVERS`) on every node selects a profile, and each
entry of the profile replaces that parameter's default, so that a user overrides any of them one by one.

| driver | commands | ``/joint_states`` effort | rate |
| --- | --- | --- | --- |
| ``generic`` | full joint torques (a forward effort controller) | full joint torques | any |
| ``franka`` | without gravity: the robot adds it (franka_hardware); torque rate limited (libfranka) | link-side torque ``tau_J``, gravity included | 1 kHz |
| ``ur`` | without gravity and the robot's friction compensation: the robot adds both, its friction scaled per joint (``direct_torque()``), the controllers send the learned friction's residual; ``/forward_effort_controller/commands`` | gravity-compensated torques (driver releases that report torques; ``effort.kind: current`` with ``effort.torque_constants`` for the ones that report currents) | 500 Hz |
| ``lbr`` | a torque overlay: KUKA's gravity compensation stays on | measured torque low-pass filtered at 10 Hz (lbr_fri_ros2_stack's ``measured_torque_cutoff_frequency``) | 500 Hz |

Per node kind: the controllers (``inverse_dynamics``, ``mpc``) leave out what the robot adds, and their
parameter gate reads the efforts as the estimator does (``effort.*``); the
``estimator`` turns the efforts back into full joint torques (:mod:`robodyn_ros.estimation.effort_measurement`);
the ``simulator`` behaves as the driver does (adds gravity and friction compensation, reports efforts the
same way, at its rate). The sources (driver documentation and code) are cited in docs/DRIVERS.md.
"""
from __future__ import annotations

from dataclasses import replace

DRIVERS = ("generic", "franka", "ur", "lbr")
"""The driver profiles (the ``driver`` parameter's choices)."""

_CONTROLLER = {
    "franka": {"gravity_compensated_by_robot": True, "max_torque_rate": 1000.0},
    # UR stops the program 0.04 s after the last command: the stale hold must start well before that
    "ur": {"gravity_compensated_by_robot": True, "robot_compensates_friction": True, "state_timeout": 0.02,
           "command_topic": "/forward_effort_controller/commands", "effort.kind": "gravity_compensated"},
    "lbr": {"gravity_compensated_by_robot": True, "effort.filter_cutoff": 10.0},
}
_ESTIMATOR = {
    "franka": {"effort.kind": "torque"},
    "ur": {"effort.kind": "gravity_compensated"},
    "lbr": {"effort.kind": "torque", "effort.filter_cutoff": 10.0},
}
_SIMULATOR = {
    "franka": {"rate": 1000.0, "robot_adds_gravity": True, "effort.kind": "torque", "missed_command_limit": 20,
               "driver_max_torque_rate": 1000.0},
    "ur": {"rate": 500.0, "robot_adds_gravity": True, "robot_friction_scale": 0.85,
           "effort.kind": "gravity_compensated", "receive_timeout": 0.04,
           "command_topic": "/forward_effort_controller/commands"},
    "lbr": {"rate": 500.0, "robot_adds_gravity": True, "effort.kind": "torque", "effort.filter_cutoff": 10.0},
}
PROFILES = {
    "inverse_dynamics": _CONTROLLER,
    "mpc": _CONTROLLER,
    "estimator": _ESTIMATOR,
    "simulator": _SIMULATOR,
}
"""``{node kind: {driver: {parameter: default}}}``; ``generic`` is every schema's own defaults."""


def check_driver(driver):
    """``driver`` if it is one of :data:`DRIVERS`, else ValueError naming them."""
    if driver not in DRIVERS:
        raise ValueError(f"driver: {driver!r} is not one of {', '.join(DRIVERS)}")
    return driver


def profile_defaults(kind, driver):
    """``{parameter: default}`` the profile ``driver`` sets for a node of ``kind`` (empty for ``generic`` and
    for kinds without a profile)."""
    return dict(PROFILES.get(kind, {}).get(check_driver(driver), {}))


def with_profile(specs, kind, driver):
    """``specs`` (a tuple of :class:`~robodyn_ros.model.parameter_schema.ParameterSpec`) with the defaults of the
    profile ``driver`` for a node of ``kind``; the profile's names must be in ``specs``."""
    defaults = profile_defaults(kind, driver)
    names = {spec.name for spec in specs}
    missing = sorted(set(defaults) - names)
    if missing:
        raise ValueError(f"driver profile {driver} of {kind}: no parameter {', '.join(missing)}")
    return tuple(replace(spec, default=defaults[spec.name]) if spec.name in defaults else spec for spec in specs)


def driver_overrides(driver, nodes=("simulator", "estimator", "inverse_dynamics", "mpc")):
    """``{node: {parameter: value}}``: ``driver`` on every node and its profile's values, which replace those
    of a robot's parameter file (config/*.yaml sets e.g. the simulator's rate and the controllers'
    max_torque_rate explicitly)."""
    return {node: {"driver": driver, **profile_defaults(node, driver)} for node in nodes}


def with_driver(overrides, driver):
    """``overrides`` (``{node: {parameter: value}}``) on top of :func:`driver_overrides` (``overrides`` win)."""
    base = driver_overrides(driver)
    return {node: {**base.get(node, {}), **overrides.get(node, {})} for node in set(base) | set(overrides)}
