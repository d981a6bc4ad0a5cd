"""Forward kinematics and Jacobians (Garofalo Sec. VI, eqs. 27-32: the outward recursion for the body
Jacobians ``J_k`` and their time derivatives ``J̇_k``).

``liMi``: placement of body i in its parent body (parent-to-child transform of Pinocchio);
``oMi``: placement of body i in the base frame.
"""
from __future__ import annotations

from ..model import spatial
from ..model.backend import ops_for


def joint_slices(model, i):
    """``(slice in q, slice in v)`` of body ``i``'s joint."""
    j = model.joints[i]
    return slice(model.idx_q[i], model.idx_q[i] + j.nq), slice(model.idx_v[i], model.idx_v[i] + j.nv)


def parent_placements(ops, model, q):
    """``liMi`` for every body: ``X_tree_i * X_J(q_i)`` as ``(R, p)`` pairs."""
    out = []
    for i, joint in enumerate(model.joints):
        sq, _ = joint_slices(model, i)
        R0, p0 = (ops.const(x) for x in model.placements[i])
        RJ, pJ = joint.placement(ops, q[sq])
        out.append(spatial.compose(ops, R0, p0, RJ, pJ))
    return out


def forward_kinematics(model, q):
    """``oMi`` for every body: list of ``(R (3, 3), p (3,))``, bodies in q order."""
    ops = ops_for(q)
    if ops.name == "numpy":
        q = model.check_vector("q", q, model.nq)
    liMi = parent_placements(ops, model, q)
    oMi = []
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        oMi.append((R, p) if lam < 0 else spatial.compose(ops, *oMi[lam], R, p))
    return oMi


def frame_placement(model, q, link_name):
    """Placement ``(R, p)`` of a URDF link frame in the base frame."""
    frame = model.frames.get(link_name)
    if frame is None:
        model.body_index(link_name)  # raises ModelError listing the links
    if frame.body < 0:
        return frame.R, frame.p
    ops = ops_for(q)
    return spatial.compose(ops, *forward_kinematics(model, q)[frame.body], ops.const(frame.R), ops.const(frame.p))


def body_jacobians(model, q, v=None):
    """Body Jacobians ``J_k`` (6, nv) of every body in its own frame (Pinocchio's LOCAL), by the outward
    recursion ``J_k = X_{k,λ} J_λ + [.. S_k ..]`` (Garofalo eq. 27). With ``v`` also ``J̇_k`` (eq. 28):
    ``J̇_k = X_{k,λ} J̇_λ - (S_k q̇_k) × (X_{k,λ} J_λ)``. Returns ``J`` or ``(J, Jdot)`` (lists)."""
    ops = ops_for(q, v)
    liMi = parent_placements(ops, model, q)
    J, Jd = [], []
    for i, (R, p) in enumerate(liMi):
        lam = model.parents[i]
        _, sv = joint_slices(model, i)
        X = spatial.inv_motion_matrix(ops, R, p)
        Ji = ops.mtimes(X, J[lam]) if lam >= 0 else ops.zeros(6, model.nv)
        if v is not None:
            vJ = model.joints[i].motion(ops, v[sv])
            Jdi = ops.zeros(6, model.nv)
            if lam >= 0:
                Jdi = ops.mtimes(X, Jd[lam]) - ops.mtimes(spatial.cross_motion_matrix(ops, vJ), Ji)
            Jd.append(Jdi)
        Ji[:, sv] = model.joints[i].S
        J.append(Ji)
    return J if v is None else (J, Jd)


def frame_jacobian(model, q, link_name, reference="local"):
    """Jacobian (6, nv) of a URDF link frame: ``reference='local'`` (twist in the link frame),
    ``'world'`` (spatial twist at the base origin, Pinocchio WORLD) or ``'local_world_aligned'``
    (velocity of the link origin and angular velocity, in base axes)."""
    frame = model.frames.get(link_name)
    if frame is None:
        model.body_index(link_name)
    ops = ops_for(q)
    if frame.body < 0:
        return ops.zeros(6, model.nv)
    Jb = body_jacobians(model, q)[frame.body]
    Jl = ops.mtimes(spatial.inv_motion_matrix(ops, ops.const(frame.R), ops.const(frame.p)), Jb)
    Ro, po = frame_placement(model, q, link_name)
    if reference == "local":
        return Jl
    if reference == "world":
        return ops.mtimes(spatial.motion_matrix(ops, Ro, po), Jl)
    if reference == "local_world_aligned":
        return ops.mtimes(spatial.motion_matrix(ops, Ro, 0 * po), Jl)
    raise ValueError(f"reference must be 'local', 'world' or 'local_world_aligned', got {reference!r}")
