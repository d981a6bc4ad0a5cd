"""The ``mpc`` node's loop without ROS: :class:`~robodyn_ros.control.mpc.ModelPredictiveController` (built
in the background by :class:`~robodyn_ros.control.mpc.BackgroundController`, gravity compensation served
until it is ready) at a fixed rate on the newest joint state (``trigger: timer``) or on every joint state
(``trigger: joint_state``), tracking the built-in Fourier reference (time from the first joint-state stamp),
and, with ``output: commands``, the solution's torque ``tau_ff,k + K_k (x - x_k)`` at the joint-state rate
through :class:`~robodyn_ros.control.torque_output.TorqueOutput` (stamp gate, watchdog
with the MPC model's gravity hold, guard; no solves while stale; after a time reset the reference time is
re-based so that it continues and the solution of the old time line is dropped).

With ``use_base_parameters`` the estimator's base parameters reach the NLP as its parameters
``θ = [π, f_v, f_c, f_o]`` without a rebuild (:meth:`ModelPredictiveController.set_parameters`): the consistent
set a worker thread fits to each estimate, as far as the parameter gate on this loop's own joint-state
samples lets it through (:class:`~robodyn_ros.control.base_parameter_update.BaseParameterUpdate`, as the
inverse_dynamics node). With ``output: commands`` the Coulomb part is left out of the NLP and compensated at
the joint-state rate, ``+ f_c tanh(v_d / coulomb_width)`` at the reference velocity (as :class:`~robodyn_ros.control.adaptive_mpc.
AdaptiveMPC`: a light wrist's smoothed Coulomb term is too stiff for the 10-ms intervals); with
``output: feedforward`` it stays in the NLP.

``robot_compensates_friction`` (the robot adds its own friction compensation): friction is left out as with
``friction_compensation: false``; with ``output: commands``, ``use_base_parameters`` and ``friction_compensation``,
once the applied set's friction is learned and the robot's compensation identified from this loop's commands and
the measured efforts (:mod:`~robodyn_ros.control.robot_friction`), the solutions keep the friction and the
robot's compensation at the measured velocity is taken off each command: the residual.

A state that comes with no solution in hand (the first, or the first after a time reset) is solved at once and
commanded from that solution, whatever the trigger: no state waits for the timer's first solve (a lockstep
simulator steps on the command for its state, and a Franka counts every uncommanded 1-ms cycle).

``trigger: joint_state`` runs the real-time iteration's two phases around the joint states (Diehl et al. 2005,
sec. 4), on every k-th joint state, k the joint-state rate over ``rate`` rounded (at least 1: every state at
``rate`` >= the joint-state rate): :meth:`MpcLoop.on_state` first commands the state from the solution in hand
(``output: commands``: the torque law at once, as with the timer; the gains act on the new state), then runs the
feedback phase of the step prepared for that state's time (the published solution waits for nothing else, and
the next states are commanded from it), then :meth:`MpcLoop.prepare` linearises and factorises the next step
for the time its state is expected (stamps spaced by the median of the last stamp intervals). A state whose
stamp is within half an interval of the prepared time takes the prepared step, its plan timed from the prepared
time (the measurement stands for the state at that time, as in the paper); any other runs both phases at its
own stamp. While the MPC builds, its gravity fallback is solved every ``dt`` only. Between solves, ``output:
commands`` applies the last solution to every state, as with the timer.

``gravity_compensated_by_robot`` and ``friction_compensation: false`` leave the robot's own gravity (of the
nominal parameters, the URDF: what its driver adds; what the MPC's model knows beyond it is still sent) and the
MPC model's friction out of every solution's feed-forward at its planned states
(:func:`~robodyn_ros.control.mpc.solution.without_robot_terms`), in both outputs, and out of the stale hold
and the Coulomb compensation of ``output: commands``; the published solution says what it left out, so the
inverse_dynamics node can refuse a plan whose convention is not its own.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from .adaptation_watchdog import AdaptationWatchdog
from .loop_diagnostics import apply_diagnostics_parameters, diagnostics_notes
from .adaptive_mpc import MpcSoundness
from .mpc import BackgroundController, MPCConfig
from .mpc.config import coulomb_apart, parameter_vector, split_parameters
from .mpc.solution import OMIT_FRICTION, omitted_terms, without_robot_terms
from .mpc.stage import prediction_model
from .payload_update import payload_body_parameters
from .reference import fourier_reference
from .robot_friction import FrictionResidual, holds_learned_friction
from .torque_output import TorqueOutput
from .tracking_watchdog import TrackingWatchdog


STAMP_INTERVALS = 9
"""Joint-state stamp intervals whose median is the expected interval to the next state (``trigger: joint_state``)."""


def node_mpc_config(c):
    """The :class:`~robodyn_ros.control.mpc.MPCConfig` of the mpc node's parameters ``c``."""
    return MPCConfig(horizon=c["horizon"], dt=c["dt"], solver=c["solver"], compiled=c["compiled"],
                     time_limit=c["time_limit"], q_weight=c["q_weight"], v_weight=c["v_weight"],
                     r_weight=c["r_weight"])


class MpcLoop:
    """robot: the node's robot (``model``, ``home``, ``command_order``); config: the mpc node's parameters
    (a mapping read live); publish(command), report(kind, text): as for :class:`TorqueOutput`, used with
    ``output: commands`` only."""

    def __init__(self, robot, config, publish=None, report=None):
        c = config
        mpc_config = node_mpc_config(c)
        self.mpc = BackgroundController(robot.model, mpc_config)       # gravity fallback while it builds
        self.model = robot.model
        self.pi_nominal = robot.model.inertial_parameters()
        self.reference = fourier_reference(robot.home, c["generator.amplitude"], c["generator.period"],
                                           c["generator.harmonics"])
        self.solves = self.fallbacks = self.parameter_updates = 0
        self.trigger = c["trigger"]
        self._intervals = deque(maxlen=STAMP_INTERVALS)   # the last joint-state stamp intervals (s)
        self.rate = c["rate"]
        self._next = None                     # the stamp of the next solve's state (trigger joint_state)
        self._prepared_t = None               # the state time the prepared step is for (trigger joint_state)
        self.fresh = None                     # the solve of the last state, until taken (trigger joint_state)
        self._fallbacks_reported = 0          # fallbacks counted in the last status (the node's 1-Hz diagnostics)
        self.base_update = self._make_base_update(robot, c)
        self.soundness = MpcSoundness(prediction_model(robot.model, mpc_config), c["dt"])   # as the NLP predicts
        self.refused = self.restored = 0      # parameter sets the MPC was not sound with (before, after a solve)
        self.unsound_reason = ""
        self._trial = None                    # (θ, Coulomb) in use before the last change, while on trial
        self.coulomb = np.zeros(robot.model.nv)     # compensated at the joint-state rate (output: commands)
        self.gravity_compensated_by_robot = c["gravity_compensated_by_robot"]
        self.friction_compensation = c["friction_compensation"] and not c["robot_compensates_friction"]
        self.omitted = omitted_terms(c["gravity_compensated_by_robot"], self.friction_compensation)
        self.theta_robot = parameter_vector(robot.model)      # the robot's own model, whose gravity its driver adds
        hold = None if c["gravity_compensated_by_robot"] else self.gravity
        self.output = TorqueOutput(self.mpc.tau_max, hold, config, publish, robot.command_order, report) \
            if c["output"] == "commands" else None
        self.tracking = TrackingWatchdog(robot.model.joint_names, c["tracking_error.threshold"],
                                         c["tracking_error.window"])
        self.adaptation = AdaptationWatchdog(c["adaptation_timeout"]) if self.base_update is not None else None
        self.robot_friction = None
        if c["robot_compensates_friction"] and c["friction_compensation"] and self.base_update is not None \
                and self.output is not None:     # the residual needs this loop's own commands
            from .base_parameter_update import effort_measurement
            self.robot_friction = FrictionResidual(
                robot.model.nv, self.base_update.base, effort_measurement(robot, c),
                self._robot_gravity if c["gravity_compensated_by_robot"] else None)
        self.start()

    @staticmethod
    def _make_base_update(robot, c):
        if not c["use_base_parameters"]:
            return None
        from ..identification.base_parameters import compute_base_parameters
        from .base_parameter_update import BaseParameterUpdate, effort_measurement, initial_parameters
        base = compute_base_parameters(robot.model, coulomb_width=c["base_parameters.coulomb_width"])
        update = BaseParameterUpdate(robot.model, base, cutoff=c["base_parameters.cutoff"],
                                     deterministic=c["base_parameters.deterministic"], nominal_on_change=True,
                                     keep_drives=False, measurement=effort_measurement(robot, c),
                                     refinement_variance=None)   # no refinement on information for the MPC
                                                                 # (parameter_gate's docstring)
        initial_parameters(update, c["initial_parameters"])
        return update

    def close(self):
        """Stop the MPC's build if it is still running and the base-parameter worker thread (if any)."""
        self.mpc.close()
        if self.base_update is not None:
            self.base_update.close()

    def apply_base_parameters(self, beta, covariance=None):
        """The estimator's base parameters ``β`` (r,) (and covariance (r, r)) through the gate; the consistent
        parameters of the decision become the next solve's θ (no rebuild) if the MPC stays sound with them
        (:class:`~robodyn_ros.control.adaptive_mpc.MpcSoundness`: admissible now, checked again on the first solve
        with them; otherwise the gate takes them back). Returns the gate's status."""
        u = self.base_update
        if covariance is not None:
            u.set_covariance(covariance)
        return self._take(u.offer(beta))

    def _take(self, decision):
        """The MPC takes the consistent parameters of the gate's ``decision`` (:meth:`apply_base_parameters`);
        returns the status, ``"revoked"`` when the MPC would be unsound with them."""
        u = self.base_update
        theta = u.theta.copy()
        if self.output is not None:
            theta, coulomb = coulomb_apart(theta, self.model.nbodies, self.model.nv)
        else:
            coulomb = self.coulomb
        if not np.array_equal(theta, self.mpc.theta):
            ok, reason = self.soundness.admissible(theta, self.soundness_configurations())
            if not ok:
                self.refused += 1
                self.unsound_reason = reason
                u.revoke()
                return "revoked"
            self._trial = (self.mpc.theta.copy(), self.coulomb.copy())
            self.mpc.set_parameters(theta)
            self.parameter_updates += 1
        self.coulomb = coulomb
        return decision.status

    def soundness_configurations(self):
        """The configurations a new θ is checked at before a solve uses it: the reference's now and the newest
        measured one (only the reference's start before any state)."""
        t = 0.0 if self.state is None else self.state[0] - self.t0
        configurations = [self.reference.evaluate(t)[0]]
        if self.state is not None:
            configurations.append(self.state[1])
        return configurations

    def reset_parameters(self):
        """``~/reset`` (a tool change): the nominal parameters from the next solve on (the gate's applied set, the
        payload and a pending ``initial_parameters`` dropped; without base parameters the payload)."""
        if self.base_update is not None:
            self.base_update.reset()
            self._trial = None
            theta = self.base_update.theta.copy()
            if self.output is not None:      # Coulomb compensated at the joint-state rate (apply_base_parameters)
                theta, self.coulomb = coulomb_apart(theta, self.model.nbodies, self.model.nv)
            self.mpc.set_parameters(theta)
        else:
            self.mpc.set_inertial_parameters(self.pi_nominal.copy())

    def start(self):
        self.state = self.t0 = self.solution = self.fresh = self._prepared_t = self._next = None
        self._intervals.clear()
        if self.output is not None:
            self.output.start()
        if self.robot_friction is not None:
            self.robot_friction.restart()
        self.tracking.restart()
        if self.adaptation is not None:
            self.adaptation.restart()

    def apply_live(self, changed):
        """Apply changed live parameters (``max_torque_rate``, ``tracking_error.*``, ``adaptation_timeout``)."""
        if "max_torque_rate" in changed and self.output is not None:
            self.output.set_max_torque_rate(changed["max_torque_rate"])
        apply_diagnostics_parameters(changed, self.tracking, self.adaptation)

    def gravity(self, q):
        """Gravity hold of the MPC's model (nv,) at ``q`` (with its friction offset)."""
        return self.mpc.gravity(q)

    def _robot_gravity(self, q):
        """``g(q)`` (nv,) the robot's driver adds: of the nominal parameters (the URDF), without friction offset."""
        return self.mpc.gravity(q, self.theta_robot) - split_parameters(self.theta_robot, self.model.nbodies,
                                                                          self.model.nv).offset

    def _friction(self, v):
        """The MPC model's joint friction ``f_v v + f_c tanh(v / ε) + f_o`` (nv,) at ``v`` (its NLP's law)."""
        p = split_parameters(self.mpc.theta, self.model.nbodies, self.model.nv)
        return p.viscous * v + p.coulomb * np.tanh(v / self.mpc.config.coulomb_smoothing) + p.offset

    def on_state(self, t, q, v, effort=None):
        """A valid joint state: kept for the next solve; with ``output: commands`` returns the published
        torque (nv,) once a solution exists, None otherwise or when the stamp gate drops the state.
        ``effort`` (nv,): measured joint torques, for the base-parameter gate's samples."""
        if self.base_update is not None and effort is not None and self.base_update.observe(t, q, v, effort):
            decision = self.base_update.offer_initial()
            if decision is not None:
                self._take(decision)
        if self.robot_friction is not None:
            self._robot_friction_update(q, effort)
        if self.output is not None:
            newest = self.output.gate.newest
            verdict = self.output.accept_state(t, q)
            if verdict is None:
                return None
            if verdict == "reset":
                self.t0 = None if self.t0 is None else self.t0 + (t - newest)
                self.solution = self._prepared_t = self._next = None
                self._intervals.clear()
        if self.t0 is None:
            self.t0 = t
        if self.state is not None and t > self.state[0]:
            self._intervals.append(t - self.state[0])
        self.state = (t, q, v)
        if self.adaptation is not None:
            self.adaptation.observe(t)
        published = None
        solved_now = False
        if self.output is not None and self.solution is None:   # no solution to command it from: solve it first
            self.fresh = self.solve() if self.trigger == "timer" else self._solve_state()
            solved_now = True
        if self.output is not None and self.solution is not None:     # first: no solve delays the command
            tau = self.solution[1].torque(np.concatenate([q, v]), t - self.solution[0])
            if self.base_update is not None and self.friction_compensation:   # Coulomb at v_d
                v_d = self.reference.evaluate(t - self.t0)[1]
                tau = tau + self.coulomb * np.tanh(v_d / self.base_update.base.coulomb_width)
            if self.robot_friction is not None and self.friction_compensation \
                    and not self.solution[1].omitted & OMIT_FRICTION:      # the residual
                tau = tau - self.robot_friction.fit.torque(v)
            published = self.output.publish(tau, t)
            if self.robot_friction is not None:
                self.robot_friction.commanded(v, published, self.output.commands)
        if self.trigger == "joint_state" and not solved_now and self._solve_due(t):
            self.fresh = self._solve_state()
        return published

    def _robot_friction_update(self, q, effort):
        """A sample of the robot's friction compensation from ``effort``; friction (the residual, less the
        robot's) in the next solves and at the joint-state rate once that is identified and the applied set's
        friction learned (:class:`~robodyn_ros.control.control_loop.ControlLoop`'s rule), none before."""
        u = self.base_update
        learned = holds_learned_friction(u.gate.applied, u.beta_nominal, self.robot_friction.columns)
        residual = self.robot_friction.update(q, effort, learned, self.output.commands)
        if residual != self.friction_compensation:
            self.friction_compensation = residual
            self.omitted = omitted_terms(self.gravity_compensated_by_robot, residual)

    def _solve_due(self, t):
        """``trigger: joint_state``: whether the state at ``t`` is solved: the first within half an interval of
        the next solve's time or after it; every state before the interval is known. While the MPC builds, its
        gravity fallback every ``dt`` (the plan's interval) only: on every state it would take the core (and
        the interpreter) the build needs."""
        if not self.mpc.ready and self.solution is not None:
            return t >= self.solution[0] + self.mpc.config.dt - 1e-9
        return self._next is None or t >= self._next - 0.5 * self.expected_interval()

    def _solve_state(self):
        """``trigger: joint_state``: the solve of the state just kept, at the prepared time when its stamp is
        within half an interval of it (module docstring), else at its own."""
        t, prepared, self._prepared_t = self.state[0], self._prepared_t, None
        interval = self.expected_interval()
        if prepared is not None and interval is not None and abs(t - prepared) <= 0.5 * interval:
            t = prepared
        solved = self.solve(t)
        if solved is not None and interval is not None:     # k intervals on: the rate in whole intervals
            self._next = self.state[0] + interval * max(1, round(1.0 / (self.rate * interval)))
        return solved

    def expected_interval(self):
        """The median of the last joint-state stamp intervals (s), None before two states."""
        return float(np.median(self._intervals)) if self._intervals else None

    def take_solution(self):
        """The ``(t, MPCSolution)`` solved for the last joint state in :meth:`on_state` (``trigger: joint_state``,
        or a state that came with no solution to command it from), once (None when that state was not solved
        there, was dropped, or has been taken)."""
        fresh, self.fresh = self.fresh, None
        return fresh

    def prepare(self):
        """``trigger: joint_state``: the preparation phase of the next solve, for the time of the state it is
        expected at (k intervals of :meth:`expected_interval` after the last solve's state, module docstring).
        Returns the time it took (s); 0 when there is nothing to prepare (no interval known yet, stale, a solver
        without phases, the controller still building)."""
        if self._next is None or (self.output is not None and self.output.stale):
            return 0.0
        t = self._next
        elapsed = self.mpc.prepare(self.reference, t - self.t0)
        self._prepared_t = t if elapsed > 0.0 else None
        return elapsed

    def solve(self, t=None):
        """One solve from the newest state (its ``q, v`` taken as the state at ``t``, default its stamp):
        ``(t, MPCSolution)``, or None (no state yet, or stale)."""
        if self.state is None or (self.output is not None and self.output.stale):
            return None
        t_state, q, v = self.state
        t = t_state if t is None else t
        solution = self.mpc.solve(q, v, self.reference, t - self.t0)
        if self._trial is not None and self.mpc.ready:    # the first solve with new parameters: kept if sound
            ok, reason = self.soundness.sound(solution)
            if not ok:
                theta, self.coulomb = self._trial
                self.mpc.set_parameters(theta)
                self.restored += 1
                self.unsound_reason = reason
                self.base_update.revoke()
                solution = self.mpc.solve(q, v, self.reference, t - self.t0)
            self._trial = None
        self.tracking.update(t_state, q - self.reference.evaluate(t_state - self.t0)[0])
        solution = without_robot_terms(solution, self._robot_gravity, self._friction, self.omitted)
        self.solution = (t, solution)
        self.solves += 1
        self.fallbacks += solution.status.startswith("fallback")
        return self.solution

    def apply_payload(self, link, m, com, I_c):
        """The payload estimate (as :meth:`ControlLoop.apply_payload`, unchecked) in the next solve's model."""
        body, pi_body = payload_body_parameters(self.model, link, m, com, I_c)
        if self.base_update is not None:     # a candidate for the gate (apply_base_parameters)
            self.base_update.set_payload(body, pi_body)
            return
        pi = self.pi_nominal.copy()
        pi[10 * body:10 * body + 10] += pi_body
        self.mpc.set_inertial_parameters(pi)

    def diagnostic_values(self, solution):
        values = {"solve_time_ms": solution.solve_time * 1e3, "iterations": solution.iterations,
                  "status": solution.status, "solver_status": solution.solver_status, "solves": self.solves,
                  "fallbacks": self.fallbacks, "build": self.mpc.build,
                  "reference_t0": "" if self.t0 is None else f"{self.t0:.6f}",     # a stamp: more than 9 digits
                  **(self.output.diagnostic_values() if self.output is not None else {}),
                  **self.tracking.values()}
        if self.base_update is not None:
            values.update(parameter_updates=self.parameter_updates, parameters_refused=self.refused,
                          parameters_restored=self.restored, **self.base_update.diagnostic_values())
        if self.robot_friction is not None:
            values.update(self.robot_friction.fit.diagnostic_values(),
                          friction_residual_sent=self.friction_compensation)
        return values

    def status(self, solution):
        """``(level, message, values)`` of the node's /diagnostics after ``solution``, the last solve: WARN on a
        fallback (its status, or the count of fallbacks since the last status), while a joint tracks worse
        than ``tracking_error.threshold`` and while adaptation is on and nothing has been applied
        (``adaptation_timeout``, with the gate's reason)."""
        recent, self._fallbacks_reported = self.fallbacks - self._fallbacks_reported, self.fallbacks
        notes = [] if solution.status in ("solved", "rti") else [solution.status]
        if recent and not notes:
            notes = [f"{recent} fallback(s) since the last report"]
        notes += diagnostics_notes(self.tracking, self.adaptation, self.base_update)
        return ("WARN" if notes else "OK"), ("; ".join(notes) or solution.status), self.diagnostic_values(solution)
