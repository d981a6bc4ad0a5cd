"""Which base-parameter estimate a controller may use: converged, plausible, and not diverging.

An online estimate (:class:`robodyn_ros.estimation.recursive.RecursiveLeastSquares` on ``τ = Y_base β``) is
offered to the gate at the publishing rate; the gate keeps the filtered samples the estimator used most
recently (``window`` of them: ``Y_k`` (nv, r), ``τ_k`` (nv,)) and judges an offered ``β`` by what it is for:
predicting those torques. With the RMS prediction residual over the window

    ρ(β) = sqrt( Σ_k ‖W (τ_k - Y_k β)‖² / (nv K) ),    W = diag(1 / σ_j)

an estimate is

* **unconverged** while the standard deviation of the torques it predicts over the window,
  ``sqrt(mean diag(W Y_k P Y_kᵀ W))`` from the estimator's covariance ``P`` (or its diagonal), exceeds
  ``torque_std_limit`` (in units of σ_j): kept out, the previous one stays (and never rolled back: an
  estimate still converging is not diverging);
* **implausible** when it is not finite or a friction coefficient that stands alone in β (viscous or
  Coulomb of a joint) is negative beyond ``friction_tolerance`` plus three of its standard deviations
  (friction dissipates; a coefficient that is truly zero is estimated around zero), or when the
  ``plausibility`` check (e.g. :class:`robodyn_ros.control.base_parameter_control.InertiaPlausibility`: a
  positive definite mass matrix not far lighter than the nominal one) fails at ``configurations`` of the
  window's configurations: kept out;
* **diverging** when ``ρ(β) > (1 + margin) ρ(β_nominal)``: worse on recent data than the model the
  controller started with. Kept out, and :attr:`GateDecision.restore` is the last good estimate, for the
  estimator to continue from (roll-back);
* **worse** than the one applied, ``ρ(β) > (1 + margin) ρ(β_applied)``: kept out (no roll-back; e.g. right
  after a payload change, while the window still holds samples from before it);
* otherwise **accepted**: it becomes the applied one and the last good one.

The applied estimate itself is re-checked at every offer: if it has become diverging (its residual grew
beyond the nominal model's) the gate falls back to the nominal parameters. The controller's limits and
output guard (:mod:`robodyn_ros.control.command_guard`) stay in force whatever the gate passes.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GateDecision:
    """``status``: ``accepted``, ``unconverged``, ``implausible``, ``diverging``, ``worse`` or
    ``fallback_nominal``; ``beta`` (r,): the parameters to apply now; ``restore`` (r,) or None: the last good
    estimate the estimator should continue from (only on ``diverging``); residuals (N m RMS over the
    window) of the offered, applied and nominal parameters (NaN without samples)."""

    status: str
    beta: np.ndarray
    restore: np.ndarray | None
    residual_offered: float
    residual_applied: float
    residual_nominal: float


class ParameterGate:
    """Decides which base-parameter estimate is applied (module docstring).

    ``beta_nominal`` (r,): the controllers' model's base parameters (applied at the start, the fallback);
    ``window``: number of recent samples kept; ``margin``: relative residual margin; ``torque_std``: σ_j,
    scalar or (nv,) (N m); ``torque_std_limit``: convergence bound (in units of σ_j); ``friction_indices``: indices into β of stand-alone viscous and Coulomb
    coefficients (:func:`friction_indices`); ``min_samples``: samples needed before any estimate is judged."""

    def __init__(self, beta_nominal, window=200, margin=0.05, torque_std_limit=0.1, friction_indices=(),
                 friction_tolerance=1e-3, min_samples=100, torque_std=1.0, plausibility=None, configurations=3):
        self.beta_nominal = np.array(beta_nominal, dtype=float)
        self.plausibility = plausibility
        self._q = deque(maxlen=int(window))
        self.configurations = int(configurations)
        self.weights = 1.0 / np.asarray(torque_std, dtype=float)
        self.margin, self.torque_std_limit = float(margin), float(torque_std_limit)
        self.friction_indices = np.asarray(friction_indices, dtype=int)
        self.friction_tolerance = float(friction_tolerance)
        self.min_samples = int(min_samples)
        self._Y, self._tau = deque(maxlen=int(window)), deque(maxlen=int(window))
        self.applied = self.beta_nominal.copy()
        self.last_good = self.beta_nominal.copy()
        self.counts = {s: 0 for s in ("accepted", "unconverged", "implausible", "diverging", "worse",
                                      "fallback_nominal")}
        self.last_reason = None   # the last decision and why, in words (the controllers' diagnostics)

    def observe(self, Y, tau, q=None):
        """One filtered sample the estimator used: ``Y`` (nv, r), ``τ`` (nv,), and its configuration ``q``
        (nq,) for the ``plausibility`` check."""
        if q is not None:
            self._q.append(np.array(q, dtype=float))
        w = np.broadcast_to(self.weights, (len(tau),))
        self._Y.append(np.array(Y, dtype=float) * w[:, None])
        self._tau.append(np.array(tau, dtype=float) * w)

    def clear_window(self, min_samples=None):
        """Forget the recent samples (the robot changed, e.g. a payload was detected: older samples would
        judge estimates by a robot that is gone); ``min_samples``: samples needed from now on (a change
        seen by a converged estimator is judged sooner than the first convergence)."""
        if min_samples is not None:
            self.min_samples = int(min_samples)
        self._Y.clear()
        self._tau.clear()
        self._q.clear()

    def residual(self, beta):
        """ρ(β): RMS torque prediction residual over the window, each joint's in units of its ``torque_std``
        (dimensionless); NaN without samples."""
        if not self._Y:
            return float("nan")
        Y, tau = np.asarray(self._Y), np.asarray(self._tau)
        return float(np.sqrt(np.mean((tau - Y @ beta) ** 2)))

    def predicted_torque_std(self, P):
        """``sqrt(mean diag(Y_k P Y_kᵀ))`` over the window (rows in units of ``torque_std``) for a covariance
        ``P`` (r, r) or its diagonal (r,)."""
        Y = np.asarray(self._Y)
        P = np.asarray(P, dtype=float)
        var = np.einsum("kij,j,kij->", Y, P, Y) if P.ndim == 1 else np.einsum("kij,jl,kil->", Y, P, Y)
        return float(np.sqrt(max(var, 0.0) / (Y.shape[0] * Y.shape[1])))

    def _decide(self, status, restore, rho, rho_applied, rho_nominal, why):
        self.counts[status] += 1
        self.last_reason = f"{status}: {why}"
        return GateDecision(status, self.applied.copy(), restore, rho, rho_applied, rho_nominal)

    def offer(self, beta, P=None):
        """Judge the estimate ``beta`` (r,) with covariance ``P`` ((r, r), (r,) diagonal, or None: taken as
        converged); returns a :class:`GateDecision`."""
        beta = np.asarray(beta, dtype=float)
        rho_applied, rho_nominal = self.residual(self.applied), self.residual(self.beta_nominal)
        if len(self._Y) < self.min_samples:
            return self._decide("unconverged", None, float("nan"), rho_applied, rho_nominal,
                                f"{len(self._Y)} of the {self.min_samples} samples needed in the window")
        if rho_applied > (1.0 + self.margin) * rho_nominal and not np.array_equal(self.applied, self.beta_nominal):
            self.applied = self.beta_nominal.copy()
            self.last_good = self.beta_nominal.copy()
            self.counts["fallback_nominal"] += 1
            rho_applied = rho_nominal
        std = np.zeros_like(beta) if P is None else np.sqrt(np.clip(np.diag(P) if np.ndim(P) == 2 else P, 0.0, None))
        f = self.friction_indices
        if beta.shape != self.beta_nominal.shape or not np.all(np.isfinite(beta)):
            return self._decide("implausible", None, float("nan"), rho_applied, rho_nominal,
                                "not finite or of the wrong size")
        if np.any(beta[f] < -self.friction_tolerance - 3.0 * std[f]):
            return self._decide("implausible", None, float("nan"), rho_applied, rho_nominal,
                                "a friction coefficient is negative beyond 3 standard deviations")
        rho = self.residual(beta)
        if not np.isfinite(rho):
            return self._decide("implausible", None, rho, rho_applied, rho_nominal, "its torque residual is not finite")
        if self.plausibility is not None and self._q:
            picks = np.unique(np.linspace(0, len(self._q) - 1, self.configurations).astype(int))
            if not self.plausibility(beta, [self._q[i] for i in picks]):
                return self._decide("implausible", None, rho, rho_applied, rho_nominal,
                                    "its mass matrix is not positive definite, or far lighter than the nominal one, "
                                    "at recent configurations")
        if P is not None:
            spread = self.predicted_torque_std(P)
            if spread > self.torque_std_limit:
                return self._decide("unconverged", None, rho, rho_applied, rho_nominal,
                                    f"the estimate's covariance predicts the recent torques within {spread:.3g} sigma, "
                                    f"not yet {self.torque_std_limit:g}")
        if rho > (1.0 + self.margin) * rho_nominal:
            return self._decide("diverging", self.last_good.copy(), rho, rho_applied, rho_nominal,
                                f"it predicts the recent torques worse than the nominal model (residual {rho:.3g} "
                                f"against {rho_nominal:.3g} sigma)")
        if rho > (1.0 + self.margin) * rho_applied:
            return self._decide("worse", None, rho, rho_applied, rho_nominal,
                                f"it predicts the recent torques worse than the applied estimate (residual {rho:.3g} "
                                f"against {rho_applied:.3g} sigma)")
        self.applied = beta.copy()
        self.last_good = beta.copy()
        return self._decide("accepted", None, rho, rho, rho_nominal, f"residual {rho:.3g} sigma")


def friction_indices(base):
    """Indices into β (r,) of the viscous and Coulomb coefficients that are base parameters by themselves
    (their column independent and not combined with another): the ones whose sign is physical."""
    out = []
    for r, i in enumerate(base.independent):
        name = base.full_names[i]
        if name.startswith(("viscous_", "coulomb_")) and not np.any(base.K_d[r] != 0.0):
            out.append(r)
    return np.array(out, dtype=int)


def friction_from_base(base, beta):
    """``{"viscous", "coulomb", "offset": (nv,)}`` read from β where the coefficient is a base parameter by
    itself (NaN for a joint where it is combined with others or not identifiable)."""
    nv = sum(1 for n in base.full_names if n.startswith("viscous_"))
    out = {k: np.full(nv, np.nan) for k in ("viscous", "coulomb", "offset")}
    for r, i in enumerate(base.independent):
        name = base.full_names[i]
        kind = name.split("_", 1)[0]
        if kind in out and not np.any(base.K_d[r] != 0.0):
            n_rigid = len(base.full_names) - 4 * nv
            out[kind][(i - n_rigid) // 4] = beta[r]
    return out
