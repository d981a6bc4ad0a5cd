"""Do the measured joint torques look like what the driver profile says they are? A check of the first seconds
of motion against the URDF, before anything learned from them is published.

Efforts that are not joint torques (motor currents read as torques, gravity-compensated torques read as whole
ones, a wrong torque constant, torques filtered by the driver and read as unfiltered) still fit a rigid-body
model: into masses of a tenth, inertias of the wrong sign, a held-out error that looks plausible. What gives
them away is the nominal model, which is wrong in its details but right in scale, sign and timing: over
``duration`` s of motion (any joint faster than ``MOTION_SPEED``) the filtered torques ``τ_m`` (after
:class:`~robodyn_ros.estimation.effort_measurement.EffortMeasurement`) are regressed on the nominal model's
``τ_n = Y_base β_nom`` and its rate, all joints stacked, beside each joint's friction columns
``[q̇_j, tanh(q̇_j / ε), 1]`` (what a URDF most often lacks, and what would otherwise pass for a lag):

    τ_m ≈ s τ_n - s d τ̇_n + ...        (scale s, lag d: τ_m(t) ≈ s τ_n(t - d))

with the correlation ``ρ`` of ``τ_m`` and ``τ_n``, and per joint the scale ``s_j`` on the joints whose nominal
torque is at least ``JOINT_SHARE`` of the largest joint's. The efforts are judged consistent when ``s``, ``ρ``
and every judged ``s_j`` are within the :class:`Bounds` (:data:`ONLINE` before adapting, the looser :data:`BATCH`
for identification), and ``|d|`` within their ``max_lag`` where one is set; otherwise :attr:`EffortCheck.verdict` is ``"mismatch"`` and :attr:`EffortCheck.reason`
names the likely cause and the parameter to set. Gravity-compensated efforts are also judged as reported, before
the gravity is added back: whole joint torques there (correlation at least ``REPORTED_CORRELATION`` at a scale
within the scale bounds) would get their gravity twice. The online bounds: a URDF off by a factor of two in its masses (further
than any vendor's URDF from its robot) keeps ``s`` within them; currents (torque constants of 5-15 N m/A at the
joint), gravity-compensated torques (``ρ`` 0-0.4 in a slow motion) and a 10-Hz filter (16 ms) do not.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

MOTION_SPEED = 0.05      # rad/s: a sample counts as motion when a joint moves faster
JOINT_SHARE = 0.25
MAX_LAG = 0.008          # s: half the lag of a 10-Hz first-order filter


class Bounds(NamedTuple):
    """What the check accepts: the scale ``s`` (lo, hi), a judged joint's ``s_j`` (lo, hi), the least
    correlation."""

    scale: tuple
    joint_scale: tuple
    min_correlation: float
    max_lag: float = MAX_LAG


ONLINE = Bounds((0.5, 2.0), (0.4, 2.5), 0.5, float("inf"))
"""Before a controller adapts to the estimate: a URDF off by a factor of two is no base to adapt from either. The
lag is reported, not judged: on plants whose rotor inertia the URDF lacks (the UR3 of example-robot-data with
0.1 kg m² of armature) it reached -29 ms unfiltered, where 10-Hz filtered torques on the Panda twin give 15 ms."""
BATCH = Bounds((0.25, 4.0), (0.25, 4.0), 0.5, float("inf"))
"""``robodyn identify``, whose purpose is a URDF far from the robot (its nominal-model warning says how far):
only what no URDF explains, currents (torque constants of 5-15 N m/A) and gravity-compensated efforts; no lag
(its zero-phase filter, and bags whose stamps lead or lag their torques by a sample or more)."""
REPORTED_CORRELATION = 0.9
FRICTION_WIDTH = 0.02    # rad/s: the Coulomb sign tanh(v / width) of the friction the URDF may lack


class EffortCheck:
    """The check of the module docstring for the efforts of ``kind`` (``effort.kind``) with the driver filter
    ``filter_cutoff`` (Hz) compensated, over ``duration`` s of motion of the joints ``joint_names``.

    :meth:`observe` per filtered sample; :attr:`verdict` is ``"pending"``, ``"consistent"`` or ``"mismatch"``
    (final), :attr:`reason` the one line saying why, :meth:`values` the numbers for /diagnostics."""

    def __init__(self, joint_names, kind="torque", filter_cutoff=0.0, duration=2.0, bounds=ONLINE):
        self.joint_names, self.kind, self.filter_cutoff = tuple(joint_names), kind, float(filter_cutoff)
        self.bounds = bounds
        self.duration = float(duration)
        nv = len(self.joint_names)
        n = 2 + 3 * nv                            # normal equations of [τ_n, τ̇_n, friction per joint] -> τ_m
        self.A, self.b = np.zeros((n, n)), np.zeros(n)
        self._X = np.zeros((nv, n))
        self.S_mn, self.S_nn, self.S_mm = np.zeros(nv), np.zeros(nv), np.zeros(nv)
        self.S_rn = self.S_rr = 0.0               # the efforts as reported (before adding gravity back)
        self.motion_time = 0.0
        self._previous = None                     # (t, τ_n)
        self.verdict, self.reason = "pending", ""
        self.scale = self.correlation = self.lag = float("nan")
        self.joint_scale = np.full(nv, np.nan)

    def observe(self, t, tau_nominal, tau_measured, v, as_reported=None):
        """One filtered sample at time t: the nominal model's torques, the measured ones and the velocities (nv,)
        each; ``as_reported`` (nv,): for gravity-compensated efforts, the efforts before the gravity was added
        back (which must not look like whole joint torques). Returns :attr:`verdict`."""
        if self.verdict != "pending":
            return self.verdict
        previous, self._previous = self._previous, (t, np.array(tau_nominal, dtype=float))
        if previous is None or t <= previous[0] or np.max(np.abs(v)) < MOTION_SPEED:
            return self.verdict
        dt = t - previous[0]
        rate = (tau_nominal - previous[1]) / dt
        X, j = self._X, np.arange(len(v))
        X[:, 0], X[:, 1] = tau_nominal, rate
        X[j, 2 + 3 * j], X[j, 3 + 3 * j], X[j, 4 + 3 * j] = v, np.tanh(v / FRICTION_WIDTH), 1.0
        self.A += X.T @ X
        self.b += X.T @ tau_measured
        self.S_mn += tau_measured * tau_nominal
        self.S_nn += tau_nominal ** 2
        self.S_mm += tau_measured ** 2
        if as_reported is not None:
            self.S_rn += float(as_reported @ tau_nominal)
            self.S_rr += float(as_reported @ as_reported)
        self.motion_time += dt
        if self.motion_time >= self.duration:
            self._judge()
        return self.verdict

    def _judge(self):
        try:
            x = np.linalg.lstsq(self.A, self.b, rcond=1e-12)[0]
            a, b = x[0], x[1]
        except np.linalg.LinAlgError:
            a, b = 0.0, 0.0
        self.scale = float(a)
        self.lag = float(-b / a) if abs(a) > 1e-12 else float("nan")
        self.correlation = float(self.S_mn.sum() / np.sqrt(max(self.S_mm.sum() * self.S_nn.sum(), 1e-300)))
        judged = self.S_nn >= JOINT_SHARE ** 2 * self.S_nn.max()
        self.joint_scale = np.where(judged, self.S_mn / np.maximum(self.S_nn, 1e-300), np.nan)
        self.reason = self._cause(judged)
        self.verdict = "mismatch" if self.reason else "consistent"

    def _cause(self, judged):
        """The one-line reason of a mismatch, or "" when the efforts are consistent."""
        s, rho, d = self.scale, self.correlation, self.lag
        seen = (f"over {self.motion_time:.1f} s of motion the joint efforts are {s:.3g} times the URDF's joint "
                f"torques (correlation {rho:.2f}, lag {1e3 * d:.0f} ms)")
        if self.S_rr > 0.0:
            s_r = self.S_rn / self.S_nn.sum()
            rho_r = self.S_rn / np.sqrt(self.S_rr * self.S_nn.sum())
            if rho_r >= REPORTED_CORRELATION and self.bounds.scale[0] <= s_r <= self.bounds.scale[1]:
                return (f"over {self.motion_time:.1f} s of motion the efforts as reported are already {s_r:.3g} times "
                        f"the URDF's whole joint torques (correlation {rho_r:.2f}): gravity added back to efforts that "
                        f"include it? set effort.kind: torque (Franka's tau_J, KUKA's measured torque)")
        if rho < self.bounds.min_correlation:
            if self.kind == "torque":
                return (f"{seen}: they do not follow the URDF's gravity, as gravity-compensated efforts do (UR "
                        f"drivers that report torques): set effort.kind: gravity_compensated (driver: ur), or check "
                        f"that the URDF and the joint names are the robot's")
            return (f"{seen}: they do not follow the URDF's torques with effort.kind {self.kind}: check effort.kind "
                    f"(torque for Franka's tau_J), the URDF and the joint names")
        off = [j for j in np.flatnonzero(np.isfinite(self.joint_scale))
               if not self.bounds.joint_scale[0] <= self.joint_scale[j] <= self.bounds.joint_scale[1]]
        joints = ", ".join(f"{self.joint_names[j]} {self.joint_scale[j]:.3g}" for j in off)
        if self.kind == "current" and off and len(off) < np.count_nonzero(np.isfinite(self.joint_scale)):
            return (f"{seen}, per joint {joints} times: the torque constants of effort.torque_constants for those "
                    f"joints are off (N m/A per joint, gear ratio included)")
        if not self.bounds.scale[0] <= s <= self.bounds.scale[1]:
            if self.kind == "torque" and 0.0 < s < self.bounds.scale[0]:
                return (f"{seen}: motor currents read as torques? (UR drivers report currents by default) set "
                        f"effort.kind: current with effort.torque_constants (N m/A per joint)")
            if self.kind == "current":
                return (f"{seen}: effort.torque_constants are off by a factor of about {s:.3g} (N m/A per joint, "
                        f"gear ratio included)")
            if self.kind == "gravity_compensated" and s > self.bounds.scale[1]:
                return (f"{seen}: gravity added back to efforts that already include it? set effort.kind: torque "
                        f"(Franka's tau_J, KUKA's measured torque)")
            return f"{seen}: check effort.kind ({self.kind}) and that the URDF is the robot's"
        if off:
            return f"{seen}, but per joint {joints} times: check those joints' effort sign and scale"
        if abs(d) > self.bounds.max_lag:
            if d > 0 and self.filter_cutoff <= 0.0:
                return (f"{seen}: the efforts lag the joint states, as a driver's low-pass filter makes them "
                        f"(lbr_fri_ros2_stack: 10 Hz, 16 ms): set effort.filter_cutoff to the driver's cutoff "
                        f"(driver: lbr)")
            return (f"{seen}: effort.filter_cutoff {self.filter_cutoff:g} Hz does not match the lag of the efforts: "
                    f"set it to the driver's cutoff (0: unfiltered)")
        return ""

    def values(self):
        """``{name: value}`` of the check for /diagnostics."""
        return {"effort_check": self.verdict, "effort_scale": self.scale, "effort_correlation": self.correlation,
                "effort_lag_ms": 1e3 * self.lag}
