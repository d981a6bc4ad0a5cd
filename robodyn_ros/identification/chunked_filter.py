"""The zero-phase low-pass of :func:`robodyn_ros.identification.signal_filters.filter_joint_signals`
computed window by window over a stream of joint-state samples, in memory bounded by the window.

A source of samples is any object with ``count`` (samples), ``has_velocity`` (bool) and
``blocks(start, stop)``, an iterator of consecutive ``(t (m,), q (m, nq), v (m, nv) or None, tau (m, nv))``
blocks covering samples ``start .. stop - 1`` in time order (:class:`ArraySamples` for arrays;
:class:`robodyn_ros.bags.streaming.BagJointStates` reads a bag).

Why windows give the same result as filtering the whole signal at once: the signal is linearly
resampled on the same uniform grid (step: the median sample interval), and each core window of the
grid is filtered forward and backward together with ``overlap`` grid samples of real data on both sides.
The only difference from the whole-signal filter is the transient at a window's edge, which decays like
the slowest pole of the order-n Butterworth filter, ``exp(-sin(π / 2n) ω_c t)``; the overlap is chosen so
that it has decayed by ``exp(-40)`` (4e-18) at the core, i.e. below rounding. (At 5 Hz and order 4: 3.3 s.)
The two ends of the signal get the quadratic extension of the whole-signal filter. Derivatives are
central differences on the grid and the cubic spline back to the measured times is built on the window,
whose influence on the core decays by a factor ~0.27 per grid sample, far inside the overlap.

The grid step is the median interval of the first 2^20 samples (all of them for shorter signals, where
this equals the whole-signal filter exactly); samples used for the fit (``valid``) are those more than
2/cutoff s from either end, decimated as in :func:`robodyn_ros.identification.batch.filtered_samples`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from .signal_filters import _resample_linear

MEDIAN_SAMPLES = 2 ** 20
"""Sample intervals from which the grid step (their median) is taken."""


class ArraySamples:
    """A sample source (module docstring) over arrays t (N,), q (N, nq), v (N, nv) or None, tau (N, nv)."""

    def __init__(self, t, q, v, tau, block=65536):
        self.t, self.q, self.v, self.tau = t, q, v, tau
        self.count, self.has_velocity, self.block = len(t), v is not None, int(block)

    def blocks(self, start=0, stop=None):
        stop = self.count if stop is None else stop
        for s in range(start, stop, self.block):
            e = min(stop, s + self.block)
            yield self.t[s:e], self.q[s:e], None if self.v is None else self.v[s:e], self.tau[s:e]


@dataclass
class SampleBlock:
    """Filtered samples at measured times: t (m,), q (m, nq), v, a (m, nv), tau (m, nv) filtered,
    tau_raw (m, nv) the measured torques at the same instants, index (m,) sample indices in the range."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray
    tau_raw: np.ndarray
    index: np.ndarray


@dataclass(frozen=True)
class RangeStatistics:
    """count: samples; t_first, t_last: s; step: median interval of the first 2^20 samples (s)."""

    count: int
    t_first: float
    t_last: float
    step: float


def range_statistics(source, start=0, stop=None, progress=None):
    """:class:`RangeStatistics` of samples ``start .. stop - 1`` of ``source`` (one pass);
    progress(done, total) per block."""
    stop = source.count if stop is None else stop
    head, count, t_first, t_last = [], 0, None, None
    kept = 0
    for t, *_ in source.blocks(start, stop):
        if len(t) == 0:
            continue
        if t_first is None:
            t_first = float(t[0])
        if kept <= MEDIAN_SAMPLES:
            piece = t[:MEDIAN_SAMPLES + 1 - kept]
            head.append(np.asarray(piece, dtype=float))
            kept += len(piece)
        count += len(t)
        t_last = float(t[-1])
        if progress is not None:
            progress(count, stop - start)
    if count < 2:
        raise ModelError(f"{count} sample(s): too few to filter")
    head = np.concatenate(head)
    steps = np.diff(head)
    if np.any(steps <= 0):
        n = int(np.flatnonzero(steps <= 0)[0])
        raise ModelError(f"samples are not in time order: t[{n + 1}] = {head[n + 1]:.6f} s follows t[{n}] = {head[n]:.6f} s")
    return RangeStatistics(count, t_first, t_last, float(np.median(steps)))


class _WindowFilter:
    """The filter of one grid window (module docstring); ``head``/``tail``: the window touches an end."""

    def __init__(self, sos, h, n_pad, n_fit):
        self.sos, self.h, self.n_pad, self.n_fit = sos, h, n_pad, n_fit

    def _extend(self, x, head, tail):
        k = np.arange(self.n_fit, dtype=np.float64)
        basis = np.stack([np.ones_like(k), k, k * k], axis=1)
        parts = [x]
        if head:
            c = np.linalg.lstsq(basis, x[:self.n_fit], rcond=None)[0]
            j = np.arange(-self.n_pad, 0, dtype=np.float64)
            parts.insert(0, np.stack([np.ones_like(j), j, j * j], axis=1) @ c)
        if tail:
            c = np.linalg.lstsq(basis, x[-self.n_fit:], rcond=None)[0]
            j = np.arange(self.n_fit, self.n_fit + self.n_pad, dtype=np.float64)
            parts.append(np.stack([np.ones_like(j), j, j * j], axis=1) @ c)
        return np.concatenate(parts)

    def __call__(self, grid, x_grid, t_out, head, tail, derivatives):
        """[x_f, x_f', ...] (each (len(t_out), n)) of x_grid (L, n) sampled on grid (L,)."""
        extended = self._extend(x_grid, head, tail)
        from scipy.interpolate import CubicSpline       # where used (a second of every process's start)
        from scipy.signal import sosfiltfilt
        signal = sosfiltfilt(self.sos, extended, axis=0, padtype=None)
        signal = signal[self.n_pad if head else 0:len(signal) - (self.n_pad if tail else 0)]
        out = []
        for k in range(derivatives + 1):
            out.append(CubicSpline(grid, signal, axis=0)(t_out))
            if k < derivatives:
                signal = np.gradient(signal, self.h, axis=0, edge_order=2)
        return out


def chunked_filtered_samples(source, cutoff_hz, *, start=0, stop=None, decimate=None, order=4, chunk=65536,
                             progress=None, statistics=None):
    """Filtered samples of ``source`` samples ``start .. stop - 1``, as an iterator of :class:`SampleBlock`
    (module docstring); equal, to rounding, to ``filtered_samples(t, q, v, tau, cutoff_hz, decimate)`` of the
    same range whatever ``chunk`` (grid samples per core window). progress(done, total) per window.
    decimate=1 keeps every valid sample."""
    stop = source.count if stop is None else stop
    stats = statistics or range_statistics(source, start, stop, progress)
    t0, tN = stats.t_first, stats.t_last
    M = int(round((tN - t0) / stats.step)) + 1
    h = (tN - t0) / (M - 1)
    if not 0.0 < cutoff_hz < 0.5 / h:
        raise ModelError(f"cutoff_hz={cutoff_hz} must lie in (0, {0.5 / h:.6g}) Hz, the grid's Nyquist frequency")
    from scipy.signal import butter
    sos = butter(order, cutoff_hz, fs=1.0 / h, output="sos")
    n_fit = int(round(0.5 / (cutoff_hz * h)))
    if M < max(4 * n_fit, 3 * (2 * len(sos) + 1)):
        raise ModelError(f"{M} samples span too few filter periods; use a higher cutoff_hz than {cutoff_hz}")
    n_pad = max(int(round(3.0 / (cutoff_hz * h))), 3 * (2 * len(sos) + 1))
    overlap = int(np.ceil(40.0 / (np.sin(np.pi / (2 * order)) * 2 * np.pi * cutoff_hz * h))) + 8
    window = _WindowFilter(sos, h, n_pad, max(n_fit, 3))
    if decimate is None:
        decimate = max(1, int(1.0 / (10.0 * cutoff_hz * stats.step)))
    t_valid0, t_valid1 = t0 + 2.0 / cutoff_hz, tN - 2.0 / cutoff_hz
    grid_at = lambda i: t0 + np.asarray(i, dtype=np.float64) * h if np.ndim(i) else (tN if i == M - 1 else t0 + i * h)  # noqa: E731

    blocks = source.blocks(start, stop)
    buf = None            # raw samples [t, q, v, tau] covering the current window
    buf_first = 0         # index (in the range) of buf's first sample
    exhausted = False
    first_valid = None    # index of the first valid sample
    chunk = max(int(chunk), 1)
    cores = range(0, M, chunk)
    for n_core, c0 in enumerate(cores):
        c1 = min(M, c0 + chunk)
        w0, w1 = max(0, c0 - overlap), min(M, c1 + overlap)
        t_need = grid_at(w1 - 1)
        while not exhausted and (buf is None or buf[0][-1] < t_need):
            try:
                t, q, v, tau = next(blocks)
            except StopIteration:
                exhausted = True
                break
            piece = [np.asarray(t, dtype=float), np.asarray(q, dtype=float),
                     None if (v is None or not source.has_velocity) else np.asarray(v, dtype=float),
                     np.asarray(tau, dtype=float)]
            buf = piece if buf is None else [None if b is None else np.concatenate([b, p]) for b, p in zip(buf, piece)]
        bt, bq, bv, btau = buf
        grid = t0 + np.arange(w0, w1, dtype=np.float64) * h
        if w1 == M:
            grid[-1] = tN
        lo = t0 + c0 * h if c0 else -np.inf
        hi = t0 + c1 * h if c1 < M else np.inf
        out = np.flatnonzero((bt >= lo) & (bt < hi)) if c1 < M else np.flatnonzero(bt >= lo)
        head, tail = w0 == 0, w1 == M
        t_out = bt[out]
        if len(out):
            index = buf_first + out
            q_f, v_f, a_f = window(grid, _resample_linear(bt, bq, grid), t_out, head, tail, 2)
            if bv is not None:
                v_f, a_f = window(grid, _resample_linear(bt, bv, grid), t_out, head, tail, 1)
            tau_f = window(grid, _resample_linear(bt, btau, grid), t_out, head, tail, 0)[0]
            valid = (t_out >= t_valid0) & (t_out <= t_valid1)
            if first_valid is None and valid.any():
                first_valid = int(index[np.flatnonzero(valid)[0]])
            if first_valid is not None:
                valid &= (index - first_valid) % decimate == 0
            keep = np.flatnonzero(valid)
            if len(keep):
                yield SampleBlock(t_out[keep], q_f[keep], v_f[keep], a_f[keep], tau_f[keep], btau[out][keep], index[keep])
        if progress is not None:
            progress(c1, M)
        if c1 < M:   # drop samples the next window does not need (keep one before its start)
            next_w0 = max(0, c1 - overlap)
            drop = max(int(np.searchsorted(bt, grid_at(next_w0), side="right")) - 1, 0)
            buf = [None if b is None else b[drop:] for b in buf]
            buf_first += drop
