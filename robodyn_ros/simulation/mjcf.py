"""A fixed-base :class:`~robodyn_ros.model.model.Model` written as MuJoCo's MJCF: one ``<body>`` per body of
the model (the links merged into it by fixed joints are already in its inertial), at its joint's placement
in the parent body, with its inertial (mass, centre of mass, inertia about the centre of mass), and its
joint: ``hinge`` (revolute, continuous) or ``slide`` (prismatic) along the model's axis, with its range (a
continuous joint has none), ``armature``, ``damping`` (viscous friction) and ``frictionloss`` (Coulomb
friction). No geometry: the bodies collide with nothing. Gravity and the integrator are in ``<option>``.

What MuJoCo does with them (and what it means next to :mod:`robodyn_ros.simulation.joint_torques`):
``damping`` is the same viscous torque ``-viscous v``, integrated implicitly by ``implicitfast``. The
Coulomb friction is not a smooth function of ``v``: ``frictionloss`` is a constraint, a torque up to
``coulomb`` that the constraint solver chooses each step to oppose the joint's motion (at rest it holds
the joint as long as it can: static friction), made soft by the constraint's impedance (``solreffriction``,
``solimpfriction``). The controllers and this package's engine smooth the sign as ``tanh(v / eps)``;
both are friction of the same magnitude away from rest and differ only while a joint is within about
``eps`` of rest. A constant friction offset has no MJCF attribute: :class:`~robodyn_ros.simulation.mujoco_engine.MujocoEngine`
applies it with the command. The limits are MuJoCo's own (a soft constraint at the range,
``solreflimit``), not the spring-damper stops of this package's engine: both push back, with different
stiffness.
"""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

import numpy as np

from ..model import spatial
from ..model.errors import ModelError

JOINT_TYPES = {"revolute": "hinge", "prismatic": "slide"}
FRICTION_CONSTRAINT = ' solreffriction="{:.17g} 1" solimpfriction="0.9999 0.9999 0.001"'
"""The ``frictionloss`` constraint's softness: a time constant of two steps (the stiffest MuJoCo keeps) and an
impedance of 0.9999. MuJoCo's defaults (0.02 s, 0.9-0.95) let a joint that friction holds creep at 5-10 %
of the acceleration the other joints' motion gives it: a passive Kuka iiwa then drifts 0.06-0.09 rad in a
second from where Coulomb friction holds its joints."""


def rotation_quaternion(R):
    """Unit quaternion ``(w, x, y, z)`` (MuJoCo's order) of the rotation matrix ``R`` (3, 3)."""
    R = np.asarray(R, dtype=float)
    w = np.sqrt(max(0.0, 1.0 + R[0, 0] + R[1, 1] + R[2, 2])) / 2.0
    x = np.copysign(np.sqrt(max(0.0, 1.0 + R[0, 0] - R[1, 1] - R[2, 2])) / 2.0, R[2, 1] - R[1, 2])
    y = np.copysign(np.sqrt(max(0.0, 1.0 - R[0, 0] + R[1, 1] - R[2, 2])) / 2.0, R[0, 2] - R[2, 0])
    z = np.copysign(np.sqrt(max(0.0, 1.0 - R[0, 0] - R[1, 1] + R[2, 2])) / 2.0, R[1, 0] - R[0, 1])
    q = np.array([w, x, y, z])
    return q / np.linalg.norm(q)


def body_inertial(pi):
    """``(mass, com (3,), principal moments (3,), principal axes quaternion (w, x, y, z))`` of a body's
    10 inertial parameters about its frame origin: what MuJoCo stores as ``body_mass``, ``body_ipos``,
    ``body_inertia``, ``body_iquat``. A massless body gets its centre of mass at the origin."""
    mass, com, Ic = spatial.numpy_inertia_split(pi)
    moments, axes = np.linalg.eigh(0.5 * (Ic + Ic.T))
    if np.linalg.det(axes) < 0:
        axes[:, 0] = -axes[:, 0]
    return float(mass), com, moments, rotation_quaternion(axes)


def _vector(x):
    return " ".join(f"{float(v):.17g}" for v in x)


def check_mujoco_model(model):
    """ModelError unless MuJoCo can hold ``model`` as written here: a fixed base and 1-DoF joints."""
    if model.floating_base or model.nq != model.nv:
        raise ModelError(f"model '{model.name}': the MuJoCo engine simulates fixed-base arms")
    for name, joint in zip(model.joint_names, model.joints):
        if joint.kind not in JOINT_TYPES:
            raise ModelError(f"joint '{name}' is {joint.kind}: the MuJoCo engine writes revolute, continuous "
                             "and prismatic joints")


def model_to_mjcf(model, timestep=1e-3, integrator="implicitfast", frictionloss=True):
    """MJCF text (a string) of ``model`` (module docstring); ``timestep`` (s) and ``integrator`` (one of
    MuJoCo's: ``implicitfast``, ``implicit``, ``Euler``, ``RK4``) go to ``<option>``. Bodies and joints keep
    the model's names (body ``i`` is ``model.body_names[i]``). ``frictionloss`` False: no Coulomb friction
    in the MJCF (the engine applies a smoothed one itself)."""
    check_mujoco_model(model)
    children = [[] for _ in range(model.nbodies)]
    roots = []
    for i, parent in enumerate(model.parents):
        (children[parent] if parent >= 0 else roots).append(i)

    def body(i, indent):
        R, p = model.placements[i]
        mass, com, _, _ = body_inertial(model.inertias[i])
        _, _, Ic = spatial.numpy_inertia_split(model.inertias[i])
        joint = model.joints[i]
        pad = " " * indent
        k = model.idx_v[i]
        lower, upper = model.lower[k], model.upper[k]
        limited = bool(np.isfinite(lower) and np.isfinite(upper))
        lines = [f"{pad}<body name={quoteattr(model.body_names[i])} pos=\"{_vector(p)}\" "
                 f"quat=\"{_vector(rotation_quaternion(R))}\">",
                 f"{pad}  <inertial pos=\"{_vector(com)}\" mass=\"{mass:.17g}\" fullinertia=\""
                 f"{_vector([Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2]])}\"/>",
                 f"{pad}  <joint name={quoteattr(model.joint_names[i])} type=\"{JOINT_TYPES[joint.kind]}\" "
                 f"axis=\"{_vector(joint.axis)}\" limited=\"{str(limited).lower()}\""
                 + (f" range=\"{lower:.17g} {upper:.17g}\"" if limited else "")
                 + f" armature=\"{model.armature[k]:.17g}\" damping=\"{model.viscous[k]:.17g}\""
                 + (f" frictionloss=\"{model.coulomb[k]:.17g}\"{FRICTION_CONSTRAINT.format(2.0 * timestep)}"
                    if frictionloss else "") + "/>"]
        for child in children[i]:
            lines += body(child, indent + 2)
        lines.append(f"{pad}</body>")
        return lines

    lines = [f"<mujoco model={quoteattr(model.name or 'robot')}>",
             # the inertials are the model's; MuJoCo's compiler checks them for physical plausibility, the
             # engine sets the model's exact values after compiling (MujocoEngine.set_inertial_parameters)
             "  <compiler angle=\"radian\" balanceinertia=\"true\" boundmass=\"1e-9\" boundinertia=\"1e-12\"/>",
             f"  <option timestep=\"{timestep:.17g}\" gravity=\"{_vector(model.gravity)}\" integrator=\"{integrator}\">",
             # no geometry to collide; no warm start of the constraint solver, so that a step is a function of
             # (q, v, tau) alone, as the package's own step is
             "    <flag contact=\"disable\" warmstart=\"disable\"/>",
             "  </option>",
             "  <worldbody>"]
    for i in roots:
        lines += body(i, 4)
    lines += ["  </worldbody>", "</mujoco>"]
    return "\n".join(lines) + "\n"
