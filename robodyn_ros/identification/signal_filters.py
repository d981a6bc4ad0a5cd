"""Low-pass filtering and differentiation of measured joint signals, offline and online.

Both filters follow one rule: every channel (q, v, tau) goes through the SAME linear filter F, and
derivatives are derivatives of the filtered signal (v_f = s F q or F v, a_f = s v_f). A linear
dynamic model tau = Y(q, v, a) pi that is linear in the signals then still holds between the filtered
signals, whatever F's gain and phase at the signal frequencies ("parallel filtering" in
identification practice); the tests check tau_f = k1 a_f + k2 q_f near the cutoff.

Offline (`filter_joint_signals`): zero-phase Butterworth, `scipy.signal.sosfiltfilt`, on a uniform
grid. Measured timestamps are non-uniform (jitter, drops), so samples are (1) linearly interpolated
onto a uniform grid of step h = median(diff(t)) spanning [t0, tN], (2) filtered forward and backward
(zero phase; magnitude |H_order(jw)|^2, i.e. -6 dB at the cutoff), (3) differentiated with
second-order central differences, and (4) brought back to the measured timestamps with a cubic
spline. Linear interpolation is itself a mild low-pass; its error h^2/8 max|q''| is far below the
noise the filter removes for kHz sampling. Edges: scipy's default odd extension keeps x and x'
continuous but forces x'' to zero at the ends; we extend each end with a quadratic least-squares fit
over the last 0.5/cutoff seconds instead, which cuts the edge error of q̈ about tenfold. Samples within
2/cutoff seconds of either end are still less accurate (`FilteredSignals.valid` marks the rest).

Online (`CausalButterworthFilter`): a continuous-time Butterworth filter F(s) = wc^n / D(s) written
in controllable canonical form, whose states ARE the filtered signal and its first n-1 derivatives:
x = [y, y', ..., y^(n-1)], y^(n) = wc^n u - d_0 y - ... - d_(n-1) y^(n-1). Each update integrates it
over the actual step h with the trapezoidal (Tustin) rule, so non-uniform steps need no resampling.
On a uniform grid the discrete response is exactly F(j w_h) with w_h = (2/h) tan(w h / 2) (frequency
warping), so the phase lag is -arg F(j w_h) and at low frequency the delay is d_1/d_0:
sqrt(2)/wc for order 2, 2/wc for order 3 (e.g. 11.3 ms and 15.9 ms at 20 Hz).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robodyn_ros.model.errors import ModelError


def quantize(x, resolution):
    """Round ``x`` to multiples of ``resolution`` (an encoder's step): resolution * round(x / resolution)."""
    return resolution * np.round(np.asarray(x, dtype=np.float64) / resolution)


def encoder_resolution(counts_per_revolution: int) -> float:
    """Angle step (rad) of an encoder with ``counts_per_revolution`` counts."""
    return 2.0 * np.pi / counts_per_revolution


# --------------------------------------------------------------------------------------------------
# Offline, zero phase
# --------------------------------------------------------------------------------------------------


@dataclass
class FilteredSignals:
    """Filtered q, v, a (N, n) and tau (N, n) or None, at the measured times t (N,)."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray | None
    valid: np.ndarray  # (N,) bool: farther than 2/cutoff seconds from both ends


def _uniform_grid(t: np.ndarray, dt: float | None) -> np.ndarray:
    """Uniform grid from t[0] to t[-1] with step close to ``dt`` (default median(diff(t)))."""
    if t.ndim != 1 or t.size < 2 or not np.all(np.isfinite(t)):
        raise ModelError("t must be a finite (N,) array with N >= 2")
    if np.any(np.diff(t) <= 0):
        raise ModelError("t must be strictly increasing (read_joint_states sorts and de-duplicates)")
    step = float(np.median(np.diff(t))) if dt is None else float(dt)
    count = int(round((t[-1] - t[0]) / step)) + 1
    return np.linspace(t[0], t[-1], count)


def _resample_linear(t: np.ndarray, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """x (N, n) sampled at t, linearly interpolated at grid (M,) -> (M, n)."""
    i = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, len(t) - 2)
    w = ((grid - t[i]) / (t[i + 1] - t[i]))[:, None]
    return x[i] * (1.0 - w) + x[i + 1] * w


def _extend_quadratic(x: np.ndarray, n_pad: int, n_fit: int) -> np.ndarray:
    """x (M, n) extended by n_pad samples at each end with quadratics fitted to its first/last n_fit samples."""
    k = np.arange(n_fit, dtype=np.float64)
    basis = np.stack([np.ones_like(k), k, k * k], axis=1)
    head = np.linalg.lstsq(basis, x[:n_fit], rcond=None)[0]
    tail = np.linalg.lstsq(basis, x[-n_fit:], rcond=None)[0]
    before = np.arange(-n_pad, 0, dtype=np.float64)
    after = np.arange(n_fit, n_fit + n_pad, dtype=np.float64)
    extrapolate = lambda c, j: np.stack([np.ones_like(j), j, j * j], axis=1) @ c  # noqa: E731
    return np.concatenate([extrapolate(head, before), x, extrapolate(tail, after)])


def _as_columns(x, n_samples: int, label: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim not in (1, 2) or len(x) != n_samples:
        raise ModelError(f"{label} must be ({n_samples},) or ({n_samples}, n); got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ModelError(f"{label} contains NaN or inf; drop those samples first")
    return x.reshape(n_samples, -1)


def zero_phase_lowpass(t, x, cutoff_hz: float, order: int = 4, dt: float | None = None,
                       derivatives: int = 0):
    """Zero-phase Butterworth low-pass of x (N,) or (N, n) sampled at non-uniform t (N,).

    Returns the filtered signal and its first ``derivatives`` time derivatives at t, as a list
    [x_f, x_f', ...] of arrays shaped like x. Method: see the module docstring (uniform grid, sosfiltfilt,
    central differences, cubic spline back to t). ``order`` is the Butterworth order of one pass.
    """
    t = np.asarray(t, dtype=np.float64)
    grid = _uniform_grid(t, dt)
    x = np.asarray(x, dtype=np.float64)
    columns = _as_columns(x, len(t), "x")
    h = grid[1] - grid[0]
    if not 0.0 < cutoff_hz < 0.5 / h:
        raise ModelError(f"cutoff_hz={cutoff_hz} must lie in (0, {0.5 / h:.6g}) Hz, the grid's Nyquist frequency")
    from scipy.interpolate import CubicSpline       # where used: scipy.signal and scipy.interpolate take
    from scipy.signal import butter, sosfiltfilt     # a second of every process's start
    sos = butter(order, cutoff_hz, fs=1.0 / h, output="sos")
    n_fit = int(round(0.5 / (cutoff_hz * h)))
    if len(grid) < max(4 * n_fit, 3 * (2 * len(sos) + 1)):
        raise ModelError(f"{len(grid)} samples span too few filter periods; use a higher cutoff_hz than {cutoff_hz}")
    n_pad = max(int(round(3.0 / (cutoff_hz * h))), 3 * (2 * len(sos) + 1))
    extended = _extend_quadratic(_resample_linear(t, columns, grid), n_pad, max(n_fit, 3))
    signal = sosfiltfilt(sos, extended, axis=0, padtype=None)[n_pad:-n_pad]
    out = []
    for k in range(derivatives + 1):
        out.append(CubicSpline(grid, signal, axis=0)(t).reshape(x.shape))
        if k < derivatives:
            signal = np.gradient(signal, h, axis=0, edge_order=2)
    return out


def _absent_columns(x: np.ndarray) -> np.ndarray:
    """(n,) bool: columns of x (N, n) that are NaN throughout (interface missing)."""
    if x.ndim != 2:
        raise ModelError(f"expected an (N, n) array, got shape {x.shape}")
    return np.isnan(x).all(axis=0)


def filter_joint_signals(t, q, v=None, tau=None, *, cutoff_hz: float, order: int = 4,
                         dt: float | None = None) -> FilteredSignals:
    """Offline zero-phase q, q̇, q̈ (and tau) from measured joint signals at non-uniform times.

    t: (N,) strictly increasing seconds; q: (N, n); v: (N, n) measured velocities or None; tau: (N, n)
    or None. Without v: v_f = d/dt F q and a_f = d²/dt² F q. With v: q_f = F q, v_f = F v and
    a_f = d/dt F v (measured velocity is usually less noisy than differentiated position).
    tau_f = F tau with the same F, so all channels share one (zero) phase and one attenuation.
    A v or tau column that is NaN throughout (a joint without that interface, as `read_joint_states`
    returns it) is allowed: such a joint's velocity comes from its positions, its torque stays NaN.
    """
    t = np.asarray(t, dtype=np.float64)
    q_f, v_f, a_f = zero_phase_lowpass(t, q, cutoff_hz, order, dt, derivatives=2)
    if v is not None:
        v = np.asarray(v, dtype=np.float64)
        measured = ~_absent_columns(v)
        if measured.any():
            v_f[:, measured], a_f[:, measured] = zero_phase_lowpass(
                t, v[:, measured], cutoff_hz, order, dt, derivatives=1)
    tau_f = None
    if tau is not None:
        tau = np.asarray(tau, dtype=np.float64)
        tau_f = np.full(tau.shape, np.nan)
        present = ~_absent_columns(tau)
        if present.any():
            tau_f[:, present] = zero_phase_lowpass(t, tau[:, present], cutoff_hz, order, dt)[0]
    valid = (t >= t[0] + 2.0 / cutoff_hz) & (t <= t[-1] - 2.0 / cutoff_hz)
    return FilteredSignals(t=t, q=q_f, v=v_f, a=a_f, tau=tau_f, valid=valid)


# --------------------------------------------------------------------------------------------------
# Online, causal
# --------------------------------------------------------------------------------------------------


def butterworth_denominator(order: int, cutoff_hz: float) -> np.ndarray:
    """Coefficients [d_0, ..., d_(order-1)] of D(s) = s^order + d_(order-1) s^(order-1) + ... + d_0
    of the analog Butterworth low-pass with cutoff ``cutoff_hz``; d_0 = wc^order."""
    from scipy.signal import butter
    _, den = butter(order, 2.0 * np.pi * cutoff_hz, analog=True)
    return np.asarray(den[::-1][:-1] / den[0], dtype=np.float64)


def butterworth_response(frequency_hz, cutoff_hz: float, order: int, step: float | None = None):
    """Complex response F(jw) of the analog Butterworth low-pass at ``frequency_hz``; with ``step`` h,
    the response of its Tustin discretisation on that uniform step, F(j (2/h) tan(w h / 2))."""
    w = 2.0 * np.pi * np.asarray(frequency_hz, dtype=np.float64)
    if step is not None:
        w = 2.0 / step * np.tan(w * step / 2.0)
    d = butterworth_denominator(order, cutoff_hz)
    s = 1j * w
    denominator = s**order + sum(d[k] * s**k for k in range(order))
    return d[0] / denominator


class CausalButterworthFilter:
    """Online filter of n joint channels: q, q̇, q̈ and tau from streaming, possibly jittered samples.

    F(s) = wc^order / D(s), Butterworth, in controllable canonical form (module docstring), integrated
    per update with the trapezoidal rule over the actual step. Outputs (each (n,)):
    - without measured v: q_f = y, v_f = y', a_f = y'' of F q (order >= 3: a_f is a state; order 2:
      a_f = wc² q - d_0 y - d_1 y', which passes measurement noise with gain wc²);
    - with measured v: q_f = F q, v_f = F v, a_f = d/dt F v;
    - tau_f = F tau.
    The first update initialises the states at rest on the first sample. Low-frequency delay:
    ``low_frequency_delay`` = d_1 / d_0 seconds.
    """

    def __init__(self, n: int, cutoff_hz: float, order: int = 3):
        if order < 2:
            raise ModelError(f"order={order}: at least 2 is needed to give velocity and acceleration")
        if cutoff_hz <= 0:
            raise ModelError(f"cutoff_hz={cutoff_hz} must be positive")
        self.n, self.order, self.cutoff_hz = int(n), int(order), float(cutoff_hz)
        self._d = butterworth_denominator(self.order, self.cutoff_hz)
        self._A = np.zeros((self.order, self.order))
        self._A[:-1, 1:] = np.eye(self.order - 1)
        self._A[-1] = -self._d
        self._B = np.zeros(self.order)
        self._B[-1] = self._d[0]
        self._step = None
        self.reset()

    @property
    def low_frequency_delay(self) -> float:
        """Delay (s) of F at frequencies well below the cutoff: -d arg F(jw)/dw at w = 0, = d_1 / d_0."""
        return float(self._d[1] / self._d[0])

    def reset(self) -> None:
        """Forget the past: the next update restarts the filter at rest on its sample."""
        self._t = None
        self._X = None        # (order, k n): the states of the k channels [q, v?, tau?] side by side
        self._U = None        # (k n,): their last inputs
        self._has_v = self._has_tau = None
        self._output = None

    def _discretise(self, h: float) -> None:
        """Tustin step x+ = Phi x + Gamma (u + u+) for step h, cached while h repeats."""
        if self._step is not None and abs(h - self._step) <= 1e-12 * max(h, 1.0):
            return
        left = np.eye(self.order) - 0.5 * h * self._A
        self._Phi = np.linalg.solve(left, np.eye(self.order) + 0.5 * h * self._A)
        self._Gamma = np.linalg.solve(left, 0.5 * h * self._B)
        self._step = h

    def _highest_derivative(self, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        """y^(order) = wc^order u - sum_k d_k y^(k), shape (n,)."""
        return self._B[-1] * u - self._d @ x

    def _outputs(self):
        n, X = self.n, self._X
        if self._has_v:
            q, v, a = X[0, :n], X[0, n:2 * n], X[1, n:2 * n]
        else:
            q, v = X[0, :n], X[1, :n]
            a = X[2, :n] if self.order >= 3 else self._highest_derivative(X[:, :n], self._U[:n])
        tau = X[0, -n:] if self._has_tau else None
        return q.copy(), v.copy(), a.copy(), None if tau is None else tau.copy()

    def _start(self, t: float, U: np.ndarray) -> None:
        self._t = t
        self._X = np.zeros((self.order, U.size))
        self._X[0] = U
        self._U = U
        if self._has_v:
            self._X[1, :self.n] = U[self.n:2 * self.n]

    def update(self, t: float, q, v=None, tau=None):
        """Feed one sample at time t (s): q, v, tau (n,). Returns filtered (q, v, a, tau), each (n,)
        (tau None when not given). A repeated t returns the previous output; a t earlier than the
        previous one raises ModelError (call reset() after a clock jump). The channels share one state
        array, so a step is one (order, order) x (order, k n) product."""
        signals = [("q", q), ("v", v), ("tau", tau)]
        parts = []
        for name, u in signals:
            if u is None:
                continue
            u = np.asarray(u, dtype=np.float64)
            if u.shape != (self.n,):
                raise ModelError(f"{name} has shape {u.shape}, expected ({self.n},)")
            parts.append(u)
        U = np.concatenate(parts)
        if self._t is None:
            self._has_v, self._has_tau = v is not None, tau is not None
            self._start(float(t), U)
            self._output = self._outputs()
            return self._output
        if (v is not None) != self._has_v or (tau is not None) != self._has_tau:
            raise ModelError("v and tau must be given on every update or on none (call reset() to change)")
        h = float(t) - self._t
        if h == 0.0:
            return self._output
        if h < 0.0:
            raise ModelError(f"time went backwards by {-h:.6g} s; call reset() after a clock jump")
        self._discretise(h)
        X = self._Phi @ self._X
        X += self._Gamma[:, None] * (self._U + U)
        self._X, self._U = X, U
        self._t = float(t)
        self._output = self._outputs()
        return self._output
