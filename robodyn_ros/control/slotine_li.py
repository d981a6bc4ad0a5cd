"""Slotine-Li adaptive control (Slotine and Li 1987, "On the adaptive control of robot manipulators",
IJRR 6(3); composite variant: Slotine and Li 1989, "Composite adaptive control of robot manipulators",
Automatica 25(4)), with the regressor of Garofalo et al. eqs. 15-16.

With ``e = q - q_d``, ``ė = v - v_d`` and ``Λ ≻ 0``:

    v_r = v_d - Λ e,   a_r = a_d - Λ ė,   s = v - v_r = ė + Λ e
    Y(q, v, v_r, a_r) π = M(q) a_r + C(q, v) v_r + g(q)        (Christoffel C, Ṁ - 2C skew)
    τ = Y π̂ + D_a a_r + τ_f - K_D s                              (D_a armature, τ_f friction: known)
    π̂̇ = -Γ Yᵀ s                                                  (the gradient law)

with ``τ_f = f_v v + f_c sign(v_d) + f_o``: the Coulomb term on the reference velocity, as in
:mod:`.computed_torque` (the sign of a noisy measured velocity chatters at reversals).

For the Lyapunov function ``V = ½ sᵀ M s + ½ π̃ᵀ Γ⁻¹ π̃`` (``π̃ = π̂ - π``) this gives ``V̇ = -sᵀ K_D s``:
tracking errors converge whatever the initial estimate. Against drift under noise and unmodelled
dynamics the law takes a dead zone (no adaptation while ``‖s‖ <= δ``, Slotine and Li 1991 §9.3) and
σ-leakage towards a prior ``π_0`` (Ioannou and Kokotovic 1983):

    π̂̇ = -Γ [ w(‖s‖) Yᵀ s + σ (π̂ - π_0) - κ Y_fᵀ ε ],      w(x) = max(0, 1 - δ / x)

where the last term is the composite part (Slotine and Li 1989 eq. 14): the prediction error
``ε = τ_f - Y_f π̂`` of the recursive estimator, i.e. filtered measured torque minus the filtered classic
regressor times the estimate, passed in by the caller (the estimator owns the filter).

Parameters adapted: the full inertial vector (10 per body, Pinocchio's order), not the base parameters
of :mod:`robodyn_ros.identification.base_parameters` (which arrived after this was written): adapting
per body is what lets each body be kept physically consistent, which a base-parameter combination
cannot express, and the unidentifiable directions do not affect the Lyapunov argument. After each Euler
step of the law every body's block is projected onto the set of (length-scaled) pseudo-inertias
``D J D ⪰ ε 1`` by eigenvalue clipping (:mod:`physical_consistency`). That clipping is the orthogonal
projection in the Frobenius metric ``W`` of ``D J D``; the default Γ is block-diagonal with blocks
``γ W⁻¹``, so the projection is orthogonal in the Γ⁻¹ metric of the Lyapunov function too and never
increases it (the true parameters lie in the convex set). A boolean ``adapted`` mask restricts
adaptation to a subset (e.g. the last body's 10 parameters and the masses).
"""
from __future__ import annotations

import numpy as np

from .command_guard import CommandGuard, ControlStatus, effort_bounds
from ..kernels.compiled_functions import DynamicsFunctions
from ..identification.physical_consistency import project_parameters, pseudo_inertia_metric


def consistent_adaptation_gains(nbodies, gamma, length=0.1):
    """Block-diagonal ``Γ`` (10 nb, 10 nb) with blocks ``γ_k W⁻¹`` for the pseudo-inertia metric ``W``
    of :func:`physical_consistency.pseudo_inertia_metric`: the metric in which the consistency
    projection is orthogonal, so projecting never increases ``½ π̃ᵀ Γ⁻¹ π̃`` (``γ``: scalar or (nb,)).
    With ``ℓ = 0.1`` m the mass adapts with gain ``γ``, first moments ``γ ℓ²/2``, inertias ``~γ ℓ⁴``."""
    g = np.broadcast_to(np.asarray(gamma, dtype=float), (nbodies,))
    Winv = np.linalg.inv(pseudo_inertia_metric(length))
    G = np.zeros((10 * nbodies, 10 * nbodies))
    for k in range(nbodies):
        G[10 * k:10 * k + 10, 10 * k:10 * k + 10] = g[k] * Winv
    return G


class SlotineLiController:
    """Slotine-Li adaptive controller (module docstring).

    ``pi0`` (10 nb,): initial estimate (also the leakage prior); ``Lambda``, ``kd``: scalar or (nv,)
    gains Λ and K_D; ``gamma``: Γ as a scalar or (nb,) per-body gain of
    :func:`consistent_adaptation_gains` (length scale ``length``), or any (p, p) positive semi-definite
    matrix (the projection is then orthogonal only if Γ⁻¹ is block-wise proportional to ``W``);
    ``dead_zone``: δ on ‖s‖ (rad/s); ``sigma``: leakage σ; ``composite_gain``: κ; ``projection``: keep
    each body physically consistent; ``adapted``: (p,) bool mask of adapted parameters (all by default).
    """

    def __init__(self, model, pi0=None, *, Lambda=10.0, kd=50.0, gamma=1.0, length=0.1, dead_zone=0.0, sigma=0.0,
                 composite_gain=0.0, projection=True, projection_eps=1e-8, adapted=None,
                 friction_compensation=True, gravity_compensated_by_robot=False, limit_margin=0.0,
                 functions=None, compiled=False):
        nv = model.nv
        self.model = model
        self.Lambda = np.broadcast_to(np.asarray(Lambda, dtype=float), (nv,)).copy()
        self.kd = np.broadcast_to(np.asarray(kd, dtype=float), (nv,)).copy()
        self.pi_hat = model.inertial_parameters() if pi0 is None else np.array(pi0, dtype=float)
        self.pi_prior = self.pi_hat.copy()
        p = self.pi_hat.size
        if np.ndim(gamma) <= 1:
            self.Gamma = consistent_adaptation_gains(model.nbodies, gamma, length)
        else:
            self.Gamma = np.asarray(gamma, dtype=float).copy()
        if self.Gamma.shape != (p, p) or not np.all(np.isfinite(self.Gamma)):
            raise ValueError(f"gamma must be a scalar, an (nbodies,) vector or a ({p}, {p}) matrix")
        self.length = float(length)
        if adapted is not None:
            mask = np.asarray(adapted, dtype=bool)
            self.Gamma = self.Gamma * np.outer(mask, mask)
        self.dead_zone, self.sigma, self.composite_gain = float(dead_zone), float(sigma), float(composite_gain)
        self.projection, self.projection_eps = bool(projection), float(projection_eps)
        self.friction_compensation = bool(friction_compensation)
        self.gravity_compensated_by_robot = bool(gravity_compensated_by_robot)
        self.pi_robot = model.inertial_parameters()        # the gravity the robot adds (its own model)
        self.limit_margin = float(limit_margin)
        self.functions = functions or DynamicsFunctions(model, compiled=compiled)
        self.guard = CommandGuard(effort_bounds(model))
        self.s = np.zeros(nv)
        self.projected_bodies = []

    def control_law(self, q, v, q_d, v_d, a_d):
        """``(τ, s, Y)``: the torque (nv,) before clamping, the sliding variable ``s`` (nv,) and the
        Slotine-Li regressor (nv, p) at the current estimate (module docstring)."""
        e, de = q - q_d, v - v_d
        v_r, a_r = v_d - self.Lambda * e, a_d - self.Lambda * de
        s = v - v_r
        Y = self.functions.slotine_li(q, v, v_r, a_r)
        tau = Y @ self.pi_hat + self.model.armature * a_r - self.kd * s
        if self.friction_compensation:   # Coulomb on the reference velocity (module docstring)
            m = self.model
            tau = tau + m.viscous * v + m.coulomb * np.sign(v_d) + m.friction_offset
        if self.gravity_compensated_by_robot:    # the robot adds its own model's: the estimate's difference is sent
            tau = tau - self.functions.gravity(q, self.pi_robot)
        return tau, s, Y

    def adaptation_rate(self, s, Y, prediction_error=None, prediction_regressor=None):
        """``π̂̇`` (p,): gradient term with dead zone, σ-leakage and the composite term (module docstring).
        ``prediction_error`` ε (m,) and ``prediction_regressor`` Y_f (m, p) come together or not at all."""
        ns = float(np.linalg.norm(s))
        w = 0.0 if ns <= self.dead_zone else 1.0 - self.dead_zone / ns
        direction = w * (Y.T @ s) + self.sigma * (self.pi_hat - self.pi_prior)
        if prediction_error is not None and self.composite_gain > 0.0:
            Yf, eps = np.asarray(prediction_regressor), np.asarray(prediction_error)
            direction = direction - self.composite_gain * (Yf.T @ eps)
        return -self.Gamma @ direction

    def compute(self, q, v, q_d, v_d, a_d, dt, prediction_error=None, prediction_regressor=None):
        """Torque ``τ`` (nv,) and status for the state ``(q, v)`` and reference ``(q_d, v_d, a_d)``, then
        one explicit-Euler step ``π̂ += dt π̂̇`` of the adaptation (followed by the projection). ``dt``:
        the control period (s). On a fault the estimate is not changed."""
        status = ControlStatus()
        inputs = self.guard.checked_inputs(status, self.model, self.limit_margin, q, v, q_d, v_d, a_d)
        if inputs is None:
            return self.guard.hold(), status
        q, v, q_d, v_d, a_d = inputs
        if prediction_error is not None and not self.guard.check_finite(
                status, "nonfinite_prediction", prediction_error=prediction_error):
            prediction_error = None
            status.ok, status.fault = True, ""
        tau, s, Y = self.control_law(q, v, q_d, v_d, a_d)
        tau = self.guard.accept(tau, status)
        if status.ok:
            self.s = s
            pi_new = self.pi_hat + dt * self.adaptation_rate(s, Y, prediction_error, prediction_regressor)
            if self.projection:
                pi_new, self.projected_bodies = project_parameters(pi_new, self.projection_eps, self.length)
            if np.all(np.isfinite(pi_new)):
                self.pi_hat = pi_new
        return tau, status

    def lyapunov(self, q, v, q_d, v_d, pi_true, M_true):
        """``V = ½ sᵀ M s + ½ π̃ᵀ Γ⁻¹ π̃`` over the adapted parameters, for the true parameters ``pi_true``
        (p,) and true mass matrix ``M_true`` (nv, nv) (a simulation-side check)."""
        s = (v - v_d) + self.Lambda * (q - q_d)
        on = np.flatnonzero(np.any(self.Gamma != 0, axis=1))
        err = (self.pi_hat - pi_true)[on]
        return 0.5 * s @ M_true @ s + 0.5 * err @ np.linalg.solve(self.Gamma[np.ix_(on, on)], err)
