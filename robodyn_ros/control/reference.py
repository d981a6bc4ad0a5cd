"""Joint reference trajectories for the controllers: every reference answers ``evaluate(t) -> (q, v, a)``
with (nv,) arrays for a scalar time.

- :class:`QuinticTrajectory`: rest-to-rest point-to-point motion along the minimum-jerk quintic
  ``s(τ) = 10 τ³ - 15 τ⁴ + 6 τ⁵`` (Flash and Hogan 1985), zero velocity and acceleration at both ends.
- :class:`ConstantReference`: hold a configuration.
- Fourier exciting trajectories: :class:`robodyn_ros.identification.exciting_trajectory.FourierTrajectory` (shared
  with identification) already has ``evaluate(t)``; :func:`fourier_reference` builds one directly.
- :func:`clip_reference`: joint-limit clipping of a reference sample with a warning.
- :func:`sample_reference`: a reference at many times at once (a horizon's samples).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..model.errors import ModelError
from ..identification.exciting_trajectory import FourierTrajectory, fourier_qva


class ReferenceClippedWarning(UserWarning):
    """A joint reference outside the model's position limits was clipped."""


@dataclass(frozen=True)
class QuinticTrajectory:
    """Minimum-jerk rest-to-rest motion from ``q_start`` to ``q_goal`` (nv,) in ``duration`` s, starting
    at ``t_start``; constant before and after."""

    q_start: np.ndarray
    q_goal: np.ndarray
    duration: float
    t_start: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "q_start", np.asarray(self.q_start, dtype=float).reshape(-1))
        object.__setattr__(self, "q_goal", np.asarray(self.q_goal, dtype=float).reshape(-1))
        if self.q_start.shape != self.q_goal.shape:
            raise ModelError(f"q_start {self.q_start.shape} and q_goal {self.q_goal.shape} differ")
        if not self.duration > 0:
            raise ModelError(f"duration must be > 0, got {self.duration}")

    def evaluate(self, t):
        """``(q, v, a)`` (nv,) each at time ``t``: ``q = q_s + (q_g - q_s) s(τ)``, ``τ = (t - t0)/T``."""
        T = self.duration
        tau = min(max((t - self.t_start) / T, 0.0), 1.0)
        s = tau ** 3 * (10.0 - 15.0 * tau + 6.0 * tau ** 2)
        ds = 30.0 * tau ** 2 * (1.0 - tau) ** 2 / T
        dds = 60.0 * tau * (1.0 - tau) * (1.0 - 2.0 * tau) / T ** 2
        d = self.q_goal - self.q_start
        return self.q_start + d * s, d * ds, d * dds


@dataclass(frozen=True)
class ConstantReference:
    """Hold ``q`` (nv,) with zero velocity and acceleration."""

    q: np.ndarray

    def evaluate(self, t):
        q = np.asarray(self.q, dtype=float)
        return q.copy(), np.zeros_like(q), np.zeros_like(q)


def fourier_reference(q0, amplitudes, period, harmonics=1):
    """A Fourier trajectory ``q_j(t) = q0_j + A_j sin(w_f t)`` style reference (periodic, smooth) of
    ``harmonics`` equal-weight sine terms with total position amplitude about ``amplitudes`` (nv,).
    For designed exciting trajectories use :func:`robodyn_ros.identification.exciting_trajectory.design_exciting_trajectory`."""
    q0 = np.asarray(q0, dtype=float)
    amp = np.broadcast_to(np.asarray(amplitudes, dtype=float), q0.shape)
    wf = 2 * np.pi / period
    k = np.arange(1, harmonics + 1)
    # position term of harmonic k is a_jk / (w_f k) sin(w_f k t): split the amplitude equally
    a = (amp[:, None] / harmonics) * (wf * k)[None, :]
    return FourierTrajectory(q0=q0, a=a, b=np.zeros_like(a), period=period)


def sample_reference(reference, times):
    """``(Q, V, A)``, each (len(times), nv): ``reference`` at ``times``. A :class:`FourierTrajectory` is
    evaluated at all of them in one vectorised call (its basis built once per derivative order rather than
    once per time), any other reference once per time."""
    times = np.asarray(times, dtype=float)
    if isinstance(reference, FourierTrajectory):
        return reference.evaluate(times)
    samples = [reference.evaluate(t) for t in times]
    return tuple(np.array([s[r] for s in samples]) for r in range(3))


def clip_reference(model, q, v, a, margin=0.0, warn=True, stacklevel=3):
    """Clip a reference sample ``(q, v, a)`` (nv,) to ``[lower + margin, upper - margin]``.

    Clipped joints get zero reference velocity and acceleration (the reference stops at the limit).
    Returns ``(q, v, a, clipped)`` with ``clipped`` a (nv,) bool mask; warns
    :class:`ReferenceClippedWarning` naming the joints when any was clipped and ``warn``."""
    q, v, a = (np.array(x, dtype=float) for x in (q, v, a))
    lo, hi = model.lower + margin, model.upper - margin
    clipped = (q < lo) | (q > hi)
    if np.any(clipped):
        q = np.clip(q, lo, hi)
        v[clipped] = 0.0
        a[clipped] = 0.0
        if warn:
            names = [model.joint_names[i] for i in np.flatnonzero(clipped)]
            warnings.warn(f"reference outside the joint limits clipped for {', '.join(names)}",
                          ReferenceClippedWarning, stacklevel=stacklevel)
    return q, v, a, clipped


class FourierSampler:
    """``(q_d, v_d, a_d)`` (nv,) of a :class:`FourierTrajectory` at one time ``t``, the per-sample path of the
    nodes at 1 kHz: :func:`~robodyn_ros.identification.exciting_trajectory.fourier_qva` with the pulsations and
    the transposed coefficients prepared once (and no cosine terms for a trajectory whose b is zero, as the
    nodes' generator's); equal to ``evaluate`` to rounding (test_node_fast_paths)."""

    def __init__(self, trajectory):
        self.w = trajectory.omega_f * np.arange(1, trajectory.harmonics + 1)
        self.aT = trajectory.a.T.copy()
        self.bT = trajectory.b.T.copy() if np.any(trajectory.b) else None
        self.q0 = trajectory.q0

    def evaluate(self, t):
        return fourier_qva(t, self.w, self.aT, self.bT, self.q0)
