"""What a robot's driver reports as joint effort, turned into the joint torques the estimator models
(``τ = Y(q, q̇, q̈) θ``, gravity included), and the driver's own low-pass filter applied to the joint states so
that torques and regressor carry the same lag.

``effort.kind`` (docs/DRIVERS.md):

- ``torque``: the joint torque, gravity included (Franka's ``tau_J``, KUKA's measured torque): as it is;
- ``gravity_compensated``: the joint torque minus the robot's own gravity compensation (UR drivers that report
  torques: 0 at rest): ``τ = τ_eff + g(q)`` with ``g`` of the URDF's links and the payload set on the robot
  (``effort.payload_mass`` at ``effort.payload_com`` of the wrist link, a point mass);
- ``current``: motor currents (A; UR drivers by default): ``τ = k ⊙ i`` with the per-joint torque constants
  ``k`` (N m/A, gear ratio included).

``effort.filter_cutoff`` ``f_c`` > 0: the driver low-pass filters the efforts (lbr_fri_ros2_stack: 10 Hz). The
estimator then passes q and q̇ through the same first-order filter, ``y_k = y_{k-1} + α (x_k - y_{k-1})``,
``α = 1 - exp(-2π f_c Δt)`` (Δt from the stamps), before its own filter: a linear filter applied to both sides of
``τ = Y θ`` (as the estimator's Butterworth filter is) leaves the estimate unbiased, where an unfiltered regressor
against efforts lagging by ``1 / (2π f_c)`` (16 ms at 10 Hz) biases every inertia.
"""
from __future__ import annotations

import numpy as np

from ..identification.sensor_wrench import link_inertia_in_body
from ..kernels import compile_kernels
from ..model.spatial import numpy_inertia_params


class EffortMeasurement:
    """Efforts of ``model``'s driver as joint torques (module docstring). ``config``: the estimator's
    parameters (``effort.*``); ``wrist_link``: the link of ``effort.payload_mass``. ValueError naming the
    parameter when ``effort.kind: current`` has no torque constant per joint."""

    def __init__(self, model, config, wrist_link):
        self.model, self.kind = model, config["effort.kind"]
        self.cutoff = float(config["effort.filter_cutoff"])
        self.torque_constants = None
        if self.kind == "current":
            k = np.asarray(config["effort.torque_constants"], dtype=float)
            if k.shape != (model.nv,):
                raise ValueError(f"estimator parameter effort.torque_constants: effort.kind current needs one torque "
                                 f"constant (N m/A) per joint, {model.nv} for {', '.join(model.joint_names)}; got "
                                 f"{k.size}")
            self.torque_constants = k
        self.pi_robot = None
        if self.kind == "gravity_compensated":
            pi = model.inertial_parameters()
            m = float(config["effort.payload_mass"])
            if m > 0.0:
                body = model.frames[wrist_link].body
                point = numpy_inertia_params(m, np.asarray(config["effort.payload_com"], dtype=float), np.zeros((3, 3)))
                pi[10 * body:10 * body + 10] += link_inertia_in_body(model, point, wrist_link)
            self.pi_robot = pi
            self._regressor = compile_kernels(model, register=False, parts=("dynamics",)).regressor
        self._lagged = None        # (t, q, v) of the driver's filter

    @property
    def converts(self):
        """Whether the efforts are anything but joint torques as they are (a conversion or the driver's filter)."""
        return self.kind != "torque" or self.cutoff > 0.0

    def reading(self):
        """What the efforts are read as, in words."""
        what = {"torque": "joint torques",
                "gravity_compensated": "gravity-compensated torques (the URDF's gravity and the set payload added back)",
                "current": "motor currents (times effort.torque_constants)"}[self.kind]
        if self.cutoff > 0.0:
            what += f", filtered by the driver at {self.cutoff:g} Hz (q and v filtered alike)"
        return what

    def torque(self, q, effort):
        """The joint torques (nv,) an effort reading (nv,) at the configuration ``q`` stands for."""
        if self.kind == "current":
            return self.torque_constants * effort
        if self.kind == "gravity_compensated":
            return effort + self.compensation(q)
        return effort

    def compensation(self, q):
        """``effort.kind: gravity_compensated``: the gravity the robot removed from its efforts at ``q`` (nv,),
        of the URDF and the set payload."""
        z = np.zeros(self.model.nv)
        return np.asarray(self._regressor(q, z, z)) @ self.pi_robot

    def lag(self, t, q, v):
        """``(q, v)`` through the driver's first-order filter (as they are without ``effort.filter_cutoff``); the
        first sample, and one after a stamp that does not advance, starts it anew."""
        if self.cutoff <= 0.0:
            return q, v
        if self._lagged is None or t <= self._lagged[0]:
            self._lagged = (t, np.array(q, dtype=float), np.array(v, dtype=float))
            return self._lagged[1].copy(), self._lagged[2].copy()
        alpha = 1.0 - np.exp(-2.0 * np.pi * self.cutoff * (t - self._lagged[0]))
        _, q_l, v_l = self._lagged
        q_l = q_l + alpha * (q - q_l)
        v_l = v_l + alpha * (v - v_l)
        self._lagged = (t, q_l, v_l)
        return q_l.copy(), v_l.copy()

    def restart(self):
        """Forget the filter's state (a clock jump)."""
        self._lagged = None


class MeasuredTorqueSamples:
    """A sample source (``count``, ``has_velocity``, ``blocks(start, stop)``:
    :mod:`robodyn_ros.identification.chunked_filter`) over ``source``, a bag's joint states as the driver
    reported them, with the efforts turned into joint torques and ``q``, ``v`` passed through the driver's
    filter by ``measurement`` (:class:`EffortMeasurement`), so that a batch identification fits what the
    estimator fits. The driver's filter is causal: with ``effort.filter_cutoff`` every range is computed from
    the first sample (and the filter restarted there), so that a held-out range carries the lag the robot's
    efforts had."""

    def __init__(self, source, measurement):
        self.source, self.measurement = source, measurement
        self.count, self.has_velocity = source.count, source.has_velocity

    def blocks(self, start=0, stop=None):
        m = self.measurement
        first = 0 if m.cutoff > 0.0 else start
        m.restart()
        index = first
        for t, q, v, effort in self.source.blocks(first, stop):
            n = len(t)
            skip = max(start - index, 0)
            index += n
            tau = np.array([m.torque(qk, ek) for qk, ek in zip(q, effort)]).reshape(np.shape(effort))
            if m.cutoff > 0.0:
                q, v = self._lagged(t, q, v)
            if skip < n:
                yield t[skip:], q[skip:], None if v is None else v[skip:], tau[skip:]

    def _lagged(self, t, q, v):
        """``(q, v)`` of one block through the driver's filter (``v`` None: the bag has no velocities)."""
        m = self.measurement
        zero = np.zeros(m.model.nv)
        Q, V = np.array(q, dtype=float), None if v is None else np.array(v, dtype=float)
        for k in range(len(t)):
            Q[k], lagged_v = m.lag(t[k], Q[k], zero if V is None else V[k])
            if V is not None:
                V[k] = lagged_v
        return Q, V
