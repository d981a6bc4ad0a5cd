"""MuJoCo as the engine that integrates the plant: the simulator's step on an engine this package did not
write, so that a mistake shared by the package's dynamics, its estimator and its controllers cannot hide.

:class:`MujocoEngine` has the step interface of :class:`~robodyn_ros.simulation.simulation_step.CompiledStep`:
``step(q, v, tau_command, pi, config) -> (q+, v+, a+, tau, finite)``, so the
:class:`~robodyn_ros.simulation.simulator.Simulator` (``engine="mujoco"``) keeps its payloads, sensors,
noise (the same random draws) and checks. The plant is the model written as MJCF
(:func:`robodyn_ros.simulation.mjcf.model_to_mjcf`): MuJoCo integrates it with ``implicitfast`` (the
joint damping implicit in the velocity, the rest semi-implicit Euler), the Coulomb friction is its
``frictionloss`` constraint and the limits its own (the MJCF module says how both differ from this package's
engine; ``config.coulomb_smoothing``, ``limit_stiffness`` and ``limit_damping`` do not apply). A plant whose
friction is defined smoothed (``coulomb_width``: a plant identified with ``coulomb tanh(v / width)``, such
as the Panda twin, :class:`robodyn_ros.simulation.plant.Plant`) keeps that law: MuJoCo's ``frictionloss``
(static friction, no smoothing) would be another robot, so the engine applies the smoothed friction
through MuJoCo's implicit joint damping instead (:meth:`MujocoEngine._advance_smoothed`). Each step
sets MuJoCo's state to ``(q, v)``, applies the clamped command minus the friction offset as
``qfrc_applied``, steps :data:`STEPS_PER_PERIOD` times through ``config.dt`` under it, and evaluates the
acceleration at the new state under the same command (``mj_forward``: what the force/torque sensor
reads). A payload is the inertial parameters ``pi`` of the step: when they change, the bodies' mass,
centre of mass and inertia in MuJoCo's model change with them.

MuJoCo is an optional dependency (``pip install "robodyn_ros[mujoco]"``), imported when an engine is built.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.errors import ModelError
from ..model.backend import NUMPY
from .joint_torques import smoothed_coulomb
from .mjcf import body_inertial, model_to_mjcf
from .plant import plant_key

INTEGRATOR = "implicitfast"
STEPS_PER_PERIOD = 4
"""MuJoCo steps per simulator step (``timestep = dt / 4``): its semi-implicit Euler at 1 ms integrates a
light joint coarsely (the SO-100's 2e-5 kg m² gripper: 1.3e-4 rad of computed-torque tracking error with
the exact model at one step, 3e-5 at four; ``robodyn bench tracking``)."""


def import_mujoco():
    """The ``mujoco`` module, or one ModelError saying how to install it."""
    try:
        import mujoco
    except ImportError:
        raise ModelError('engine mujoco needs the mujoco package: pip install "robodyn_ros[mujoco]"') from None
    return mujoco


class MujocoEngine:
    """One MuJoCo model and data for ``model`` (a fixed-base Model with 1-DoF joints, the plant):
    ``step(q, v, tau_command, pi, config)`` -> ``(q+, v+, a+, tau, finite)`` (module docstring); ``tau``
    the command clamped to the effort limits, ``finite`` False when the state diverged (MuJoCo's
    divergence warnings, or a non-finite state), the state then left to the caller."""

    engine = "mujoco"

    def __init__(self, model, integrator=INTEGRATOR, coulomb_width=None, steps_per_period=STEPS_PER_PERIOD):
        mujoco = self.mujoco = import_mujoco()
        self.coulomb_width, self.steps_per_period = coulomb_width, int(steps_per_period)
        self.model_xml = model_to_mjcf(model, integrator=integrator, frictionloss=coulomb_width is None)
        try:
            self.mj_model = mujoco.MjModel.from_xml_string(self.model_xml)
        except ValueError as exc:
            raise ModelError(f"model '{model.name}': MuJoCo refuses its MJCF: {str(exc).splitlines()[0]}") from None
        self.mj_data = mujoco.MjData(self.mj_model)
        self.integrator, self.nv, self.plant_key = integrator, model.nv, plant_key(model)
        self.model = model
        # MuJoCo body ids of the model's bodies, in model order (0 is the world)
        self._body_ids = np.array([mujoco.mj_name2id(self.mj_model, mujoco.mjtObj.mjOBJ_BODY, name)
                                   for name in model.body_names])
        self._offset = np.asarray(model.friction_offset, dtype=float)
        self._effort = np.where(np.isfinite(model.effort_limit), model.effort_limit, np.inf)
        self._resets = [int(w) for w in (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQPOS,
                                         mujoco.mjtWarning.mjWARN_BADQVEL)]
        self._pi = self._pi_given = None
        self.set_inertial_parameters(model.inertial_parameters())
        self._viscous = self.mj_model.dof_damping.copy()
        self._coulomb = np.asarray(model.coulomb, dtype=float)

    def set_inertial_parameters(self, pi):
        """Make MuJoCo's bodies carry the inertial parameters ``pi`` (10 nbodies,): the model's exact
        values (also where MJCF's compiler would have changed a non-physical inertia), or with a payload."""
        pi = np.array(pi, dtype=float)
        m = self.mj_model
        for i, body in enumerate(self._body_ids):
            mass, com, moments, quat = body_inertial(pi[10 * i:10 * i + 10])
            if np.any(moments < 0.0) or mass < 0.0:
                raise ModelError(f"body '{self.model.body_names[i]}': MuJoCo needs a non-negative mass and "
                                 f"inertia, got mass {mass:.3g} and principal moments {np.round(moments, 6)}")
            m.body_mass[body], m.body_ipos[body], m.body_inertia[body], m.body_iquat[body] = mass, com, moments, quat
        self.mujoco.mj_setConst(m, self.mj_data)
        self._pi = pi

    def step(self, q, v, tau_command, pi, config):
        mujoco, m, d = self.mujoco, self.mj_model, self.mj_data
        if pi is not self._pi_given:      # the simulator passes a new array when its payload changes
            self._pi_given = pi
            if not np.array_equal(pi, self._pi):
                self.set_inertial_parameters(pi)
        tau = np.clip(tau_command, -self._effort, self._effort)
        n = self.steps_per_period
        if m.opt.timestep != config.dt / n:   # the friction constraint's time constant follows the step
            m.opt.timestep = config.dt / n
            m.dof_solref[:, 0] = 2.0 * m.opt.timestep
        resets = self._reset_count()
        for k in range(n):
            if k:
                q, v = d.qpos.copy(), d.qvel.copy()
            if self.coulomb_width is None or not self._coulomb.any():
                self._advance(q, v, tau - self._offset)
            else:
                self._advance_smoothed(q, v, tau - self._offset)
        q_next, v_next = d.qpos.copy(), d.qvel.copy()
        mujoco.mj_forward(m, d)
        finite = self._reset_count() == resets and math.isfinite(q_next.sum() + v_next.sum())
        return q_next, v_next, d.qacc.copy(), tau, finite

    def _reset_count(self):
        """How often MuJoCo has reset this data so far: it does, with a warning, on a position, velocity or
        acceleration that is not finite or beyond 1e10 (the step then diverged)."""
        warning = self.mj_data.warning
        return sum(warning[w].number for w in self._resets)

    def _advance(self, q, v, applied, damping=None):
        """One MuJoCo step from ``(q, v)`` under ``qfrc_applied = applied`` and, when given, the joint damping
        ``damping`` (else the model's viscous friction)."""
        m, d = self.mj_model, self.mj_data
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, applied
        if damping is not None:
            m.dof_damping[:] = damping
        self.mujoco.mj_step(m, d)

    def _advance_smoothed(self, q, v, applied):
        """The step with the plant's Coulomb friction ``coulomb tanh(v / coulomb_width)`` in MuJoCo's implicit
        damping, as :func:`robodyn_ros.simulation.joint_torques.implicit_joint_torque` takes it: the friction
        at ``v`` minus ``W v`` applied, ``W`` added to the joint damping (``implicitfast`` then solves
        ``(M + h W) dv = h (tau - f(v) - ...)``), ``W`` the friction's tangent, or its secant through rest on
        the joints whose velocity that step reversed (a second step from the same state)."""
        friction, tangent, secant = smoothed_coulomb(NUMPY, self._coulomb, v, self.coulomb_width)
        self._advance(q, v, applied - friction + tangent * v, self._viscous + tangent)
        reversed_ = v * self.mj_data.qvel <= 0.0
        if np.any(reversed_ & (self._coulomb > 0)):
            w = np.where(reversed_, secant, tangent)
            self._advance(q, v, applied - friction + w * v, self._viscous + w)
