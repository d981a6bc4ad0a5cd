"""Which base-parameter estimate a controller may use: one that predicts the robot better than the model in
use, on samples it has never seen, in the units that move the tracking error.

An online estimate ``β`` (:class:`robodyn_ros.estimation.base_parameter_estimator.BaseParameterEstimator` on
``τ = Y_base β``) is offered to the gate at the publishing rate; the gate keeps the filtered samples the
controller ran on (``window`` of them: ``Y_k`` (nv, r), ``τ_k`` (nv,) and the configuration ``q_k``), each
weighed by ``W_k`` (``weighting(q_k)``, by default the nominal model's ``M(q_k)⁻¹``). A controller that
applies the model ``β`` to a robot that needs ``τ_k`` leaves the acceleration ``M⁻¹ (τ_k - Y_k β)`` for its
feedback to reject (the closed loop of computed torque is ``ë + K_D ė + K_P e = M̂⁻¹ (τ - τ̂)``), so the gate
compares models by the RMS of that acceleration residual,

    ρ_S(β) = sqrt( Σ_(k ∈ S) ‖W_k (τ_k - Y_k β)‖² / (nv |S|) ),

over two sets S: the **fresh** samples, those observed after the estimate was offered (which it cannot have
been fitted to), and the whole window. An offered estimate waits (``unconverged``) until ``fresh`` samples
have arrived after it, then it is

* **implausible** when it is not finite, a friction coefficient that stands alone in β (viscous or Coulomb
  of a joint) is negative beyond ``friction_tolerance`` plus three of its standard deviations, or the
  ``plausibility`` check (e.g. :class:`robodyn_ros.control.base_parameter_control.InertiaPlausibility`: a
  positive definite mass matrix not far lighter than the nominal one) fails at ``configurations`` of the
  window's configurations: kept out;
* **diverging** when it predicts the fresh samples worse than the nominal model, ``ρ_fresh(β) > (1 +
  margin) ρ_fresh(β_nom)``, after an estimate had been accepted: kept out, and :attr:`GateDecision.restore`
  is the last good estimate, for the estimator to continue from (roll-back); before any was accepted the
  estimator is still learning and such an estimate is only ``worse``;
* **worse** when it is not better than the applied one by ``improvement`` on the fresh samples, ``ρ_fresh(β)
  > (1 - improvement) ρ_fresh(β_applied)``; while the applied parameters are the nominal ones, by
  ``improvement`` above the noise floor ``ρ_0`` and significantly: it must remove ``1 - (1 -
  improvement)²`` of the nominal model's share of ``ρ²`` above the floor, i.e. not ``ρ_fresh(β)² >
  ρ_fresh(β_nom)² (1 - (1 - (1 - improvement)²) (1 - ρ_0² / ρ(β_nom)²))`` (the share measured on the whole
  window; without noise the test above), with a per-sample gain (:meth:`ParameterGate.paired_gain`)
  :data:`SIGNIFICANCE` standard errors above zero; unless, refining an applied estimate of the same source, it
  is better informed (below); or when it is not as good as the applied one on the whole window (``(1 +
  margin)``):
  kept out (a candidate only a little better in prediction can still be worse in a direction the motion
  hardly excites, which a model-based controller's feedback acts in: the MPC on the Panda twin tracked
  1.8 times worse after accepting an early estimate that predicted 6 % better);
* otherwise **accepted**: it becomes the applied one and the last good one.

**Refinement on information.** Near the noise floor a better estimate cannot predict 10 % better: on a perturbed
Panda the estimator's own model error fell from 0.46 to 0.10 rad/s² between 4 s and 29 s (near the Cramér–Rao
bound of its torques, :mod:`robodyn_ros.estimation.cramer_rao_bound`) while the applied one stayed at 0.38 after
the first two acceptances. Estimates that come with their covariance ``P`` carry what the residual cannot show:
a refinement of an applied estimate of the same source is also accepted when its model variance on the window,
``tr(Ḡ P)`` (:meth:`ParameterGate.model_variance`, the mean square of ``W_k Y_k δβ`` an estimate of covariance
``P`` is expected to leave), is at most :data:`REFINEMENT_VARIANCE` of the applied estimate's (the information
has doubled since), it predicts the fresh samples no worse (``(1 + margin)``) and the whole window as well; the
estimator's recursive least squares never loses information (no forgetting), so such an estimate is expected to
be nearer the robot in every direction, not only along the window's motion. Computed torque and Slotine-Li take
them; the MPC does not (``refinement_variance`` None: the mpc node's and the library loop's gate): its plan predicts
off the window's motion too, and with the rule its tracking ratio on the Panda, UR5 and iiwa's ``perturbed:3..5``
fell from medians of 51.3 / 33.2 / 53.6 to 28.1 / 30.0 / 30.5 (never worse all the same).

The noise floor ``ρ_0²`` is what no parameter set can predict: the residual of the least-squares fit to the
window, ``min_β Σ_k ‖W_k (τ_k - Y_k β)‖² / (nv N - r)`` (the unbiased estimate of a linear regression's noise
variance; 0 while the window holds fewer than ``2 r`` rows). Measurement noise adds the same ``ρ_0²`` to every
model's ``ρ²`` (in expectation), so a relative test on ``ρ`` itself asks a better model for more the noisier
the robot: on a perturbed UR10 (wrist torque noise up to 0.5 N m on about 5e-3 kg m², 90-100 rad/s² of
``ρ``) an estimate that halves the model's error lowers ``ρ`` by a few percent, and the gate kept the
nominal model for 3 s after the warm-up while it tracked 0.09 rad RMS. Whether an estimate models the robot
better than the URDF at all is judged above the floor; between two estimates the stricter test on ``ρ``
stays, since a refinement a little better in prediction can be worse in a direction the motion hardly
excites (judged above the floor, the MPC on a perturbed Panda took such refinements and tracked 1.5-2
times worse than with the first estimate).

No estimate is judged before ``warmup`` samples have been observed (by default a window's worth): an estimate
fitted to the first second of a motion can predict the next half second well and the rest of the motion worse
(a perturbed Panda under computed torque tracked 1.23 times worse than the nominal model from 1 s to 2 s
after accepting an estimate fitted to 1.15 s of data; the UR5 under the MPC 1.53 times); after a full window
of motion the estimate has seen what it is judged on.

So an estimate is applied only when it has predicted data it never saw better than the model in use and than
the nominal model: until then the controller keeps the nominal model, and adaptation never makes the
prediction it runs on worse. The applied estimate itself is re-checked at every judgement: when it predicts
the fresh samples worse than the nominal model (the robot changed, or the motion went where the estimate is
poor) the gate falls back to the nominal parameters (``fallback_nominal``); a controller that cannot use the
applied estimate hands it back (:meth:`ParameterGate.revoke`, ``revoked``). Each source of candidates
(``source``: the estimate, a payload candidate, ...) has its own pending estimate. The controller's limits and
output guard (:mod:`robodyn_ros.control.command_guard`) stay in force whatever the gate passes.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

SIGNIFICANCE = 2.0
"""Standard errors of :meth:`ParameterGate.paired_gain` by which an estimate's gain over the nominal
parameters must exceed zero (while they are applied)."""
REFINEMENT_VARIANCE = 0.5
"""A refinement of an applied estimate of the same source is also accepted when the estimator's covariance says
its model error on the window has at most this share of the applied one's variance (and it predicts the fresh
samples no worse): the information has doubled since (module docstring)."""
STATUSES = ("accepted", "unconverged", "implausible", "diverging", "worse", "fallback_nominal", "revoked", "reset")


@dataclass(frozen=True)
class GateDecision:
    """``status``: one of :data:`STATUSES`; ``beta`` (r,): the parameters to apply now; ``restore`` (r,) or
    None: the last good estimate the estimator should continue from (only on ``diverging``); residuals (RMS
    acceleration residual over the fresh samples, rad/s² with the default weighting; NaN before a judgement)
    of the judged, applied and nominal parameters."""

    status: str
    beta: np.ndarray
    restore: np.ndarray | None
    residual_offered: float
    residual_applied: float
    residual_nominal: float


class ParameterGate:
    """Decides which base-parameter estimate is applied (module docstring).

    ``beta_nominal`` (r,): the controllers' model's base parameters (applied at the start, the fallback);
    ``window``: recent samples kept; ``fresh``: samples an estimate must have predicted before it is judged;
    ``margin``: relative residual margin; ``improvement``: the relative gain on the fresh samples an
    estimate needs over the applied one (above the noise floor over the nominal one); ``warmup``: samples
    observed (since the gate was made, whatever :meth:`clear_window` forgets) before any estimate is judged
    (None: ``window``); ``refinement_variance``: the share of the applied estimate's model variance below which a
    refinement is taken on information (module docstring; None: never, the 10 % test alone);
    ``weighting``: ``q -> W (nv, nv)`` (None: identity, torque residuals); ``friction_indices``: indices into
    β of stand-alone viscous and Coulomb coefficients (:func:`friction_indices`); ``plausibility``: ``(β,
    [q, ...]) -> bool``."""

    def __init__(self, beta_nominal, window=400, fresh=50, margin=0.02, improvement=0.1, weighting=None,
                 friction_indices=(),
                 friction_tolerance=1e-3, plausibility=None, configurations=3, warmup=None,
                 refinement_variance=REFINEMENT_VARIANCE):
        self.beta_nominal = np.array(beta_nominal, dtype=float)
        self.window, self.fresh = int(window), int(fresh)
        self.warmup = self.window if warmup is None else int(warmup)
        self.margin, self.improvement = float(margin), float(improvement)
        self.weighting = weighting
        self.friction_indices = np.asarray(friction_indices, dtype=int)
        self.friction_tolerance = float(friction_tolerance)
        self.plausibility = plausibility
        self.configurations = int(configurations)
        self.refinement_variance = None if refinement_variance is None else float(refinement_variance)
        self._Y, self._tau, self._q = deque(maxlen=self.window), deque(maxlen=self.window), deque(maxlen=self.window)
        self.observed = 0                 # samples observed so far (the fresh samples' clock)
        self._pending = {}                # source -> (β, std or None, observed when offered, tag, P or None, source)
        self.applied = self.beta_nominal.copy()
        self.applied_tag = None           # what the caller attached to the applied estimate (None: nominal)
        self._applied_covariance = None   # (source, P (r, r)) of the applied estimate, when it came with one
        self._previous = (self.applied.copy(), None)   # applied before the last acceptance
        self.last_good = self.beta_nominal.copy()
        self.counts = {s: 0 for s in STATUSES}
        self.last_status = "unconverged"
        self.last_reason = None           # the last decision and why, in words (the controllers' diagnostics)

    def observe(self, Y, tau, q=None):
        """One filtered sample the controller ran on: ``Y`` (nv, r), ``τ`` (nv,) and its configuration ``q``
        (nq,) (for the weighting and the ``plausibility`` check)."""
        Y, tau = np.asarray(Y, dtype=float), np.asarray(tau, dtype=float)
        if self.weighting is not None and q is not None:
            W = self.weighting(q)
            Y, tau = W @ Y, W @ tau
        self._Y.append(Y.copy())
        self._tau.append(tau.copy())
        self._q.append(None if q is None else np.array(q, dtype=float))
        self.observed += 1

    def clear_window(self, nominal=False, fallback=None):
        """Forget the recent samples and the pending estimates (the robot changed, e.g. a payload was detected:
        older samples would judge estimates by a robot that is gone); ``nominal``: also apply the nominal
        parameters again until an estimate of the changed robot is accepted (``fallback_nominal``), or
        ``fallback`` ``(β, tag)`` when given."""
        self._Y.clear()
        self._tau.clear()
        self._q.clear()
        self._pending.clear()
        if nominal and not np.array_equal(self.applied, self.beta_nominal):
            self._previous = (self.applied.copy(), self.applied_tag)
            if fallback is None:
                self.applied, self.applied_tag = self.beta_nominal.copy(), None
            else:
                self.applied, self.applied_tag = np.array(fallback[0], dtype=float), fallback[1]
            self._applied_covariance = None
            self.counts["fallback_nominal"] += 1

    def reset(self):
        """Back to the nominal parameters at once (the robot changed, e.g. a tool change): applied, last good and
        previous sets nominal, the window and the pending estimates forgotten (the decision counts kept)."""
        self.clear_window()
        self.applied, self.applied_tag = self.beta_nominal.copy(), None
        self._applied_covariance = None
        self._previous = (self.beta_nominal.copy(), None)
        self.last_good = self.beta_nominal.copy()
        self.counts["reset"] += 1

    def residual(self, beta, last=None):
        """ρ(β): RMS weighted residual over the window (``last``: over its last ``last`` samples); NaN
        without samples."""
        Y, tau = self._samples(last)
        return float(np.sqrt(np.mean((tau - Y @ beta) ** 2))) if len(Y) else float("nan")

    def _samples(self, last=None):
        """The window's weighted samples ``(Y (n, nv, r), τ (n, nv))``, its last ``last`` ones if given."""
        n = len(self._Y) if last is None else min(int(last), len(self._Y))
        return np.asarray(list(self._Y)[len(self._Y) - n:]), np.asarray(list(self._tau)[len(self._tau) - n:])

    def paired_gain(self, beta, beta_ref, last):
        """``(mean, standard error)`` over the last ``last`` samples of the per-sample gain ``d_k = ‖W_k (τ_k -
        Y_k β_ref)‖² - ‖W_k (τ_k - Y_k β)‖²``: both models on the same samples, so the noise they share cancels
        but for its product with the models' difference.

        Successive samples are not independent (filtered torques observed faster than the filter's band), so
        the standard error is that of a first-order autoregressive series: ``s / sqrt(n)`` times ``sqrt((1 + φ)
        / (1 - φ))``, with ``φ`` the lag-1 autocorrelation of the noise, measured on the residuals ``W_k (τ_k -
        Y_k β)`` of the estimate (0 when negative, at most 0.9; not on ``d`` itself, whose slow variation with
        the motion is the models' difference, not noise). With ``s / sqrt(n)`` alone, the UR10 simulated as its
        own URDF (nothing to learn, the nominal model at the noise floor) had an estimate accepted at 2.45
        standard errors that tracked 5-39 times worse than the nominal model for the next second."""
        Y, tau = self._samples(last)
        if len(Y) < 3:
            return float("nan"), float("nan")
        residual = tau - Y @ beta
        d = np.sum((tau - Y @ beta_ref) ** 2, axis=1) - np.sum(residual ** 2, axis=1)
        c = residual - residual.mean(axis=0)
        energy = float(np.sum(c * c))
        phi = float(np.clip(np.sum(c[1:] * c[:-1]) / energy, 0.0, 0.9)) if energy > 0 else 0.0
        inflation = np.sqrt((1.0 + phi) / (1.0 - phi))
        return float(np.mean(d)), float(np.std(d, ddof=1) / np.sqrt(len(d)) * inflation)

    def noise_floor(self):
        """``ρ_0²`` (module docstring): the window's least-squares residual per row over its degrees of freedom,
        from the normal equations ``Σ Y_kᵀ Y_k`` (r, r); 0 while the window has fewer than ``2 r`` rows."""
        Y, tau = self._samples()
        r = self.beta_nominal.size
        rows = tau.size
        if rows < 2 * r:
            return 0.0
        Y, tau = Y.reshape(rows, r), tau.reshape(rows)
        beta = np.linalg.lstsq(Y.T @ Y, Y.T @ tau, rcond=None)[0]
        return max(float(np.sum((tau - Y @ beta) ** 2)) / (rows - r), 0.0)

    def _decide(self, status, restore=None, rho=(float("nan"),) * 3, why=""):
        self.counts[status] += 1
        self.last_status = status
        self.last_reason = f"{status}: {why}" if why else status
        return GateDecision(status, self.applied.copy(), restore, *rho)

    def _implausible(self, beta, std):
        """Why ``beta`` is implausible (module docstring), or None."""
        f = self.friction_indices
        if beta.shape != self.beta_nominal.shape or not np.all(np.isfinite(beta)):
            return "not finite or of the wrong size"
        if len(f) and np.any(beta[f] < -self.friction_tolerance - 3.0 * (0.0 if std is None else std[f])):
            return "a friction coefficient is negative beyond 3 standard deviations"
        if self.plausibility is not None:
            qs = [q for q in self._q if q is not None]
            if qs:
                picks = np.unique(np.linspace(0, len(qs) - 1, self.configurations).astype(int))
                if not self.plausibility(beta, [qs[i] for i in picks]):
                    return ("its mass matrix is not positive definite, or far lighter than the nominal one, at recent "
                            "configurations")
        return None

    def offer(self, beta, P=None, source="estimate", tag=None, fresh=None, warmup=None):
        """Offer the estimate ``beta`` (r,) (covariance ``P``: (r, r), (r,) diagonal or None) from ``source``,
        with ``tag`` (anything the caller needs back with it, e.g. the full parameters it stands for: kept
        as :attr:`applied_tag` when accepted); returns the :class:`GateDecision` (the pending estimate of that
        source judged, if it has seen ``fresh`` samples (default: the gate's) and the gate ``warmup`` (default:
        the gate's), and ``beta`` pending in its place)."""
        fresh = self.fresh if fresh is None else int(fresh)
        warmup = self.warmup if warmup is None else int(warmup)
        beta = np.array(beta, dtype=float)
        std = None if P is None else np.sqrt(np.clip(np.diag(P) if np.ndim(P) == 2 else np.asarray(P), 0.0, None))
        covariance = np.array(P, dtype=float) if P is not None and np.ndim(P) == 2 else None
        pending = self._pending.get(source)
        if pending is None or self.observed - pending[2] < fresh or len(self._Y) < fresh:
            if pending is None:
                self._pending[source] = (beta, std, self.observed, tag, covariance, source)
            seen = 0 if pending is None else min(self.observed - pending[2], len(self._Y))
            return self._decide("unconverged", why=f"the {source} offered last has predicted {seen} of the {fresh} "
                                                    "new samples it is judged on")
        if self.observed < warmup:
            self._pending[source] = (beta, std, self.observed, tag, covariance, source)
            return self._decide("unconverged", why=f"{self.observed} of the {warmup} samples observed before a "
                                                    "first estimate is judged")
        self._pending[source] = (beta, std, self.observed, tag, covariance, source)
        return self._judge(*pending)

    def _judge(self, beta, std, offered_at, tag, covariance, source):
        fresh = min(self.observed - offered_at, len(self._Y))
        rho_n, rho_a = self.residual(self.beta_nominal, fresh), self.residual(self.applied, fresh)
        if not np.array_equal(self.applied, self.beta_nominal) and rho_a > (1.0 + self.margin) * rho_n:
            self.applied, self.applied_tag = self.beta_nominal.copy(), None
            self._applied_covariance = None
            self.last_good = self.beta_nominal.copy()
            self.counts["fallback_nominal"] += 1
            rho_a = rho_n
        why = self._implausible(beta, std)
        if why is not None:
            return self._decide("implausible", rho=(float("nan"), rho_a, rho_n), why=why)
        rho = self.residual(beta, fresh)
        rhos = (rho, rho_a, rho_n)
        if not np.isfinite(rho):
            return self._decide("implausible", rho=rhos, why="its residual is not finite")
        versus = f"residual {rho:.3g} on {fresh} new samples against {rho_a:.3g} applied, {rho_n:.3g} nominal"
        if rho > (1.0 + self.margin) * rho_n:
            if np.array_equal(self.last_good, self.beta_nominal):    # still learning: nothing to roll back to
                return self._decide("worse", rho=rhos, why=f"worse than the nominal model ({versus})")
            return self._decide("diverging", restore=self.last_good.copy(), rho=rhos,
                                why=f"worse than the nominal model ({versus})")
        whole = self.residual(beta), self.residual(self.applied), self.residual(self.beta_nominal)
        if np.array_equal(self.applied, self.beta_nominal):     # better than the URDF at all: above the floor
            floor = self.noise_floor()
            excess = max(1.0 - floor / whole[1] ** 2, 0.0) if whole[1] > 0 else 1.0   # of ρ(β_a)² (window)
            needed = rho_a * np.sqrt(1.0 - (1.0 - (1.0 - self.improvement) ** 2) * excess)
            if rho > needed:
                return self._decide("worse", rho=rhos, why=f"not better than the nominal parameters above the "
                                                            f"noise floor {np.sqrt(floor):.3g} ({versus})")
            gain, error = self.paired_gain(beta, self.applied, fresh)
            if not gain > SIGNIFICANCE * error:
                return self._decide("worse", rho=rhos, why=f"its gain over the nominal parameters is within "
                                                            f"{SIGNIFICANCE:g} standard errors ({versus})")
        elif rho > (1.0 - self.improvement) * rho_a and not self._better_informed(covariance, source, rho, rho_a):
            return self._decide("worse", rho=rhos, why=f"not better than the applied parameters ({versus})")
        if whole[0] > (1.0 + self.margin) * min(whole[1], whole[2]):
            return self._decide("worse", rho=rhos, why=f"worse over the whole window ({whole[0]:.3g} against "
                                                        f"{min(whole[1], whole[2]):.3g})")
        self._previous = (self.applied.copy(), self.applied_tag)
        self.applied, self.applied_tag = beta.copy(), tag
        self._applied_covariance = None if covariance is None else (source, covariance)
        self.last_good = beta.copy()
        return self._decide("accepted", rho=rhos, why=versus)

    def model_variance(self, P):
        """``tr(Ḡ P)``, ``Ḡ = Σ_k (W_k Y_k)ᵀ (W_k Y_k) / (n nv)`` over the window: the mean square of the
        (weighted) model error along the window's samples that an estimate of covariance ``P`` (r, r) is expected
        to have (``ε²`` of :mod:`robodyn_ros.estimation.cramer_rao_bound` on the window); NaN without samples."""
        Y, _ = self._samples()
        if not len(Y):
            return float("nan")
        G = np.einsum("kir,kis->rs", Y, Y) / (Y.shape[0] * Y.shape[1])
        return float(np.sum(G * P))

    def _better_informed(self, covariance, source, rho, rho_a):
        """Whether a refinement of the applied estimate is accepted on information (module docstring): the same
        source, both with a covariance, its model variance on the window at most ``refinement_variance`` of the
        applied one's, and its residual on the fresh samples not above the applied one's by ``margin``."""
        if (self.refinement_variance is None or covariance is None or self._applied_covariance is None
                or self._applied_covariance[0] != source):
            return False
        if rho > (1.0 + self.margin) * rho_a:
            return False
        applied = self.model_variance(self._applied_covariance[1])
        return bool(self.model_variance(covariance) <= self.refinement_variance * applied)

    def revoke(self):
        """The controller could not use the applied estimate (e.g. an MPC unsound with it): back to the one
        applied before it (``revoked``)."""
        self.applied, self.applied_tag = self._previous[0].copy(), self._previous[1]
        self._applied_covariance = None
        self.last_good = self.applied.copy()
        self._previous = (self.beta_nominal.copy(), None)
        self.counts["revoked"] += 1


def mass_matrix_weighting(model):
    """``q -> M(q)⁻¹`` (nv, nv) of ``model`` (the compiled CRBA when compiled), the gate's default weighting:
    torque residuals become the acceleration residuals the controller's feedback must reject."""
    from ..kernels.numeric import crba

    def weighting(q):
        return np.linalg.inv(crba(model, q))

    return weighting


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
