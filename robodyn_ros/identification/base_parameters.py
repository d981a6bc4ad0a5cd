"""Identifiable (base) parameters of a robot's joint-torque model (Gautier & Khalil 1990, "Numerical
calculation of the base inertial parameters of robots"; Cărmizaru ch. 4, Remarks 4.2.7-4.2.8).

Full parameter vector ``pi_full`` (10 nbodies + 4 nv,): per body ``[m, mx, my, mz, Ixx, Ixy, Iyy, Ixz,
Iyz, Izz]`` (about the body frame origin, Pinocchio's order), then per joint ``[armature, viscous,
coulomb, offset]``. The model is linear in it:

    tau = Y_full(q, v, a) pi_full,   Y_full = [Y_rigid (nv, 10 nb) | Y_joint (nv, 4 nv)]
    Y_joint[j, 4j:4j+4] = [a_j, v_j, sgn(v_j), 1]

(``sgn`` is ``sign`` or the smooth ``tanh(v / width)``). Some columns of ``Y_full`` vanish for every state
and others are linear combinations of earlier ones. Stacking ``Y_full`` at random states into ``W`` and
factoring it by QR (Householder, Gautier & Khalil) gives the rank ``r``; the columns that are not in the
span of the columns before them (|R_ii| > tol ||W_i||, scanning in the natural order) are the
independent ones ``W_1`` (r columns), the others satisfy ``W_2 = W_1 K_d``. With the permutation
``P = [independent | dependent]``:

    tau = Y_full pi = Y_1 (pi_1 + K_d pi_2) = Y_1 beta,   beta = [I, K_d] P^T pi = K pi   (r,)

The natural order (body 1 first, and Ixx before Iyy within a body) makes the combinations read like
Khalil's regrouping: ``Ixx_l - Iyy_l``, a child's mass added to its parent's parameters, and so on.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .batch_regressor import batch_regressor

INERTIAL_NAMES = ("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
JOINT_NAMES = ("armature", "viscous", "coulomb", "offset")


def smooth_sign(v, width=0.0):
    """``sign(v)`` for ``width == 0``, else ``tanh(v / width)`` (a Coulomb model without a jump at v = 0)."""
    v = np.asarray(v, dtype=float)
    return np.sign(v) if width <= 0.0 else np.tanh(v / width)


def batch_joint_parameter_regressor(model, V, A, coulomb_width=0.0):
    """Per-joint parameter columns (N, nv, 4 nv): row j, columns 4j..4j+3 = ``[a_j, v_j, sgn(v_j), 1]``
    (armature, viscous, Coulomb, offset): the batched, smooth-sign form of
    :func:`robodyn_ros.dynamics.friction_regressor.joint_parameter_regressor` (same columns; equal for N = 1 and
    ``coulomb_width = 0``, tested). Written here before that module existed, kept for the batch and tanh."""
    V, A = np.atleast_2d(V), np.atleast_2d(A)
    N, nv = V.shape
    Y = np.zeros((N, nv, 4 * nv))
    j = np.arange(nv)
    Y[:, j, 4 * j] = A
    Y[:, j, 4 * j + 1] = V
    Y[:, j, 4 * j + 2] = smooth_sign(V, coulomb_width)
    Y[:, j, 4 * j + 3] = 1.0
    return Y


def full_regressor(model, Q, V, A, coulomb_width=0.0):
    """``Y_full`` (N, nv, 10 nb + 4 nv) of N samples (module docstring)."""
    return np.concatenate([batch_regressor(model, Q, V, A),
                           batch_joint_parameter_regressor(model, V, A, coulomb_width)], axis=2)


def full_parameter_names(model):
    """Names of ``pi_full``: ``"m_panda_link1"``, ..., ``"viscous_panda_joint1"``, ..."""
    names = [f"{p}_{body}" for body in model.body_names for p in INERTIAL_NAMES]
    return names + [f"{p}_{joint}" for joint in model.joint_names for p in JOINT_NAMES]


def full_parameters(model):
    """``pi_full`` (10 nb + 4 nv,) of a model: its inertias, armature and friction."""
    joint = np.stack([model.armature, model.viscous, model.coulomb, model.friction_offset], axis=1)
    return np.concatenate([model.inertial_parameters(), joint.reshape(-1)])


def split_full_parameters(model, pi_full):
    """``(pi (10 nb,), armature, viscous, coulomb, offset (nv,) each)`` of ``pi_full``."""
    pi_full = np.asarray(pi_full, dtype=float)
    n_in = 10 * model.nbodies
    joint = pi_full[n_in:].reshape(model.nv, 4)
    return pi_full[:n_in], joint[:, 0], joint[:, 1], joint[:, 2], joint[:, 3]


@dataclass(frozen=True)
class BaseParameters:
    """The base-parameter map of one model.

    independent: (r,) indices into ``pi_full`` of the columns kept; dependent: the others;
    K_d: (r, n - r) with ``W_dep = W_ind K_d``; K: (r, n) with ``beta = K pi_full``;
    names: (r,) readable combinations; full_names: (n,); zero_columns: indices whose column vanishes
    (no effect on any joint torque); coulomb_width: the smooth-sign width the regressor used.
    """

    independent: np.ndarray
    dependent: np.ndarray
    K_d: np.ndarray
    K: np.ndarray
    names: tuple
    full_names: tuple
    zero_columns: np.ndarray
    coulomb_width: float = 0.0

    @property
    def count(self):
        return len(self.independent)

    def from_full(self, pi_full):
        """``beta = K pi_full`` (r,)."""
        return self.K @ np.asarray(pi_full, dtype=float)

    def reduce(self, Y_full):
        """Base regressor ``Y_base = Y_full[..., independent]`` (..., r): ``Y_full pi = Y_base beta``."""
        return Y_full[..., self.independent]

    def regressor(self, model, Q, V, A):
        """Base regressors (N, nv, r) of N samples."""
        return self.reduce(full_regressor(model, Q, V, A, self.coulomb_width))


def _combination_name(full_names, i, coefficients, dependent, digits=6):
    """``"Ixx_l3 - Iyy_l3 + 0.333*m_l4"`` for independent column i and its row of K_d."""
    text = full_names[i]
    for c, d in zip(coefficients, dependent):
        if c == 0.0:
            continue
        sign = "-" if c < 0 else "+"
        magnitude = abs(c)
        coefficient = "" if abs(magnitude - 1.0) < 1e-9 else f"{magnitude:.{digits}g}*"
        text += f" {sign} {coefficient}{full_names[d]}"
    return text


def random_states(model, rng, samples):
    """``(Q, V, A)`` (samples, n) at random configurations within the limits and random v, a."""
    Q = np.stack([model.random_configuration(rng) for _ in range(samples)])
    V = rng.uniform(-2.0, 2.0, size=(samples, model.nv))
    A = rng.uniform(-5.0, 5.0, size=(samples, model.nv))
    return Q, V, A


def compute_base_parameters(model, rng=None, samples=None, coulomb_width=0.0, tol=1e-7):
    """Base parameters of ``model`` by QR of regressors stacked at random states (Gautier & Khalil).

    samples: number of random states (default enough for 8 rows per full parameter); tol: a column is
    independent when its distance to the span of the earlier columns exceeds ``tol`` times its norm.
    The rank is cross-checked with QR with column pivoting. Returns :class:`BaseParameters`.
    """
    rng = np.random.default_rng(1234) if rng is None else rng
    n = 10 * model.nbodies + 4 * model.nv
    samples = samples or max(30, int(np.ceil(8 * n / model.nv)))
    W = full_regressor(model, *random_states(model, rng, samples), coulomb_width).reshape(-1, n)
    norms = np.linalg.norm(W, axis=0)
    zero = norms <= 1e-10 * norms.max()
    Wn = W / np.where(zero, 1.0, norms)
    Wn[:, zero] = 0.0
    R = scipy.linalg.qr(Wn, mode="r")[0]
    independent = np.flatnonzero((np.abs(np.diag(R)) > tol) & ~zero)
    _, Rp, _ = scipy.linalg.qr(Wn, mode="economic", pivoting=True)
    d = np.abs(np.diag(Rp))
    rank = int(np.count_nonzero(d > tol * d[0]))
    if rank != len(independent):
        raise RuntimeError(f"base parameters: natural-order QR found {len(independent)} independent columns, "
                           f"pivoted QR rank {rank}; increase samples or change tol")
    dependent = np.setdiff1d(np.arange(n), independent)
    K_d = np.linalg.lstsq(W[:, independent], W[:, dependent], rcond=None)[0]
    K_d[np.abs(K_d) < 1e-9] = 0.0
    K = np.zeros((len(independent), n))
    K[:, independent] = np.eye(len(independent))
    K[:, dependent] = K_d
    full_names = tuple(full_parameter_names(model))
    names = tuple(_combination_name(full_names, i, K_d[r], dependent) for r, i in enumerate(independent))
    return BaseParameters(independent=independent, dependent=dependent, K_d=K_d, K=K, names=names,
                          full_names=full_names, zero_columns=np.flatnonzero(zero),
                          coulomb_width=float(coulomb_width))


def parameter_identifiability(model, base):
    """Per body, its 10 inertial parameters sorted by what joint torques say about them:
    ``{"alone": [...], "combined": [...], "none": [...]}`` (identifiable by itself; only inside
    combinations with other parameters; no effect on any joint torque)."""
    out = {}
    used_as_dependent = set(base.dependent[np.any(base.K_d != 0.0, axis=0)])
    zero = set(base.zero_columns)
    for b, body in enumerate(model.body_names):
        groups = {"alone": [], "combined": [], "none": []}
        for k, p in enumerate(INERTIAL_NAMES):
            i = 10 * b + k
            if i in zero:
                groups["none"].append(p)
            elif i in base.independent and not np.any(base.K_d[list(base.independent).index(i)] != 0.0):
                groups["alone"].append(p)
            else:
                groups["combined"].append(p) if (i in base.independent or i in used_as_dependent) else groups["none"].append(p)
        out[body] = groups
    return out


def identifiability_explanation(model, base):
    """Text per body (dict body -> str) saying which of its parameters joint torques identify and why
    (Cărmizaru Remarks 4.2.7-4.2.9): a body moved only by the first joint of a fixed base turns about a
    fixed axis, so only its inertia about that axis reaches the torques; deeper bodies are seen through
    configuration-dependent transforms ``X`` and most of their parameters become identifiable."""
    groups = parameter_identifiability(model, base)
    text = {}
    for b, body in enumerate(model.body_names):
        g = groups[body]
        chain = [model.joint_names[j] for j in reversed(model.ancestors(b))]
        lines = [f"{body}: moved by {len(chain)} joint(s) ({', '.join(chain)}); "
                 f"identifiable alone: {', '.join(g['alone']) or 'none'}; "
                 f"only in combinations: {', '.join(g['combined']) or 'none'}; "
                 f"no effect on joint torques: {', '.join(g['none']) or 'none'}."]
        if model.parents[b] < 0 and not model.floating_base:
            kind = model.joints[b].kind
            motion = "rotates about the fixed axis" if kind == "revolute" else "translates along the fixed axis"
            lines.append(
                f"Why: the body {motion} of {model.joint_names[b]}, the first joint of a fixed base. Its wrench "
                f"reaches the joint torques only through S1^T (I1 A1 + ...), and joint 1 has no parent, so no "
                f"configuration-dependent transform X projects the other columns of I1 onto the axis (Cărmizaru "
                f"Rem. 4.2.8): only the inertia about the axis acts (together with the joint's armature and what "
                f"the children regroup into it); mass, first moments and the other moments are carried by the "
                f"base. A wrench sensor at the base or in joint 1 would identify more (Rem. 4.2.7, 4.2.9).")
        elif g["none"] or g["combined"]:
            lines.append(
                "Why: the columns of its inertia are projected onto the axes of its ancestors through "
                "transforms X(q) that change with the configuration (Rem. 4.2.8), so most parameters are "
                "excited; those left combined are tied to a parent's by the joint's own axis (e.g. mass and "
                "the first moment along the axis regroup into the parent, and the moments about perpendicular "
                "axes enter as differences such as Ixx - Iyy for a revolute joint about z).")
        else:
            lines.append("Why: every column of its inertia is excited through configuration-dependent transforms X(q).")
        text[body] = " ".join(lines)
    return text
