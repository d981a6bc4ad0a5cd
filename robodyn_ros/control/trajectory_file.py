"""A joint reference read from a trajectory file: the CSV ``robodyn excite`` writes (header
``time,<joint name>,...``, one row of positions per sample), followed by cubic-spline interpolation.

``evaluate(t) -> (q_d, v_d, a_d)`` (nv,) each, like every reference of :mod:`robodyn_ros.control.reference`:

- the positions are interpolated by a cubic spline through the rows (C², so v_d and a_d are continuous
  and exact derivatives of q_d); a file whose last row equals its first (a periodic motion, as excite
  writes it) gets periodic end conditions, any other file clamped ones (v_d = 0 at both ends);
- before the first row the reference holds the first row, after the last it holds the last row (at rest),
  or with ``loop=True`` (periodic files only) it repeats the motion.

Time ``t`` is measured from the start of following (``t_start``). ``speed`` (0 < speed <= 1) runs the file
slower: the reference at t is the file's at ``speed t``, so ``v_d`` scales by ``speed`` and ``a_d`` (and the
inertial torques) by ``speed²`` (the first run on a real arm, watched at a quarter of the speed). Columns are matched to the model's
joints by name, so the file may list them in any order and may carry extra columns (which are ignored).
"""
from __future__ import annotations

from bisect import bisect_right

import numpy as np

from ..model.errors import ModelError


def read_trajectory_csv(path):
    """``(names (n,), t (N,), q (N, n))`` of a trajectory CSV; ModelError naming the file and the row or
    column at fault (missing file, header without ``time``, fewer than 2 rows, non-numbers, NaN, times
    not strictly increasing)."""
    try:
        with open(path) as stream:
            header = stream.readline().strip()
            rows = stream.read()
    except OSError as exc:
        raise ModelError(f"trajectory file {path}: {exc.strerror or exc}") from None
    names = [n.strip() for n in header.split(",")]
    if not names or names[0] != "time" or len(names) < 2:
        raise ModelError(f"trajectory file {path}: the header must be 'time,<joint name>,...', got '{header[:80]}'")
    if len(set(names)) != len(names):
        raise ModelError(f"trajectory file {path}: a column is named twice in the header")
    data = []
    for k, line in enumerate(rows.splitlines(), start=2):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != len(names):
            raise ModelError(f"trajectory file {path}, line {k}: {len(fields)} values for {len(names)} columns")
        try:
            data.append([float(x) for x in fields])
        except ValueError:
            raise ModelError(f"trajectory file {path}, line {k}: not a number in '{line[:80]}'") from None
    data = np.array(data, dtype=float).reshape(-1, len(names))
    if len(data) < 2:
        raise ModelError(f"trajectory file {path}: {len(data)} row(s), need at least 2")
    bad = np.argwhere(~np.isfinite(data))
    if len(bad):
        k, j = bad[0]
        raise ModelError(f"trajectory file {path}, line {k + 2}: column '{names[j]}' is {data[k, j]}")
    steps = np.diff(data[:, 0])
    if np.any(steps <= 0):
        k = int(np.flatnonzero(steps <= 0)[0])
        raise ModelError(f"trajectory file {path}, line {k + 3}: time {data[k + 1, 0]} does not follow {data[k, 0]}")
    return names[1:], data[:, 0], data[:, 1:]


class TrajectoryFileReference:
    """Reference of a trajectory file (module docstring).

    path: the CSV; joint_names: the model's joints (nv,), in the order q_d is returned; t_start: time at
    which following starts; loop: repeat a periodic file; model: if given, every row must lie within its
    position limits (ModelError naming the joint and time otherwise); speed: the fraction of the file's speed
    (module docstring).
    """

    def __init__(self, path, joint_names, t_start=0.0, loop=False, model=None, speed=1.0):
        if not 0.0 < speed <= 1.0:
            raise ModelError(f"trajectory speed {speed}: must lie in (0, 1] (a fraction of the file's speed)")
        names, t, q = read_trajectory_csv(path)
        missing = [n for n in joint_names if n not in names]
        if missing:
            raise ModelError(f"trajectory file {path}: no column for joint(s) {missing}; its columns: {names}")
        q = q[:, [names.index(n) for n in joint_names]]
        if model is not None:
            idx = [list(model.joint_names).index(n) for n in joint_names]
            lower, upper = np.asarray(model.lower)[idx], np.asarray(model.upper)[idx]
            outside = np.argwhere((q < lower) | (q > upper))
            if len(outside):
                k, j = outside[0]
                raise ModelError(f"trajectory file {path}: joint {joint_names[j]} at t = {t[k]:g} s is {q[k, j]:.6g}, "
                                 f"outside its limits [{lower[j]:.6g}, {upper[j]:.6g}]")
        self.path, self.joint_names = path, tuple(joint_names)
        self.t0, self.t1 = float(t[0]), float(t[-1])
        self.t_start, self.speed = float(t_start), float(speed)
        scale = max(1.0, float(np.max(np.abs(q))))
        self.periodic = bool(np.all(np.abs(q[-1] - q[0]) <= 1e-9 * scale))
        if loop and not self.periodic:
            raise ModelError(f"trajectory file {path}: loop needs a periodic file (last row equal to the first)")
        self.loop = bool(loop)
        from scipy.interpolate import CubicSpline       # where used (a third of a second of every start)
        spline = CubicSpline(t, q, axis=0, bc_type="periodic" if self.periodic else "clamped")
        # the piecewise polynomials of q, v and a (scipy's coefficients, highest power first, those of v and a
        # led by zeros to the cubic's four), evaluated together in evaluate() as scipy evaluates each, without
        # its per-call overhead (scipy's three calls: 22-27 µs a joint state; evaluated together: 10 µs)
        pieces = [spline.c, spline.derivative(1).c, spline.derivative(2).c]
        c = np.zeros((4, 3) + spline.c.shape[1:])
        for k, p in enumerate(pieces):
            c[4 - len(p):, k] = p
        self._breaks = spline.x.tolist()
        self._coefficients = np.ascontiguousarray(np.moveaxis(c, 2, 0))          # (intervals, 4, 3, n)
        self.q_first, self.q_last = q[0].copy(), q[-1].copy()

    @property
    def duration(self):
        """Seconds from the first row to the last of the file (one period for a periodic file), at full speed."""
        return self.t1 - self.t0

    def evaluate(self, t):
        """``(q_d, v_d, a_d)`` (nv,) each at time ``t`` (s since ``t_start``)."""
        s = self.t0 + self.speed * (float(t) - self.t_start)
        if s < self.t0 or (s > self.t1 and not self.loop):
            q = self.q_first if s < self.t0 else self.q_last
            return q.copy(), np.zeros_like(q), np.zeros_like(q)
        if self.loop:
            s = self.t0 + (s - self.t0) % self.duration
        q, v, a = _piecewise_value(self._coefficients, self._breaks, s)
        return q, self.speed * v, self.speed ** 2 * a


def _piecewise_value(c, breaks, s):
    """The piecewise polynomials of coefficients ``c`` (intervals, degree + 1, ...; highest power first) on
    ``breaks`` at ``s``: the interval with ``breaks[i] <= s < breaks[i + 1]`` (the first or the last beyond the
    ends), its powers of ``s - breaks[i]`` summed from the lowest, as ``scipy.interpolate.PPoly`` sums them
    (a leading zero coefficient adds 0)."""
    i = min(max(bisect_right(breaks, s) - 1, 0), len(breaks) - 2)
    ci = c[i]
    dx = s - breaks[i]
    value = ci[-1].copy()
    z = 1.0
    for k in range(len(ci) - 2, -1, -1):
        z *= dx
        value = value + ci[k] * z
    return value


class ApproachThenFollow:
    """Move at rest from the current configuration to the reference's first sample, then follow it: a
    minimum-jerk quintic (:class:`robodyn_ros.control.reference.QuinticTrajectory`) from ``q_current``
    (nv,) starting at ``t_now``, lasting ``T_a = max_j 1.875 |Δq_j| / (speed_fraction v_max_j)`` (the
    quintic's peak speed is 1.875 Δq / T_a, so no joint exceeds ``speed_fraction`` of its limit;
    at least ``min_duration`` s), then ``reference`` with its ``t_start`` moved to ``t_now + T_a``.
    ``reference`` must start at rest (an excite file does): both pieces then meet with equal q, v = 0."""

    def __init__(self, reference, q_current, t_now, velocity_limit, speed_fraction=0.2, min_duration=1.0):
        from .reference import QuinticTrajectory
        if not 0.0 < speed_fraction <= 1.0:
            raise ModelError(f"speed_fraction={speed_fraction} must lie in (0, 1]")
        reference.t_start = 0.0
        q_goal = reference.evaluate(0.0)[0]
        distance = np.abs(q_goal - np.asarray(q_current, dtype=float))
        duration = max(float(np.max(1.875 * distance / (speed_fraction * np.asarray(velocity_limit, dtype=float)))),
                       float(min_duration))
        self.approach = QuinticTrajectory(np.asarray(q_current, dtype=float), q_goal, duration, float(t_now))
        self.reference = reference
        self.switch = float(t_now) + duration
        reference.t_start = self.switch

    def evaluate(self, t):
        """``(q_d, v_d, a_d)`` (nv,) each at time ``t``."""
        return self.approach.evaluate(t) if t < self.switch else self.reference.evaluate(t)
