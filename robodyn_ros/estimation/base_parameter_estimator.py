"""Online base-parameter estimation that configures itself: recursive weighted least squares on
``τ = Y_base(q, q̇, q̈) β`` (Gautier & Khalil base parameters, friction and armature included) in information
form, with the joint-torque noise learnt from the data and a payload-change detector that holds on any arm.

Measurement model per filtered sample k (nv rows): ``τ_k = Y_k β + e_k``, ``e_k ~ N(0, diag(σ²))``.
The estimate is the weighted least-squares solution with a Gaussian prior ``β ~ N(β_0, P_0)`` (the nominal
model, wide), kept as information (Ljung & Söderström 1983, the information form of recursive least squares):

    A = P_0⁻¹ + Σ_k λ^(n-k) c_k Y_kᵀ W_k Y_k,   η = P_0⁻¹ β_0 + Σ_k λ^(n-k) c_k Y_kᵀ W_k τ_k,   A β = η

with ``W_k = diag(1 / σ_j²)`` at sample k and ``P = A⁻¹`` the covariance. Three things set themselves:

* **σ per joint** from the innovations ``e_k = τ_k - Y_k β_(k-1)`` (the prediction error of the estimate
  before the sample), an exponentially weighted mean of ``e_j²`` over ``sigma_time`` seconds (a plain mean
  until that much data has arrived; once it has, a sample counts at most ``(5 σ_j)²``): the residual level
  the current model achieves, model error included while it is being learnt, the sensor noise once
  converged. A joint whose torques are noisy weighs less; no noise level has to be known.
* **c_k**, the share of an independent sample that sample k is: the estimator sees samples through a
  low-pass filter of cutoff ``f_c`` (``bandwidth``), so about ``2 f_c`` of them per second carry independent
  noise, and a sample ``Δt_k`` after the previous one counts ``c_k = min(1, 2 f_c Δt_k)`` (1/25 at 1 kHz
  behind a 20 Hz filter, whatever the decimation). Without it P would shrink 25 times too fast and every
  test built on it (convergence, outliers, changes) would be overconfident.
* **Change detection** on the normalised innovation ``z_k = e_kᵀ S_k⁻¹ e_k / nv``, ``S_k = Y_k P Y_kᵀ +
  diag(σ²)`` (mean 1 while the model fits): a change is declared when its exponentially weighted mean over
  ``change_time`` seconds exceeds ``change_ratio``, i.e. the residual variance stayed several times its
  learnt level for longer than a velocity reversal lasts (a payload is a persistent torque; the brief residual
  of friction the model does not capture exactly at each reversal of a periodic motion is not). The detector
  is armed once the estimate has converged (the torque it predicts is uncertain by less than its noise,
  ``diag(Y P Yᵀ) < σ²`` for the median joint in geometric mean over ``sigma_time``, and ``2 sigma_time`` of
  data has arrived; ``z`` is normalised by
  that uncertainty too. With ``σ² / 4``, or the mean over the joints, in which a light wrist with a tiny σ
  dominates, the demo motion of perturbed Pandas armed it after the demo's payload at 7.5 s), and rests
  ``change_time``
  after an alarm. An alarm adds ``boost_variance`` to the covariance of the parameters a payload moves
  (``boost_indices``; Woodbury's identity on A) so they re-converge, the others keep what they learnt.

Once armed, samples far off (``z`` beyond the chi-square tail ``outlier_probability``: a corrupted
measurement, smeared over the filter's response) are left out, unless they last longer than ``change_time``:
that is a change. Before, the model may still be far from the robot and nothing is an outlier.

Divergence guard: the estimator compares, over ``sigma_time``, its innovations with the residual of the prior
(nominal) parameters on the same samples, both weighed by ``W_k``. While it predicts clearly better (half the
nominal residual energy or less) it keeps a checkpoint of what it learnt, at most once per ``sigma_time``;
if it comes to predict worse than the nominal model for that long (a payload change does not do that: the
estimate still knows the rest of the robot, and re-converges within a second), it returns to the checkpoint
(``rollbacks``). :meth:`restore` moves the estimate to given parameters keeping what was
learnt (the controller's gate hands back the last estimate it found good).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dense_solves import cholesky_lower, cholesky_solve, lower_solve, median, spd_solve


@dataclass(frozen=True)
class EstimatorUpdate:
    """What one update did: ``accepted`` (False: left out as an outlier), ``nis`` (z_k, normalised by the
    rows), ``change_detected``."""

    accepted: bool
    nis: float
    change_detected: bool


ARMED_UNCERTAINTY = 1.0    # median diag(Y P Yᵀ) / σ² below which the change detector is armed (docstring)


class BaseParameterEstimator:
    """Recursive weighted least squares of ``β`` (r,) from ``(Y_k (m, r), τ_k (m,))`` samples (module
    docstring).

    ``beta0`` (r,), ``prior_std`` (r,): the prior; ``rows``: m; ``bandwidth``: f_c (Hz; None: every sample
    independent); ``sigma``: a
    fixed σ (scalar or (m,), N m) instead of learning it; ``sigma_floor`` (scalar or (m,)): the least σ
    learnt; ``sigma_time``: s; ``forgetting``: λ per update in (0, 1] (the data's information only, the prior
    stays); ``boost_indices``, ``boost_variance``: what a change adds to P; ``change_ratio``, ``change_time``
    (s): the detector; ``detect``: False turns it off."""

    def __init__(self, beta0, prior_std, rows, *, bandwidth=None, sigma=None, sigma_floor=1e-3, sigma_time=2.0,
                 forgetting=1.0, boost_indices=(), boost_variance=0.0, change_ratio=4.0, change_time=0.15,
                 detect=True, outlier_probability=1e-6):
        self.beta0 = np.array(beta0, dtype=float)
        r = self.beta0.size
        prior_std = np.broadcast_to(np.asarray(prior_std, dtype=float), (r,))
        if not np.all(np.isfinite(prior_std)) or np.any(prior_std <= 0):
            raise ValueError("prior_std must be finite and positive")
        self.A0 = np.diag(1.0 / prior_std ** 2)
        self.rows = int(rows)
        self.bandwidth = None if bandwidth is None else float(bandwidth)
        self.fixed_sigma = None if sigma is None else np.broadcast_to(np.asarray(sigma, dtype=float), (self.rows,)).copy()
        self.sigma_floor = np.broadcast_to(np.asarray(sigma_floor, dtype=float), (self.rows,)).copy()
        self.sigma_time = float(sigma_time)
        self.forgetting = float(forgetting)
        self.boost_indices = np.asarray(boost_indices, dtype=int)
        self.boost_variance = np.broadcast_to(np.asarray(boost_variance, dtype=float), (len(self.boost_indices),)).copy()
        self.change_ratio, self.change_time, self.detect = float(change_ratio), float(change_time), bool(detect)
        from scipy.stats import chi2      # where used (half a second of every process's start)
        self.outlier_threshold = float(chi2.isf(outlier_probability, self.rows)) / self.rows
        self.reset()

    def reset(self):
        """Back to the prior; σ, the detector and the counters start again."""
        self.A_data = np.zeros_like(self.A0)
        self.eta_data = np.zeros(self.beta0.size)
        self._eta0 = self.A0 @ self.beta0
        self.beta = self.beta0.copy()
        self._factor = self._P = None
        self._s2 = None if self.fixed_sigma is None else self.fixed_sigma ** 2
        self._e2 = None                   # EW mean of the innovations' squares (nv,) over sigma_time, always kept
        self._sigma_weight = 0.0          # seconds of data in σ (up to sigma_time)
        self._t = self._t0 = None
        self._zbar = 1.0
        self._log_uncertainty = 0.0       # EW mean of log(median diag(Y P Yᵀ) / σ²)
        self._rest_until = -np.inf
        self.updates = self.rejected = self.changes = self.rollbacks = 0
        self._outliers_since = None      # time of the first of the outliers in a row
        self._energy = None               # EW means of the weighted innovation energy: (estimate, nominal)
        self._checkpoint = None           # (A_data, eta_data, time) of the last estimate that predicted well
        self._worse_since = None
        self._last_change = -np.inf
        self.prediction_sums = np.zeros(2)   # Σ ‖e_k‖², Σ ‖τ_k‖² of the samples taken (e_k predicted before)

    def set_prior_mean(self, beta0):
        """The prior's mean becomes ``beta0`` (r,) (a stored estimate judged better than the nominal one), the
        prior's spread and the data learnt so far kept; the divergence guard compares with it from now on."""
        self.beta0 = np.array(beta0, dtype=float)
        self._eta0 = self.A0 @ self.beta0
        self._solve()

    @property
    def prediction_error(self):
        """``sqrt(Σ ‖τ_k - Y_k β_(k-1)‖² / Σ ‖τ_k‖²)`` over the samples taken, each predicted by the estimate
        before it (NaN before the first)."""
        sse, sst = self.prediction_sums
        return float(np.sqrt(sse / sst)) if sst > 0 else float("nan")

    # ------------------------------------------------------------------------------------------ state
    @property
    def sigma(self):
        """σ (m,) now: the fixed one, or the learnt one (None before the first sample)."""
        if self._s2 is None:
            return None
        return np.sqrt(np.maximum(self._s2, self.sigma_floor ** 2))

    @property
    def A(self):
        """The information matrix (r, r)."""
        return self.A0 + self.A_data

    def _cholesky(self):
        if self._factor is None:
            self._factor = cholesky_lower(self.A)
            self._P = None
        return self._factor

    @property
    def P(self):
        """The covariance ``A⁻¹`` (r, r) (computed once per update, when asked)."""
        factor = self._cholesky()
        if self._P is None:
            self._P = cholesky_solve(factor, np.eye(self.beta0.size))
            self._P.setflags(write=False)
        return self._P

    @property
    def std(self):
        """Standard deviations (r,) of the estimate."""
        return np.sqrt(np.clip(np.diag(self.P), 0.0, None))

    @property
    def innovation_rms(self):
        """RMS (rows,) of the innovations over the last ``sigma_time`` (N m; None before the first sample): with
        a converged estimate, the noise the data show, whatever σ was configured."""
        return None if self._e2 is None else np.sqrt(self._e2)

    def sigma_too_low(self, ratio=5.0):
        """The rows whose configured σ is below ``1/ratio`` of the innovations' RMS, after ``3 sigma_time``
        of data (empty when σ is learnt): a σ set that low makes the estimate look unconverged forever and
        arms no change detector."""
        if self.fixed_sigma is None or self._e2 is None or self._t - self._t0 < 3.0 * self.sigma_time:
            return np.zeros(0, dtype=int)
        return np.flatnonzero(np.sqrt(self._e2) > ratio * np.maximum(self.fixed_sigma, self.sigma_floor))

    @property
    def armed(self):
        """Whether the change detector is armed (converged, enough data, not resting after an alarm)."""
        if not self.detect or self._t is None:
            return False
        return bool(self._t - self._t0 >= 2.0 * self.sigma_time and self.uncertainty < ARMED_UNCERTAINTY
                    and self._t >= self._rest_until and self._sigma_fits())

    def _sigma_fits(self, ratio=5.0):
        """Whether a configured σ is within ``ratio`` of the innovations' RMS for the median row (always, when σ
        is learnt): against a σ set far below the data's noise every sample looks like a change (a UR5 with
        0.5 N m of noise told 0.02 N m raised 7 false payload alarms in 8 s)."""
        if self.fixed_sigma is None or self._e2 is None:
            return True
        return bool(median(self._e2 / np.maximum(self.fixed_sigma, self.sigma_floor) ** 2) <= ratio ** 2)

    @property
    def uncertainty(self):
        """The median joint's ``diag(Y P Yᵀ) / σ²`` over the last ``sigma_time``: a geometric mean (an
        exponentially weighted mean of its logarithm), since it falls by decades as the estimate converges
        (measured: 10⁶ in the first samples, below 1 within 1-2 s on the UR10 of example-robot-data): an
        arithmetic mean kept the first samples' 10⁶ for 7 time constants, and the detector disarmed until after
        a payload attached at 7.5 s, which it then never saw."""
        return float(np.exp(self._log_uncertainty))

    # ----------------------------------------------------------------------------------------- update
    def update(self, t, Y, tau, extra_variance=None):
        """One sample at time ``t`` (s): ``Y`` (m, r), ``τ`` (m,); ``extra_variance`` (m,): the variance of what
        the model cannot say about this sample's rows (e.g. the friction of a joint near rest), added to σ²
        (the row weighs less, counts less in σ and in the change detector). Returns :class:`EstimatorUpdate`."""
        dt = 0.0 if self._t is None else max(0.0, float(t) - self._t)
        if self._t is None:
            self._t0 = float(t)
        self._t = float(t)
        e = tau - Y @ self.beta
        G = lower_solve(self._cholesky(), Y.T)                                         # (r, m): Y P Yᵀ = Gᵀ G
        predicted = np.einsum("ij,ij->j", G, G)                                          # diag(Y P Yᵀ)
        extra = 0.0 if extra_variance is None else np.asarray(extra_variance, dtype=float)
        self._learn_sigma(e, dt, extra)
        s2 = np.maximum(self._s2, self.sigma_floor ** 2) + extra
        S = G.T @ G
        S.flat[::self.rows + 1] += s2
        z = float(e @ spd_solve(S, e)) / self.rows
        change = self._detect(z, predicted / s2, dt)
        if not change and z > self.outlier_threshold and self.armed:
            if self._outliers_since is None:
                self._outliers_since = self._t
            if self._t - self._outliers_since <= self.change_time:
                self.rejected += 1
                return EstimatorUpdate(False, z, False)
            change = True
        self._outliers_since = None
        if change:
            self.changes += 1
            self._last_change = self._t
            self.boost()
        self._guard(e, tau - Y @ self.beta0, s2, dt)
        share = 1.0 if self.bandwidth is None else min(1.0, 2.0 * self.bandwidth * dt)
        W = share / s2
        YtW = Y.T * W
        if self.forgetting < 1.0:
            self.A_data *= self.forgetting
            self.eta_data *= self.forgetting
        self.A_data += YtW @ Y
        self.eta_data += YtW @ tau
        self._solve()
        self.prediction_sums += (float(e @ e), float(tau @ tau))
        self.updates += 1
        return EstimatorUpdate(True, z, change)

    def _learn_sigma(self, e, dt, extra=0.0):
        """σ² ← exponentially weighted mean of the innovations' squares over ``sigma_time`` (module docstring),
        each row counting ``σ² / (σ² + extra)``: rows the model cannot predict tell little about the noise."""
        e2 = e * e
        if self._e2 is None:
            self._e2 = e2.copy()
        else:
            self._e2 += (1.0 - np.exp(-dt / self.sigma_time)) * (e2 - self._e2)
        if self.fixed_sigma is not None:
            return
        if self._s2 is None:
            self._s2 = e2.copy()
            return
        s2 = np.maximum(self._s2, self.sigma_floor ** 2)
        settled = self._sigma_weight >= self.sigma_time
        if settled:
            e2 = np.minimum(e2, 25.0 * s2)
        self._sigma_weight += dt
        w = (1.0 - np.exp(-dt / self.sigma_time)) if settled else dt / max(self._sigma_weight, 1e-12)
        self._s2 += w * (s2 / (s2 + extra)) * (e2 - self._s2)

    def _detect(self, z, relative_uncertainty, dt):
        """The change detector's statistic and decision (module docstring)."""
        w = 1.0 - np.exp(-dt / self.sigma_time) if dt > 0 else 0.0
        middle = max(median(relative_uncertainty), 1e-300)
        self._log_uncertainty += w * (np.log(middle) - self._log_uncertainty)
        if not self.armed:
            self._zbar = 1.0
            return False
        self._zbar += (1.0 - np.exp(-dt / self.change_time)) * (z - self._zbar)
        if self._zbar > self.change_ratio:
            self._zbar = 1.0
            self._rest_until = self._t + self.change_time
            return True
        return False

    def _guard(self, e, e_nominal, s2, dt):
        """The divergence guard (module docstring) on this sample's innovation ``e`` and nominal residual."""
        energy = np.array([np.sum(e * e / s2), np.sum(e_nominal * e_nominal / s2)])
        if self._energy is None:
            self._energy = energy
            return
        self._energy += (1.0 - np.exp(-dt / self.sigma_time)) * (energy - self._energy)
        if self._t - self._t0 < self.sigma_time:
            return
        mine, nominal = self._energy
        if mine <= 0.5 * nominal:
            self._worse_since = None
            if self._checkpoint is None or self._t - self._checkpoint[2] >= self.sigma_time:
                self._checkpoint = (self.A_data.copy(), self.eta_data.copy(), self._t)
        elif mine > nominal:
            self._worse_since = self._t if self._worse_since is None else self._worse_since
            # after a detected change the estimate re-converges first (a payload is found within a second)
            hold = self.sigma_time if self._worse_since - self._last_change > self.sigma_time else 3 * self.sigma_time
            if self._checkpoint is not None and self._t - self._worse_since >= hold:
                self.A_data, self.eta_data = self._checkpoint[0].copy(), self._checkpoint[1].copy()
                self._solve()
                self.rollbacks += 1
                self._worse_since = None
                self._energy = None
        else:
            self._worse_since = None

    def _solve(self):
        self._factor = None
        self.beta = cholesky_solve(self._cholesky(), self._eta0 + self.eta_data)

    def restore(self, beta):
        """Continue from the parameters ``beta`` (r,), keeping the information learnt (the covariance)."""
        self.beta = np.array(beta, dtype=float)
        self.eta_data = self.A @ self.beta - self._eta0

    def boost(self, indices=None, variance=None):
        """Add ``variance`` to the covariance of the parameters at ``indices`` (default: the payload's) by
        Woodbury's identity on A, keeping β: the estimator forgets what it knew about them."""
        idx = self.boost_indices if indices is None else np.asarray(indices, dtype=int)
        var = self.boost_variance if variance is None else np.broadcast_to(variance, (len(idx),))
        if len(idx) == 0:
            return
        A = self.A
        AU = A[:, idx]
        inner = np.diag(1.0 / np.asarray(var, dtype=float)) + AU[idx, :]
        self.A_data -= AU @ np.linalg.solve(inner, AU.T)
        self.A_data = 0.5 * (self.A_data + self.A_data.T)
        self._factor = None
        self.eta_data = self.A @ self.beta - self._eta0


def base_parameter_prior(model, base, beta_nominal, relative=0.5, torque_fraction=0.05, samples=200, seed=0):
    """Prior standard deviations (r,) of the base parameters around the nominal ones, wide enough for a real
    robot and scaled by what each parameter does: ``max(relative |β_nom,k|, torque_fraction / max_j(c_jk / s_j))``
    with ``c_jk`` the RMS of column k of joint j's regressor row over random states and ``s_j`` the joint's
    torque scale (:func:`robodyn_ros.dynamics.torque_scale.joint_torque_scale`): a parameter no better known
    than its nominal value within ``relative``, and at least able to move some joint's torque by
    ``torque_fraction`` of that joint's scale. Data outweighs it within a fraction of a second wherever the
    motion excites a parameter; it keeps the others at their nominal values."""
    from ..dynamics.torque_scale import joint_torque_scale
    from ..identification.base_parameters import random_states
    Q, V, A = random_states(model, np.random.default_rng(seed), samples)
    V, A = 0.5 * V, 0.5 * A          # within what an arm does: ±1 rad/s, ±2.5 rad/s²
    c = np.sqrt(np.mean(base.regressor(model, Q, V, A) ** 2, axis=0))         # (nv, r)
    scale = joint_torque_scale(model)
    reach = np.max(c / scale[:, None], axis=0)
    absolute = torque_fraction / np.maximum(reach, 1e-12)
    return np.maximum(relative * np.abs(np.asarray(beta_nominal, dtype=float)), absolute)
