"""The friction compensation a robot adds to the torques it receives (UR's ``direct_torque()``: its own friction
model, scaled per joint by the driver's friction-model parameters), identified from a controller's own commands
and the measured efforts, so that a controller that has learned the joints' friction sends only the residual
the robot leaves (``robot_compensates_friction``, the ``ur`` driver profile).

A robot that adds its gravity ``g_r(q)`` and its friction compensation ``f_r(q̇)`` to the command ``τ_c`` applies

    τ = τ_c + g_r(q) + f_r(q̇),

and the efforts report ``τ`` (less ``g_r(q)`` when gravity compensated; in amperes as currents): they include
the robot's compensation, so the estimator learns the joints' whole friction ``f(q̇)``, and a controller that
sends it while the robot adds ``f_r`` compensates friction twice. What the robot added is measured, joint by
joint, as

    y = τ - g_r(q) - τ_c      (:func:`robot_added_torque`; for gravity-compensated efforts ``τ_eff - τ_c``:
                              the robot's gravity cancels exactly, whatever its model),

where ``τ_c`` is the command sent after the previous joint state (applied over the interval that ends at this
one) and ``q̇`` that state's velocity. Each joint's ``y`` is fitted by least squares (with exponential forgetting
over :data:`MEMORY` samples) with the friction law of the base parameters, ``f_r,j(q̇_j) = φ(q̇_j)ᵀ θ_j``,
``φ(q̇) = [q̇, tanh(q̇ / ε), 1]`` (viscous, Coulomb with the smoothing ``ε`` of ``base_parameters.coulomb_width``,
offset): ``θ_j = (Σ φ φᵀ)⁻¹ Σ φ y_j`` (:class:`RobotFrictionFit`). The fit is trusted once every joint has moved
in both directions, at least :data:`MIN_SAMPLES` / 4 samples faster than :data:`MOVING` each way, and its normal
matrix is well conditioned, ``λ_min(Σ φ φᵀ / N) ≥`` :data:`MIN_EXCITATION` (``N`` the samples' weight), over at
least :data:`MIN_SAMPLES` samples. Until then, and for a joint that never moves that much, the robot's
compensation stands and the controller sends none of its own; afterwards it sends ``f̂(q̇_r) - f̂_r(q̇)``, the
learned friction less the robot's (:mod:`robodyn_ros.control.base_parameter_control`'s laws, the ``mpc`` node's
``output: commands``).

Samples with a non-finite value, and those after a command the robot did not apply as the last one sent (no
command yet, a time reset, a watchdog command sent between two states) are skipped. Efforts the driver low-pass
filters (``effort.filter_cutoff``) are not instantaneous torques and cannot be paired with the commands: the
configuration is refused.
"""
from __future__ import annotations

import numpy as np

MIN_SAMPLES = 1000
"""Samples (joint states) before the fit can be trusted: 2 s at UR's 500 Hz."""
MOVING = 0.05
"""rad/s: a joint faster than this moves (in the direction of its sign), for the fit's trust."""
MIN_EXCITATION = 2e-4
"""Smallest eigenvalue of a joint's normalised normal matrix ``Σ φ φᵀ / N`` for the fit to be trusted
(``ε`` = 0.02 rad/s): a joint swinging ``0.1 sin t`` rad/s reaches 5e-4, ``0.3 sin t`` 7e-3; one that stands
stays at 0 (its three columns are then one)."""
REFIT_EVERY = 50
"""Samples between two solves of the normal equations."""
MEMORY = 15000
"""Samples the fit remembers (exponential forgetting, ``Σ ← (1 - 1/MEMORY) Σ`` per sample: 30 s at UR's 500 Hz),
so that it follows a change of the robot's compensation (the driver's friction-model scale set anew, a warm
joint) and forgets samples of a robot that did not apply the commands (a protective stop)."""


def robot_added_torque(measurement, robot_gravity=None):
    """``(q, effort) -> y + τ_c`` (nv,): the measured torque less the robot's gravity (module docstring), from a
    driver's effort reading. ``measurement``: the :class:`~robodyn_ros.estimation.effort_measurement.
    EffortMeasurement` of the controller's ``effort.*`` (None: joint torques as they are); ``robot_gravity(q)``:
    the gravity the robot adds (None: it adds none). ValueError (naming the parameter) for filtered efforts."""
    if robot_gravity is None:
        robot_gravity = lambda q: 0.0      # noqa: E731
    if measurement is None:       # joint torques as they are
        return lambda q, effort: np.asarray(effort, dtype=float) - robot_gravity(q)
    if measurement.cutoff > 0.0:
        raise ValueError(f"robot_compensates_friction: the efforts are filtered by the driver (effort.filter_cutoff "
                         f"{measurement.cutoff:g} Hz), they cannot be paired with the commands to measure the robot's "
                         f"friction compensation; set friction_compensation: false to leave friction to the robot")
    if measurement.kind == "gravity_compensated":
        return lambda q, effort: np.asarray(effort, dtype=float)
    return lambda q, effort: measurement.torque(q, np.asarray(effort, dtype=float)) - robot_gravity(q)


def friction_columns(base):
    """Indices into the base parameters ``β`` (r,) of the joints' friction coefficients (viscous, Coulomb,
    offset; alone or combined), ``base`` a :class:`~robodyn_ros.identification.base_parameters.BaseParameters`."""
    return np.array([r for r, i in enumerate(base.independent)
                     if base.full_names[i].startswith(("viscous_", "coulomb_", "offset_"))], dtype=int)


def holds_learned_friction(beta, beta_nominal, columns):
    """Whether the base parameters ``beta`` (r,) hold friction coefficients (``columns``, :func:`friction_columns`)
    other than the nominal ones ``beta_nominal`` (r,): learned, not the URDF's."""
    return bool(np.any(beta[columns] != beta_nominal[columns]))


def friction_learned(blend, columns):
    """Whether the base parameters a law takes from ``blend`` (a :class:`~robodyn_ros.control.parameter_blend.
    ParameterBlend`) hold learned friction, now and for the rest of the ramp under way: the target's and, during
    a ramp, the start's friction coefficients (``columns``, :func:`friction_columns`) are not all the nominal
    ones. (Blending from the nominal set, the law's friction grows from the URDF's over the ramp: the residual
    then would take the robot's whole compensation away before the learned friction is there.)"""
    start = blend.ramp_start
    return holds_learned_friction(blend.target, blend.beta_nominal, columns) and (
        start is None or holds_learned_friction(start, blend.beta_nominal, columns))


class RobotFrictionFit:
    """The least-squares fit of the robot's friction compensation, joint by joint (module docstring).

    nv: joints; coulomb_width: ``ε`` (rad/s) of the Coulomb term's ``tanh``."""

    def __init__(self, nv, coulomb_width, min_samples=MIN_SAMPLES, min_excitation=MIN_EXCITATION):
        self.nv, self.width = int(nv), float(coulomb_width)
        self.min_samples, self.min_excitation = int(min_samples), float(min_excitation)
        self.normal = np.zeros((self.nv, 3, 3))    # Σ φ φᵀ per joint
        self.moment = np.zeros((self.nv, 3))       # Σ φ y per joint
        self.samples = 0
        self.weight = 0.0                          # Σ of the samples' forgetting weights
        self.theta = np.zeros((self.nv, 3))        # [f_v, f_c, f_o] of each joint's fit
        self.excitation = np.zeros(self.nv)        # λ_min(Σ φ φᵀ / N) per joint at the last solve
        self.moving = np.zeros((self.nv, 2), dtype=int)    # samples faster than MOVING, (positive, negative)
        self.trusted = False
        self._pending = None                       # (v, τ_c) of the last command, paired with the next effort

    def basis(self, v):
        """``φ(q̇)`` (nv, 3): ``[q̇, tanh(q̇ / ε), 1]`` per joint."""
        v = np.asarray(v, dtype=float)
        return np.stack([v, np.tanh(v / self.width), np.ones_like(v)], axis=-1)

    def commanded(self, v, command):
        """The command ``τ_c`` (nv,) sent from the state of velocity ``v`` (nv,): paired with the next effort."""
        command = np.asarray(command, dtype=float)
        self._pending = (np.array(v, dtype=float), command.copy()) if np.all(np.isfinite(command)) else None

    def observe(self, added):
        """The next state's measured torque less the robot's gravity ``added`` (nv,) (:func:`robot_added_torque`):
        one sample ``y = added - τ_c`` at the velocity the command was sent from."""
        if self._pending is None:
            return
        v, command = self._pending
        self._pending = None
        y = np.asarray(added, dtype=float) - command
        if not (np.all(np.isfinite(y)) and np.all(np.isfinite(v))):
            return
        self.moving[:, 0] += v > MOVING
        self.moving[:, 1] += v < -MOVING
        phi = self.basis(v)
        keep = 1.0 - 1.0 / MEMORY
        self.normal = keep * self.normal + phi[:, :, None] * phi[:, None, :]
        self.moment = keep * self.moment + phi * y[:, None]
        self.weight = keep * self.weight + 1.0
        self.samples += 1
        if self.samples % REFIT_EVERY == 0:
            self._solve()

    def _solve(self):
        self.excitation = np.linalg.eigvalsh(self.normal / self.weight)[:, 0]
        if (self.samples < self.min_samples or np.any(self.excitation < self.min_excitation)
                or np.any(self.moving < self.min_samples // 4)):
            return
        self.theta = np.linalg.solve(self.normal, self.moment[:, :, None])[:, :, 0]
        self.trusted = True

    def forget_command(self):
        """A command that was not applied as sent (a time reset, a new activation): no sample from it."""
        self._pending = None

    def torque(self, v):
        """``f̂_r(q̇)`` (nv,): the robot's friction compensation at the velocity ``v`` (zeros until trusted)."""
        if not self.trusted:
            return np.zeros(self.nv)
        return np.einsum("jk,jk->j", self.basis(v), self.theta)

    def diagnostic_values(self):
        """``robot_friction_*`` values for /diagnostics."""
        values = {"robot_friction_samples": self.samples, "robot_friction_trusted": self.trusted,
                  "robot_friction_min_excitation": float(np.min(self.excitation))}
        if self.trusted:
            values.update(robot_friction_viscous=self.theta[:, 0].round(4).tolist(),
                          robot_friction_coulomb=self.theta[:, 1].round(4).tolist())
        return values


class FrictionResidual:
    """What a control loop needs to send the friction residual (module docstring): the :class:`RobotFrictionFit`
    of the robot's compensation (:attr:`fit`), fed with the loop's commands and the efforts that answer them, and
    the rule for sending it.

    base: the loop's :class:`~robodyn_ros.identification.base_parameters.BaseParameters` (the Coulomb smoothing,
    the friction columns :attr:`columns`); measurement, robot_gravity: as for :func:`robot_added_torque`."""

    def __init__(self, nv, base, measurement, robot_gravity=None):
        self.fit = RobotFrictionFit(nv, base.coulomb_width)
        self.columns = friction_columns(base)
        self._added = robot_added_torque(measurement, robot_gravity)
        self._sent = None          # the loop's command count when the paired command went out

    def update(self, q, effort, learned, commands=None):
        """A sample from ``effort`` (nv,; None: none), the answer to the last command at the configuration ``q``;
        returns whether the residual is to be sent now: the fit trusted and the law's friction ``learned``.
        ``commands``: the loop's count of commands sent (a watchdog command sent since the paired one: no
        sample)."""
        if commands is not None and commands != self._sent:
            self.fit.forget_command()
        if effort is not None:
            self.fit.observe(self._added(q, effort))
        return self.fit.trusted and learned

    def commanded(self, v, command, commands=None):
        """The command (nv,) sent from the state of velocity ``v`` (nv,), the ``commands``-th."""
        self.fit.commanded(v, command)
        self._sent = commands

    def restart(self):
        """A new activation: the last command is not paired with the next effort."""
        self.fit.forget_command()
