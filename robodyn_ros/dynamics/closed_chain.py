"""Closed chains as a spanning tree plus a cut joint (Kwon Sect. 3): the spherical five-bar linkage.

Two branches grow from the base: joints 1, 2, 3 carry links 1, 2, 3; joints 4, 5 carry link 4 and close
the loop on link 3 (joint 5 is cut in the tree, so ``τ_5^tr = 0``). All joint axes pass through the
origin (twists ``A_i = (0, w_i)``). Active joints ``θ_a = (θ1, θ4)``, passive ``θ_p = (θ2, θ3, θ5)``.

* closure (eq. 11): ``exp(w1 θ1) exp(w2 θ2) exp(w3 θ3) = exp(w4 θ4) exp(w5 θ5)``
* velocity (eq. 12): ``θ̇_p = J_p θ̇_a``, ``J_p = -g_p^-1 g_a``, ``g_p = [w2' w3' -w5']``, ``g_a = [w1' -w4']``
* projection (eq. 13): ``τ_pr = [1  J_p^T] τ_tr``
* derivative (eq. 14): ``∂τ_pr/∂λ = -G_a(τ̂) + g_a^T g_p^-T G_p(τ̂) + [1 J_p^T] ∂τ_tr/∂λ``, ``τ̂ = g_p^-T τ_p``

:class:`SphericalFiveBar` is the model (axes, spanning tree, closure kinematics of eqs. 11-12); the
dynamics are the functions :func:`five_bar_actuator_torques` (eq. 13) and
:func:`five_bar_actuator_torque_derivatives` (eq. 14), called as ``f(five_bar, q, v, a)`` with the five
joint angles, rates and accelerations.
"""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import NUMPY as ops
from ..model.errors import ModelError
from ..model.model import Model
from .rnea import rnea
from .twist_derivatives import twist_derivatives

_LINK = ('<link name="{n}"><inertial><origin xyz="{c[0]} {c[1]} {c[2]}"/><mass value="{m}"/>'
         '<inertia ixx="{I}" ixy="0" ixz="0" iyy="{I}" iyz="0" izz="{I}"/></inertial></link>')
_JOINT = ('<joint name="{n}" type="continuous"><parent link="{p}"/><child link="{c}"/>'
          '<axis xyz="{w[0]} {w[1]} {w[2]}"/></joint>')


def _rot(w, th):
    return spatial.rotation_about_axis(ops, w, th)


class SphericalFiveBar:
    """Spherical five-bar linkage: axes ``w`` (5, 3) through the origin (closed at θ = 0), links 1-4 with
    mass, COM (4, 3) and a uniform rotational inertia about the COM."""

    def __init__(self, axes, masses, coms, inertias, gravity=(0.0, 0.0, -9.81)):
        self.w = np.array([np.asarray(a, float) / np.linalg.norm(a) for a in axes])
        if self.w.shape != (5, 3):
            raise ModelError("a spherical five-bar needs 5 joint axes")
        links = "".join(_LINK.format(n=f"link{i + 1}", m=masses[i], c=coms[i], I=inertias[i]) for i in range(4))
        joints = "".join(_JOINT.format(n=f"joint{i + 1}", p=p, c=c, w=self.w[i])
                         for i, (p, c) in enumerate([("base", "link1"), ("link1", "link2"), ("link2", "link3"),
                                                     ("base", "link4")]))
        self.tree = Model.from_urdf(f'<robot name="five_bar"><link name="base"/>{links}{joints}</robot>',
                                    gravity=gravity)

    def rotated_axes(self, theta):
        """``w_i'`` (5, 3): the axes at configuration ``theta`` (5,) (e.g. ``w3' = R1 R2 w3``)."""
        R1, R2, R4 = (_rot(self.w[i], theta[i]) for i in (0, 1, 3))
        return np.array([self.w[0], R1 @ self.w[1], R1 @ R2 @ self.w[2], self.w[3], R4 @ self.w[4]])

    def closure_residual(self, theta):
        """Rotation-vector error (3,) of eq. (11) in space-fixed axes, ``log(R_lhs R_rhs^T)``, whose
        derivative w.r.t. the passive angles is ``g_p``."""
        from ..model.joints import _quat_log, _rotation_to_quat
        lhs = _rot(self.w[0], theta[0]) @ _rot(self.w[1], theta[1]) @ _rot(self.w[2], theta[2])
        rhs = _rot(self.w[3], theta[3]) @ _rot(self.w[4], theta[4])
        return _quat_log(_rotation_to_quat(lhs @ rhs.T))

    def g_matrices(self, theta):
        """``(g_p (3, 3), g_a (3, 2))`` of eq. (12) at ``theta`` (5,)."""
        wp = self.rotated_axes(theta)
        return np.column_stack([wp[1], wp[2], -wp[4]]), np.column_stack([wp[0], -wp[3]])

    def passive_jacobian(self, theta):
        """``J_p`` (3, 2) of eq. (12)."""
        g_p, g_a = self.g_matrices(theta)
        return -np.linalg.solve(g_p, g_a)

    def solve_passive(self, theta_a, theta_p0=(0.0, 0.0, 0.0), tol=1e-12, iterations=50):
        """``θ`` (5,) with the given active angles, passive ones by Newton on eq. (11) from ``theta_p0``."""
        th = np.array([theta_a[0], *theta_p0[:2], theta_a[1], theta_p0[2]], dtype=float)
        for _ in range(iterations):
            r = self.closure_residual(th)
            if np.linalg.norm(r) < tol:
                return th
            g_p, _ = self.g_matrices(th)
            th[[1, 2, 4]] -= np.linalg.solve(g_p, r)   # r ≈ g_p δθ_p in space-fixed axes
        raise ModelError(f"five-bar closure did not converge at θ_a = {list(theta_a)} (singular or unreachable)")

    def passive_rates(self, theta, theta_a_dot, theta_a_ddot):
        """``(θ̇, θ̈)`` (5,) of all joints from active rates: ``θ̇_p = J_p θ̇_a`` and the derivative of
        eq. (12): ``g_p θ̈_p = -g_a θ̈_a - ġ_p θ̇_p - ġ_a θ̇_a`` with ``ẇ_i' = ω_{λ(i)} x w_i'``."""
        Jp = self.passive_jacobian(theta)
        thd = np.array([theta_a_dot[0], *(Jp @ theta_a_dot)[:2], theta_a_dot[1], (Jp @ theta_a_dot)[2]])
        wp = self.rotated_axes(theta)
        om1 = wp[0] * thd[0]
        om2 = om1 + wp[1] * thd[1]
        om4 = wp[3] * thd[3]
        wdot = [np.zeros(3), np.cross(om1, wp[1]), np.cross(om2, wp[2]), np.zeros(3), np.cross(om4, wp[4])]
        g_p, g_a = self.g_matrices(theta)
        gpd = np.column_stack([wdot[1], wdot[2], -wdot[4]])
        gad = np.column_stack([wdot[0], -wdot[3]])
        rhs = -g_a @ theta_a_ddot - gpd @ thd[[1, 2, 4]] - gad @ thd[[0, 3]]
        thdd_p = np.linalg.solve(g_p, rhs)
        return thd, np.array([theta_a_ddot[0], thdd_p[0], thdd_p[1], theta_a_ddot[1], thdd_p[2]])

    def rotated_axis_derivatives(self, theta):
        """``∂w_i'/∂θ_j`` (5, 3, 5): ``w_j' x w_i'`` for the joints j preceding i in its branch."""
        wp = self.rotated_axes(theta)
        d = np.zeros((5, 3, 5))
        for i, before in ((1, [0]), (2, [0, 1]), (4, [3])):
            for j in before:
                d[i, :, j] = np.cross(wp[j], wp[i])
        return d


def _closed_state(q, v, a):
    """``q, v, a`` as float (5,) arrays (joints 1..5); ValueError naming the argument otherwise."""
    out = []
    for name, x in (("q", q), ("v", v), ("a", a)):
        arr = np.asarray(x, dtype=float)
        if arr.shape != (5,):
            raise ValueError(f"{name} has shape {arr.shape}, expected (5,) for a spherical five-bar")
        out.append(arr)
    return out


def _tree_torques(five_bar, q, v, a):
    """``τ_tr`` (5,) ordered (θ1, θ4 | θ2, θ3, θ5): the spanning tree's RNEA, the cut joint's torque 0."""
    t = rnea(five_bar.tree, q[:4], v[:4], a[:4])
    return np.array([t[0], t[3], t[1], t[2], 0.0])


def five_bar_actuator_torques(five_bar, q, v, a):
    """Actuator torques ``τ_pr`` (2,) of the active joints (θ1, θ4) of a :class:`SphericalFiveBar`:
    Kwon eq. (13), ``τ_pr = [1  J_p^T] τ_tr``, the spanning tree's torques projected onto the active joints.

    ``q, v, a`` (5,): angles, rates and accelerations of joints 1..5 at a closed configuration with
    consistent rates (from :meth:`SphericalFiveBar.solve_passive` and :meth:`SphericalFiveBar.passive_rates`).
    """
    q, v, a = _closed_state(q, v, a)
    tau = _tree_torques(five_bar, q, v, a)
    return tau[:2] + five_bar.passive_jacobian(q).T @ tau[2:]


def five_bar_actuator_torque_derivatives(five_bar, q, v, a):
    """``∂τ_pr/∂λ`` (2, 15) of :func:`five_bar_actuator_torques` for ``λ = [q, v, a]`` (each (5,), joints
    1..5), Kwon eq. (14): ``-G_a(τ̂) + g_a^T g_p^-T G_p(τ̂) + [1 J_p^T] ∂τ_tr/∂λ`` with ``τ̂ = g_p^-T τ_p``,
    treating all joint variables as independent; the tree partials ``∂τ_tr/∂λ`` come from Kwon's
    Algorithm 1 (:func:`~robodyn_ros.dynamics.twist_derivatives.twist_derivatives`)."""
    q, v, a = _closed_state(q, v, a)
    _, dq, dv, da = twist_derivatives(five_bar.tree, q[:4], v[:4], a[:4])
    S_tr = np.zeros((5, 15))
    order = [0, 3, 1, 2]                 # tree rows (θ1, θ4, θ2, θ3) -> τ_tr rows 0..3
    for row, k in enumerate(order):
        for blk, D in enumerate((dq, dv, da)):
            S_tr[row, 5 * blk:5 * blk + 4] = D[k]
    tau = _tree_torques(five_bar, q, v, a)
    g_p, g_a = five_bar.g_matrices(q)
    tau_hat = np.linalg.solve(g_p.T, tau[2:])
    dw = five_bar.rotated_axis_derivatives(q)    # (5, 3, 5): ∂w_i'/∂θ_j
    G_a = np.zeros((2, 15))
    G_p = np.zeros((3, 15))
    G_a[0, :5], G_a[1, :5] = tau_hat @ dw[0], -tau_hat @ dw[3]
    G_p[0, :5], G_p[1, :5], G_p[2, :5] = tau_hat @ dw[1], tau_hat @ dw[2], -tau_hat @ dw[4]
    Jp = -np.linalg.solve(g_p, g_a)
    return -G_a + g_a.T @ np.linalg.solve(g_p.T, G_p) + np.hstack([np.eye(2), Jp.T]) @ S_tr
