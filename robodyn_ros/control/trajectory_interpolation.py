"""A joint trajectory given as points, interpolated segment by segment as ros2_control's
joint_trajectory_controller samples it.

Between two points ``k`` and ``k + 1``, ``T = times[k+1] - times[k]`` apart, the segment is the polynomial
of lowest degree that meets the boundary values the points give (Siciliano, Sciavicco, Villani, Oriolo,
*Robotics: Modelling, Planning and Control*, Sec. 4.2, interpolating polynomials through path points):

- positions only: linear, ``q(s) = q0 + (q1 - q0) s / T``;
- positions and velocities: the cubic Hermite polynomial matching ``(q, v)`` at both ends;
- positions, velocities and accelerations: the quintic matching ``(q, v, a)`` at both ends.

``s = t - times[k]`` is the time within the segment. Every segment is stored as six coefficients per joint,
``q(s) = sum_j c_j s^j`` (unused high orders zero), so that sampling is the same small product whatever
the degree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_EXPONENTS = np.arange(6.0)


def segment_coefficients(T, q0, q1, v0=None, v1=None, a0=None, a1=None):
    """Coefficients ``c`` (6, n) of one segment of duration ``T`` from ``(q0, v0, a0)`` to ``(q1, v1, a1)``
    ((n,) each): linear without velocities, cubic Hermite with velocities, quintic with velocities and
    accelerations; ``q(s) = sum_j c[j] s^j`` for ``0 <= s <= T`` (the boundary-value solutions)."""
    c = np.zeros((6, len(q0)))
    dq = q1 - q0
    c[0] = q0
    if v0 is None:
        c[1] = dq / T
    elif a0 is None:
        c[1] = v0
        c[2] = (3.0 * dq - (2.0 * v0 + v1) * T) / T**2
        c[3] = (-2.0 * dq + (v0 + v1) * T) / T**3
    else:
        c[1], c[2] = v0, 0.5 * a0
        c[3] = (20.0 * dq - (8.0 * v1 + 12.0 * v0) * T - (3.0 * a0 - a1) * T**2) / (2.0 * T**3)
        c[4] = (-30.0 * dq + (14.0 * v1 + 16.0 * v0) * T + (3.0 * a0 - 2.0 * a1) * T**2) / (2.0 * T**4)
        c[5] = (12.0 * dq - 6.0 * (v1 + v0) * T - (a0 - a1) * T**2) / (2.0 * T**5)
    return c


def trajectory_coefficients(times, q, v=None, a=None):
    """Coefficients (N-1, 6, n) of every segment of the points ``times`` (N,) (strictly increasing), ``q``
    (N, n) and optionally ``v``, ``a`` (N, n) (``a`` only with ``v``): :func:`segment_coefficients` of
    each pair of consecutive points. A large change over a very short segment can overflow to non-finite
    coefficients; the caller decides what that means for its input."""
    n_points, n = np.shape(q)
    return np.array([
        segment_coefficients(times[k + 1] - times[k], q[k], q[k + 1],
                             None if v is None else v[k], None if v is None else v[k + 1],
                             None if a is None else a[k], None if a is None else a[k + 1])
        for k in range(n_points - 1)]).reshape(n_points - 1, 6, n)


@dataclass(frozen=True, eq=False)
class TrajectoryReference:
    """A joint trajectory in ``joint_names`` order, sampled like joint_trajectory_controller does.

    ``times`` (N,) strictly increasing seconds from the trajectory start; ``q`` (N, n); ``v``, ``a``
    (N, n) or None; ``coefficients`` (N-1, 6, n) each segment's polynomial in the local time
    ``s = t - times[k]`` (:func:`trajectory_coefficients`). ``start_stamp`` is the time the trajectory
    starts at, in seconds (0: "start on receipt", as the controller reads a zero header stamp).
    """

    joint_names: tuple
    times: np.ndarray
    q: np.ndarray
    v: np.ndarray | None
    a: np.ndarray | None
    coefficients: np.ndarray
    start_stamp: float = 0.0
    _derivative_coefficients: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        # dq/ds and d2q/ds2 coefficients, so that sample() is three small matrix products
        c = self.coefficients
        dc = c[:, 1:] * np.array([1.0, 2.0, 3.0, 4.0, 5.0])[:, None]
        ddc = c[:, 2:] * np.array([2.0, 6.0, 12.0, 20.0])[:, None]
        object.__setattr__(self, "_derivative_coefficients", (dc, ddc))

    def sample(self, t):
        """``(q (n,), v (n,), a (n,))`` at ``t`` seconds from the start.

        Before ``times[0]`` the first point is held and after ``times[-1]`` the last one, both with zero
        velocity and acceleration; ``times[0] <= t <= times[-1]`` is on the polynomials.
        """
        times = self.times
        if t < times[0] or t > times[-1] or len(times) == 1:
            k = 0 if t < times[-1] else len(times) - 1
            zero = np.zeros(self.q.shape[1])
            return self.q[k].copy(), zero, zero.copy()
        k = min(int(np.searchsorted(times, t, side="right")) - 1, len(times) - 2)
        powers = (t - times[k]) ** _EXPONENTS  # s^0 .. s^5
        dc, ddc = self._derivative_coefficients
        return powers @ self.coefficients[k], powers[:5] @ dc[k], powers[:4] @ ddc[k]
