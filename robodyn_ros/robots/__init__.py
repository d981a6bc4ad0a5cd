"""Robot descriptions shipped with robodyn_ros, usable with nothing else installed (no meshes).

``panda.urdf`` and ``ur5.urdf`` are example-robot-data's descriptions with visuals and collisions removed;
``iiwa.urdf`` is the KUKA LBR iiwa 14 R820 written from Müller & Kumar (2021), Table 1. Each file's header
comment states its origin and licence; ``tools/make_bundled_urdfs.py`` regenerates them.

    >>> from robodyn_ros.model.model import Model
    >>> info = bundled_robot_info("panda")
    >>> model = Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
"""
from __future__ import annotations

import os

import numpy as np

from ..model.errors import ModelError
from ..model.robot_names import BUNDLED_ROBOTS, bundled_urdf_path

# Per robot: the actuated arm joints in chain order, the base link, the last arm link, the flange frame a
# wrist force/torque sensor or a payload is attached to, a home configuration of the arm joints (rad)
# inside the limits and away from singularities, and the joints to lock at a coordinate for arm-only use.
_INFO = {
    "panda": {
        "description": "Franka Emika Panda (example-robot-data, Apache-2.0): 7 revolute joints, hand, "
                       "2 prismatic fingers",
        "arm_joints": tuple(f"panda_joint{i}" for i in range(1, 8)),
        "base_link": "panda_link0",
        "last_link": "panda_link7",
        "wrist_link": "panda_link8",
        "home": (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785),
        "locked_joints": {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0},
    },
    "ur5": {
        "description": "Universal Robots UR5 (example-robot-data ur5_robot, BSD): 6 revolute joints",
        "arm_joints": ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint",
                       "wrist_1_joint", "wrist_2_joint", "wrist_3_joint"),
        "base_link": "base_link",
        "last_link": "wrist_3_link",
        "wrist_link": "tool0",
        "home": (0.0, -1.571, 1.571, -1.571, -1.571, 0.0),
        "locked_joints": {},
    },
    "iiwa": {
        "description": "KUKA LBR iiwa 14 R820 (Mueller & Kumar 2021, Table 1; KUKA data-sheet limits; "
                       "nominal friction): 7 revolute joints",
        "arm_joints": tuple(f"iiwa_joint_{i}" for i in range(1, 8)),
        "base_link": "iiwa_link_0",
        "last_link": "iiwa_link_7",
        "wrist_link": "iiwa_link_ee",
        "home": (0.0, -0.5236, 0.0, 1.5708, 0.0, -1.0472, 0.0),
        "locked_joints": {},
    },
}


# Per robot: bounding capsules ((a), (b), radius) in each link's frame (m) of the collision geometry of the
# description the bundled URDF was made from, written by tools/fit_bundled_capsules.py (the bundled files
# carry no geometry). The iiwa has none: its links are capsules on their frames.
_CAPSULES = {
    "panda": {
        "panda_link0": (((-0.058, 0.0, 0.023), (0.002, 0.0, 0.051), 0.106),),
        "panda_link1": (((0.0, -0.073, 0.001), (-0.002, 0.021, -0.143), 0.092),),
        "panda_link2": (((0.0, 0.003, 0.072), (0.0, -0.147, -0.021), 0.09),),
        "panda_link3": (((-0.005, -0.011, -0.071), (0.083, 0.057, -0.004), 0.083),),
        "panda_link4": (((-0.086, 0.071, -0.008), (0.003, 0.002, 0.06), 0.083),),
        "panda_link5": (((0.0, 0.087, 0.004), (-0.002, -0.011, -0.207), 0.085),),
        "panda_link6": (((0.015, -0.015, 0.016), (0.09, 0.012, 0.0), 0.077),),
        "panda_link7": (((-0.005, -0.005, 0.074), (0.034, 0.035, 0.076), 0.05),),
        "panda_hand": (((0.0, -0.091, 0.021), (0.001, 0.077, 0.023), 0.048),),
        "panda_leftfinger": (
            ((-0.011, 0.018, 0.011), (0.011, 0.018, 0.011), 0.013),
            ((-0.011, 0.007, 0.002), (0.011, 0.007, 0.002), 0.006),
            ((0.0, 0.022, 0.018), (0.0, 0.01, 0.039), 0.01),
            ((0.0, 0.008, 0.036), (0.0, 0.008, 0.054), 0.013),
        ),
        "panda_rightfinger": (
            ((-0.011, -0.018, 0.011), (0.011, -0.018, 0.011), 0.013),
            ((-0.011, -0.007, 0.002), (0.011, -0.007, 0.002), 0.006),
            ((0.0, -0.022, 0.018), (0.0, -0.01, 0.039), 0.01),
            ((0.0, -0.008, 0.036), (0.0, -0.008, 0.054), 0.013),
        ),
    },
    "ur5": {
        "base_link": (((0.0, 0.001, 0.006), (0.001, -0.036, 0.006), 0.075),),
        "shoulder_link": (((0.007, 0.002, -0.016), (-0.001, 0.014, 0.002), 0.083),),
        "upper_arm_link": (((0.001, -0.004, -0.013), (-0.001, -0.005, 0.426), 0.085),),
        "forearm_link": (((0.0, -0.008, 0.399), (0.001, 0.031, 0.004), 0.067),),
        "wrist_1_link": (((0.0, 0.097, -0.002), (0.001, 0.088, -0.002), 0.063),),
        "wrist_2_link": (((-0.002, -0.003, 0.095), (0.001, -0.003, 0.095), 0.064),),
        "wrist_3_link": (((0.0, 0.061, 0.003), (0.0, 0.061, -0.003), 0.041),),
        "ee_link": (((-0.015, 0.0, 0.0), (-0.005, 0.0, 0.0), 0.008),),
    },
}


def _check_name(name):
    if name not in BUNDLED_ROBOTS:
        raise ModelError(f"unknown bundled robot {name!r}; available: {', '.join(BUNDLED_ROBOTS)}")


def bundled_robot_info(name):
    """What a demo needs to use bundled robot ``name``, as a new dict:

    ``name``, ``description``; ``urdf`` (path); ``arm_joints`` (tuple of the actuated arm joints in chain
    order, Panda's fingers excluded); ``base_link``; ``last_link`` (last arm link); ``wrist_link`` (flange
    frame for a wrist F/T sensor or payload: panda_link8, tool0, iiwa_link_ee); ``home`` ((n_arm,) float64
    array, rad, inside the joint limits); ``locked_joints`` (dict joint -> coordinate, for
    ``Model.from_urdf(..., locked_joints=...)``: Panda's fingers at 0, empty for the others); ``capsules``
    (dict link -> tuple of ``((a), (b), radius)`` bounding its collision geometry in the link frame, m,
    for :func:`robodyn_ros.model.collision_capsules.link_capsules`; empty for the iiwa).
    """
    _check_name(name)
    info = _INFO[name]
    return {
        "name": name,
        "description": info["description"],
        "urdf": bundled_urdf_path(name),
        "arm_joints": info["arm_joints"],
        "base_link": info["base_link"],
        "last_link": info["last_link"],
        "wrist_link": info["wrist_link"],
        "home": np.array(info["home"], dtype=float),
        "locked_joints": dict(info["locked_joints"]),
        "capsules": dict(_CAPSULES.get(name, {})),
    }


# Parameter documents of bundled robots identified from real measurements (robodyn_ros.simulation.plant)
_TWINS = {"panda_twin": "panda_twin.yaml"}


def bundled_twin_path(name):
    """Absolute path (str) of a bundled identified parameter document: ``panda_twin`` (the Panda identified
    from a real robot's log by ``tools/make_panda_twin.py``). ModelError naming the available ones otherwise."""
    if name not in _TWINS:
        raise ModelError(f"unknown plant {name!r}: not a file, and not a bundled twin ({', '.join(_TWINS)})")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _TWINS[name])
