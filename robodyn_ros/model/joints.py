"""Joint models: each joint is a placement ``X_J(q)`` of the child frame in the joint frame and a
constant motion subspace ``S`` (6 x nv, expressed in the child frame, ``[lin; ang]`` rows).

Every joint here has a constant ``S`` in its child frame (so the bias ``c_J = S' q̇`` is zero):
revolute and prismatic (1 column), spherical (3), free-flyer (6, velocity in the local frame as in
Pinocchio). Configuration spaces: revolute/prismatic ``q`` is the angle/displacement (a continuous joint
is a revolute joint without limits); spherical ``q`` is a unit quaternion ``(x, y, z, w)``; free-flyer
``q = (x, y, z, qx, qy, qz, qw)``.
"""
from __future__ import annotations

import numpy as np

from . import spatial


class Joint:
    """Base class: ``nq``, ``nv``, the constant ``S`` (6, nv), and the configuration-space operations."""

    kind = "joint"
    nq = nv = 0
    S: np.ndarray

    def placement(self, ops, q):
        """``(R, p)`` of the child frame in the joint frame for the configuration slice ``q`` (nq,)."""
        raise NotImplementedError

    def motion(self, ops, x):
        """Spatial motion ``S x`` of a joint-velocity-like slice ``x`` (nv,)."""
        return ops.mtimes(self.S, x)

    def project(self, ops, f):
        """``S^T f`` for a force ``f`` (6,) or a 6 x k block."""
        return ops.mtimes(self.S.T, f)

    def neutral(self):
        return np.zeros(self.nq)

    def integrate(self, q, v):
        """``q ⊕ v`` on the joint's configuration manifold (numeric)."""
        return q + v

    def difference(self, q0, q1):
        """``v`` such that ``q0 ⊕ v = q1`` (numeric)."""
        return q1 - q0

    def random_configuration(self, rng, lower, upper):
        lo = np.where(np.isfinite(lower), lower, -np.pi)
        hi = np.where(np.isfinite(upper), upper, np.pi)
        return rng.uniform(lo, hi)


class RevoluteJoint(Joint):
    kind = "revolute"
    nq = nv = 1

    def __init__(self, axis):
        self.axis = np.asarray(axis, dtype=float)
        self.S = np.concatenate([np.zeros(3), self.axis]).reshape(6, 1)

    def placement(self, ops, q):
        return spatial.rotation_about_axis(ops, self.axis, q[0]), ops.zeros(3)


class PrismaticJoint(Joint):
    kind = "prismatic"
    nq = nv = 1

    def __init__(self, axis):
        self.axis = np.asarray(axis, dtype=float)
        self.S = np.concatenate([self.axis, np.zeros(3)]).reshape(6, 1)

    def placement(self, ops, q):
        return ops.eye(3), ops.mtimes(self.axis.reshape(3, 1), q[0:1])

    def random_configuration(self, rng, lower, upper):
        lo = np.where(np.isfinite(lower), lower, -1.0)
        hi = np.where(np.isfinite(upper), upper, 1.0)
        return rng.uniform(lo, hi)


class ScrewJoint(Joint):
    """1-DoF joint moving along a general constant twist ``A = [v; w]`` (child frame at reference, Kwon
    eq. 1: ``T = M exp([A] θ)``): a revolute joint about an axis not through the frame origin (``|w| = 1``,
    ``w·v = 0``), or prismatic (``w = 0``). This is what a joint becomes after a twist correction."""

    nq = nv = 1

    def __init__(self, twist):
        self.twist = np.asarray(twist, dtype=float).reshape(6)
        self.S = self.twist.reshape(6, 1)
        w = self.twist[3:6]
        self.kind = "screw" if np.linalg.norm(w) > 1e-12 else "prismatic_screw"
        if self.kind == "screw" and abs(np.linalg.norm(w) - 1.0) > 1e-9:
            raise ValueError(f"screw joint angular part must be a unit vector, got |w| = {np.linalg.norm(w)}")
        self.axis = w if self.kind == "screw" else self.twist[0:3]

    def placement(self, ops, q):
        """``exp([A] θ)``: ``R = Rot(w, θ)``, ``p = (1 - R)(w x v) + w (w·v) θ``."""
        v, w = self.twist[0:3], self.twist[3:6]
        if self.kind != "screw":
            return ops.eye(3), ops.mtimes(v.reshape(3, 1), q[0:1])
        R = spatial.rotation_about_axis(ops, w, q[0])
        p = ops.mtimes(ops.eye(3) - R, ops.const(np.cross(w, v))) + ops.mtimes((w * (w @ v)).reshape(3, 1), q[0:1])
        return R, p


def _quat_normalize(x):
    return x / np.linalg.norm(x)


def _quat_mul(a, b):
    """Hamilton product of ``(x, y, z, w)`` quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])


def _quat_exp(w):
    th = np.linalg.norm(w)
    if th < 1e-12:
        return _quat_normalize(np.array([*(0.5 * w), 1.0]))
    return np.array([*(np.sin(th / 2) * w / th), np.cos(th / 2)])


def _quat_log(qt):
    qt = qt if qt[3] >= 0 else -qt
    s = np.linalg.norm(qt[:3])
    if s < 1e-12:
        return 2.0 * qt[:3]
    return 2.0 * np.arctan2(s, qt[3]) * qt[:3] / s


class SphericalJoint(Joint):
    """Ball joint; ``q`` a unit quaternion ``(x, y, z, w)``, ``v`` the angular velocity in the child frame."""

    kind = "spherical"
    nq, nv = 4, 3

    def __init__(self):
        self.S = np.vstack([np.zeros((3, 3)), np.eye(3)])

    def placement(self, ops, q):
        return spatial.quaternion_to_matrix(ops, q[0], q[1], q[2], q[3]), ops.zeros(3)

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0])

    def integrate(self, q, v):
        return _quat_normalize(_quat_mul(q, _quat_exp(v)))

    def difference(self, q0, q1):
        inv0 = np.array([-q0[0], -q0[1], -q0[2], q0[3]])
        return _quat_log(_quat_mul(inv0, q1))

    def random_configuration(self, rng, lower, upper):
        return _quat_normalize(rng.normal(size=4))


class FreeFlyerJoint(Joint):
    """6-DoF root joint: ``q = (p, quaternion)``, ``v = [linear; angular]`` in the body frame (Pinocchio's
    convention, so ``S = 1``); integration on SE(3)."""

    kind = "free_flyer"
    nq, nv = 7, 6

    def __init__(self):
        self.S = np.eye(6)

    def placement(self, ops, q):
        R = spatial.quaternion_to_matrix(ops, q[3], q[4], q[5], q[6])
        return R, q[0:3]

    def neutral(self):
        return np.array([0, 0, 0, 0, 0, 0, 1.0])

    def integrate(self, q, v):
        R0 = spatial.quaternion_to_matrix(_NUMPY, *q[3:7])
        Rd, pd = _se3_exp(v)
        return np.concatenate([q[:3] + R0 @ pd, _quat_normalize(_quat_mul(q[3:7], _rotation_to_quat(Rd)))])

    def difference(self, q0, q1):
        R0 = spatial.quaternion_to_matrix(_NUMPY, *q0[3:7])
        R1 = spatial.quaternion_to_matrix(_NUMPY, *q1[3:7])
        return _se3_log(R0.T @ R1, R0.T @ (q1[:3] - q0[:3]))

    def random_configuration(self, rng, lower, upper):
        return np.concatenate([rng.uniform(-1, 1, 3), _quat_normalize(rng.normal(size=4))])


def _rotation_to_quat(R):
    w = np.sqrt(max(0.0, 1 + np.trace(R))) / 2
    if w > 1e-6:
        return np.array([(R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w), w])
    i = int(np.argmax(np.diag(R)))
    j, k = (i + 1) % 3, (i + 2) % 3
    x = np.sqrt(max(0.0, 1 + R[i, i] - R[j, j] - R[k, k])) / 2
    qv = np.zeros(4)
    qv[i] = x
    qv[j] = (R[j, i] + R[i, j]) / (4 * x)
    qv[k] = (R[k, i] + R[i, k]) / (4 * x)
    qv[3] = (R[k, j] - R[j, k]) / (4 * x)
    return qv


def _so3_left_jacobian(w):
    th = np.linalg.norm(w)
    K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    if th < 1e-8:
        return np.eye(3) + 0.5 * K
    return np.eye(3) + (1 - np.cos(th)) / th**2 * K + (th - np.sin(th)) / th**3 * K @ K


def _se3_exp(v):
    """Exponential of a body twist ``[lin; ang]``: ``(R, p)``."""
    w = v[3:6]
    th = np.linalg.norm(w)
    K = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    R = np.eye(3) + (np.sin(th) / th * K + (1 - np.cos(th)) / th**2 * K @ K if th > 1e-12 else K)
    return R, _so3_left_jacobian(w) @ v[0:3]


def _se3_log(R, p):
    qt = _rotation_to_quat(R)
    w = _quat_log(qt)
    return np.concatenate([np.linalg.solve(_so3_left_jacobian(w), p), w])


from .backend import NUMPY as _NUMPY  # noqa: E402  (placed last: joints is imported by spatial users)
