"""The offline identification pipeline: measured joint signals -> filtered samples -> base regressor ->
weighted least squares -> physically consistent parameters -> identified :class:`Model`.

Signals go through ONE zero-phase low-pass F (robodyn_ros.identification.signal_filters): q̇, q̈ are derivatives of F q
(or of F q̇ when velocities are measured) and the torques are F tau, so ``F tau = Y(F q, ...) beta`` holds
up to the filter's effect on the nonlinear terms (Gautier's "parallel filtering"). The first and last
2/cutoff seconds, where the filter's edge is less accurate, are dropped; the rest is decimated to
about 10 samples per cutoff period (filtered samples closer than that are strongly correlated, so
keeping them all would only make the reported standard deviations optimistic) unless ``decimate=1``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from .signal_filters import filter_joint_signals
from .base_parameters import BaseParameters, compute_base_parameters, full_regressor, split_full_parameters
from .least_squares import (INERTIA_MARGIN, ConsistentFit, LeastSquaresFit, RegressorAccumulator, consistent_fit,
                            weighted_least_squares)


@dataclass(frozen=True)
class IdentificationResult:
    """nominal: the model identified from; identified: the same model with the consistent parameters;
    base: the base-parameter map; fit: the weighted LS result; consistent: the consistent fit (None when
    skipped); cutoff_hz, coulomb_width: the signal model used; samples_used: rows in the regression."""

    nominal: object
    identified: object
    base: BaseParameters
    fit: LeastSquaresFit
    consistent: ConsistentFit | None
    cutoff_hz: float
    coulomb_width: float
    samples_used: int
    samples: tuple = ()
    accumulator: RegressorAccumulator | None = None


def model_with_full_parameters(model, pi_full):
    """A copy of ``model`` with inertias, armature and friction from ``pi_full`` (10 nb + 4 nv,)."""
    pi, armature, viscous, coulomb, offset = split_full_parameters(model, pi_full)
    return model.with_inertial_parameters(pi).with_armature(armature).with_friction(viscous, coulomb, offset)


def check_samples(t, q, v, tau, joint_names):
    """Raise ModelError on NaN/inf or times that are not strictly increasing, naming the first culprit."""
    t = np.asarray(t, dtype=float)
    for label, x in (("time", t), ("position", q), ("velocity", v), ("effort", tau)):
        if x is None:
            continue
        bad = ~np.isfinite(np.asarray(x, dtype=float))
        if bad.any():
            n = int(np.flatnonzero(bad.reshape(len(t), -1).any(axis=1))[0])
            column = "" if x is t else f" of joint {joint_names[int(np.flatnonzero(bad[n])[0])]}"
            raise ModelError(f"{label} sample {n}{column} is NaN or inf")
    steps = np.diff(t)
    if np.any(steps <= 0):
        n = int(np.flatnonzero(steps <= 0)[0])
        raise ModelError(f"samples are not in time order: t[{n + 1}] = {t[n + 1]:.6f} s follows t[{n}] = {t[n]:.6f} s")


def filtered_samples(t, q, v, tau, cutoff_hz, decimate=None):
    """Filtered ``(t, q, v, a, tau)`` (module docstring): zero-phase filter, edges dropped, decimated."""
    signals = filter_joint_signals(t, q, v, tau, cutoff_hz=cutoff_hz)
    keep = np.flatnonzero(signals.valid)
    if decimate is None:
        step = float(np.median(np.diff(t)))
        decimate = max(1, int(1.0 / (10.0 * cutoff_hz * step)))
    keep = keep[::decimate]
    return signals.t[keep], signals.q[keep], signals.v[keep], signals.a[keep], signals.tau[keep]


def accumulate(model, base, Q, V, A, TAU, chunk=8192, progress=None):
    """:class:`RegressorAccumulator` of the base regressor over the samples, chunk by chunk."""
    acc = RegressorAccumulator(model.nv, base.count)
    N = len(Q)
    for start in range(0, N, chunk):
        stop = min(N, start + chunk)
        Y = base.reduce(full_regressor(model, Q[start:stop], V[start:stop], A[start:stop], base.coulomb_width))
        acc.add(Y, TAU[start:stop])
        if progress is not None:
            progress(stop, N)
    return acc


def accumulate_blocks(model, base, blocks, chunk=8192):
    """:class:`RegressorAccumulator` of the base regressor over an iterator of filtered sample blocks
    (:class:`~robodyn_ros.identification.chunked_filter.SampleBlock`), ``chunk`` rows at a time."""
    acc = RegressorAccumulator(model.nv, base.count)
    for block in blocks:
        for s in range(0, len(block.t), chunk):
            e = s + chunk
            acc.add(base.regressor(model, block.q[s:e], block.v[s:e], block.a[s:e]), block.tau[s:e])
    return acc


def identify_samples(model, source, *, start=0, stop=None, cutoff_hz=5.0, coulomb_width=0.0, decimate=None,
                     base=None, consistent=True, regularization=1.0, chunk=65536, progress=None,
                     margin=INERTIA_MARGIN, statistics_progress=None):
    """:func:`identify` over samples ``start .. stop - 1`` of a sample source (ArraySamples, a bag),
    streamed: the filter runs window by window (:mod:`.chunked_filter`) and the regressor is accumulated
    into the per-joint R factors, so memory does not grow with the number of samples. Returns
    :class:`IdentificationResult` with its ``accumulator`` (``samples`` empty); equal to :func:`identify`
    of the same samples to rounding, whatever ``chunk``. progress, statistics_progress: (done, total) of
    the filter-and-regressor pass and of the first pass (time span, median step)."""
    from .chunked_filter import chunked_filtered_samples, range_statistics
    stop = source.count if stop is None else stop
    stats = range_statistics(source, start, stop, statistics_progress)
    duration = stats.t_last - stats.t_first
    if duration <= 4.0 / cutoff_hz + 1e-9:
        raise ModelError(f"{duration:.3g} s of data is too short for a {cutoff_hz} Hz filter (need more than "
                         f"{4.0 / cutoff_hz:.3g} s: 2/cutoff is dropped at each end)")
    base = base or compute_base_parameters(model, coulomb_width=coulomb_width)
    blocks = chunked_filtered_samples(source, cutoff_hz, start=start, stop=stop, decimate=decimate, chunk=chunk,
                                      progress=progress, statistics=stats)
    acc = accumulate_blocks(model, base, blocks)
    fit = weighted_least_squares(acc, names=base.names)
    cfit = consistent_fit(model, base, fit, regularization=regularization, margin=margin) if consistent else None
    identified = model_with_full_parameters(model, cfit.pi_full) if cfit is not None else model
    return IdentificationResult(nominal=model, identified=identified, base=base, fit=fit, consistent=cfit,
                                cutoff_hz=float(cutoff_hz), coulomb_width=float(coulomb_width),
                                samples_used=acc.samples, accumulator=acc)


def identify(model, t, q, v, tau, *, cutoff_hz=5.0, coulomb_width=0.0, decimate=None, base=None,
             consistent=True, regularization=1.0, progress=None, margin=INERTIA_MARGIN):
    """Identify ``model``'s parameters from measured joint signals.

    t: (N,) s strictly increasing; q: (N, nq); v: (N, nv) or None (then differentiated from q);
    tau: (N, nv) measured joint torques; cutoff_hz: the low-pass of all signals; coulomb_width: smooth
    sign width (rad/s, 0 = sign); progress(done, total) while the regressor is built; margin: ε of the
    bodies' pseudo-inertia margin in the consistent fit (:mod:`.least_squares`).
    Returns :class:`IdentificationResult`. Raises ModelError (bad samples) or InsufficientExcitation.
    """
    check_samples(t, q, v, tau, model.joint_names)
    if tau is None:
        raise ModelError("the joint states carry no effort (torque) values: nothing to identify from")
    duration = float(t[-1] - t[0])
    if duration <= 4.0 / cutoff_hz + 1e-9:
        raise ModelError(f"{duration:.3g} s of data is too short for a {cutoff_hz} Hz filter (need more than "
                         f"{4.0 / cutoff_hz:.3g} s: 2/cutoff is dropped at each end)")
    base = base or compute_base_parameters(model, coulomb_width=coulomb_width)
    T, Q, V, A, TAU = filtered_samples(t, q, v, tau, cutoff_hz, decimate)
    acc = accumulate(model, base, Q, V, A, TAU, progress=progress)
    fit = weighted_least_squares(acc, names=base.names)
    cfit = consistent_fit(model, base, fit, regularization=regularization, margin=margin) if consistent else None
    identified = model_with_full_parameters(model, cfit.pi_full) if cfit is not None else model
    return IdentificationResult(nominal=model, identified=identified, base=base, fit=fit, consistent=cfit,
                                cutoff_hz=float(cutoff_hz), coulomb_width=float(coulomb_width),
                                samples_used=len(Q), samples=(T, Q, V, A, TAU))


def predict_torques(model, Q, V, A, coulomb_width=0.0, chunk=8192):
    """Joint torques (N, nv) of ``model`` (rigid body + armature + friction with smooth sign), batched:
    ``Y_full pi_full``."""
    from .base_parameters import full_parameters
    pi = full_parameters(model)
    out = np.empty((len(Q), model.nv))
    for s in range(0, len(Q), chunk):
        out[s:s + chunk] = full_regressor(model, Q[s:s + chunk], V[s:s + chunk], A[s:s + chunk], coulomb_width) @ pi
    return out
