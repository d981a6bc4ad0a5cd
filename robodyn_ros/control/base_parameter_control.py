"""Controllers that use a base-parameter estimate directly: inverse dynamics from the base regressor.

The joint-torque model is linear in the base parameters (Gautier & Khalil 1990;
:mod:`robodyn_ros.identification.base_parameters`), friction and armature included:

    τ = Y_full(q, v, a) π_full = Y_base(q, v, a) β,    Y_base = Y_full[:, independent]      (nv, r)

with ``Y_full = [Y_rigid | Y_joint]``, ``Y_joint[j, 4j:4j+4] = [a_j, v_j, sgn(v_j), 1]``. So the inverse
dynamics of the estimated robot needs β only, never the full parameters an estimator cannot see:

* computed torque (Siciliano et al. §8.5.2): ``a_cmd = a_d - K_D ė - K_P e``, ``τ = Y_base(q, v, a_cmd) β``
  (``M a_cmd + C v + g + τ_f`` of the estimated robot);
* Slotine-Li (Slotine and Li 1987): ``v_r = v_d - Λ e``, ``a_r = a_d - Λ ė``, ``s = ė + Λ e``,
  ``τ = Y_sl,base(q, v, v_r, a_r) β - K_D s`` with ``Y_sl π = M a_r + C(q, v) v_r + g`` (Christoffel C) plus
  the joint columns ``[a_r, v_r, sgn(v_d), 1]``. The reduction to base columns holds for ``Y_sl`` too: a
  parameter direction that changes no joint torque changes neither ``M(q)`` nor ``g(q)``, hence neither
  the Christoffel ``C`` built from ``M``. Optionally the controller adapts β itself by the gradient law
  ``β̇ = -Γ Y_sl,baseᵀ s`` (``gamma``); by default it consumes the estimator's β (certainty equivalence).

Both compensate friction from the reference, not the measured velocity: computed torque ``f_v v_r + f_c
sgn(v_d)`` with ``v_r = v_d - Λ e``, ``Λ = K_P / K_D`` (at ``v_d + h/2 a_d`` with a hold ``h``, below),
Slotine-Li ``f_v v_r + f_c sgn(v_d)`` (friction feed-forward; Slotine-Li's ``v_r`` keeps its passivity
argument). The viscous term at ``v_r`` rather than ``v_d`` adds the stiffness ``f_v Λ`` to a joint's feedback,
in proportion to the damping the robot itself has there (the plant's ``f_v (v - v_d)`` damps the error, and
``f_v Λ e`` pulls it back): computed torque's own feedback ``K_P M̂`` scales with a URDF's inertia, which on a
light wrist with joint damping is all but nothing (the Unitree Z1's last joint: ``K_P M = 0.12`` N m/rad
against 1 N m s/rad of damping, 10 N m/rad from ``f_v Λ``). Measured on ten perturbed plants each, library
loop, computed torque: on the Z1 the tracking ratio median went from 4.2 to 52.7 and the runs never worse
than the nominal loop from 5 to 10 of 10, on the xArm7 from 4.8 to 70.0 (10 of 10 both), on the Panda twin
from 12.9 to 18.5. At the measured velocity the compensation is
velocity feedback: a viscous coefficient estimated above the robot's by more than the loop's damping ``K_D
M̂`` turns the loop unstable (measured: the Panda twin's light wrist diverged within 0.2 s of an estimate with
0.50 instead of 0.04 N m s/rad), and the Coulomb sign flips with the noise around every velocity reversal and,
where the model's smoothing is sharper than the robot's friction, drives a limit cycle (the iiwa with its
exact parameters: 4e-2 rad RMS against 4e-4 rad from the reference velocity).

Held for a sample period. A digital loop holds each torque for its period ``h`` while the arm moves: the
rigid-body terms change over the hold, and a joint whose friction acts faster than ``h`` (the xArm7's
joint 7: 2 N m s/rad of damping on 1.4e-4 kg m², a 70-µs time constant; near a velocity reversal any joint
with Coulomb friction, whose smoothed sign has the slope ``f_c / ε``) does not accelerate under the held
torque but settles within the hold at the velocity where its friction balances it, and moves at that
velocity. Computed torque with ``hold = h > 0`` is therefore the inverse dynamics at the middle of the
hold: the rigid body at the state predicted there, ``q_m = q + h/2 v + h²/8 a_cmd``, ``v_m = v + h/2
a_cmd`` (the midpoint rule: the torque whose mean acceleration over the hold is ``a_cmd``), and the
friction at the reference's velocity there, ``v_d + h/2 a_d`` (still feed-forward: no measured velocity in
it; a friction-dominated joint then covers the reference's displacement over the hold). Checked against
plants integrated finely enough to resolve a 70-µs joint (both engines at 20 steps per ms: 0.7-1.2e-5 rad
RMS on the xArm7, Z1 and SO-100 with the exact model, ``robodyn bench tracking``); with the friction at
the end of the hold, ``v_d + h a_d``, such a joint leads by ``h² a_d / 2`` per hold (1.5-2.1e-4 rad), and
with the PD's correction in it, ``v_d + h a_cmd``, the Panda twin's adapted loop tracked 1.5 times worse.

β comes from the estimator through a :class:`robodyn_ros.control.parameter_gate.ParameterGate` (converged,
plausible, not diverging). Both controllers clip the reference to the joint limits, hold the last safe command
on a non-finite state, and clamp to the effort limits (:mod:`robodyn_ros.control.command_guard`).
"""
from __future__ import annotations

import numpy as np

from ..identification.base_parameters import smooth_sign
from .command_guard import CommandGuard, ControlStatus, effort_bounds
from .computed_torque import _gain

MAX_HOLD = 0.01
"""s: the longest hold interval the computed-torque law predicts over (a longer gap between states is a
fault the output stage handles, not a sample period)."""


def _rigid_regressor(model):
    """The compiled regressor kernel ``(q, v, a) -> (nv, 10 nb)`` of ``model`` (about 3 µs), or NumPy's."""
    try:
        from ..kernels import compile_kernels
        return compile_kernels(model, parts=("dynamics",)).regressor
    except Exception:   # no compiler: the interpreted regressor
        from ..dynamics.regressor import regressor
        return lambda q, v, a: regressor(model, q, v, a)


class BaseParameterDynamics:
    """``τ = Y_base(q, v, a) β`` (module docstring) of ``model`` and its
    :class:`~robodyn_ros.identification.base_parameters.BaseParameters` ``base``; the Coulomb sign is
    ``base.coulomb_width``'s. ``rigid_regressor(q, v, a) -> (nv, 10 nb)`` defaults to the compiled kernel."""

    def __init__(self, model, base, rigid_regressor=None):
        self.model, self.base = model, base
        self.rigid_regressor = rigid_regressor or _rigid_regressor(model)
        nv, n_rigid = model.nv, 10 * model.nbodies
        self._Y = np.zeros((nv, n_rigid + 4 * nv))
        j = np.arange(nv)
        self._rows, self._col = j, n_rigid + 4 * j
        self._Y[j, self._col + 3] = 1.0

    def full_regressor(self, Y_rigid, v, a, v_friction=None, v_coulomb=None):
        """``Y_full`` (nv, 10 nb + 4 nv) from the rigid part (nv, 10 nb) and the joint columns of ``a``, ``v``;
        the viscous column taken at ``v_friction`` and the Coulomb column's sign at ``v_coulomb`` when given
        (default: ``v_friction``, else ``v``)."""
        v_friction = v if v_friction is None else v_friction
        Y = self._Y
        Y[:, :Y_rigid.shape[1]] = Y_rigid
        Y[self._rows, self._col] = a
        Y[self._rows, self._col + 1] = v_friction
        Y[self._rows, self._col + 2] = smooth_sign(v_friction if v_coulomb is None else v_coulomb,
                                                   self.base.coulomb_width)
        return Y

    def regressor(self, q, v, a, v_friction=None, v_coulomb=None):
        """``Y_base(q, v, a)`` (nv, r) (the friction columns at ``v_friction`` when given, the Coulomb sign at
        ``v_coulomb``: :meth:`full_regressor`)."""
        Y_rigid = np.asarray(self.rigid_regressor(q, v, a))
        return self.full_regressor(Y_rigid, v, a, v_friction, v_coulomb)[:, self.base.independent]

    def torque(self, q, v, a, beta, v_friction=None, v_coulomb=None):
        """``Y_base(q, v, a) β`` (nv,): rigid body, armature and friction of the parameters ``β`` (r,) (the
        friction at ``v_friction`` when given, the Coulomb sign at ``v_coulomb``: :meth:`full_regressor`)."""
        return self.regressor(q, v, a, v_friction, v_coulomb) @ beta

    def gravity(self, q, beta, Y_rigid=None):
        """``g(q)`` (nv,) of the parameters ``β`` (r,): the rigid columns at rest, without the friction offset
        (``Y_rigid``: ``Y(q, 0, 0)`` (nv, 10 nb) when the caller has it, else the rigid regressor's)."""
        if Y_rigid is None:
            z = np.zeros(self.model.nv)
            Y_rigid = np.asarray(self.rigid_regressor(q, z, z))
        Y = np.zeros_like(self._Y)
        Y[:, :Y_rigid.shape[1]] = Y_rigid
        return Y[:, self.base.independent] @ beta

    def friction(self, v_friction, v_coulomb, beta):
        """``f_v v_friction + f_c sgn(v_coulomb) + f_o`` (nv,) of the parameters ``β`` (r,): the friction
        columns alone, as :meth:`torque` adds them."""
        Y = np.zeros_like(self._Y)
        Y[self._rows, self._col + 1] = v_friction
        Y[self._rows, self._col + 2] = smooth_sign(v_coulomb, self.base.coulomb_width)
        Y[self._rows, self._col + 3] = 1.0
        return Y[:, self.base.independent] @ beta

    def mass_matrix(self, q, beta):
        """``M̂(q)`` (nv, nv) of the parameters ``β`` (r,): column i is ``Y_base(q, 0, e_i) β - Y_base(q, 0, 0) β``
        (armature included; friction and gravity cancel), symmetrised."""
        nv = self.model.nv
        z = np.zeros(nv)
        g = self.torque(q, z, z, beta)
        M = np.stack([self.torque(q, z, e, beta) - g for e in np.eye(nv)], axis=1)
        return 0.5 * (M + M.T)


class InertiaPlausibility:
    """An estimate is plausible when its mass matrix is positive definite and not far lighter than the nominal
    model's in any direction: ``λ_min(M̂(q), M_nom(q)) >= min_ratio`` (generalised eigenvalue) at the given
    configurations. A computed-torque law scales its feedback by ``M̂``: a nearly singular or indefinite
    ``M̂`` turns the PD loop into positive feedback in that direction. (The Panda twin identified from real
    data is at 0.09-0.12 of the nominal URDF's inertia in its lightest direction; the default 0.03 keeps it.)"""

    def __init__(self, dynamics, beta_nominal, min_ratio=0.03):
        self.dynamics, self.beta_nominal, self.min_ratio = dynamics, np.asarray(beta_nominal, dtype=float), float(min_ratio)

    def __call__(self, beta, configurations):
        import scipy.linalg
        for q in configurations:
            try:
                lam = scipy.linalg.eigh(self.dynamics.mass_matrix(q, beta), self.dynamics.mass_matrix(q, self.beta_nominal),
                                        eigvals_only=True)
            except (np.linalg.LinAlgError, ValueError):
                return False
            if not lam[0] >= self.min_ratio:
                return False
        return True


def _check_beta(beta, r):
    beta = np.asarray(beta, dtype=float)
    if beta.shape != (r,) or not np.all(np.isfinite(beta)):
        raise ValueError(f"beta must be a finite ({r},) vector of base parameters")
    return beta.copy()


class BaseParameterComputedTorque:
    """Computed torque on base parameters (module docstring): ``τ = Y_base(q, v, a_d - K_D ė - K_P e) β``, the
    viscous friction at ``v_d - Λ e``.

    ``beta`` (r,): the parameters used (the nominal model's by default; :meth:`set_parameters` for a new
    estimate); ``kp``, ``kd``: scalar or (nv,) gains; ``hold``: the time each command is held, s (the
    control period; 0: the law at the sampled state); ``dynamics``: a shared :class:`BaseParameterDynamics`;
    ``gravity_compensated_by_robot``: leave out of the command the gravity the robot adds, ``g(q)`` of its own
    model (the nominal parameters: the URDF), not of ``β``: what was learned about gravity (the links' and a
    payload's) is still sent, as the difference to the robot's model;
    ``friction_compensation``: add the friction of ``β`` (False: the robot compensates its friction, or none);
    ``robot_friction``: None, or ``f_r(v) -> (nv,)``, the friction compensation the robot adds at the measured
    velocity (:mod:`~robodyn_ros.control.robot_friction`), left out of the friction sent: the residual
    ``f(v_r) - f_r(v)``."""

    def __init__(self, model, base, beta=None, kp=400.0, kd=40.0, *, hold=0.0, limit_margin=0.0, dynamics=None,
                 gravity_compensated_by_robot=False, friction_compensation=True):
        from ..identification.base_parameters import full_parameters
        self.model, self.base = model, base
        self.gravity_compensated_by_robot = bool(gravity_compensated_by_robot)
        self.friction_compensation = bool(friction_compensation)
        self.robot_friction = None
        self.kp, self.kd = _gain(kp, model.nv, "kp"), _gain(kd, model.nv, "kd")
        if not 0.0 <= hold <= MAX_HOLD:
            raise ValueError(f"hold must be in [0, {MAX_HOLD}] s (the control period), got {hold!r}")
        self.hold = float(hold)
        self.dynamics = dynamics or BaseParameterDynamics(model, base)
        self.beta_robot = base.from_full(full_parameters(model))     # the gravity the robot adds
        self.beta = _check_beta(self.beta_robot if beta is None else beta, base.count)
        self.limit_margin = float(limit_margin)
        self.guard = CommandGuard(effort_bounds(model))

    def set_parameters(self, beta):
        """Use the base parameters ``beta`` (r,) from the next step on."""
        self.beta = _check_beta(beta, self.base.count)

    @property
    def Lambda(self):
        """``Λ = K_P / K_D`` (nv,) of the viscous friction at ``v_r = v_d - Λ e`` (module docstring; 0 where
        ``K_D`` is 0); of the gains now (the node changes them live)."""
        return np.divide(self.kp, self.kd, out=np.zeros(self.model.nv), where=self.kd > 0)

    def compute(self, q, v, q_d, v_d, a_d, hold=None):
        """Torque ``τ`` (nv,) and :class:`ControlStatus` for the state ``(q, v)`` and reference
        ``(q_d, v_d, a_d)`` (nv,) each, held for ``hold`` s (None: the constructor's ``hold``; module
        docstring, "Held for a sample period")."""
        status = ControlStatus()
        inputs = self.guard.checked_inputs(status, self.model, self.limit_margin, q, v, q_d, v_d, a_d)
        if inputs is None:
            return self.guard.hold(), status
        q, v, q_d, v_d, a_d = inputs
        h = self.hold if hold is None else min(max(float(hold), 0.0), MAX_HOLD)
        a_cmd = a_d - self.kd * (v - v_d) - self.kp * (q - q_d)
        q_m, v_m = q + 0.5 * h * v + 0.125 * h * h * a_cmd, v + 0.5 * h * a_cmd
        v_f = v_d + 0.5 * h * a_d          # the reference's velocity in the middle of the hold
        v_r = v_f - self.Lambda * (q - q_d)
        tau = self.dynamics.torque(q_m, v_m, a_cmd, self.beta, v_friction=v_r, v_coulomb=v_f)
        if not self.friction_compensation:
            tau = tau - self.dynamics.friction(v_r, v_f, self.beta)
        elif self.robot_friction is not None:
            tau = tau - self.robot_friction(v)
        if self.gravity_compensated_by_robot:
            tau = tau - self.dynamics.gravity(q_m, self.beta_robot)
        return self.guard.accept(tau, status), status


class BaseParameterSlotineLi:
    """Slotine-Li on base parameters (module docstring): ``τ = Y_sl,base(q, v, v_r, a_r) β - K_D s``.

    ``beta`` (r,): initial / consumed estimate (:meth:`set_parameters`); ``Lambda``, ``kd``: scalar or (nv,);
    ``gamma``: gain of the controller's own gradient adaptation ``β̇ = -Γ Y_sl,baseᵀ s`` (0: none, the
    estimate comes from the estimator), a scalar, (r,) diagonal or (r, r); ``functions``: a
    :class:`~robodyn_ros.kernels.compiled_functions.DynamicsFunctions` of ``model`` (its ``slotine_li``);
    ``gravity_compensated_by_robot``, ``friction_compensation``, ``robot_friction``: as for
    :class:`BaseParameterComputedTorque`
    (the robot's gravity, of the nominal parameters, is left out; the adaptation still uses the whole regressor:
    the terms are left out of the command only)."""

    def __init__(self, model, base, beta=None, *, Lambda=10.0, kd=40.0, gamma=0.0, limit_margin=0.0,
                 functions=None, compiled=False, gravity_compensated_by_robot=False, friction_compensation=True):
        from ..identification.base_parameters import full_parameters
        from ..kernels.compiled_functions import DynamicsFunctions
        self.model, self.base = model, base
        self.gravity_compensated_by_robot = bool(gravity_compensated_by_robot)
        self.friction_compensation = bool(friction_compensation)
        self.robot_friction = None
        self.Lambda, self.kd = _gain(Lambda, model.nv, "Lambda"), _gain(kd, model.nv, "kd")
        self.beta_robot = base.from_full(full_parameters(model))     # the gravity the robot adds
        self.beta = _check_beta(self.beta_robot if beta is None else beta, base.count)
        g = np.asarray(gamma, dtype=float)
        self.Gamma = np.diag(np.broadcast_to(g, (base.count,))) if g.ndim <= 1 else g.copy()
        if self.Gamma.shape != (base.count,) * 2 or not np.all(np.isfinite(self.Gamma)):
            raise ValueError(f"gamma must be a scalar, an ({base.count},) vector or a ({base.count}, {base.count}) matrix")
        self.functions = functions or DynamicsFunctions(model, compiled=compiled)
        self.joint = BaseParameterDynamics(model, base, rigid_regressor=lambda q, v, a: None)
        self.limit_margin = float(limit_margin)
        self.guard = CommandGuard(effort_bounds(model))
        self.s = np.zeros(model.nv)

    def set_parameters(self, beta):
        self.beta = _check_beta(beta, self.base.count)

    def regressor(self, q, v, v_r, a_r, v_coulomb=None):
        """``Y_sl,base(q, v, v_r, a_r)`` (nv, r): the Slotine-Li regressor with joint columns ``[a_r, v_r, sgn v, 1]``
        (the sign at ``v_coulomb`` when given)."""
        return self.joint.full_regressor(self.functions.slotine_li(q, v, v_r, a_r), v, a_r, v_r,
                                         v_coulomb)[:, self.base.independent]

    def compute(self, q, v, q_d, v_d, a_d, dt=0.0):
        """Torque ``τ`` (nv,) and status; with ``gamma`` > 0 then one Euler step ``β += dt β̇`` of the
        gradient law (``dt``: the control period, s). On a fault β is not changed."""
        status = ControlStatus()
        inputs = self.guard.checked_inputs(status, self.model, self.limit_margin, q, v, q_d, v_d, a_d)
        if inputs is None:
            return self.guard.hold(), status
        q, v, q_d, v_d, a_d = inputs
        e, de = q - q_d, v - v_d
        v_r, a_r = v_d - self.Lambda * e, a_d - self.Lambda * de
        s = v - v_r
        Y = self.regressor(q, v, v_r, a_r, v_coulomb=v_d)
        tau = Y @ self.beta - self.kd * s
        if not self.friction_compensation:
            tau = tau - self.joint.friction(v_r, v_d, self.beta)
        elif self.robot_friction is not None:
            tau = tau - self.robot_friction(v)
        if self.gravity_compensated_by_robot:
            z = np.zeros(self.model.nv)
            tau = tau - self.joint.gravity(q, self.beta_robot, Y_rigid=self.functions.slotine_li(q, z, z, z))
        tau = self.guard.accept(tau, status)
        if status.ok and dt > 0.0 and self.Gamma.any():
            beta = self.beta - dt * (self.Gamma @ (Y.T @ s))
            if np.all(np.isfinite(beta)):
                self.beta = beta
        self.s = s
        return tau, status
