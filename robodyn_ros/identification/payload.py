"""Payload identification: the 10 inertial parameters of a load held by the last body.

From a wrist force/torque sensor (Kubus, Kröger & Wahl 2008, "On-line estimation of inertial parameters
using a recursive total least-squares approach"): the sensor, at URDF link ``link``, measures the wrench
it applies to everything beyond it, expressed in its frame about its origin,

    w = Y_b(v_s, a_s) pi_p + b,     Y_b: the 6x10 body wrench regressor (robodyn_ros.dynamics.regressor),

with v_s, a_s the sensor frame's twist and acceleration (gravity included as a_0 = -g) and b the
sensor's constant bias (6 numbers). Stacking N samples gives 6N equations in the 16 unknowns.

From joint torques alone: the payload adds pi_p to the last body's parameters, so the torque change is
``tau - tau_before = Y_last(q, v, a) pi_p`` with ``Y_last`` the 10 regressor columns of that body and
``tau_before`` the identified model's torques (batch). The last body of a 6- or 7-joint arm is seen by
enough axes that all ten columns are independent (checked: an error names the combinations that are not).

Physical payloads: a load is a mass distribution, so its parameters have a positive semi-definite
pseudo-inertia ``J`` (Wensing, Kim and Slotine 2017, eq. 9; :mod:`.physical_consistency`), or are all zero
(no payload). :func:`physical_payload` maps any estimate to the nearest such parameters before they are
published: an estimate of a vanishing or negative mass (the noise of an estimator with nothing attached)
becomes "no payload", and a positive mass with non-physical inertia is projected onto ``J ⪰ 0``.

Payload change: a CUSUM test (Page 1954) on the normalised innovation squared of the recursive
estimator, ``g_k = max(0, g_{k-1} + d²_k / m - 1 - drift)``, alarms when ``g_k > h``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from ..model.spatial import numpy_inertia_split
from .physical_consistency import project_body, pseudo_inertia
from .batch_regressor import _inv_act_motion, batch_body_motions, batch_body_wrench_regressor, batch_regressor


@dataclass(frozen=True)
class PayloadEstimate:
    """pi: (10,) payload parameters about the reference frame origin (sensor link or last body frame);
    mass, com (3,), inertia (3, 3) about the COM; bias: (6,) sensor bias or None; std: (10,) of pi;
    relative_error: ||residual|| / ||measurement||."""

    pi: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    bias: np.ndarray | None
    std: np.ndarray
    relative_error: float


def sensor_frame_motions(model, link, Q, V, A):
    """Twist and acceleration (gravity included) of URDF link ``link``'s frame, each (N, 6) in that frame."""
    b = model.body_index(link)
    if b < 0:
        raise ModelError(f"link '{link}' is part of the fixed base: a sensor there sees no payload motion")
    vel, acc, _ = batch_body_motions(model, np.atleast_2d(Q), np.atleast_2d(V), np.atleast_2d(A))
    frame = model.frames[link]
    N = len(vel[b])
    R = np.broadcast_to(frame.R, (N, 3, 3))
    p = np.broadcast_to(frame.p, (N, 3))
    return _inv_act_motion(R, p, vel[b]), _inv_act_motion(R, p, acc[b])


def _estimate(Y, y, n_params):
    """Least squares with standard deviations: Y (M, k), y (M,)."""
    sol, *_ = np.linalg.lstsq(Y, y, rcond=None)
    residual = y - Y @ sol
    dof = max(len(y) - Y.shape[1], 1)
    cov = np.linalg.pinv(Y.T @ Y) * float(residual @ residual) / dof
    return sol, np.sqrt(np.abs(np.diag(cov)))[:n_params], float(np.linalg.norm(residual) / max(np.linalg.norm(y), 1e-300))


def _require_rank(Y, what, names=("m", "mx", "my", "mz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz", "bias fx",
                                  "bias fy", "bias fz", "bias tx", "bias ty", "bias tz")):
    norms = np.linalg.norm(Y, axis=0)
    if np.any(norms == 0):
        raise ModelError(f"{what}: the data never excite {', '.join(names[i] for i in np.flatnonzero(norms == 0))}")
    _, s, Vt = np.linalg.svd(Y / norms, full_matrices=False)
    if s[-1] < 1e-8 * s[0]:
        worst = np.argsort(-np.abs(Vt[-1]))[:3]
        raise ModelError(f"{what}: too little excitation to separate {', '.join(names[i] for i in worst)} "
                         f"(scaled condition number {s[0] / s[-1]:.3g}); move the wrist through more orientations")


def _payload(pi, bias, std, rel):
    m, c, Ic = numpy_inertia_split(pi)
    return PayloadEstimate(pi=pi, mass=float(m), com=c, inertia=Ic, bias=bias, std=std, relative_error=rel)


def payload_from_wrench(model, link, Q, V, A, W, estimate_bias=True):
    """Payload parameters (about ``link``'s frame) and sensor bias from wrenches W (N, 6) measured at
    ``link`` with the joint states Q, V, A (N, n). Returns :class:`PayloadEstimate`."""
    vs, as_ = sensor_frame_motions(model, link, Q, V, A)
    Yb = batch_body_wrench_regressor(vs, as_)
    N = len(Yb)
    if estimate_bias:
        Yb = np.concatenate([Yb, np.broadcast_to(np.eye(6), (N, 6, 6))], axis=2)
    Y = Yb.reshape(6 * N, -1)
    _require_rank(Y, "payload from the wrist F/T sensor")
    sol, std, rel = _estimate(Y, np.asarray(W, dtype=float).reshape(-1), 10)
    return _payload(sol[:10], sol[10:] if estimate_bias else None, std, rel)


def payload_from_joint_torques(model_before, Q, V, A, TAU, predict, body=None):
    """Payload parameters (about the frame of ``body``, default the last body) as the change of that
    body's parameters explaining ``TAU - predict(Q, V, A)`` (N, nv), with ``predict`` the identified
    model's batched torques (e.g. ``lambda Q, V, A: predict_torques(model, Q, V, A, width)``)."""
    b = model_before.nbodies - 1 if body is None else body
    residual = np.asarray(TAU, dtype=float) - predict(Q, V, A)
    Y = batch_regressor(model_before, Q, V, A)[:, :, 10 * b:10 * b + 10].reshape(-1, 10)
    _require_rank(Y, f"payload from joint torques (body {model_before.body_names[b]})")
    sol, std, rel = _estimate(Y, residual.reshape(-1), 10)
    return _payload(sol, None, std, rel)


def is_physical_payload(pi, tol=1e-12):
    """Whether the payload parameters ``pi`` (10,) are those of a load: all zero (no payload), or a
    positive mass with a pseudo-inertia whose smallest eigenvalue is >= ``-tol`` times its largest
    |entry| (positive semi-definite: principal moments >= 0 satisfying the triangle inequalities)."""
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (10,) or not np.all(np.isfinite(pi)):
        return False
    if not pi.any():
        return True
    J = pseudo_inertia(pi)
    return bool(pi[0] > 0 and np.linalg.eigvalsh(J)[0] >= -tol * np.abs(J).max())


def physical_payload(pi, min_mass=0.0):
    """The physical payload (10,) nearest to the estimate ``pi`` (10,), to publish instead of it:

    * mass ``<= min_mass`` (kg; zero, negative, or too light to say anything about the load): zeros,
      "no payload" -- never a negative mass or inertia;
    * otherwise ``pi`` itself when :func:`is_physical_payload`, else the parameters of the nearest (Frobenius
      norm) positive semi-definite pseudo-inertia (:func:`~.physical_consistency.project_body` with
      ``eps = 0``: eigenvalue clipping, which keeps a consistent estimate unchanged).

    ValueError for a ``pi`` that is not 10 finite numbers."""
    pi = np.asarray(pi, dtype=float)
    if pi.shape != (10,) or not np.all(np.isfinite(pi)):
        raise ValueError(f"payload parameters must be 10 finite numbers, got {pi!r}")
    if not pi[0] > max(float(min_mass), 0.0):
        return np.zeros(10)
    if is_physical_payload(pi):
        return pi.copy()
    projected = project_body(pi, eps=0.0)
    return projected if projected[0] > 0 else np.zeros(10)


def point_mass_parameters(m, mc):
    """Inertial parameters (10,) of a point mass ``m`` with first moment ``mc`` (3,) = m c, about the frame
    origin (Pinocchio's order ``[m, mcx, mcy, mcz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]``): ``I = m (|c|^2 1 - c c^T)``."""
    if abs(m) < 1e-9:
        return np.zeros(10)
    c = np.asarray(mc, dtype=float) / m
    I = m * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([m, *(m * c), I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]])


def payload_as_point_mass(pi):
    """The payload (10,) a controller takes from an estimate ``pi`` (10,): its mass and centre of mass as a point
    mass (:func:`point_mass_parameters`). The rotational inertia about the centre of mass is what a few hundred
    milliseconds of joint torques determine worst; taken from such an estimate it made the Panda twin's wrist
    oscillate under the MPC (0.09 rad for half a second), while a load's own inertia is a small part of the
    wrist's (a 2 kg, 10 cm box: 0.003 kg m²). Zeros for a massless ``pi``."""
    pi = np.asarray(pi, dtype=float)
    return point_mass_parameters(pi[0], pi[1:4]) if pi[0] > 0.0 else np.zeros(10)


def body_parameter_change(base, beta_before, beta_after, body):
    """Change (10,) of body ``body``'s parameters that explains a change of the base parameters, assuming
    no other parameter changed: least squares on ``K[:, body block] dpi = beta_after - beta_before``."""
    Kb = base.K[:, 10 * body:10 * body + 10]
    return np.linalg.lstsq(Kb, np.asarray(beta_after) - np.asarray(beta_before), rcond=None)[0]


class PayloadChangeDetector:
    """CUSUM on the normalised innovation squared (module docstring).

    drift: allowance per sample (in units of the expected d²/m = 1); threshold: alarm level h.
    ``update(nis, m) -> bool`` (True on alarm, after which the sum restarts); ``reset()``.
    """

    def __init__(self, drift=0.5, threshold=25.0):
        self.drift, self.threshold = float(drift), float(threshold)
        self.statistic = 0.0

    def update(self, nis, m):
        self.statistic = max(0.0, self.statistic + nis / m - 1.0 - self.drift)
        if self.statistic > self.threshold:
            self.statistic = 0.0
            return True
        return False

    def reset(self):
        self.statistic = 0.0
