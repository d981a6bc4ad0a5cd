"""Recursive least squares: the estimator of :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator`
(base parameters from joint torques, payload from the wrist wrench).

Measurement model per sample: ``tau = Y_base(q, v, a) beta + e``, ``e ~ N(0, diag(σ²))`` (nv rows).
Update (Ljung & Söderström 1983, RLS with exponential forgetting, vector measurement):

    e = tau - Y beta,   S = Y P Y^T + Σ,     K = P Y^T S^-1
    beta += K e,        P = (P - K Y P) / λ_eff

Bounded covariance: ``λ_eff = max(λ, trace(P - K Y P) / trace_max)`` so ``trace(P) <= trace_max`` always;
while the robot stands still the regressor carries no new information, exponential forgetting alone
would inflate P without bound (wind-up) and the next motion would make the estimate jump; here P grows
only up to the trace bound. Outliers: the normalised innovation squared ``d² = e^T S^-1 e`` is chi-square
with nv degrees of freedom; a sample with d² above ``outlier_threshold`` is rejected. A payload change
also produces large innovations, but persistently: a CUSUM detector (robodyn_ros.identification.payload)
on d² (or ``max_consecutive_outliers`` rejections in a row) declares a change, adds ``boost_variance``
to the covariance of the parameters that a payload moves (``boost_indices``, those of the last body) and
accepts the sample, so the estimate re-converges within a few hundred samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..identification.base_parameters import smooth_sign
from ..identification.batch_regressor import batch_regressor
from ..identification.payload import PayloadChangeDetector
from .dense_solves import spd_inverse


def _default_rigid_regressor(model):
    """The compiled regressor kernel of ``model``, or the NumPy batch regressor for one sample."""
    try:
        from ..kernels import compile_kernels
        return compile_kernels(model, parts=("dynamics",)).regressor
    except Exception:  # no compiler, or the kernels package is unavailable: stay in NumPy
        return lambda q, v, a: batch_regressor(model, q[None], v[None], a[None])[0]


@dataclass(frozen=True)
class RlsUpdate:
    """What one update did: accepted (False: rejected as an outlier), nis (d²), change_detected."""

    accepted: bool
    nis: float
    change_detected: bool


class RecursiveLeastSquares:
    """RLS estimator of ``beta`` (n,) from vector measurements (module docstring).

    beta0 (n,), P0 (n, n) or (n,) diagonal; noise_std: (m,) or scalar σ of each measurement row;
    forgetting: λ in (0, 1]; trace_max: covariance bound (default trace(P0)); outlier_probability:
    the chi-square tail beyond which a sample is an outlier; boost_indices, boost_variance: what a
    detected change adds to P; detector: a PayloadChangeDetector (None: no change detection).
    """

    def __init__(self, beta0, P0, noise_std, forgetting=0.999, trace_max=None, outlier_probability=1e-6,
                 max_consecutive_outliers=20, boost_indices=None, boost_variance=None, detector="cusum"):
        self.beta0 = np.array(beta0, dtype=float)
        n = self.beta0.size
        P0 = np.asarray(P0, dtype=float)
        self.P0 = np.diag(np.broadcast_to(P0, (n,))) if P0.ndim <= 1 else P0.copy()
        self.noise_std = np.asarray(noise_std, dtype=float)
        self.forgetting = float(forgetting)
        self.trace_max = float(np.trace(self.P0) if trace_max is None else trace_max)
        self.outlier_probability = float(outlier_probability)
        self.max_consecutive_outliers = int(max_consecutive_outliers)
        self.boost_indices = np.arange(n) if boost_indices is None else np.asarray(boost_indices)
        self.boost_variance = np.diag(self.P0)[self.boost_indices] if boost_variance is None else \
            np.broadcast_to(np.asarray(boost_variance, dtype=float), (len(self.boost_indices),))
        self.detector = PayloadChangeDetector() if detector == "cusum" else detector
        self._thresholds = {}
        self._variances = {}
        self.reset()

    def reset(self):
        """Back to beta0, P0; counters cleared (the node's reset service and a new replay call this)."""
        self.beta = self.beta0.copy()
        self.P = self.P0.copy()
        self.updates = self.rejected = self.changes = 0
        self._consecutive = 0
        if self.detector is not None:
            self.detector.reset()

    def set_noise_std(self, noise_std):
        """A new σ (m,) or scalar of the measurement rows, from the next update on."""
        self.noise_std = np.asarray(noise_std, dtype=float)
        self._variances = {}

    def _threshold(self, m):
        if m not in self._thresholds:
            from scipy.stats import chi2      # where used (half a second of every process's start)
            self._thresholds[m] = float(chi2.isf(self.outlier_probability, m))
        return self._thresholds[m]

    def boost(self, indices=None, variance=None):
        """Add ``variance`` to the diagonal of P at ``indices`` (default: the payload's), capped by the
        trace bound: the estimator forgets what it knew about those parameters."""
        idx = self.boost_indices if indices is None else np.asarray(indices)
        var = self.boost_variance if variance is None else np.broadcast_to(variance, (len(idx),))
        self.P[idx, idx] += var
        trace = np.trace(self.P)
        if trace > self.trace_max:
            self.P *= self.trace_max / trace

    def update(self, Y, y):
        """One measurement: Y (m, n), y (m,). Returns :class:`RlsUpdate`.

        One factorisation per update: ``S^-1`` (m, m; m <= 16 rows, so the explicit inverse of the small
        SPD innovation covariance costs one LAPACK call, :func:`~.dense_solves.spd_inverse`) serves the
        normalised innovation, the gain ``K = P Y^T S^-1`` and the covariance downdate ``P - K (P Y^T)^T``, which
        is done in place.
        (Its cost per update: docs/PERFORMANCE.md.)"""
        Y, y = np.atleast_2d(Y), np.atleast_1d(y)
        m = len(y)
        R = self._noise_variance(m)
        e = y - Y @ self.beta
        PYt = self.P @ Y.T
        S = Y @ PYt
        S.flat[::m + 1] += R
        S_inv = spd_inverse(S)
        Sinv_e = S_inv @ e
        nis = float(e @ Sinv_e)
        change = self.detector.update(nis, m) if self.detector is not None else False
        if nis > self._threshold(m) and not change:
            self._consecutive += 1
            if self._consecutive <= self.max_consecutive_outliers:
                self.rejected += 1
                return RlsUpdate(False, nis, False)
            change = True
        self._consecutive = 0
        if change:
            self.changes += 1
            self.boost()
            PYt = self.P @ Y.T
            S = Y @ PYt
            S.flat[::m + 1] += R
            S_inv = spd_inverse(S)
            Sinv_e = S_inv @ e
        K = PYt @ S_inv
        self.beta = self.beta + K @ e
        P = self.P
        P -= K @ PYt.T
        P += P.T
        P *= 0.5
        lam = max(self.forgetting, float(P.trace()) / self.trace_max)
        if lam < 1.0:
            P /= lam
        self.updates += 1
        return RlsUpdate(True, nis, change)

    def _noise_variance(self, m):
        """σ² (m,) of the measurement rows (cached per m)."""
        R = self._variances.get(m)
        if R is None:
            R = self._variances[m] = np.broadcast_to(self.noise_std, (m,)) ** 2
        return R

    @property
    def std(self):
        """Standard deviations (n,) of the current estimate."""
        return np.sqrt(np.clip(np.diag(self.P), 0.0, None))


def replay(estimator, Y, TAU):
    """Feed samples Y (N, m, n), TAU (N, m) through ``estimator``; returns the estimates (N, n)."""
    out = np.empty((len(Y), estimator.beta.size))
    for k in range(len(Y)):
        estimator.update(Y[k], TAU[k])
        out[k] = estimator.beta
    return out


class OnlineIdentifier:
    """The base-parameter path alone, for a recorded series with a prior from a batch fit: causal
    Butterworth filter (robodyn_ros.identification.signal_filters, the same filter on q, q̇ and tau) -> base
    regressor -> :class:`RecursiveLeastSquares` (the estimator node's full logic, faults and payload included,
    is :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator`).

    model, base: the model and its :class:`~robodyn_ros.identification.base_parameters.BaseParameters`;
    beta0, P0, noise_std and ``rls_options``: see :class:`RecursiveLeastSquares`; cutoff_hz, filter_order:
    the causal low-pass; warmup: seconds after the first sample (or a reset) without updates while the
    filter settles (default 3 / cutoff); update_every: use one filtered sample in k (the filter sees all);
    rigid_regressor: callable (q, v, a) -> (nv, 10 nb); default the compiled kernel
    (``robodyn_ros.kernels.compile_kernels(model).regressor``, about 3 us) or, when it cannot be built,
    the NumPy batch regressor (about 1-2 ms per sample).
    """

    def __init__(self, model, base, beta0, P0, noise_std, cutoff_hz=5.0, filter_order=3, warmup=None,
                 update_every=1, rigid_regressor=None, **rls_options):
        from ..identification.signal_filters import CausalButterworthFilter
        self.model, self.base = model, base
        self.rigid_regressor = rigid_regressor or _default_rigid_regressor(model)
        self.rls = RecursiveLeastSquares(beta0, P0, noise_std, **rls_options)
        self.filter = CausalButterworthFilter(model.nv, cutoff_hz, filter_order)
        self.warmup = 3.0 / cutoff_hz if warmup is None else float(warmup)
        self.update_every = int(update_every)
        self.reset()

    def reset(self):
        """Forget everything: parameters back to beta0, filter restarted on the next sample."""
        self.rls.reset()
        self.filter.reset()
        self._t0 = None
        self._count = 0

    @property
    def beta(self):
        return self.rls.beta

    @property
    def std(self):
        return self.rls.std

    def update(self, t, q, v=None, tau=None):
        """Feed one sample (t s, q (nq,), v (nv,) or None, tau (nv,)); returns the :class:`RlsUpdate`, or
        None while warming up or between used samples."""
        qf, vf, af, tauf = self.filter.update(t, q, v, tau)
        if self._t0 is None:
            self._t0 = float(t)
        self._count += 1
        if float(t) - self._t0 < self.warmup or self._count % self.update_every:
            return None
        nv = self.model.nv
        joint = np.zeros((nv, 4 * nv))
        j = np.arange(nv)
        joint[j, 4 * j], joint[j, 4 * j + 1], joint[j, 4 * j + 3] = af, vf, 1.0
        joint[j, 4 * j + 2] = smooth_sign(vf, self.base.coulomb_width)
        Y = np.concatenate([self.rigid_regressor(qf, vf, af), joint], axis=1)[:, self.base.independent]
        return self.rls.update(Y, tauf)

    def replay(self, t, Q, V, TAU):
        """Run a recorded series through :meth:`update` (V may be None); returns the estimates (N, r)."""
        out = np.empty((len(t), self.rls.beta.size))
        for k in range(len(t)):
            self.update(t[k], Q[k], None if V is None else V[k], TAU[k])
            out[k] = self.rls.beta
        return out
