"""Spatial algebra: the one place where vector order and frame conventions are decided (STYLE rule 6).

Conventions (Pinocchio's, and the API's):

* A spatial motion vector (twist, acceleration, joint motion subspace column) is ``[v; w]``: linear part
  ``v`` (velocity of the frame origin) first, angular ``w`` second. A spatial force (wrench) is
  ``[f; n]``: force first, moment about the frame origin second.
* A placement ``(R, p)`` of frame B in frame A maps B coordinates to A coordinates:
  ``x_A = R x_B + p``. It acts on motions and forces expressed in B to give them in A (``act_*``);
  the inverse action maps A-expressed vectors into B (``inv_act_*``).
* A rigid-body inertia is kept as the triple ``(m, h, I)`` with ``h = m c`` (first moment) and ``I``
  the rotational inertia about the frame ORIGIN, all in the frame's axes. Its 10-vector form is
  ``pi = [m, hx, hy, hz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``.

Every function takes the math backend ``ops`` (see :mod:`robodyn_ros.model.backend`) first, so algorithms
written with them run on NumPy and CasADi alike.
"""
from __future__ import annotations

import numpy as np

from .backend import NUMPY


# ---------------------------------------------------------------------------------------------- placements
def compose(ops, Ra, pa, Rb, pb):
    """Placement of C in A from B in A ``(Ra, pa)`` and C in B ``(Rb, pb)``: ``(Ra Rb, pa + Ra pb)``."""
    return ops.mtimes(Ra, Rb), pa + ops.mtimes(Ra, pb)


def inverse(ops, R, p):
    """Inverse placement: A in B from B in A."""
    Rt = ops.T(R)
    return Rt, -ops.mtimes(Rt, p)


# ----------------------------------------------------------------------------------------- motions, forces
def act_motion(ops, R, p, m):
    """Motion ``m = [v; w]`` in B expressed in A: ``[R v + p x R w; R w]``."""
    w = ops.mtimes(R, m[3:6])
    return ops.vcat([ops.mtimes(R, m[0:3]) + ops.cross(p, w), w])


def inv_act_motion(ops, R, p, m):
    """Motion ``m`` in A expressed in B: ``[R^T (v - p x w); R^T w]``."""
    Rt = ops.T(R)
    return ops.vcat([ops.mtimes(Rt, m[0:3] - ops.cross(p, m[3:6])), ops.mtimes(Rt, m[3:6])])


def act_force(ops, R, p, f):
    """Force ``f = [f; n]`` in B expressed in A: ``[R f; R n + p x R f]``."""
    fa = ops.mtimes(R, f[0:3])
    return ops.vcat([fa, ops.mtimes(R, f[3:6]) + ops.cross(p, fa)])


def inv_act_force(ops, R, p, f):
    """Force ``f`` in A expressed in B: ``[R^T f; R^T (n - p x f)]``."""
    Rt = ops.T(R)
    return ops.vcat([ops.mtimes(Rt, f[0:3]), ops.mtimes(Rt, f[3:6] - ops.cross(p, f[0:3]))])


def cross_motion(ops, v, m):
    """Motion cross product ``v x m`` (Featherstone's ``crm(v) m``) in ``[lin; ang]`` order."""
    return ops.vcat([ops.cross(v[3:6], m[0:3]) + ops.cross(v[0:3], m[3:6]), ops.cross(v[3:6], m[3:6])])


def cross_force(ops, v, f):
    """Force cross product ``v x* f`` (``crf(v) f = -crm(v)^T f``)."""
    return ops.vcat([ops.cross(v[3:6], f[0:3]), ops.cross(v[3:6], f[3:6]) + ops.cross(v[0:3], f[0:3])])


# -------------------------------------------------------------------------------------------- 6x6 matrices
def motion_matrix(ops, R, p):
    """6x6 matrix of :func:`act_motion`: ``[[R, [p]R], [0, R]]``."""
    Z = ops.zeros(3, 3)
    return ops.blocks([[R, ops.mtimes(ops.skew(p), R)], [Z, R]])


def inv_motion_matrix(ops, R, p):
    """6x6 matrix of :func:`inv_act_motion`: ``[[R^T, -R^T [p]], [0, R^T]]``."""
    Rt = ops.T(R)
    return ops.blocks([[Rt, -ops.mtimes(Rt, ops.skew(p))], [ops.zeros(3, 3), Rt]])


def force_matrix(ops, R, p):
    """6x6 matrix of :func:`act_force`: ``[[R, 0], [[p]R, R]]`` (the transpose of :func:`inv_motion_matrix`)."""
    return ops.blocks([[R, ops.zeros(3, 3)], [ops.mtimes(ops.skew(p), R), R]])


def cross_motion_matrix(ops, v):
    """6x6 matrix ``crm(v)`` with ``crm(v) m = v x m``."""
    Sw, Sv = ops.skew(v[3:6]), ops.skew(v[0:3])
    return ops.blocks([[Sw, Sv], [ops.zeros(3, 3), Sw]])


def cross_force_matrix(ops, v):
    """6x6 matrix ``crf(v) = -crm(v)^T``."""
    Sw, Sv = ops.skew(v[3:6]), ops.skew(v[0:3])
    return ops.blocks([[Sw, ops.zeros(3, 3)], [Sv, Sw]])


def force_cross_operand_matrix(ops, f):
    """6x6 matrix ``G(f)`` with ``G(f) v = v x* f`` (the force cross product as a function of ``v``):
    ``-[[0, [f]], [[f], [n]]]``."""
    Sf, Sn = ops.skew(f[0:3]), ops.skew(f[3:6])
    return -ops.blocks([[ops.zeros(3, 3), Sf], [Sf, Sn]])


# ----------------------------------------------------------------------------------------------- inertias
def inertia_from_params(ops, pi):
    """``(m, h, I)`` from the 10-vector ``pi = [m, hx, hy, hz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``."""
    pi = ops.const(pi)
    rows = [[pi[4], pi[5], pi[7]], [pi[5], pi[6], pi[8]], [pi[7], pi[8], pi[9]]]
    return pi[0], pi[1:4], (ops.blocks(rows) if ops.is_symbolic() else np.array(rows))


def params_from_inertia(ops, m, h, I):
    """10-vector of an ``(m, h, I)`` triple (inverse of :func:`inertia_from_params`)."""
    return ops.vcat([ops.vec(m) if not ops.is_symbolic() else m, h,
                     ops.vec(I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2])])


def inertia_apply(ops, inertia, m_):
    """Momentum ``I m_`` of a rigid inertia ``(m, h, I)`` moving with twist ``m_ = [v; w]``:
    ``[m v - h x w; I w + h x v]``."""
    m, h, I = inertia
    v, w = m_[0:3], m_[3:6]
    return ops.vcat([m * v - ops.cross(h, w), ops.mtimes(I, w) + ops.cross(h, v)])


def inertia_matrix(ops, inertia):
    """6x6 spatial inertia ``[[m 1, -[h]], [[h], I]]`` of ``(m, h, I)``."""
    m, h, I = inertia
    S = ops.skew(h)
    return ops.blocks([[m * ops.eye(3), -S], [S, I]])


def inertia_act(ops, R, p, inertia):
    """Inertia given in B, expressed in A (placement ``(R, p)`` of B in A), still a rigid triple:
    ``h' = R h + m p``, ``I' = R I R^T - m [p]^2 - [R h][p] - [p][R h]``."""
    m, h, I = inertia
    Rh = ops.mtimes(R, h)
    Sp, Sh = ops.skew(p), ops.skew(Rh)
    I2 = ops.mtimes(ops.mtimes(R, I), ops.T(R)) - m * ops.mtimes(Sp, Sp) - ops.mtimes(Sh, Sp) - ops.mtimes(Sp, Sh)
    return m, Rh + m * p, I2


def inertia_add(a, b):
    """Sum of two rigid inertias expressed in the same frame."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


# ------------------------------------------------------------------------------------------------ rotations
def rotation_about_axis(ops, axis, angle):
    """Rotation by ``angle`` about the constant unit ``axis`` (Rodrigues); for a coordinate axis the
    matrix is written out so that symbolic code keeps its zeros and ones exact."""
    c, s = ops.cos(angle), ops.sin(angle)
    a = np.asarray(axis, dtype=float)
    k = int(np.argmax(np.abs(a)))
    if np.count_nonzero(a) == 1 and abs(a[k]) == 1.0:
        i, j, sg = (k + 1) % 3, (k + 2) % 3, float(np.sign(a[k]))
        rows = [[0.0] * 3 for _ in range(3)]
        rows[k][k], rows[i][i], rows[j][j], rows[i][j], rows[j][i] = 1.0, c, c, -sg * s, sg * s
        return ops.blocks(rows) if ops.is_symbolic() else np.array(rows, dtype=float)
    K = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return ops.eye(3) + s * ops.mtimes(K, ops.eye(3)) + (1.0 - c) * ops.mtimes(K @ K, ops.eye(3))


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix, ``R = Rz(y) Ry(p) Rx(r)``."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def quaternion_to_matrix(ops, qx, qy, qz, qw):
    """Rotation matrix of the unit quaternion ``(x, y, z, w)`` (Pinocchio's coefficient order in q)."""
    rows = [[1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qz * qw), 2 * (qx * qz + qy * qw)],
            [2 * (qx * qy + qz * qw), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qx * qw)],
            [2 * (qx * qz - qy * qw), 2 * (qy * qz + qx * qw), 1 - 2 * (qx * qx + qy * qy)]]
    return ops.blocks(rows) if ops.is_symbolic() else np.array(rows, dtype=float)


def numpy_inertia_params(mass, com, inertia_com):
    """10-vector about the frame origin from mass, COM (3,) and the 3x3 inertia about the COM (numeric)."""
    c = np.asarray(com, dtype=float)
    Ic = np.asarray(inertia_com, dtype=float)
    Io = Ic + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]])


def numpy_inertia_split(pi):
    """Inverse of :func:`numpy_inertia_params`: ``(m, com (3,), I about the COM (3, 3))``; ``com`` is zero
    for a massless body."""
    m, h, Io = inertia_from_params(NUMPY, np.asarray(pi, dtype=float))
    c = h / m if m > 0 else np.zeros(3)
    return m, c, Io - m * (c @ c * np.eye(3) - np.outer(c, c))
