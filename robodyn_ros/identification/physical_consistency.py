"""Physical consistency of a body's inertial parameters through its pseudo-inertia matrix (Wensing,
Kim and Slotine 2017, "Linear matrix inequalities for physically consistent inertial parameter
identification", eq. 9): for ``pi_b = [m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`` about the body origin,

    J = [[Σ, h], [hᵀ, m]],   Σ = ½ tr(I) 1 - I   (the second moment ∫ x xᵀ dm)

and the parameters are those of some mass distribution iff ``J ≻ 0`` (positive mass, triangle
inequalities on the principal moments at the COM). :func:`project_body` is the Frobenius-norm projection
of ``J`` onto ``{J ⪰ ε 1}`` by eigenvalue clipping.
"""
from __future__ import annotations

import numpy as np

from ..model.mesh_inertia import parameters_from_pseudo_inertia, pseudo_inertia_from_parameters


def pseudo_inertia(pi_b):
    """Pseudo-inertia ``J`` (4, 4) of one body's 10 parameters ``pi_b`` (Wensing et al. eq. 9; the model
    layer's :func:`~robodyn_ros.model.mesh_inertia.pseudo_inertia_from_parameters`)."""
    return pseudo_inertia_from_parameters(pi_b)


def params_from_pseudo_inertia(J):
    """Inverse of :func:`pseudo_inertia`: the 10 parameters (10,) of the symmetric part of ``J`` (4, 4) (the
    model layer's :func:`~robodyn_ros.model.mesh_inertia.parameters_from_pseudo_inertia`)."""
    J = np.asarray(J, dtype=float)
    return parameters_from_pseudo_inertia(0.5 * (J + J.T))


def is_consistent(pi_b, eps=0.0):
    """Whether the smallest eigenvalue of the pseudo-inertia of ``pi_b`` (10,) exceeds ``eps``."""
    return bool(np.linalg.eigvalsh(pseudo_inertia(pi_b))[0] > eps)


def project_body(pi_b, eps=1e-8):
    """The parameters (10,) whose pseudo-inertia is the nearest (Frobenius) matrix with eigenvalues
    ``>= eps`` to that of ``pi_b`` (10,); ``pi_b`` itself when already consistent."""
    J = pseudo_inertia(pi_b)
    lam, V = np.linalg.eigh(J)
    if lam[0] >= eps:
        return np.array(pi_b, dtype=float)
    return params_from_pseudo_inertia((V * np.maximum(lam, eps)) @ V.T)


def pseudo_inertias(pi):
    """Pseudo-inertias (nb, 4, 4) of all bodies of ``pi`` (10 nb,), vectorised :func:`pseudo_inertia`."""
    P = np.asarray(pi, dtype=float).reshape(-1, 10)
    m, h = P[:, 0], P[:, 1:4]
    ixx, ixy, iyy, ixz, iyz, izz = P[:, 4:10].T
    half_tr = 0.5 * (ixx + iyy + izz)
    J = np.empty((P.shape[0], 4, 4))
    J[:, 0, 0], J[:, 1, 1], J[:, 2, 2] = half_tr - ixx, half_tr - iyy, half_tr - izz
    J[:, 0, 1] = J[:, 1, 0] = -ixy
    J[:, 0, 2] = J[:, 2, 0] = -ixz
    J[:, 1, 2] = J[:, 2, 1] = -iyz
    J[:, :3, 3] = J[:, 3, :3] = h
    J[:, 3, 3] = m
    return J


def _length_scaling(length):
    return np.array([1.0 / length, 1.0 / length, 1.0 / length, 1.0])


def pseudo_inertia_metric(length=0.1):
    """``W`` (10, 10): the Gram matrix of the linear map ``pi_b -> D J(pi_b) D`` with
    ``D = diag(1/ℓ, 1/ℓ, 1/ℓ, 1)``, so that ``‖D J(a) D - D J(b) D‖_F² = (a - b)ᵀ W (a - b)``.
    The length ``ℓ`` (m) balances masses, first moments and second moments."""
    d = _length_scaling(length)
    L = np.stack([(d[:, None] * pseudo_inertia(e) * d[None, :]).reshape(-1) for e in np.eye(10)], axis=1)
    return L.T @ L


def project_parameters(pi, eps=1e-8, length=0.1):
    """Projection of each body's block of ``pi`` (10 nb,) onto ``{D J D ⪰ ε 1}`` (``D`` of
    :func:`pseudo_inertia_metric`) by eigenvalue clipping of ``D J D``: the orthogonal projection in the
    metric ``W`` of :func:`pseudo_inertia_metric`, onto a convex set. Returns ``(pi, projected)`` with
    ``projected`` the list of body indices that were changed.

    Because the set is convex and the projection orthogonal in ``W``, it never moves an estimate farther
    (in ``W``) from any parameter vector inside the set — the property that keeps a Lyapunov function
    ``½ π̃ᵀ Γ⁻¹ π̃`` from increasing when ``Γ⁻¹`` is block-diagonal with blocks proportional to ``W``."""
    out = np.array(pi, dtype=float)
    d = _length_scaling(length)
    Js = d[None, :, None] * pseudo_inertias(out) * d[None, None, :]
    lam, V = np.linalg.eigh(Js)
    changed = [int(k) for k in np.flatnonzero(lam[:, 0] < eps)]
    for k in changed:
        Jk = (V[k] * np.maximum(lam[k], eps)) @ V[k].T
        out[10 * k:10 * k + 10] = params_from_pseudo_inertia(Jk / d[:, None] / d[None, :])
    return out, changed


def pseudo_inertia_margin(pi_b, length=0.1):
    """``λ_min(D J D) / tr(D J D)`` of body parameters ``pi_b`` (10,), ``D = diag(1/ℓ, 1/ℓ, 1/ℓ, 1)``:
    the margin of :mod:`robodyn_ros.identification.least_squares` (0 on the boundary, negative outside)."""
    d = _length_scaling(length)
    J = d[:, None] * pseudo_inertia(pi_b) * d[None, :]
    return float(np.linalg.eigvalsh(J)[0] / np.trace(J))
