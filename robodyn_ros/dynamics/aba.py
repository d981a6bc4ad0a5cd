"""Articulated-body algorithm: forward dynamics in O(n) (Featherstone RBDA Table 7.1), body coordinates,
Pinocchio conventions, armature added to the joint-space articulated inertia ``D``."""
from __future__ import annotations

import numpy as np

from ..model import spatial
from ..model.backend import ops_for
from ..model.errors import ModelError
from .kinematics import joint_slices, parent_placements
from .rnea import base_acceleration, body_inertia, external_wrench


SINGULAR_D = 1e-12
"""Relative bound below which the joint-space articulated inertia ``D_i = S_i^T I^A_i S_i + armature``
(Featherstone RBDA Table 7.1) counts as singular: its smallest eigenvalue <= SINGULAR_D times the
largest |entry| of ``D`` and of the model's inertial parameters. A body whose subtree carries no inertia has
``D_i = 0`` exactly (to rounding)."""


def inertia_scale(model, pi=None):
    """Largest |inertial parameter| of the model (or of ``pi``) on NumPy, the scale of :data:`SINGULAR_D`;
    None for symbolic parameters (no check)."""
    values = model.inertias if pi is None else pi
    return float(np.abs(values).max(initial=0.0)) if isinstance(values, np.ndarray) else None


def articulated_inverse(ops, model, i, D, scale=None):
    """``D^-1`` of body ``i``'s joint-space articulated inertia ``D`` (n_i, n_i); on NumPy (``scale`` from
    :func:`inertia_scale`), ModelError naming the body and its joint when ``D`` is singular or not positive
    definite (a massless subtree without armature, or non-physical inertias), instead of inf, NaN or a
    bare LinAlgError."""
    if scale is not None and ops.name == "numpy":
        smallest = float(D[0, 0]) if D.shape == (1, 1) else float(np.linalg.eigvalsh(D)[0])
        bound = SINGULAR_D * max(scale, float(np.abs(D).max()), 1e-300)
        if not smallest > bound:     # NaN too
            raise ModelError(f"articulated inertia of body '{model.body_names[i]}' (joint '{model.joint_names[i]}') "
                             f"is {'singular' if abs(smallest) <= bound else 'not positive definite'} "
                             f"(smallest eigenvalue {smallest:.3g}): its subtree carries no inertia along the "
                             f"joint, or non-physical inertias; give the joint armature (model '{model.name}')")
    return ops.inv(D)


def aba(model, q, v, tau, f_ext=None, pi=None, armature=None, joint_inertia=False):
    """Joint accelerations ``a = M^-1 (tau - C v - g + sum_k J_k^T f_ext_k)`` (nv,).

    q (nq,), v (nv,), tau (nv,), f_ext (nbodies, 6) body wrenches; ``pi`` optional parameters;
    ``armature`` (nv,) optional, in place of the model's: the diagonal added to ``M`` (an implicit step's
    ``M + h D`` is the ABA with armature ``armature + h D``, :mod:`robodyn_ros.simulation.simulator`).
    ``joint_inertia``: return ``(a, d)``, ``d`` (nv,) the diagonal of each joint's articulated inertia
    ``D_i = S_i^T I^A_i S_i`` plus the armature (Featherstone RBDA Table 7.1): the inertia a joint moves
    with its parent held and the bodies beyond it free."""
    ops = ops_for(q, v, tau, f_ext, pi, armature)
    if ops.name == "numpy":
        q, v, tau = (model.check_vector(n, x, k) for n, x, k in (("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)))
        f_ext, pi = model.check_f_ext(f_ext), model.check_parameters(pi)
        if armature is not None:
            armature = model.check_vector("armature", armature, model.nv)
    n = model.nbodies
    liMi = parent_placements(ops, model, q)
    vel, c, IA, pA = [], [], [], []
    for i, (R, p) in enumerate(liMi):                      # pass 1: velocities and bias forces
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        vJ = model.joints[i].motion(ops, v[sv])
        vi = vJ if lam < 0 else spatial.inv_act_motion(ops, R, p, vel[lam]) + vJ
        inertia = body_inertia(ops, model, i, pi)
        pi_ = spatial.cross_force(ops, vi, spatial.inertia_apply(ops, inertia, vi))
        fe = external_wrench(ops, f_ext, i)
        vel.append(vi), c.append(spatial.cross_motion(ops, vi, vJ))
        IA.append(spatial.inertia_matrix(ops, inertia)), pA.append(pi_ if fe is None else pi_ - fe)
    U, Dinv, u = [None] * n, [None] * n, [None] * n
    d = ops.zeros(model.nv) if joint_inertia else None
    scale = inertia_scale(model, pi) if ops.name == "numpy" else None
    for i in reversed(range(n)):                            # pass 2: articulated inertias
        _, sv = joint_slices(model, i)
        S = model.joints[i].S
        U[i] = ops.mtimes(IA[i], S)
        rotor = np.diag(model.armature[sv]) if armature is None else ops.diag(armature[sv])
        D = ops.mtimes(S.T, U[i]) + rotor
        Dinv[i] = articulated_inverse(ops, model, i, D, scale)
        if joint_inertia:
            d[sv] = ops.diag(D)
        u[i] = tau[sv] - ops.mtimes(S.T, pA[i])
        lam = model.parents[i]
        if lam >= 0:
            UD = ops.mtimes(U[i], Dinv[i])
            Ia = IA[i] - ops.mtimes(UD, ops.T(U[i]))
            pa = pA[i] + ops.mtimes(Ia, c[i]) + ops.mtimes(UD, u[i])
            X = spatial.inv_motion_matrix(ops, *liMi[i])
            IA[lam] = IA[lam] + ops.mtimes(ops.T(X), ops.mtimes(Ia, X))
            pA[lam] = pA[lam] + spatial.act_force(ops, *liMi[i], pa)
    qdd = ops.zeros(model.nv)
    a0 = base_acceleration(ops, model)
    acc = [None] * n
    for i, (R, p) in enumerate(liMi):                      # pass 3: accelerations
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        ai = spatial.inv_act_motion(ops, R, p, a0 if lam < 0 else acc[lam]) + c[i]
        qdd[sv] = ops.mtimes(Dinv[i], u[i] - ops.mtimes(ops.T(U[i]), ai))
        acc[i] = ai + model.joints[i].motion(ops, qdd[sv])
    return (qdd, d) if joint_inertia else qdd
