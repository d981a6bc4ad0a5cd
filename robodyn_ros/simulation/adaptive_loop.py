"""The adaptive loop on a plant that is not the model, without ROS: what ``robodyn demo --scenario twin`` runs.

At 1 kHz: the plant (e.g. the Panda twin, :mod:`robodyn_ros.simulation.plant`) is measured with noise; the
estimator node's :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator` (causal Butterworth filter
-> base regressor -> recursive least squares on ``τ = Y_base β``; :func:`joint_torque_estimator`: joint
torques only, the plant's per-joint noise as σ and its Coulomb width) takes every joint state.
Every ``1 / consistent_rate`` s its estimate is mapped to the closest physically consistent full parameter
set (:class:`robodyn_ros.control.consistent_parameters.ConsistentParameters`); at ``publish_rate`` that
candidate is offered to the :class:`~robodyn_ros.control.parameter_gate.ParameterGate`, whose applied
parameters the controller uses from the next step on:

* ``computed_torque`` / ``slotine_li``: :mod:`robodyn_ros.control.base_parameter_control` (inverse dynamics
  from ``Y_base β``, friction included), a newly applied ``β`` taken over ``blend_time`` s
  (:mod:`robodyn_ros.control.parameter_blend`);
* ``mpc``: :class:`robodyn_ros.control.adaptive_mpc.AdaptiveMPC` (solves at ``mpc_rate``, feedforward and
  gains at 1 kHz), its NLP parameters ``θ = [π, f_v, f_c, f_o]`` those of the consistent set (nothing
  rebuilt).

A payload attached at ``attach_time`` is estimated from the joint torques as a load on the last body that
explains the torque residual of the estimate from just before the change detector fired (the estimator's
``payload_reference: before_change``; the robot starts without one: changes detected within
``CONVERGED_AFTER`` s of the first update are the estimate converging, not a payload); the controller gets the
parameters applied before the change plus the payload, through the gate, once the payload mass is known to
0.05 kg. With ``adapt=False`` the same loop (same noise) runs on the nominal model.

The oracle (:class:`OracleLoop`) is that loop given the plant's exact model, the payload added to it when it is
attached, and no adaptation: what adaptation could at best achieve. :func:`twin_experiment` runs the nominal
loop, the adaptive loop and the oracle, and measures the adapted loop against both (:func:`window_ratios`,
:func:`time_to_oracle`).

``driver`` (franka, ur, lbr; :mod:`robodyn_ros.model.driver_profiles`): the plant is driven through the robot's
driver as the simulator node emulates it (:class:`~robodyn_ros.simulation.driver_emulation.DriverEmulation`:
gravity and friction compensation added, the rate limit, efforts as the driver reports them, at the driver's
rate; the robot's set payload is none), and the controller and the estimator take the profile's settings
(gravity and friction left out of the commands, the efforts turned back into joint torques), as the nodes do
with the same ``driver`` parameter. The MPC runs with the generic driver only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..control.base_parameter_control import (BaseParameterComputedTorque, BaseParameterDynamics,
                                              BaseParameterSlotineLi, InertiaPlausibility)
from ..control.base_parameter_update import OBSERVE_PERIOD, PAYLOAD_FRESH, nominal_links
from ..control.parameter_blend import BLEND_TIME, ParameterBlend
from ..control.consistent_parameters import ConsistentParameters
from ..control.parameter_gate import ParameterGate, friction_from_base, friction_indices, mass_matrix_weighting
from ..control.robot_friction import FrictionResidual, friction_learned
from ..estimation.estimator_parameters import COULOMB_WIDTH
from ..estimation.online_estimator import OnlineEstimator
from ..identification.base_parameters import compute_base_parameters, full_parameters
from ..model.driver_profiles import DRIVERS, profile_defaults
from ..model.errors import ModelError
from .driver_emulation import DriverEmulation, driver_config
from .learning_limit import learning_report
from .simulation_step import engine_step
from .simulator import Payload, SensorNoise, Simulator, SimulatorConfig

CONTROLLERS = ("computed_torque", "slotine_li", "mpc")
CONVERGED_AFTER = 2.0   # s after the first estimator update from which a detected change is a payload


@dataclass
class AdaptiveLoopConfig:
    """What the loop runs: ``controller`` (one of CONTROLLERS), ``duration`` (s), ``attach_time`` (s, the
    payload; None: none), ``payload_mass`` (kg, a 0.1 m box centred ``payload_com`` in ``payload_link``'s
    frame), ``adapt`` (False: the nominal model throughout), gains ``kp``, ``kd`` (computed torque; Slotine-Li
    uses ``Lambda = kp / kd`` and ``K_D = kd diag(M_nom(q_0))``), the sensor noise (position, velocity; the effort noise is the
    plant's when it has one, else ``effort_noise``), the estimator's ``cutoff`` (Hz), ``filter_order``,
    ``effort_std`` (σ assumed by the RLS and the gate, N m, scalar or (nv,); None: the sensor's effort noise), ``coulomb_width`` (rad/s, the estimator's Coulomb sign; None:
    the plant's), ``publish_rate`` (Hz, estimate offered to the gate), ``mpc_rate`` (Hz), ``blend_time`` (s, the
    ramp of a newly applied set into computed torque and Slotine-Li; 0: at once), ``seed``, the plant's ``engine``
    (``robodyn`` or ``mujoco``, :data:`robodyn_ros.simulation.simulator.ENGINES`) and its ``substeps``."""

    controller: str = "computed_torque"
    duration: float = 15.0
    attach_time: float | None = 7.5
    payload_mass: float = 2.0
    payload_link: str = "panda_link8"
    payload_com: tuple = (0.0, 0.0, 0.05)
    adapt: bool = True
    kp: float = 400.0
    kd: float = 40.0
    position_noise: float = 1e-5
    velocity_noise: float = 1e-3
    effort_noise: float = 0.01
    cutoff: float = 20.0
    filter_order: int = 2
    effort_std: float | None = None
    coulomb_width: float | None = None
    publish_rate: float = 100.0
    gate_window: int = 400
    consistent_rate: float = 2.0
    mpc_rate: float = 100.0
    blend_time: float = BLEND_TIME
    seed: int = 0
    substeps: int = 1
    engine: str = "robodyn"
    driver: str = "generic"
    options: dict = field(default_factory=dict)

    def validate(self):
        if self.controller not in CONTROLLERS:
            raise ModelError(f"controller must be one of {', '.join(CONTROLLERS)}, got {self.controller!r}")
        if not self.duration > 0:
            raise ModelError(f"duration must be positive, got {self.duration}")
        if not self.blend_time >= 0:
            raise ModelError(f"blend_time must be >= 0 s, got {self.blend_time}")
        if self.attach_time is not None and not 0 < self.attach_time < self.duration:
            raise ModelError(f"attach_time must be inside (0, duration = {self.duration}), got {self.attach_time}")
        if self.driver not in DRIVERS:
            raise ModelError(f"driver must be one of {', '.join(DRIVERS)}, got {self.driver!r}")
        if self.driver != "generic" and self.controller == "mpc":
            raise ModelError(f"the library loop runs the mpc with the generic driver only (driver {self.driver}: "
                             f"use the nodes)")


def joint_torque_estimator(model, cutoff=20.0, order=2, effort_std=None, coulomb_width=None, holdoff=0.0, effort=None):
    """The estimator node's :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator` on joint torques
    only (``use_wrench`` false): causal filter (``cutoff``, ``order``), base regressor with the Coulomb sign
    ``tanh(v / coulomb_width)``, RLS with σ ``effort_std`` (scalar or (nv,)), payload referenced to the
    estimate held just before a detected change (``payload_reference`` before_change; changes within
    ``holdoff`` s of the first update are convergence); ``effort``: the ``effort.*`` parameters of the robot's
    driver (what its efforts are)."""
    std = np.broadcast_to(np.asarray(effort_std if effort_std is not None else 0.0, dtype=float), (model.nv,))
    return OnlineEstimator(model, {"use_wrench": False, "base_parameters": True, "filter.cutoff": float(cutoff),
                                   "filter.order": int(order),
                                   "effort_noise_per_joint": [float(x) for x in std] if np.all(std > 0) else [],
                                   **({} if coulomb_width is None else {"coulomb_width": float(coulomb_width)}),
                                   "payload_reference": "before_change",
                                   "payload_change_holdoff": float(holdoff), "effort_saturation": 0.0,
                                   **(effort or {})})


def payload_candidate(estimator, beta_before, mass_std_limit=0.05):
    """``(β, P, π_p)``: ``beta_before`` (the parameters applied before the change) plus the estimator's payload
    (its RLS on the residual of the estimate before the change) made physical (as the estimator node publishes
    it, :func:`~robodyn_ros.identification.payload.physical_payload`) and taken as a point mass
    (:func:`~robodyn_ros.identification.payload.payload_as_point_mass`), ``β_before + K_last π_p`` with ``P =
    K_last P_p K_lastᵀ``, once the payload mass is known to ``mass_std_limit`` kg; else None."""
    from ..identification.payload import payload_as_point_mass, physical_payload
    rls = estimator.payload_rls
    if beta_before is None or not estimator.payload_references or rls.std[0] > mass_std_limit:
        return None
    K = estimator.base.K[:, estimator.last_body_columns]
    pi_p = payload_as_point_mass(physical_payload(estimator.payload_parameters()))
    return beta_before + K @ pi_p, K @ rls.P @ K.T, pi_p


def time_to_within(t, values, true_value, start, fraction=0.05):
    """Seconds after ``start`` from which ``values`` (at times ``t``) stay within ``fraction`` of
    ``true_value``; None if the last sample is outside."""
    t, values = np.asarray(t), np.asarray(values)
    after = t >= start
    t, values = t[after], values[after]
    if len(t) == 0:
        return None
    bad = np.flatnonzero(np.abs(values - true_value) > fraction * abs(true_value))
    if len(bad) == 0:
        return float(t[0] - start)
    if bad[-1] == len(t) - 1:
        return None
    return float(t[bad[-1] + 1] - start)


def window_ratios(adapted, nominal, start=1.0, width=1.0):
    """Per ``width``-s window from ``start`` to the end of the shorter run: ``(t0, RMS ratio, peak ratio)`` of the
    adapted run's tracking error (``{"t", "error"}`` series) over the nominal run's in the same window (the
    rule that adaptation never makes tracking worse: both at most 1.2 in every window)."""
    out = []
    end = min(float(np.max(adapted["t"])), float(np.max(nominal["t"]))) if len(adapted["t"]) and len(nominal["t"]) \
        else start
    for lo in np.arange(start, end - 0.5 * width + 1e-9, width):
        rows = []
        for run in (adapted, nominal):
            sel = (np.asarray(run["t"]) >= lo) & (np.asarray(run["t"]) < lo + width)
            e = np.asarray(run["error"])[sel]
            rows.append((float(np.sqrt(np.mean(e ** 2))), float(np.abs(e).max())) if len(e) else (np.nan, np.nan))
        (ra, pa), (rn, pn) = rows
        out.append((float(lo), ra / rn if rn > 0 else np.inf, pa / pn if pn > 0 else np.inf))
    return out


def time_to_oracle(windows, factor=2.0):
    """The first window start ``t0`` from which every window's RMS ratio is at most ``factor``: ``windows`` as
    :func:`window_ratios` gives them (``(t0, RMS ratio, peak ratio)`` rows, in time order) for the adapted run
    over the oracle run (:class:`OracleLoop`), the time from which adaptation tracks within ``factor`` of the
    plant's exact model to the end. None when the last window is above ``factor`` (or is not finite) or there is
    no window."""
    ratios = np.array([w[1] for w in windows], dtype=float)
    if len(ratios) == 0:
        return None
    above = np.flatnonzero(~(ratios <= factor))          # a NaN ratio counts as above
    if len(above) == 0:
        return float(windows[0][0])
    if above[-1] == len(ratios) - 1:
        return None
    return float(windows[above[-1] + 1][0])


def rms(errors, t, lo, hi):
    """RMS over all joints of ``errors`` (N, nv) at times ``t`` in ``[lo, hi)``."""
    rows = np.asarray(errors)[(np.asarray(t) >= lo) & (np.asarray(t) < hi)]
    return float(np.sqrt(np.mean(rows ** 2))) if len(rows) else float("nan")


def plant_coulomb_width(plant):
    """The Coulomb width (rad/s) the simulator integrates ``plant``'s friction with: its own, else 1e-3."""
    return plant.coulomb_width if plant.coulomb_width else 1e-3


class AdaptiveLoop:
    """One run (module docstring) of ``plant`` (a :class:`~robodyn_ros.simulation.plant.Plant`) under a controller
    built on ``model`` (the nominal model), following ``reference`` (``evaluate(t) -> (q, v, a)``). ``nominal``:
    the robot's URDF model when ``model`` is not it (:class:`OracleLoop`): what the emulated driver compensates
    with and what Slotine-Li's gains are scaled by (default ``model``)."""

    def __init__(self, model, plant, reference, config=None, base=None, nominal=None):
        self.config = config or AdaptiveLoopConfig()
        self.config.validate()
        self.model, self.plant, self.reference = model, plant, reference
        self.nominal_model = nominal if nominal is not None else model
        c = self.config
        width = c.coulomb_width if c.coulomb_width is not None else COULOMB_WIDTH
        self.base = base or compute_base_parameters(model, coulomb_width=width)
        if abs(self.base.coulomb_width - width) > 1e-12:
            raise ModelError(f"base parameters computed with Coulomb width {self.base.coulomb_width}, loop uses {width}")
        self.dynamics = BaseParameterDynamics(model, self.base)
        noise = plant.sensor_noise(SensorNoise(position=c.position_noise, velocity=c.velocity_noise,
                                               effort=c.effort_noise))
        q0 = np.asarray(reference.evaluate(0.0)[0], dtype=float)
        v0 = np.asarray(reference.evaluate(0.0)[1], dtype=float)
        emulated = driver_config(c.driver)
        sim_config = SimulatorConfig(dt=1.0 / emulated["rate"], noise=noise, seed=c.seed, substeps=c.substeps,
                                     engine=c.engine,
                                     coulomb_smoothing=plant_coulomb_width(plant))
        self.sim = Simulator(model, sim_config, q0=q0, v0=v0, plant=plant, step_function=engine_step(plant, sim_config))
        self.driver = DriverEmulation(self.nominal_model, emulated, sim_config.dt, friction_model=plant.model)
        profile = profile_defaults("inverse_dynamics", c.driver)
        robot_friction = profile.get("robot_compensates_friction", False)
        self.convention = {"gravity_compensated_by_robot": profile.get("gravity_compensated_by_robot", False),
                           "friction_compensation": profile.get("friction_compensation", True) and not robot_friction}
        self.estimator = joint_torque_estimator(model, c.cutoff, c.filter_order, c.effort_std, width,
                                                effort=profile_defaults("estimator", c.driver))
        # the robot's friction compensation, identified from the commands and efforts (ControlLoop's)
        self.robot_friction = FrictionResidual(
            model.nv, self.base, self.estimator.effort if self.estimator.effort.converts else None,
            self.driver.gravity if self.driver.adds_gravity else None) \
            if robot_friction and profile.get("friction_compensation", True) and c.controller != "mpc" else None
        if not np.array_equal(self.estimator.base.independent, self.base.independent):
            raise ModelError("the estimator's base parameters differ from the controllers'")
        # the MPC takes no refinement on information (parameter_gate's docstring), as the mpc node's gate
        gate_options = {"refinement_variance": None} if c.controller == "mpc" else {}
        gate_options.update(c.options.get("gate", {}))
        self.gate = ParameterGate(self.estimator.beta_nominal, window=c.gate_window,
                                  weighting=mass_matrix_weighting(model), friction_indices=friction_indices(self.base),
                                  plausibility=InertiaPlausibility(self.dynamics, self.estimator.beta_nominal),
                                  **gate_options)
        self._consistent = None     # built at the first estimate (an IPOPT problem: half a second)
        self.controller = self._controller()
        # computed torque and Slotine-Li take a new applied set over a ramp (the MPC's θ is checked first)
        self.blend = ParameterBlend(self.estimator.beta_nominal, c.blend_time) if c.controller != "mpc" else None

    @property
    def consistent(self):
        """The :class:`~robodyn_ros.control.consistent_parameters.ConsistentParameters` of the estimates, built
        when first asked for (a loop that does not adapt never builds it)."""
        if self._consistent is None:
            self._consistent = ConsistentParameters(self.model, self.base)
        return self._consistent

    def _robot_friction_update(self, q, effort):
        """A sample of the robot's friction compensation from ``effort`` (the answer to the last command); the
        law sends the friction residual once that is identified and the applied set's friction learned
        (:class:`~robodyn_ros.control.control_loop.ControlLoop`'s rule)."""
        residual = self.robot_friction.update(q, effort, friction_learned(self.blend, self.robot_friction.columns))
        if residual != self.controller.friction_compensation:
            self.controller.friction_compensation = residual
            self.controller.robot_friction = self.robot_friction.fit.torque if residual else None

    def _controller(self):
        c, beta = self.config, self.estimator.beta_nominal
        if c.controller == "computed_torque":
            return BaseParameterComputedTorque(self.model, self.base, beta, c.kp, c.kd, hold=self.sim.config.dt,
                                               dynamics=self.dynamics, **self.convention)
        if c.controller == "slotine_li":
            # the computed-torque gains as Slotine-Li's: Λ = kp / kd and K_D = kd M_nom(q0) (diagonal), so that
            # near q0 both give ë + (Λ + kd) ė + Λ kd e = 0 (K_D in N m s/rad must scale with each joint's
            # inertia: kd = 40 unscaled on a wrist of 1e-3 kg m² is a 40 000 rad/s loop at 1 kHz)
            from ..dynamics.crba import crba
            q0 = np.asarray(self.reference.evaluate(0.0)[0], dtype=float)
            return BaseParameterSlotineLi(self.model, self.base, beta, Lambda=c.kp / c.kd,
                                          kd=c.kd * np.diag(crba(self.nominal_model, q0)), compiled=True,
                                          **self.convention)
        from ..control.adaptive_mpc import AdaptiveMPC
        # simulated time, not wall time: the solve's time limit must not depend on the machine's load
        return AdaptiveMPC(self.model, self.reference, rate=c.mpc_rate, beta=beta, time_limit=10.0,
                           coulomb_smoothing=self.base.coulomb_width, **c.options.get("mpc", {}))

    def _with_payload(self, theta, pi_payload):
        """θ (10 nb + 3 nv,) with the payload's parameters (10,) added to the last body's, or None."""
        if theta is None:
            return None
        theta = theta.copy()
        last = self.model.nbodies - 1
        theta[10 * last:10 * last + 10] += pi_payload
        return theta

    def _attach(self, payload):
        """The payload reaches the plant (the controller learns of it only through the estimator)."""
        self.sim.attach_payload(payload)

    def _command(self, t, meas, dt):
        """``(q_d, tau)``: the reference position at time t and the controller's torque command on the
        measurement ``meas`` (step dt)."""
        q_d, v_d, a_d = self.reference.evaluate(t)
        if self.config.controller == "slotine_li":
            tau, _ = self.controller.compute(meas.q, meas.v, q_d, v_d, a_d, dt)
        elif self.config.controller == "mpc":
            tau, _ = self.controller.compute(t, meas.q, meas.v)
        else:
            tau, _ = self.controller.compute(meas.q, meas.v, q_d, v_d, a_d)
        return q_d, tau

    def _apply(self, gate, t):
        """Hand the gate's applied parameters to the controller from time ``t``: computed torque and Slotine-Li
        over the blend's ramp; the MPC takes θ, the consistent parameters the applied β stands for, and the gate
        revokes what it cannot take."""
        if self.blend is not None:
            self.blend.switch(gate.applied, t)
            return
        theta = (self.controller.nominal_theta() if np.array_equal(gate.applied, gate.beta_nominal)
                 else gate.applied_tag)
        if theta is None or not self.controller.set_parameters(gate.applied, theta):
            gate.revoke()

    def run(self, progress=None):
        """Simulate; returns a dict of series: ``t`` (N,), ``error`` (N, nv) ``q - q_d``, ``t_estimate`` (M,),
        ``payload_mass`` (M,), ``beta`` (M, r) applied, ``estimate`` (M, r) the estimator's own, ``gate`` (M,)
        statuses, plus counters."""
        c, sim, est, gate = self.config, self.sim, self.estimator, self.gate
        dt = sim.config.dt
        steps = int(round(c.duration / dt))
        every = max(1, int(round(1.0 / (c.publish_rate * dt))))
        nv = self.model.nv
        T, E = np.empty(steps), np.empty((steps, nv))
        t_est, mass, betas, estimates, statuses, coulomb = [], [], [], [], [], []
        non_finite, rollbacks, attached, events = 0, 0, False, 0
        consistent_every = max(1, int(round(1.0 / (c.consistent_rate * dt))))
        observe_every = max(1, int(round(OBSERVE_PERIOD / dt)))     # the gate's samples, as the nodes take them
        fit, applied_before, theta_before, restored, observe_from = None, None, None, 0, -np.inf
        wall = time.monotonic()
        for k in range(steps):
            t = sim.t
            if c.attach_time is not None and not attached and t >= c.attach_time - 1e-12:
                self._attach(Payload.box(c.payload_link, c.payload_mass, c.payload_com))
                attached = True
            meas = sim.measure_joints()
            if self.driver.kind != "torque" or self.driver.cutoff > 0.0:
                self.driver.effort_into(meas.t, meas.q, meas.tau)
            blended = self.blend.due(t) if self.blend is not None else None
            if blended is not None:
                self.controller.set_parameters(blended)
            if self.robot_friction is not None:
                self._robot_friction_update(meas.q, meas.tau)
            q_d, tau = self._command(t, meas, dt)
            if not np.all(np.isfinite(tau)):
                non_finite += 1
                tau = np.zeros(nv)
            if self.robot_friction is not None:
                self.robot_friction.commanded(meas.v, tau)
            T[k], E[k] = t, sim.q - q_d
            sim.step(self.driver.applied(t, sim.q, sim.v, tau, True))
            if progress is not None and k % 1000 == 0:
                progress(t)
            if not c.adapt:
                continue
            if est.admit(meas.t, meas.q, meas.v, meas.tau):
                est.step(meas.t, meas.q, meas.v, meas.tau)
                if est.base_sample is not None and k % observe_every == 0 and meas.t >= observe_from:
                    gate.observe(*est.base_sample, q=est.filtered[0])
            if len(est.payload_references) > events:        # a payload change: judge on the new robot only
                events = len(est.payload_references)
                applied_before = gate.applied.copy()
                theta_before = self.controller.theta.copy() if c.controller == "mpc" else None
                # and the filtered samples of the change itself are no robot's; the controller goes back to the
                # links' nominal inertias until the changed robot's are accepted, computed torque and Slotine-Li
                # with the drives' friction and armature kept, the MPC to the nominal set whole
                # (BaseParameterUpdate's nominal_on_change and keep_drives)
                fallback = None if c.controller == "mpc" else nominal_links(
                    self.base, self.model.inertial_parameters(), gate.applied, gate.applied_tag)
                gate.clear_window(nominal=True, fallback=fallback)
                observe_from = meas.t + est.settle_time
            if k % every or est.base_started_at is None or est.withheld:   # as the node: nothing before the check
                continue
            estimator = est.base_estimator
            if fit is None or k % consistent_every == 0:
                fit = self.consistent.fit(estimator.beta, estimator.P)
            beta, P = (fit.beta, estimator.P) if fit.success else (estimator.beta, estimator.P)
            decision = gate.offer(beta, P, source="estimate", tag=fit.theta if fit.success else None)
            if decision.restore is not None:
                estimator.restore(decision.restore)
                rollbacks += 1
            with_payload = payload_candidate(est, applied_before) if events and meas.t >= observe_from else None
            if with_payload is not None:
                payload_decision = gate.offer(*with_payload[:2], source="payload", fresh=PAYLOAD_FRESH,
                                              tag=self._with_payload(theta_before, with_payload[2]))
                if payload_decision.status != "unconverged":
                    decision = payload_decision
            if c.controller == "mpc" and self.controller.restored > restored:
                restored = self.controller.restored      # the MPC was unsound with the applied set
                gate.revoke()
            if not np.array_equal(gate.applied, self.controller.beta if self.blend is None else self.blend.target):
                self._apply(gate, sim.t)
            t_est.append(t)
            mass.append(est.payload_parameters()[0])
            betas.append(gate.applied.copy())
            estimates.append(estimator.beta.copy())
            coulomb.append(friction_from_base(self.base, gate.applied)["coulomb"])
            statuses.append(decision.status)
        return {"t": T, "error": E, "t_estimate": np.array(t_est), "payload_mass": np.array(mass),
                "beta": np.array(betas), "estimate": np.array(estimates), "coulomb": np.array(coulomb), "gate": statuses,
                "non_finite_commands": non_finite,
                "rollbacks": rollbacks + est.base_estimator.rollbacks, "gate_counts": dict(gate.counts),
                "payload_events": list(est.payload_references),
                "wall_seconds": time.monotonic() - wall}


def same_kinematics(a, b, tol=1e-12):
    """Whether models ``a`` and ``b`` move alike: the same joints, tree, joint axes, placements and gravity
    (their inertias, armature and friction may differ)."""
    if (tuple(a.joint_names) != tuple(b.joint_names) or list(a.parents) != list(b.parents)
            or [j.kind for j in a.joints] != [j.kind for j in b.joints]):
        return False
    return (all(np.allclose(ja.S, jb.S, rtol=0.0, atol=tol) for ja, jb in zip(a.joints, b.joints))
            and all(np.allclose(Ra, Rb, rtol=0.0, atol=tol) and np.allclose(pa, pb, rtol=0.0, atol=tol)
                    for (Ra, pa), (Rb, pb) in zip(a.placements, b.placements))
            and np.allclose(a.gravity, b.gravity, rtol=0.0, atol=tol))


class OracleLoop(AdaptiveLoop):
    """The anchor adaptation is measured against: the same loop (gains, noise seed, reference, payload, driver)
    with the controller given ``plant``'s exact model (its inertias, armature and friction, the Coulomb width
    the plant is integrated with) and no adaptation; at the payload's attachment the controller switches at
    once to the plant's model with the payload added (the simulator's own parameters of robot plus payload).

    Computed torque and Slotine-Li are ``τ = Y_base β``: when the plant moves as the nominal model does
    (:func:`same_kinematics`) they keep the nominal model's regressor (and its compiled kernels) and take the
    plant's base parameters ``β = K π_plant``, armature and friction included; otherwise, and for the MPC,
    the controller is built on ``plant.model``: the MPC's ``θ = [π, f_v, f_c, f_o]`` has no armature, which its
    prediction model carries. If the MPC refuses the payload's θ (:class:`MpcSoundness`),
    :attr:`payload_applied` stays False and it goes on with the plant's model without the payload.

    ``model``: the nominal (URDF) model: the emulated driver's own model, what Slotine-Li's gains are scaled
    by and the gravity a driver that adds gravity is credited with, as in the nominal and adapted runs (with such
    a driver the gravity the robot adds is the nominal model's in all three runs; a robot that compensates
    friction compensates the plant's, scaled, and the oracle sends the plant's friction less that exact
    compensation). ModelError when the plant's base parameters are not the nominal model's (other ``independent``
    columns: the two robots are not the same structure)."""

    def __init__(self, model, plant, reference, config=None, base=None):
        width = plant_coulomb_width(plant)
        config = AdaptiveLoopConfig(**{**vars(config or AdaptiveLoopConfig()), "adapt": False,
                                       "coulomb_width": width})
        if base is None or abs(base.coulomb_width - width) > 1e-12:
            base = compute_base_parameters(model, coulomb_width=width)
        plant_base = compute_base_parameters(plant.model, coulomb_width=width)
        if not np.array_equal(plant_base.independent, base.independent):
            raise ModelError(f"plant {plant.source}: its base parameters ({plant_base.count}) are not the nominal "
                             f"model's ({base.count}): no oracle for a plant of another structure")
        if config.controller != "mpc" and same_kinematics(model, plant.model):
            super().__init__(model, plant, reference, config, base)
            self.controller.set_parameters(base.from_full(full_parameters(plant.model)))
        else:
            super().__init__(plant.model, plant, reference, config, plant_base, nominal=model)
            if config.controller != "mpc":     # the gravity a driver adds is that of the robot's own model
                self.controller.beta_robot = plant_base.from_full(full_parameters(model))
        if self.robot_friction is not None:    # the exact residual: the plant's friction less the robot's
            self.robot_friction = None
            self.controller.friction_compensation = True
            self.controller.robot_friction = self.driver.friction
        self.payload_applied = None

    def _attach(self, payload):
        """The payload reaches the plant and, at the same instant, the controller's model."""
        from ..control.mpc.config import parameter_vector, replace_inertial_parameters
        super()._attach(payload)
        pi = self.sim.inertial_parameters                       # the plant's bodies plus the payload
        pi_full = full_parameters(self.plant.model)
        pi_full[:len(pi)] = pi
        beta = self.base.from_full(pi_full)
        if self.config.controller == "mpc":
            theta = replace_inertial_parameters(parameter_vector(self.plant.model), pi, self.plant.model.nbodies)
            self.payload_applied = bool(self.controller.set_parameters(beta, theta))
        else:
            self.controller.set_parameters(beta)
            self.payload_applied = True

    def run(self, progress=None):
        """:meth:`AdaptiveLoop.run` plus ``payload_applied`` (None: no payload)."""
        return {**super().run(progress), "payload_applied": self.payload_applied}


def window_report(adapted, nominal):
    """The report's ``worst_window_ratio`` (the largest RMS or peak ratio of :func:`window_ratios`), its window's
    start ``worst_window_start``, and ``window_ratios`` ([t0, RMS ratio, peak ratio] per second)."""
    windows = window_ratios(adapted, nominal)
    if not windows:
        return {"worst_window_ratio": float("nan"), "worst_window_start": None, "window_ratios": []}
    worst = max(windows, key=lambda w: max(w[1], w[2]))
    return {"worst_window_ratio": float(max(worst[1], worst[2])), "worst_window_start": worst[0],
            "window_ratios": [[round(w[0], 3), round(w[1], 4), round(w[2], 4)] for w in windows]}


def oracle_report(adapted, oracle, lo, end):
    """The report's keys against the oracle run (:class:`OracleLoop`): ``tracking_rms_oracle`` over ``[lo,
    end)`` (the window of ``tracking_rms_adapted``), ``oracle_window_ratios`` ([t0, RMS ratio, peak ratio] of
    the adapted run over the oracle per second from 1 s, :func:`window_ratios`), ``worst_oracle_window_ratio``
    (the largest RMS ratio among them) and ``time_to_oracle`` (:func:`time_to_oracle`, 2 x)."""
    windows = window_ratios(adapted, oracle)
    return {"tracking_rms_oracle": rms(oracle["error"], oracle["t"], lo, end),
            "worst_oracle_window_ratio": float(max(w[1] for w in windows)) if windows else float("nan"),
            "time_to_oracle": time_to_oracle(windows),
            "oracle_payload_applied": oracle["payload_applied"],
            "oracle_window_ratios": [[round(w[0], 3), round(w[1], 4), round(w[2], 4)] for w in windows]}


def twin_experiment(model, plant, reference, config=None, base=None, progress=None, oracle=True):
    """The paired runs of the twin scenario: the nominal model without adaptation and the adaptive loop,
    same plant, trajectory, noise (seed) and payload, and (``oracle``) the same loop on the plant's exact model
    (:class:`OracleLoop`). Returns ``(report dict, adapted series, nominal series)`` with
    ``tracking_rms_nominal`` and ``tracking_rms_adapted`` over the last third of the time before the payload
    (the whole run's last third without one), and with the oracle the keys of :func:`oracle_report` (the
    oracle's series under ``adapted["oracle"]``)."""
    config = config or AdaptiveLoopConfig()
    base = base or compute_base_parameters(model, coulomb_width=config.coulomb_width if config.coulomb_width is not None
                                           else COULOMB_WIDTH)
    nominal_cfg = AdaptiveLoopConfig(**{**vars(config), "adapt": False})
    nominal = AdaptiveLoop(model, plant, reference, nominal_cfg, base).run(progress)
    adapted = AdaptiveLoop(model, plant, reference, config, base).run(progress)
    exact = OracleLoop(model, plant, reference, config, base).run(progress) if oracle else None
    end = config.attach_time if config.attach_time is not None else config.duration
    lo = end * 2.0 / 3.0
    r_nom, r_ad = rms(nominal["error"], nominal["t"], lo, end), rms(adapted["error"], adapted["t"], lo, end)
    report = {
        "controller": config.controller,
        "duration": float(config.duration),
        "tracking_window": [float(lo), float(end)],
        "tracking_rms_nominal": r_nom,
        "tracking_rms_adapted": r_ad,
        "tracking_ratio": r_nom / r_ad if r_ad > 0 else float("inf"),
        "payload_attach_time": config.attach_time,
        "payload_mass_true": float(config.payload_mass) if config.attach_time is not None else 0.0,
        "payload_mass_estimated": float(adapted["payload_mass"][-1]) if len(adapted["payload_mass"]) else float("nan"),
        "payload_source": "joint_torques",
        "payload_time_to_5_percent": (time_to_within(adapted["t_estimate"], adapted["payload_mass"], config.payload_mass,
                                                     config.attach_time) if config.attach_time is not None else None),
        "tracking_rms_after_payload_adapted": rms(adapted["error"], adapted["t"], (config.attach_time or 0.0) + 3.0, np.inf),
        "tracking_rms_after_payload_nominal": rms(nominal["error"], nominal["t"], (config.attach_time or 0.0) + 3.0, np.inf),
        "non_finite_commands": int(adapted["non_finite_commands"] + nominal["non_finite_commands"]),
        **window_report(adapted, nominal),
        "gate": adapted["gate_counts"],
        "rollbacks": int(adapted["rollbacks"]),
        "payload_changes_detected": adapted["payload_events"],
        "wall_seconds": round(adapted["wall_seconds"] + nominal["wall_seconds"]
                              + (exact["wall_seconds"] if exact is not None else 0.0), 2),
        "joints": list(plant.model.joint_names),
        "coulomb_true": [float(x) for x in plant.model.coulomb],
        "coulomb_estimated": [float(x) for x in adapted["coulomb"][-1]] if len(adapted["coulomb"]) else [],
    }
    if exact is not None:
        report.update(oracle_report(adapted, exact, lo, end))
        adapted["oracle"] = exact
    report.update(learning_report(model, plant, base, reference, config, adapted, report.get("tracking_rms_oracle")))
    return report, adapted, nominal
