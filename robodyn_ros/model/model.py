"""The read-only robot model: a kinematic tree of bodies, one per movable joint (STYLE rule 1).

Body ``i`` has parent body ``parents[i]`` (``-1`` is the fixed base), a joint ``joints[i]`` whose frame
sits at the constant placement ``placements[i] = (R, p)`` in the parent body frame, and the inertial
10-vector ``pi`` (:mod:`robodyn_ros.model.spatial`) about the body frame origin. Bodies are ordered so that a
parent comes before its children; ``idx_q[i]``/``idx_v[i]`` are the first indices of body ``i``'s joint
coordinates in ``q``/``v``.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import ModelError
from .joints import Joint
from .robot_names import resolve_urdf
from .urdf_loader import urdf_model_description


@dataclass(frozen=True)
class Frame:
    """A named frame (URDF link) rigidly attached to ``body`` (-1: the base) at placement ``(R, p)``."""

    name: str
    body: int
    R: np.ndarray
    p: np.ndarray


@dataclass(frozen=True, eq=False)
class Model:
    """Rigid-body tree. Build it with :meth:`from_urdf`; it is never mutated (``with_*`` returns a copy).

    Attributes: ``name``, ``joint_names``, ``body_names`` (URDF child link of each movable joint),
    ``joints``, ``parents``, ``placements``, ``inertias`` (nbodies, 10), ``armature``, ``viscous``,
    ``coulomb``, ``friction_offset`` (nv,), ``lower``, ``upper`` (nq,), ``velocity_limit``,
    ``effort_limit`` (nv,), ``gravity`` (3,), ``frames`` (dict of link name to :class:`Frame`),
    ``merged_links`` (per body, the URDF links merged into it), ``root_link``.
    """

    name: str
    joint_names: tuple
    body_names: tuple
    joints: tuple
    parents: tuple
    placements: tuple
    inertias: np.ndarray
    armature: np.ndarray
    viscous: np.ndarray
    coulomb: np.ndarray
    friction_offset: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    gravity: np.ndarray
    frames: dict = field(default_factory=dict)
    merged_links: tuple = ()
    root_link: str = ""
    urdf_xml: str = ""
    floating_base: bool = False
    notes: tuple = ()

    def __post_init__(self):
        for name in ("inertias", "armature", "viscous", "coulomb", "friction_offset", "lower", "upper",
                     "velocity_limit", "effort_limit", "gravity"):
            arr = np.array(getattr(self, name), dtype=float)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        idx_q, idx_v, nq, nv = [], [], 0, 0
        for j in self.joints:
            idx_q.append(nq)
            idx_v.append(nv)
            nq, nv = nq + j.nq, nv + j.nv
        object.__setattr__(self, "idx_q", tuple(idx_q))
        object.__setattr__(self, "idx_v", tuple(idx_v))
        object.__setattr__(self, "nq", nq)
        object.__setattr__(self, "nv", nv)
        children = [[] for _ in self.joints]
        for i, lam in enumerate(self.parents):
            if lam >= 0:
                children[lam].append(i)
        object.__setattr__(self, "children", tuple(tuple(c) for c in children))

    # ------------------------------------------------------------------------------------------ builders
    @classmethod
    def from_urdf(cls, source, *, floating_base=False, gravity=(0.0, 0.0, -9.81), armature=None,
                  mesh_density=None, locked_joints=None, strict=False):
        """Model from a URDF file path, a bundled robot name (``panda``, ``ur5``, ``iiwa``) or an XML string
        (see :mod:`robodyn_ros.model.urdf_loader`).

        ``armature``: rotor inertia per joint (finite, >= 0), a float, an (nv,) sequence or a dict joint
        name -> value. ``mesh_density``: kg/m^3 used to fill missing inertials from collision meshes.
        ``locked_joints``: dict joint name -> finite coordinate; those joints become fixed (e.g. Panda's
        fingers). Finite but non-physical inertias (not positive definite, violating the triangle
        inequality) and moving bodies whose subtree has no inertia load as Pinocchio loads them, each named
        in ``notes``, with a :class:`~robodyn_ros.model.errors.NonPhysicalInertiaWarning`; ``strict=True``
        refuses them. Raises :class:`ModelError` naming the file, link or joint at fault.
        """
        description = urdf_model_description(resolve_urdf(source), floating_base=floating_base,
                                             mesh_density=mesh_density, locked_joints=locked_joints, strict=strict)
        description["frames"] = {name: Frame(name, *f) for name, f in description["frames"].items()}
        model = cls(gravity=np.asarray(gravity, dtype=float), **description)
        if armature is not None:
            model = model.with_armature(armature)
        return model.with_gravity(gravity)

    @property
    def nbodies(self):
        return len(self.joints)

    def inertial_parameters(self):
        """The stacked inertial parameters ``pi`` (10 nbodies,), bodies in q order."""
        return self.inertias.reshape(-1).copy()

    def with_inertial_parameters(self, pi):
        """A copy with inertial parameters ``pi`` (10 nbodies,) (not checked for physical consistency)."""
        pi = np.asarray(pi, dtype=float)
        if pi.shape != (10 * self.nbodies,):
            raise ValueError(f"pi has shape {pi.shape}, expected ({10 * self.nbodies},)")
        if not np.all(np.isfinite(pi)):
            raise ModelError("inertial parameters contain NaN or inf")
        return replace(self, inertias=pi.reshape(self.nbodies, 10))

    def with_armature(self, armature):
        """A copy with rotor inertias: a float, an (nv,) array or a dict joint name -> value."""
        return replace(self, armature=self._per_dof("armature", armature, self.armature, nonnegative=True))

    def with_friction(self, viscous=None, coulomb=None, offset=None):
        """A copy with joint friction ``tau_f = viscous v + coulomb sign(v) + offset`` per dof."""
        return replace(self, viscous=self._per_dof("viscous", viscous, self.viscous, nonnegative=True),
                       coulomb=self._per_dof("coulomb", coulomb, self.coulomb, nonnegative=True),
                       friction_offset=self._per_dof("offset", offset, self.friction_offset))

    def with_gravity(self, gravity):
        g = np.asarray(gravity, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be 3 finite numbers, got {gravity!r}")
        return replace(self, gravity=g)

    def _per_dof(self, what, value, current, nonnegative=False):
        """Per-dof values (nv,) from a float, an (nv,) sequence or a dict joint name -> value; ModelError
        naming the joint for a value that is not finite (or negative, with ``nonnegative``)."""
        if value is None:
            return current
        if isinstance(value, dict):
            out = np.array(current, dtype=float)
            for name, val in value.items():
                if name not in self.joint_names:
                    raise ModelError(f"{what}: unknown joint '{name}' (joints: {', '.join(self.joint_names)})")
                i = self.joint_names.index(name)
                out[self.idx_v[i]:self.idx_v[i] + self.joints[i].nv] = _scalar(what, name, val)
        else:
            arr = _numeric_array(what, value, self.name)
            if arr.ndim == 0:
                arr = np.full(self.nv, float(arr))
            if arr.shape != (self.nv,):
                raise ValueError(f"{what} has shape {arr.shape}, expected ({self.nv},)")
            out = np.array(arr, dtype=float)
        dof_joint = [self.joint_names[i] for i, j in enumerate(self.joints) for _ in range(j.nv)]
        for k, x in enumerate(out):
            if not abs(x) <= MAX_MAGNITUDE or (nonnegative and x < 0):
                need = "finite and >= 0" if nonnegative else "finite"
                raise ModelError(f"{what} of joint '{dof_joint[k]}' is {x}: it must be {need} "
                                 f"(model '{self.name}')")
        return out

    # ------------------------------------------------------------------------------------ configurations
    def neutral_configuration(self):
        return np.concatenate([j.neutral() for j in self.joints]) if self.joints else np.zeros(0)

    def random_configuration(self, rng):
        """A configuration inside the joint limits (infinite limits replaced by ±π or ±1 m)."""
        if not self.joints:
            return np.zeros(0)
        return np.concatenate([j.random_configuration(rng, self.lower[self.idx_q[i]:self.idx_q[i] + j.nq],
                                                      self.upper[self.idx_q[i]:self.idx_q[i] + j.nq])
                               for i, j in enumerate(self.joints)])

    def integrate(self, q, v):
        """``q ⊕ v``: configuration reached from ``q`` (nq,) by the tangent vector ``v`` (nv,)."""
        if not self.joints:
            return np.zeros(0)
        return np.concatenate([j.integrate(q[self.idx_q[i]:self.idx_q[i] + j.nq], v[self.idx_v[i]:self.idx_v[i] + j.nv])
                               for i, j in enumerate(self.joints)])

    def difference(self, q0, q1):
        """Tangent vector ``v`` (nv,) with ``q0 ⊕ v = q1``."""
        if not self.joints:
            return np.zeros(0)
        return np.concatenate([j.difference(q0[self.idx_q[i]:self.idx_q[i] + j.nq], q1[self.idx_q[i]:self.idx_q[i] + j.nq])
                               for i, j in enumerate(self.joints)])

    def body_index(self, link_name):
        """Index of the body a URDF link belongs to (-1 for the fixed base); ModelError if unknown."""
        if link_name not in self.frames:
            raise ModelError(f"unknown link '{link_name}' (links: {', '.join(sorted(self.frames))})")
        return self.frames[link_name].body

    def subtree(self, i):
        """Bodies in the subtree rooted at body ``i`` (``i`` first), in q order."""
        out, stack = [], [i]
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(reversed(self.children[k]))
        return sorted(out)

    def ancestors(self, i):
        """Body ``i`` and its ancestors, from ``i`` up to the root."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.parents[i]
        return out

    def fingerprint(self):
        """SHA-256 of everything that determines the dynamics (structure, geometry, parameters)."""
        h = hashlib.sha256()
        h.update(repr((self.joint_names, self.parents, [j.kind for j in self.joints])).encode())
        for j in self.joints:
            h.update(np.ascontiguousarray(j.S).tobytes())
        for R, p in self.placements:
            h.update(np.ascontiguousarray(R).tobytes())
            h.update(np.ascontiguousarray(p).tobytes())
        for arr in (self.inertias, self.armature, self.gravity):
            h.update(np.ascontiguousarray(arr).tobytes())
        return h.hexdigest()

    # ---------------------------------------------------------------------------------------- validation
    def check_vector(self, name, x, n):
        """``x`` as a float (n,) array; ValueError on a wrong shape or a non-numeric ``x`` (strings,
        ragged lists, complex, ints beyond float range), ModelError on NaN/inf or ``|x| > MAX_MAGNITUDE``."""
        arr = _numeric_array(name, x, self.name)
        if arr.shape != (n,):
            raise ValueError(f"{name} has shape {arr.shape}, expected ({n},) for model '{self.name}'")
        _check_magnitude(name, arr, self.name)
        return arr

    def check_f_ext(self, f_ext):
        if f_ext is None:
            return None
        arr = _numeric_array("f_ext", f_ext, self.name)
        if arr.shape != (self.nbodies, 6):
            raise ValueError(f"f_ext has shape {arr.shape}, expected ({self.nbodies}, 6)")
        _check_magnitude("f_ext", arr, self.name)
        return arr

    def check_parameters(self, pi):
        """Optional inertial parameters ``pi`` (10 nbodies,) checked like :meth:`check_vector` (None stays None)."""
        return None if pi is None else self.check_vector("pi", pi, 10 * self.nbodies)

    def __repr__(self):
        return f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, bodies={self.nbodies})"


MAX_MAGNITUDE = 1e100
"""Largest accepted |entry| of a numeric input: products of two such numbers (v x I v, v_i v_j in the
regressor) stay far from float overflow, so finite inputs give finite outputs; no physical joint
coordinate, velocity, acceleration or torque comes near it."""


def _scalar(what, joint, value):
    """``value`` as a float; ModelError naming the joint if it is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ModelError(f"{what} of joint '{joint}' is {value!r}: expected a number") from None


def _numeric_array(name, x, model_name):
    """``x`` as a float array; ValueError naming ``name`` if it is not real numbers."""
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:   # ragged nested sequences
        raise ValueError(f"{name} is not an array of numbers for model '{model_name}': {exc}") from None
    if raw.dtype.kind not in "biuf":         # strings, objects (None, huge ints), complex
        raise ValueError(f"{name} must hold real numbers for model '{model_name}', got {raw.dtype} "
                         f"values ({type(x).__name__})")
    return raw.astype(float, copy=False)


def _check_magnitude(name, arr, model_name):
    ok = np.abs(arr) <= MAX_MAGNITUDE         # False for NaN and inf too
    if not ok.all():
        bad = np.unravel_index(int(np.flatnonzero(~ok.ravel())[0]), arr.shape)
        where = "".join(f"[{int(k)}]" for k in bad)
        value = arr[bad]
        limit = "" if not np.isfinite(value) else f", beyond the accepted magnitude {MAX_MAGNITUDE:g}"
        raise ModelError(f"{name}{where} is {value}{limit} (model '{model_name}')")


__all__ = ["Model", "Frame", "Joint", "MAX_MAGNITUDE"]
