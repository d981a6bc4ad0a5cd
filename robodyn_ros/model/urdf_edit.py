"""Edits of URDF XML text that keep everything else as written.

``lock_joints`` turns movable joints into fixed joints at a given coordinate (Panda's fingers, a gripper
that is not recorded). The core loader has the same option (``Model.from_urdf(locked_joints=...)``);
this text form is for URDFs written back out (``robodyn identify --urdf-out``), so that other URDF tools
see exactly the model that was identified.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from .errors import ModelError
from .spatial import rotation_about_axis, rpy_to_matrix
from .backend import NUMPY

_MOVABLE = ("revolute", "continuous", "prismatic")


def matrix_to_rpy(R):
    """URDF roll-pitch-yaw of a rotation matrix (inverse of ``rpy_to_matrix``, ``R = Rz Ry Rx``)."""
    pitch = float(np.arcsin(np.clip(-R[2, 0], -1.0, 1.0)))
    if abs(R[2, 0]) < 1.0 - 1e-12:
        return float(np.arctan2(R[2, 1], R[2, 2])), pitch, float(np.arctan2(R[1, 0], R[0, 0]))
    return float(np.arctan2(-R[1, 2], R[1, 1])), pitch, 0.0  # gimbal lock: put all of it in roll


def _floats(text, default):
    return np.array([float(x) for x in text.split()]) if text else np.array(default, dtype=float)


def _fmt(values):
    return " ".join(repr(float(x)) for x in values)


def lock_joint_element(joint, value):
    """Make one ``<joint>`` element fixed at coordinate ``value`` (its origin absorbs the joint motion)."""
    kind = joint.get("type")
    origin = joint.find("origin")
    xyz = _floats(origin.get("xyz") if origin is not None else None, [0, 0, 0])
    R = rpy_to_matrix(_floats(origin.get("rpy") if origin is not None else None, [0, 0, 0]))
    axis_el = joint.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, [1, 0, 0])
    axis = axis / np.linalg.norm(axis)
    if kind in ("revolute", "continuous"):
        R = R @ rotation_about_axis(NUMPY, axis, float(value))
    else:
        xyz = xyz + R @ axis * float(value)
    if origin is None:
        origin = ET.SubElement(joint, "origin")
    origin.set("xyz", _fmt(xyz))
    origin.set("rpy", _fmt(matrix_to_rpy(R)))
    joint.set("type", "fixed")
    for tag in ("axis", "limit", "dynamics", "mimic", "safety_controller", "calibration"):
        for child in joint.findall(tag):
            joint.remove(child)


def lock_joints(xml, values):
    """URDF text with the joints of ``values`` (dict name -> coordinate, rad or m) made fixed at that
    coordinate. Raises ModelError for an unknown joint or one that is not movable."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"URDF is not valid XML: {exc}") from None
    joints = {j.get("name"): j for j in root.findall("joint")}
    for name, value in values.items():
        if name not in joints:
            raise ModelError(f"cannot lock joint '{name}': no such joint (joints: {', '.join(sorted(joints))})")
        if joints[name].get("type") not in _MOVABLE:
            raise ModelError(f"cannot lock joint '{name}': it is {joints[name].get('type')}, not movable")
        lock_joint_element(joints[name], value)
    return ET.tostring(root, encoding="unicode")
