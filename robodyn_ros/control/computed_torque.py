"""Computed-torque control and gravity compensation (Siciliano et al., Robotics, §8.5.2 "inverse
dynamics control"; Spong, Hutchinson and Vidyasagar §8.3).

Computed torque, with ``e = q - q_d``, ``ė = v - v_d``:

    a_cmd = a_d - K_D ė - K_P e
    τ = M(q) a_cmd + C(q, v) v + g(q) + f_v v + f_c sign(v_d) + f_o      (= rnea(q, v, a_cmd) + friction)

With exact parameters the closed loop is the decoupled linear error dynamics ``ë + K_D ė + K_P e = 0``.
The Coulomb term takes the sign of the reference velocity ``v_d``, not of the measured ``v``: near a
velocity reversal the measured velocity is noise (the demo's 1e-3 rad/s) and ``sign(v)`` chatters between
``±f_c``, an acceleration disturbance ``f_c / M_jj`` (0.1 N m on the iiwa's last joint: about 30 rad/s^2)
that gave 5e-2 rad error spikes at every reversal of the iiwa's wrist (tracking RMS 4.4e-3 rad; 4.8e-5
rad with ``sign(v_d)``, same gains).

Robots that compensate gravity themselves (Franka's torque interface expects torques without gravity)
take the same law minus the gravity the robot adds, ``g(q)`` of its own model (the model's nominal parameters,
the URDF): set ``gravity_compensated_by_robot=True``. What the law knows beyond it (a payload, an estimate) is
still sent, as the difference to the robot's model.

Both controllers clip the reference to the joint limits (with a warning), hold the last safe command on
a non-finite state and clamp to the effort limits (:mod:`robodyn_ros.control.command_guard`).
"""
from __future__ import annotations

import numpy as np

from .command_guard import CommandGuard, ControlStatus, effort_bounds
from ..kernels.compiled_functions import DynamicsFunctions
from .reference import clip_reference


def _gain(value, nv, name):
    k = np.broadcast_to(np.asarray(value, dtype=float), (nv,)).copy() if np.ndim(value) <= 1 else None
    if k is None or not np.all(np.isfinite(k)) or np.any(k < 0):
        raise ValueError(f"{name} must be a non-negative scalar or ({nv},) vector, got {value!r}")
    return k


class ComputedTorqueController:
    """Inverse-dynamics feedforward plus PD on the tracking error (module docstring).

    ``kp``, ``kd``: scalar or (nv,) gains; ``pi``: inertial parameters (10 nb,) used by the law (the
    model's by default; change with :meth:`set_parameters`); ``gravity_compensated_by_robot``: leave the
    robot's own gravity (``g(q)`` of the model's nominal parameters) out of the command;
    ``friction_compensation``: add the model's friction (Coulomb on ``v_d``);
    ``limit_margin``: rad kept from the joint limits when clipping references; ``functions``: a shared
    :class:`DynamicsFunctions` (built here, ``compiled`` or not, when None)."""

    def __init__(self, model, kp=400.0, kd=40.0, *, pi=None, gravity_compensated_by_robot=False,
                 friction_compensation=True, limit_margin=0.0, functions=None, compiled=False):
        self.model = model
        self.kp, self.kd = _gain(kp, model.nv, "kp"), _gain(kd, model.nv, "kd")
        self.gravity_compensated_by_robot = bool(gravity_compensated_by_robot)
        self.friction_compensation = bool(friction_compensation)
        self.limit_margin = float(limit_margin)
        self.functions = functions or DynamicsFunctions(model, compiled=compiled)
        self.pi = model.inertial_parameters() if pi is None else np.asarray(pi, dtype=float).copy()
        self.pi_robot = model.inertial_parameters()        # the gravity the robot adds (its own model)
        self.guard = CommandGuard(effort_bounds(model))
        self._friction = tuple(np.asarray(x, dtype=float) for x in (model.viscous, model.coulomb, model.friction_offset))

    def set_parameters(self, pi):
        """Use the inertial parameters ``pi`` (10 nb,) from the next step on (e.g. a new estimate)."""
        pi = np.asarray(pi, dtype=float)
        if pi.shape != self.pi.shape or not np.all(np.isfinite(pi)):
            raise ValueError(f"pi must be a finite ({self.pi.size},) vector")
        self.pi = pi.copy()

    def compute(self, q, v, q_d, v_d, a_d):
        """Torque command ``τ`` (nv,) and :class:`ControlStatus` for the state ``(q, v)`` and reference
        ``(q_d, v_d, a_d)``, all (nv,)."""
        status = ControlStatus()
        inputs = self.guard.checked_inputs(status, self.model, self.limit_margin, q, v, q_d, v_d, a_d)
        if inputs is None:
            return self.guard.hold(), status
        q, v, q_d, v_d, a_d = inputs
        return self.guard.accept(self.torque(q, v, q_d, v_d, a_d), status), status

    def torque(self, q, v, q_d, v_d, a_d):
        """The law alone (module docstring), before the guard: ``τ`` (nv,) for finite float arrays (nv,) and
        a reference inside the joint limits, i.e. what :meth:`compute` has checked (1 kHz callers that have
        validated their inputs call it directly)."""
        a_cmd = a_d - self.kd * (v - v_d) - self.kp * (q - q_d)
        tau = self.functions.rnea(q, v, a_cmd, self.pi)
        if self.gravity_compensated_by_robot:
            tau = tau - self.functions.gravity(q, self.pi_robot)
        if self.friction_compensation:   # Coulomb on the reference velocity (module docstring)
            viscous, coulomb, offset = self._friction
            tau = tau + viscous * v + coulomb * np.sign(v_d) + offset
        return tau


class GravityCompensation:
    """``τ = g(q) + K_P (q_d - q) - K_D v`` (the PD part is zero with the default gains): holds the arm
    still, or lets it be moved by hand when the gains are zero. With ``gravity_compensated_by_robot``
    the robot's own gravity (``g(q)`` of the model's nominal parameters) is left out: only the difference of
    ``pi``'s gravity to it (a payload) is sent."""

    def __init__(self, model, kp=0.0, kd=0.0, *, pi=None, gravity_compensated_by_robot=False, limit_margin=0.0,
                 functions=None, compiled=False):
        self.model = model
        self.kp, self.kd = _gain(kp, model.nv, "kp"), _gain(kd, model.nv, "kd")
        self.gravity_compensated_by_robot = bool(gravity_compensated_by_robot)
        self.limit_margin = float(limit_margin)
        self.functions = functions or DynamicsFunctions(model, compiled=compiled)
        self.pi = model.inertial_parameters() if pi is None else np.asarray(pi, dtype=float).copy()
        self.pi_robot = model.inertial_parameters()        # the gravity the robot adds (its own model)
        self.guard = CommandGuard(effort_bounds(model))

    def set_parameters(self, pi):
        self.pi = np.asarray(pi, dtype=float).copy()

    def compute(self, q, v, q_d=None):
        """Torque ``τ`` (nv,) and status for the state ``(q, v)``; ``q_d`` (nv,) the held configuration
        (the current one when None)."""
        status = ControlStatus()
        if not self.guard.check_finite(status, "nonfinite_state", q=q, v=v):
            return self.guard.hold(), status
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        if q_d is None:
            q_d = q
        elif not self.guard.check_finite(status, "nonfinite_reference", q_d=q_d):
            return self.guard.hold(), status
        zero = np.zeros(self.model.nv)
        q_d, _, _, status.reference_clipped = clip_reference(self.model, q_d, zero, zero, self.limit_margin)
        tau = self.kp * (q_d - q) - self.kd * v + self.functions.gravity(q, self.pi)
        if self.gravity_compensated_by_robot:
            tau = tau - self.functions.gravity(q, self.pi_robot)
        return self.guard.accept(tau, status), status


class FastComputedTorque:
    """The 1 kHz form of :meth:`ComputedTorqueController.compute` for the node: the controller's own law
    (:meth:`ComputedTorqueController.torque`) and guard (:meth:`CommandGuard.clamp_and_limit`, no rate
    limit), without the per-call argument checks and status object. ``q``, ``v`` (nv,) must be finite (the
    nodes' message conversion checks them); a non-finite or out-of-limit reference, or a non-finite
    torque, goes to ``controller.compute`` itself (its clipping warning, fault status and hold). Returns
    ``tau`` (nv,)."""

    def __init__(self, controller):
        self.c = controller
        self.lo = controller.model.lower + controller.limit_margin
        self.hi = controller.model.upper - controller.limit_margin

    def compute(self, q, v, q_d, v_d, a_d):
        c = self.c
        if not (np.isfinite(v_d).all() and np.isfinite(a_d).all()) or (q_d < self.lo).any() or (q_d > self.hi).any() \
                or not np.isfinite(q_d).all():
            return c.compute(q, v, q_d, v_d, a_d)[0]
        tau = c.torque(q, v, q_d, v_d, a_d)
        if not np.isfinite(tau).all():
            return c.compute(q, v, q_d, v_d, a_d)[0]
        return c.guard.clamp_and_limit(tau, None)[0]
