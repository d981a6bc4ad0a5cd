"""Gazebo-free simulation of a torque-controlled arm: fixed-step forward dynamics (ABA) with joint
friction, stiff spring-damper joint-limit stops, a payload attached to a link at any time, and the
sensors of a ros2_control robot (joint positions, velocities, efforts; a wrist force/torque sensor), with
configurable noise. The simulator node is a thin ROS wrapper around :class:`Simulator`.

Sign conventions: the effort a joint reports is the commanded torque after effort-limit clamping
(``effort_measurement='commanded'``, what most ros2_control drivers report) or that torque minus joint
friction (``'link_side'``, a link-side torque sensor such as Franka's ``tau_J``). The force/torque
sensor reports the wrench it transmits to the load, in the sensor link's frame, about its origin:
``w = Y_b(v_s, a_s) pi_load`` (:func:`robodyn_ros.dynamics.regressor.body_wrench_regressor`, gravity included),
so a static load of mass m reads ``+m g`` opposite to gravity, plus a constant bias.

Integration: :data:`INTEGRATORS` of this package's dynamics (the default ``rk4_implicit`` takes the joint
friction and limit stops implicitly, :mod:`robodyn_ros.simulation.joint_torques`, so one step per ``dt``
suffices whatever the URDF's damping), or MuJoCo (:data:`ENGINES`, ``engine="mujoco"``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..model import spatial
from ..dynamics.aba import aba
from ..model.backend import NUMPY
from ..model.errors import ModelError
from ..dynamics.kinematics import parent_placements
from ..dynamics.regressor import body_wrench_regressor
from ..dynamics.rnea import body_motions
from .joint_torques import applied_torque, implicit_joint_torque, relaxed_position
from .plant import plant_key

INTEGRATORS = ("rk4_implicit", "rk4", "semi_implicit_euler")
"""``rk4_implicit`` (the default): RK4 of the rigid body under the joint friction and limit-stop torque of
an implicit step (:mod:`robodyn_ros.simulation.joint_torques`), stable for any inertia/damping ratio;
``rk4``: classic explicit RK4 of everything; ``semi_implicit_euler``: explicit Euler in ``v``, then ``q``
with the new ``v``."""
ENGINES = ("robodyn", "mujoco")
"""What integrates the plant: ``robodyn`` (this package's dynamics, :data:`INTEGRATORS`) or ``mujoco``
(MuJoCo on the plant written as MJCF, :mod:`robodyn_ros.simulation.mujoco_engine`)."""


class DivergedStep(ModelError):
    """A step whose result is not finite; ``q``, ``v`` (nv,): that result (the simulator keeps the state it
    had before the step)."""

    def __init__(self, q, v):
        super().__init__("simulation diverged (non-finite state); state kept at the previous step")
        self.q, self.v = q, v


@dataclass(frozen=True)
class SensorNoise:
    """Standard deviations of white measurement noise, and the encoder resolution (rad per count).

    ``position``, ``velocity``, ``effort``: a scalar for every joint or an (nv,) sequence per joint
    (e.g. the measured torque noise of a real robot, :mod:`robodyn_ros.simulation.plant`); ``force``,
    ``torque``: the wrist sensor's, scalars."""

    position: float = 0.0
    velocity: float = 0.0
    effort: float = 0.0
    force: float = 0.0
    torque: float = 0.0
    encoder_resolution: float = 0.0


@dataclass(frozen=True)
class Payload:
    """A rigid load: its 10 inertial parameters about the origin of ``link``'s frame, in that frame."""

    link: str
    pi: np.ndarray

    @classmethod
    def box(cls, link, mass, com=(0.0, 0.0, 0.0), size=(0.1, 0.1, 0.1)):
        """A solid box of ``mass`` with its centre at ``com`` (3,) in the link frame, edges ``size``."""
        a, b, c = size
        Ic = mass / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
        return cls(link, spatial.numpy_inertia_params(mass, com, Ic))

    @property
    def mass(self):
        return float(self.pi[0])


@dataclass
class JointMeasurement:
    t: float
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray


@dataclass
class SimulatorConfig:
    dt: float = 1e-3
    integrator: str = "rk4_implicit"         # one of INTEGRATORS (engine robodyn)
    limit_stiffness: float = 2.0e4           # N m / rad beyond a position limit
    limit_damping: float = 2.0e2             # N m s / rad while beyond it
    coulomb_smoothing: float = 1e-3          # rad/s: tanh(v / eps) replaces sign(v) for integration
    effort_measurement: str = "commanded"    # or "link_side"
    noise: SensorNoise = field(default_factory=SensorNoise)
    wrench_bias: tuple = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    seed: int = 0
    substeps: int = 1                        # integration steps per dt (the command is held over dt)
    engine: str = "robodyn"                  # one of ENGINES

    def validate(self):
        if not (np.isfinite(self.dt) and 0 < self.dt <= 0.1):
            raise ModelError(f"simulator dt must be in (0, 0.1] s, got {self.dt}")
        if self.integrator not in INTEGRATORS:
            raise ModelError(f"simulator integrator must be one of {', '.join(INTEGRATORS)}, got {self.integrator!r}")
        if self.engine not in ENGINES:
            raise ModelError(f"simulator engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if not (isinstance(self.substeps, (int, np.integer)) and 1 <= self.substeps <= 1000):
            raise ModelError(f"simulator substeps must be an integer in [1, 1000], got {self.substeps!r}")
        if self.effort_measurement not in ("commanded", "link_side"):
            raise ModelError(f"effort_measurement must be 'commanded' or 'link_side', got {self.effort_measurement!r}")
        for name in ("limit_stiffness", "limit_damping", "coulomb_smoothing"):
            if not (np.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ModelError(f"simulator {name} must be a finite non-negative number")
        for name in ("position", "velocity", "effort", "force", "torque", "encoder_resolution"):
            x = np.asarray(getattr(self.noise, name), dtype=float)
            if x.ndim > 1 or (x.ndim == 1 and name in ("force", "torque", "encoder_resolution")) \
                    or not (np.all(np.isfinite(x)) and np.all(x >= 0)):
                raise ModelError(f"sensor noise {name} must be finite and non-negative"
                                 + ("" if name in ("force", "torque", "encoder_resolution") else
                                    ", a scalar or one value per joint"))


class Simulator:
    """Fixed-step simulation of ``model`` under joint torques.

    ``plant``: the simulated robot when it is not ``model`` (the controllers' model), a
    :class:`robodyn_ros.simulation.plant.Plant` or a Model with the same joints (e.g. a URDF or an
    identified parameter set applied on top of the robot's URDF, :func:`robodyn_ros.simulation.plant.load_plant`);
    ``self.model`` is then the plant's model, ``self.nominal_model`` the one passed in, and
    ``forward_dynamics`` / ``step_function`` must be built from the plant.

    ``forward_dynamics(q, v, tau, pi) -> a`` defaults to the interpreted :func:`robodyn_ros.dynamics.aba`;
    pass a compiled kernel for speed. ``pi`` (10 nbodies,) are the true inertial parameters including
    any attached payload. Fixed-base models with 1-DoF joints. ``wrench_regressor(q, v, a) -> Y_b``
    (6, 10) of ``sensor_link`` (e.g. :class:`robodyn_ros.identification.sensor_wrench.SensorWrenchRegressor`, compiled)
    replaces the NumPy forward pass in :meth:`true_wrench`, which costs milliseconds per sample.
    ``step_function`` (:class:`robodyn_ros.simulation.simulation_step.CompiledStep` of ``model`` and the configured
    integrator) makes :meth:`step` one compiled call (the same arithmetic, to rounding; the robot's and
    payload's parameters are its input, so ``forward_dynamics`` then serves only callers of it).

    ``engine`` (or ``config.engine``): ``"robodyn"`` (default) or ``"mujoco"``: MuJoCo integrates the plant
    (:class:`robodyn_ros.simulation.mujoco_engine.MujocoEngine`, built here unless passed as
    ``step_function``); payloads, the sensors and their noise are the same for both engines.
    """

    def __init__(self, model, config=None, q0=None, v0=None, forward_dynamics=None, sensor_link=None,
                 wrench_regressor=None, step_function=None, plant=None, engine=None):
        if model.nq != model.nv:
            raise ModelError("the simulator handles fixed-base models (nq == nv)")
        self.nominal_model = model
        if plant is not None:
            from .plant import Plant
            plant = plant if isinstance(plant, Plant) else Plant(plant)
            plant.check_matches(model)
            model = plant.model
        self.plant = plant
        self.model = model
        self.config = config or SimulatorConfig()
        if engine is not None:
            self.config = replace(self.config, engine=engine)
        self.config.validate()
        for name, n in (("position", model.nq), ("velocity", model.nv), ("effort", model.nv)):
            x = np.asarray(getattr(self.config.noise, name), dtype=float)
            if x.ndim == 1 and x.size != n:
                raise ModelError(f"sensor noise {name} has {x.size} values for {n} joints")
        self._noisy = tuple(bool(np.any(np.asarray(getattr(self.config.noise, name)) > 0))
                            for name in ("position", "velocity", "effort"))
        self.rng = np.random.default_rng(self.config.seed)
        self.forward_dynamics = forward_dynamics or (lambda q, v, tau, pi: aba(model, q, v, tau, pi=pi))
        self.t = 0.0
        self.q = model.check_vector("q0", np.zeros(model.nq) if q0 is None else q0, model.nq).copy()
        self.v = model.check_vector("v0", np.zeros(model.nv) if v0 is None else v0, model.nv).copy()
        self.tau_command = np.zeros(model.nv)
        self._held_torque = None     # rk4_implicit: command + joint torque over the current step
        self.a = np.zeros(model.nv)
        self.payload = None
        self.sensor_link = sensor_link
        self.wrench_regressor = wrench_regressor
        if step_function is None and self.config.engine == "mujoco":
            from .mujoco_engine import MujocoEngine
            step_function = MujocoEngine(model, coulomb_width=plant.coulomb_width if plant is not None else None)
        if step_function is not None and getattr(step_function, "engine", "robodyn") != self.config.engine:
            raise ModelError(f"step_function is of engine {getattr(step_function, 'engine', 'robodyn')!r}, "
                             f"the simulator's engine is {self.config.engine!r}")
        if step_function is not None and self.config.engine == "robodyn" and (
                step_function.integrator != self.config.integrator or step_function.nv != model.nv):
            raise ModelError(f"step_function integrates with {step_function.integrator!r} for nv = "
                             f"{step_function.nv}, the simulator {self.config.integrator!r} for nv = {model.nv}")
        if step_function is not None and step_function.plant_key != plant_key(model):
            raise ModelError("step_function was compiled for another model than the simulated one "
                             "(build it from the plant: CompiledStep(simulator.model))")
        self.step_function = step_function
        self._pi_sensor = None   # (payload, its parameters about the sensor frame), cached
        if sensor_link is not None:
            model.body_index(sensor_link)
        self._pi_robot = model.inertial_parameters()
        self._pi = self._pi_robot.copy()
        self._effort = np.where(np.isfinite(model.effort_limit), model.effort_limit, np.inf)

    # ----------------------------------------------------------------------------------------- payload
    def attach_payload(self, payload):
        """Rigidly attach ``payload`` (replacing any previous one); its link must belong to a body."""
        frame = self.model.frames.get(payload.link)
        if frame is None or frame.body < 0:
            raise ModelError(f"cannot attach a payload to link '{payload.link}': "
                             + ("unknown link" if frame is None else "it is part of the fixed base"))
        pi = np.asarray(payload.pi, dtype=float)
        if pi.shape != (10,) or not np.all(np.isfinite(pi)) or pi[0] < 0:
            raise ModelError("payload inertial parameters must be 10 finite numbers with non-negative mass")
        tri = spatial.inertia_act(NUMPY, frame.R, frame.p, spatial.inertia_from_params(NUMPY, pi))
        self._pi = self._pi_robot.copy()
        self._pi[10 * frame.body:10 * frame.body + 10] += spatial.params_from_inertia(NUMPY, *tri)
        self.payload = payload

    def detach_payload(self):
        self._pi = self._pi_robot.copy()
        self.payload = None

    @property
    def inertial_parameters(self):
        """True parameters (10 nbodies,) of robot plus payload."""
        return self._pi.copy()

    # ---------------------------------------------------------------------------------------- dynamics
    def applied_torque(self, q, v, tau_command):
        """Torque reaching the rigid bodies: command minus friction plus the joint-limit stops (the module
        function :func:`applied_torque` on NumPy: the formula the compiled step traces on SX)."""
        c = self.config
        return applied_torque(NUMPY, self.model, q, v, tau_command, c.limit_stiffness, c.limit_damping,
                              c.coulomb_smoothing)

    def _acceleration(self, q, v):
        """Acceleration at a stage of the step: under the held command and joint torque (``rk4_implicit``,
        :meth:`_integrate`), or the command and the joint torques at ``(q, v)`` (explicit integrators)."""
        tau = self._held_torque if self._held_torque is not None else self.applied_torque(q, v, self.tau_command)
        return self.forward_dynamics(q, v, tau, self._pi)

    def step(self, tau_command):
        """Advance one ``dt`` with ``tau_command`` (nv,) held (clamped to the effort limits).

        A non-finite command is refused (ModelError) and the state is unchanged."""
        try:
            tau = self.model.check_vector("tau_command", tau_command, self.model.nv)
        except ValueError as exc:   # ModelError too; strings, ragged lists, complex, huge ints included
            raise ModelError(f"torque command must be {self.model.nv} finite numbers: {exc}") from None
        self.step_validated(tau)

    def step_validated(self, tau, external=None):
        """:meth:`step` with ``tau`` (nv,) float64 already known to be finite and in range (validated once
        on receipt, as the simulator node does with each command): the per-step check costs a few µs.
        ``external`` (nv,): joint torques of an external force over the step (a push,
        :class:`~robodyn_ros.simulation.torque_pulse.TorquePulse`), added to the command before the effort
        limits and left out of the measured effort. :class:`DivergedStep` when the step's result is not finite
        (the state is unchanged)."""
        if external is not None:
            tau = tau + external
        if self.step_function is not None:
            q, v, n = self.q, self.v, self.config.substeps
            config = self.config if n == 1 else replace(self.config, dt=self.config.dt / n)
            for _ in range(self.config.substeps):
                q, v, a, self.tau_command, finite = self.step_function.step(q, v, tau, self._pi, config)
                if not finite:
                    raise DivergedStep(q, v)
            self.q, self.v, self.a = q, v, a
            self.t += self.config.dt
        else:
            self.tau_command = np.clip(tau, -self._effort, self._effort)
            q0, v0 = self.q, self.v
            for _ in range(self.config.substeps):
                self._integrate(self.config.dt / self.config.substeps)
                if not (np.all(np.isfinite(self.q)) and np.all(np.isfinite(self.v))):
                    diverged = DivergedStep(self.q, self.v)
                    self.q, self.v = q0, v0
                    raise diverged
            self.a = self._acceleration(self.q, self.v)
            self.t += self.config.dt
        if external is not None:                       # the motors' torque is what the driver reports
            self.tau_command = self.tau_command - external

    def _integrate(self, h):
        """One integration step of ``h`` s under the held ``tau_command`` (and, ``rk4_implicit``, the joint
        torque of :func:`robodyn_ros.simulation.joint_torques.implicit_joint_torque` at the step's start,
        held too, and kept for the acceleration at the end of the step; each joint's position then moved
        to the travel of a first-order relaxation by its weight ``phi``)."""
        q, v, c = self.q, self.v, self.config
        self._held_torque, phi = None, None
        if c.integrator == "rk4_implicit":
            tau_joint, phi = implicit_joint_torque(
                NUMPY, self.model, q, v, self.tau_command, self._pi, h, c.limit_stiffness, c.limit_damping,
                c.coulomb_smoothing)
            self._held_torque = self.tau_command + tau_joint
        if c.integrator != "semi_implicit_euler":
            a1 = self._acceleration(q, v)
            q2, v2 = q + 0.5 * h * v, v + 0.5 * h * a1
            a2 = self._acceleration(q2, v2)
            q3, v3 = q + 0.5 * h * v2, v + 0.5 * h * a2
            a3 = self._acceleration(q3, v3)
            q4, v4 = q + h * v3, v + h * a3
            a4 = self._acceleration(q4, v4)
            self.q = q + h / 6.0 * (v + 2 * v2 + 2 * v3 + v4)
            self.v = v + h / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4)
            if phi is not None:
                self.q = relaxed_position(self.q, v, self.v, phi, h)
        else:
            a1 = self._acceleration(q, v)
            self.v = v + h * a1
            self.q = q + h * self.v

    # ----------------------------------------------------------------------------------------- sensors
    def measure_joints(self):
        """Joint positions, velocities and efforts with the configured noise and quantisation."""
        q, v, tau = np.empty(self.model.nq), np.empty(self.model.nv), np.empty(self.model.nv)
        self.measure_joints_into(q, v, tau)
        return JointMeasurement(self.t, q, v, tau)

    def measure_joints_into(self, q, v, tau):
        """:meth:`measure_joints` written into ``q`` (nq,), ``v``, ``tau`` (nv,) float64 arrays (e.g. views of
        a message's fields), without allocating when there is no noise; returns the time ``t``."""
        n, c = self.config.noise, self.config
        np.copyto(q, self.q)
        if self._noisy[0]:
            q += self.rng.normal(0.0, n.position, self.model.nq)
        if n.encoder_resolution > 0:
            np.multiply(np.round(q / n.encoder_resolution), n.encoder_resolution, out=q)
        np.copyto(v, self.v)
        if self._noisy[1]:
            v += self.rng.normal(0.0, n.velocity, self.model.nv)
        np.copyto(tau, self.tau_command)
        if c.effort_measurement == "link_side":
            tau -= (self.model.viscous * self.v + self.model.coulomb * np.tanh(self.v / max(c.coulomb_smoothing, 1e-12))
                    + self.model.friction_offset)
        if self._noisy[2]:
            tau += self.rng.normal(0.0, n.effort, self.model.nv)
        return self.t

    def true_wrench(self):
        """Noise-free wrench (6,) ``[f; n]`` the sensor transmits to the load, in the sensor frame."""
        if self.sensor_link is None:
            raise ModelError("no force/torque sensor configured (sensor_link)")
        if self.payload is None:
            return np.zeros(6)
        if self.wrench_regressor is not None:
            if self._pi_sensor is None or self._pi_sensor[0] is not self.payload:
                from ..identification.sensor_wrench import inertia_in_frame
                self._pi_sensor = (self.payload, inertia_in_frame(self.model, self.payload.pi, self.payload.link,
                                                                  self.sensor_link))
            return self.wrench_regressor(self.q, self.v, self.a) @ self._pi_sensor[1]
        frame = self.model.frames[self.sensor_link]
        vel, acc = body_motions(NUMPY, self.model, parent_placements(NUMPY, self.model, self.q), self.v, self.a)
        vs = spatial.inv_act_motion(NUMPY, frame.R, frame.p, vel[frame.body])
        as_ = spatial.inv_act_motion(NUMPY, frame.R, frame.p, acc[frame.body])
        pi = self.payload.pi
        if self.payload.link != self.sensor_link:   # express the load's inertia in the sensor frame
            pf = self.model.frames[self.payload.link]
            tri = spatial.inertia_act(NUMPY, pf.R, pf.p, spatial.inertia_from_params(NUMPY, pi))
            Rs, ps = spatial.inverse(NUMPY, frame.R, frame.p)
            pi = spatial.params_from_inertia(NUMPY, *spatial.inertia_act(NUMPY, Rs, ps, tri))
        return body_wrench_regressor(NUMPY, vs, as_) @ pi

    def measure_wrench(self):
        """Sensor reading: :meth:`true_wrench` plus bias and noise."""
        n = self.config.noise
        w = self.true_wrench() + np.asarray(self.config.wrench_bias, dtype=float)
        if n.force > 0:
            w[:3] += self.rng.normal(0.0, n.force, 3)
        if n.torque > 0:
            w[3:] += self.rng.normal(0.0, n.torque, 3)
        return w
