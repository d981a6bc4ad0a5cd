"""A new parameter set enters the control law over a ramp, not a step.

The gate (:mod:`robodyn_ros.control.parameter_gate`) switches the applied base parameters ``β`` when an
estimate predicts the robot better. Applied at once, the switch is a step in the feedforward
``τ = Y_base(q, v, a) β``: ``Y_base Δβ``, which the feedback has to reject like a torque disturbance. On a light
wrist whose computed-torque gains scale with ``M̂`` (``K_P M̂``: about 0.2 N m/rad on example-robot-data's
UR10's last joint) such a step moves the joint further than the better model gains back within the second:
on ten perturbed UR10 plants under computed torque, switched at once, the adapted loop tracked worse than 1.2
times the nominal one in a second after a switch on two (``perturbed:7`` 1.51, ``perturbed:2`` 1.89), over the
ramp on one (``perturbed:2``, 1.74).

Since the model is linear in ``β``, the blend

    β(t) = β_from + s(t) (β_to - β_from),    s(t) = min((t - t_switch) / T, 1)

is the convex combination ``(1 - s) τ(β_from) + s τ(β_to)`` of the two models' torques: the feedforward
moves from one model's to the other's at a bounded rate ``|Y_base Δβ| / T``. A switch that arrives during a
ramp starts from the blend reached (no jump). A return to the nominal parameters is not blended: the gate
falls back to them when the applied set predicts worse than the URDF, and the nominal model is what adaptation
must never be worse than (ramped back after a payload, the UR10's ``perturbed:0`` tracked 1.30 times worse than
the nominal loop in the second of its payload). When the robot changed (a payload appeared) the fallback is the
links' nominal inertias with the learned friction and armature
(:func:`~robodyn_ros.control.base_parameter_update.nominal_links`), a set like any other: blended. The
physically consistent sets are a convex set (each body's
pseudo-inertia matrix positive semidefinite, friction non-negative), so every blended ``β`` of two
consistent sets stands for a consistent set too.
"""
from __future__ import annotations

import numpy as np

BLEND_TIME = 0.5
"""s: the default ramp from one applied parameter set to the next."""


def _duration(duration):
    """``duration`` (s) as a float; ValueError unless >= 0."""
    if not duration >= 0.0:
        raise ValueError(f"blend duration must be >= 0 s, got {duration!r}")
    return float(duration)


class ParameterBlend:
    """``β(t)`` (module docstring): starts at the nominal parameters ``beta_nominal`` (r,); :meth:`switch` to a
    new target at time ``t`` (back to ``beta_nominal``: at once); :meth:`due` what the controller takes at time
    ``t``. ``duration``: ``T``, s (0: switch at once)."""

    def __init__(self, beta_nominal, duration=BLEND_TIME):
        self.duration = _duration(duration)
        self.beta_nominal = np.array(beta_nominal, dtype=float)
        self.target = self.beta_nominal.copy()
        self._from = self.target.copy()
        self._t_switch = None          # time of the last switch while its ramp is not delivered to its end

    def switch(self, beta, t, duration=None):
        """Blend towards ``beta`` (r,) from time ``t`` on (over ``duration`` s when given), starting from the
        blend at ``t``; to the nominal parameters at once."""
        beta = np.array(beta, dtype=float)
        if np.array_equal(beta, self.target):
            return
        if duration is not None:
            self.duration = _duration(duration)
        nominal = np.array_equal(beta, self.beta_nominal)
        self._from = beta.copy() if nominal else self.value(t)
        self.target = beta
        self._t_switch = float(t) - (self.duration if nominal else 0.0)    # nominal: the ramp is over at t

    @property
    def ramp_start(self):
        """The set a ramp under way started from (r,), or None when none is (the controller has the target)."""
        return None if self._t_switch is None else self._from.copy()

    def shift(self, jump):
        """The clock jumped by ``jump`` s (a time reset): a ramp under way continues where it was."""
        if self._t_switch is not None:
            self._t_switch += float(jump)

    def value(self, t):
        """``β(t)`` (r,): the target after the ramp (and without a switch); before the switch's time (a time
        that went back) the set blended from."""
        if self._t_switch is None or self.duration == 0.0:
            return self.target.copy()
        s = min(max((t - self._t_switch) / self.duration, 0.0), 1.0)
        return self._from + s * (self.target - self._from)

    def due(self, t):
        """``β(t)`` while a ramp is under way (its end, the target, included once), else None: nothing new
        for the controller (which may adapt its own β between switches)."""
        if self._t_switch is None:
            return None
        beta = self.value(t)
        if self.duration == 0.0 or t - self._t_switch >= self.duration:
            self._t_switch = None
        return beta
