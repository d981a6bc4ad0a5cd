"""How fast any estimator can learn a robot from its joint torques: the Cramér–Rao bound on the model error a
controller feels, along a motion.

The joint torques ``τ_k = Y_k β + n_k`` (``Y_k`` (nv, r) the base regressor at sample ``k`` of the motion, ``n_k``
white, independent per joint, standard deviations ``σ`` (nv,)) carry the Fisher information

    F = Σ_k Y_kᵀ Σ⁻¹ Y_k,   Σ = diag(σ²),

about β, and any unbiased estimate ``β̂`` made from them has a covariance of at least ``F⁻¹`` (Cramér–Rao). A
controller that applies ``β̂`` where the robot needs ``β`` leaves the acceleration ``δa_k = M_k⁻¹ Y_k (β̂ - β)``
for its feedback to reject (the residual :mod:`robodyn_ros.control.parameter_gate` judges estimates by); its mean
square along the motion is then at least

    ε² = tr(Ḡ F⁻¹),   Ḡ = Σ_k (M_k⁻¹ Y_k)ᵀ (M_k⁻¹ Y_k) / (n nv)   (the mean over the motion's n samples).

For a periodic motion sampled at ``rate`` Hz for ``T`` s, ``F = rate T F̄`` (``F̄`` the information per sample,
averaged over one period), so ``ε(T) = ε₁ / √T`` with ``ε₁ = sqrt(tr(Ḡ F̄⁻¹) / rate)``: halving the model error
takes four times the motion, whatever the estimator. Directions of β that the motion hardly excites (``F̄``'s
eigenvalues below ``rcond`` times its largest) are left out of the trace: no estimator learns them from this
motion and the motion hardly feels them, and leaving terms out of a sum of positive terms keeps ``ε`` a lower
bound.

Computed torque's closed loop ``ë + K_D ė + K_P e = δa`` (plus the terms of the sensor noise) turns a ``δa`` that
varies slowly against the loop's bandwidth ``√k_P`` into a tracking error of about ``δa / k_P``, uncorrelated with
the error the exact model's loop (the oracle) makes from the noise alone, ``e_o``: ``e² ≈ e_o² + (ε / k_P)²``. To
track within ``factor`` times the oracle's RMS a model's error must therefore be at most ``sqrt(factor² - 1) k_P
e_o`` (:func:`model_error_for_oracle`), which no estimate from these torques reaches before ``T = (ε₁ /
that)²`` s of the motion (:meth:`LearningBound.time_to`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RCOND = 1e-10
"""Eigenvalues of the information per sample below this fraction of its largest: directions the motion does not
excite, left out of the bound (on the default motion of the Panda and a UR10, the bound changes by less than 1 %
from 1e-10 to 1e-14, and by 10-15 % at 1e-6, whose cut leaves out directions that the light wrists' small
inertias make count)."""


def fisher_information(Y, sigma):
    """``F = Σ_k Y_kᵀ diag(σ)⁻² Y_k`` (r, r): the Fisher information about β of the torques ``τ_k = Y_k β + n_k``
    measured at the samples ``Y`` (n, nv, r), with white noise of standard deviations ``sigma`` (nv,) or scalar."""
    Y = np.asarray(Y, dtype=float)
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (Y.shape[1],))
    Yw = Y / sigma[None, :, None]
    return np.einsum("kir,kis->rs", Yw, Yw)


def acceleration_regressor(Y, Minv):
    """``M_k⁻¹ Y_k`` (n, nv, r): what a parameter error ``δβ`` does to the acceleration at each sample (``Y`` (n, nv,
    r), ``Minv`` (n, nv, nv))."""
    return np.einsum("kij,kjr->kir", np.asarray(Minv, dtype=float), np.asarray(Y, dtype=float))


def model_error(Y, Minv, delta_beta):
    """RMS over the samples and joints of ``M_k⁻¹ Y_k δβ`` (rad/s² for revolute joints): the acceleration the
    parameter error ``delta_beta`` (r,) or (m, r) leaves for the feedback along the motion (float or (m,))."""
    MY = acceleration_regressor(Y, Minv)
    d = np.atleast_2d(np.asarray(delta_beta, dtype=float))
    out = np.sqrt(np.mean(np.einsum("kir,mr->mki", MY, d) ** 2, axis=(1, 2)))
    return float(out[0]) if np.ndim(delta_beta) == 1 else out


@dataclass(frozen=True)
class LearningBound:
    """The bound of the module docstring for one motion: ``epsilon_1s`` (ε₁, the model error's lower bound after
    one second of the motion, rad/s²), ``rate`` (Hz) and ``sigma`` (nv,) it assumes, ``directions`` (the
    directions of β the motion excites, of ``parameters``)."""

    epsilon_1s: float
    rate: float
    sigma: tuple
    directions: int
    parameters: int

    def model_error(self, seconds):
        """ε(T) = ε₁ / √T: the least RMS model error (rad/s²) of any unbiased estimate after ``seconds`` s of the
        motion (inf at 0)."""
        seconds = np.asarray(seconds, dtype=float)
        with np.errstate(divide="ignore"):
            out = self.epsilon_1s / np.sqrt(seconds)
        return float(out) if out.ndim == 0 else out

    def time_to(self, epsilon):
        """``(ε₁ / ε)²``: the seconds of the motion before any unbiased estimate can have a model error as small
        as ``epsilon`` (rad/s²; inf for ε <= 0)."""
        return float((self.epsilon_1s / epsilon) ** 2) if epsilon > 0 else float("inf")


def learning_bound(Y, Minv, sigma, rate, rcond=RCOND):
    """The :class:`LearningBound` of a periodic motion from its samples over one period, evenly spaced in time:
    ``Y`` (n, nv, r) the base regressor, ``Minv`` (n, nv, nv) the robot's inverse mass matrix there, ``sigma``
    (nv,) or scalar the joint torques' noise (N m), ``rate`` (Hz) the rate they are measured at."""
    Y = np.asarray(Y, dtype=float)
    n, nv, r = Y.shape
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (nv,))
    if not np.all(sigma > 0) or not rate > 0:
        raise ValueError(f"the noise's standard deviations and the rate must be positive, got {sigma} and {rate}")
    F_bar = fisher_information(Y, sigma) / n
    MY = acceleration_regressor(Y, Minv)
    G_bar = np.einsum("kir,kis->rs", MY, MY) / (n * nv)
    w, U = np.linalg.eigh(F_bar)
    keep = w > rcond * w.max() if w.max() > 0 else np.zeros(r, dtype=bool)
    Uk = U[:, keep]
    trace = float(np.sum(np.einsum("rj,rs,sj->j", Uk, G_bar, Uk) / w[keep]))
    return LearningBound(epsilon_1s=float(np.sqrt(max(trace, 0.0) / rate)), rate=float(rate),
                         sigma=tuple(float(s) for s in sigma), directions=int(keep.sum()), parameters=int(r))


def model_error_for_oracle(kp, oracle_rms, factor=2.0):
    """``sqrt(factor² - 1) k_P e_o``: the largest RMS model error (rad/s²) with which computed torque of gain
    ``kp`` (1/s²) tracks within ``factor`` times the oracle's RMS error ``oracle_rms`` (rad) (module docstring)."""
    return float(np.sqrt(factor ** 2 - 1.0) * kp * oracle_rms)
