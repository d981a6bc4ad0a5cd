"""Regressor columns for the per-joint parameters (armature, viscous, Coulomb friction, torque offset),
and the full regressor ``[Y_inertial | Y_joint]`` that identification fits (Cărmizaru ch. 4: the joint
terms are linear in their parameters, like the inertial ones, Garofalo Prop. 2).

    tau = Y(q, v, a) pi + Y_joint(v, a) theta = rnea(q, v, a) + friction_torque(v)

with ``theta`` grouped per degree of freedom ``i`` (columns ``4 i .. 4 i + 3``):
``[armature_i, viscous_i, coulomb_i, offset_i]`` multiplying ``[a_i, v_i, sign(v_i), 1]`` on row ``i``.
The sign convention is :func:`robodyn_ros.dynamics.friction.friction_torque`'s (``sign(0) = 0``).
"""
from __future__ import annotations

import numpy as np

from .regressor import regressor

JOINT_PARAMETER_NAMES = ("armature", "viscous", "coulomb", "offset")


def joint_parameter_regressor(model, v, a):
    """``Y_joint`` (nv, 4 nv) with ``Y_joint @ joint_parameter_vector(model) ==
    armature * a + friction_torque(model, v)``; column order in the module docstring. v, a (nv,)."""
    v, a = model.check_vector("v", v, model.nv), model.check_vector("a", a, model.nv)
    Y = np.zeros((model.nv, 4 * model.nv))
    rows = np.arange(model.nv)
    for c, col in enumerate((a, v, np.sign(v), np.ones(model.nv))):
        Y[rows, 4 * rows + c] = col
    return Y


def joint_parameter_vector(model):
    """``theta`` (4 nv,): the model's ``[armature, viscous, coulomb, offset]`` per dof."""
    return np.column_stack([model.armature, model.viscous, model.coulomb, model.friction_offset]).reshape(-1)


def joint_parameter_names(model):
    """Names of the ``theta`` entries, ``'<joint>[<dof>].<parameter>'`` (``[<dof>]`` only for multi-DoF joints)."""
    names = []
    for name, joint in zip(model.joint_names, model.joints):
        for d in range(joint.nv):
            tag = name if joint.nv == 1 else f"{name}[{d}]"
            names.extend(f"{tag}.{p}" for p in JOINT_PARAMETER_NAMES)
    return names


def full_regressor(model, q, v, a):
    """``[Y_inertial | Y_joint]`` (nv, 10 nbodies + 4 nv) with ``@ full_parameter_vector(model) ==
    rnea(model, q, v, a) + friction_torque(model, v)``. q (nq,), v, a (nv,)."""
    return np.hstack([regressor(model, q, v, a), joint_parameter_regressor(model, v, a)])


def full_parameter_vector(model):
    """``[pi | theta]`` (10 nbodies + 4 nv,): inertial parameters then the per-dof joint parameters."""
    return np.concatenate([model.inertial_parameters(), joint_parameter_vector(model)])
