"""Build a :class:`~robodyn_ros.model.model.Model` from bodies and joints in code, without a URDF: the way to
get joints URDF cannot describe (spherical, free-flyer anywhere in the tree) and small test mechanisms.

    b = ModelBuilder("arm")
    b.add_body("shoulder", SphericalJoint(), parent=None, inertia=b.rigid(2.0, [0, 0, 0.2], np.eye(3) * 0.01))
    b.add_body("elbow", "revolute", axis=[0, 1, 0], parent="shoulder", placement=(np.eye(3), [0, 0, 0.4]),
               inertia=b.rigid(1.0, [0, 0, 0.15], np.eye(3) * 0.005))
    model = b.build()

Each body has one joint (named like the body unless ``joint_name`` is given); its frame is the joint's
child frame, at ``placement = (R, p)`` in the parent body's frame (the base frame for ``parent=None``)
when the joint is at its neutral configuration. Every body name is also a frame of the model.
"""
from __future__ import annotations

import numpy as np

from . import spatial
from .errors import ModelError
from .joints import FreeFlyerJoint, Joint, PrismaticJoint, RevoluteJoint, SphericalJoint
from .model import Frame, Model


def make_joint(kind, axis=None):
    """A joint object from its kind ``'revolute' | 'continuous' | 'prismatic' | 'spherical' |
    'free_flyer'`` (``axis`` (3,) for the 1-DoF kinds)."""
    if kind in ("revolute", "continuous", "prismatic"):
        a = np.asarray((0.0, 0.0, 1.0) if axis is None else axis, dtype=float)
        if a.shape != (3,) or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-12:
            raise ModelError(f"joint axis must be a non-zero 3-vector, got {axis!r}")
        a = a / np.linalg.norm(a)
        return PrismaticJoint(a) if kind == "prismatic" else RevoluteJoint(a)
    if kind == "spherical":
        return SphericalJoint()
    if kind in ("free_flyer", "floating"):
        return FreeFlyerJoint()
    raise ModelError(f"unknown joint kind '{kind}' (revolute, continuous, prismatic, spherical, free_flyer)")


class ModelBuilder:
    """Collects bodies in parent-before-child order and produces a read-only :class:`Model`."""

    def __init__(self, name="robot", gravity=(0.0, 0.0, -9.81)):
        self.name, self.gravity = name, np.asarray(gravity, dtype=float)
        self._bodies = []

    @staticmethod
    def rigid(mass, com, inertia_com):
        """Inertial 10-vector about the body origin from mass, COM (3,) and the inertia about the COM."""
        return spatial.numpy_inertia_params(mass, com, inertia_com)

    def add_body(self, name, joint, parent=None, placement=None, inertia=None, *, axis=None, joint_name=None,
                 lower=None, upper=None, velocity_limit=np.inf, effort_limit=np.inf, armature=0.0,
                 viscous=0.0, coulomb=0.0):
        """Add body ``name`` moved by ``joint`` (a :class:`Joint` or a kind for :func:`make_joint`) relative
        to ``parent`` (a body name, or None for the base). ``placement`` ``(R (3, 3), p (3,))`` of the joint
        frame in the parent frame (identity by default); ``inertia`` (10,) about the body origin (zero by
        default). Limits are per coordinate (nq,), the other per-dof values scalars or (nv,). Returns the
        body index."""
        names = [b["name"] for b in self._bodies]
        if name in names:
            raise ModelError(f"body '{name}' already exists")
        if parent is not None and parent not in names:
            raise ModelError(f"body '{name}': unknown parent '{parent}' (bodies: {', '.join(names) or 'none'})")
        joint = joint if isinstance(joint, Joint) else make_joint(joint, axis)
        R, p = (np.eye(3), np.zeros(3)) if placement is None else (np.asarray(placement[0], float), np.asarray(placement[1], float))
        if R.shape != (3, 3) or p.shape != (3,) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9):
            raise ModelError(f"body '{name}': placement must be (rotation (3, 3), position (3,))")
        pi = np.zeros(10) if inertia is None else np.asarray(inertia, dtype=float)
        if pi.shape != (10,) or not np.all(np.isfinite(pi)):
            raise ModelError(f"body '{name}': inertia must be 10 finite numbers, got shape {pi.shape}")
        unbounded = isinstance(joint, (SphericalJoint, FreeFlyerJoint))
        lo = np.full(joint.nq, -np.inf) if lower is None or unbounded else np.broadcast_to(np.asarray(lower, float), (joint.nq,))
        hi = np.full(joint.nq, np.inf) if upper is None or unbounded else np.broadcast_to(np.asarray(upper, float), (joint.nq,))
        if np.any(lo > hi):
            raise ModelError(f"body '{name}': lower limit above upper limit")
        per_dof = {k: np.broadcast_to(np.asarray(val, float), (joint.nv,)) for k, val in
                   (("velocity_limit", velocity_limit), ("effort_limit", effort_limit), ("armature", armature),
                    ("viscous", viscous), ("coulomb", coulomb))}
        self._bodies.append(dict(name=name, joint=joint, joint_name=joint_name or name,
                                 parent=-1 if parent is None else names.index(parent), placement=(R, p),
                                 inertia=pi, lower=lo, upper=hi, **per_dof))
        return len(self._bodies) - 1

    def build(self):
        """The :class:`Model` (ModelError when empty)."""
        if not self._bodies:
            raise ModelError(f"model '{self.name}' has no body")
        B = self._bodies
        cat = lambda key: np.concatenate([b[key] for b in B])  # noqa: E731
        frames = {"base": Frame("base", -1, np.eye(3), np.zeros(3))}
        frames.update({b["name"]: Frame(b["name"], i, np.eye(3), np.zeros(3)) for i, b in enumerate(B)})
        return Model(name=self.name, joint_names=tuple(b["joint_name"] for b in B),
                     body_names=tuple(b["name"] for b in B), joints=tuple(b["joint"] for b in B),
                     parents=tuple(b["parent"] for b in B), placements=tuple(b["placement"] for b in B),
                     inertias=np.array([b["inertia"] for b in B]), armature=cat("armature"), viscous=cat("viscous"),
                     coulomb=cat("coulomb"), friction_offset=np.zeros(sum(b["joint"].nv for b in B)),
                     lower=cat("lower"), upper=cat("upper"), velocity_limit=cat("velocity_limit"),
                     effort_limit=cat("effort_limit"), gravity=self.gravity, frames=frames,
                     merged_links=tuple((b["name"],) for b in B), root_link="base",
                     floating_base=isinstance(B[0]["joint"], FreeFlyerJoint))


def random_tree_model(rng, kinds, parents=None, name="random_tree", gravity=(0.0, 0.0, -9.81)):
    """A seeded random model for tests (STYLE rule 8): body ``i`` has joint kind ``kinds[i]`` and parent
    ``parents[i]`` (an earlier index or None; a chain by default), random placements, unaligned axes and
    physically consistent random inertias. Bodies are named ``b0, b1, ...``."""
    parents = [None] + list(range(len(kinds) - 1)) if parents is None else list(parents)
    b = ModelBuilder(name, gravity)
    for i, (kind, parent) in enumerate(zip(kinds, parents)):
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        R = Q * np.sign(np.linalg.det(Q))
        L = rng.normal(size=(3, 3))
        inertia = b.rigid(rng.uniform(0.5, 2.0), 0.1 * rng.normal(size=3), 0.01 * (L @ L.T + np.eye(3)))
        b.add_body(f"b{i}", kind, parent=None if parent is None else f"b{parent}", axis=rng.normal(size=3),
                   placement=(R, 0.3 * rng.normal(size=3)), inertia=inertia)
    return b.build()
