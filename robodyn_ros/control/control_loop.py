"""One joint-space control loop, as the ``inverse_dynamics`` node runs it at the joint-state rate: reference
sampling, the control law of the configured mode, live model updates and the output stage. No ROS: the
node converts messages, calls :meth:`ControlLoop.on_state` per joint state and publishes through the
callback it gave.

Reference: the built-in Fourier generator around the home pose (:class:`~robodyn_ros.control.reference.
FourierSampler`), a trajectory (:meth:`ControlLoop.set_trajectory`), a trajectory file (``reference:
file``: :class:`~robodyn_ros.control.trajectory_file.TrajectoryFileReference`, approached from the first
measured configuration by :class:`~robodyn_ros.control.trajectory_file.ApproachThenFollow`), or the first
measured configuration held; reference time is the joint-state stamp. Model updates: a payload estimate is added to the nominal
parameters of its link's body from the next command on (certainty equivalence; in ``slotine_li`` mode it
also resets the adapted estimate), unless :func:`~robodyn_ros.control.payload_update.check_payload_plausible`
refuses it. With ``use_base_parameters`` (modes ``computed_torque`` and ``slotine_li``) the law is the
base-parameter one (:mod:`~robodyn_ros.control.base_parameter_control`, friction included) and its ``β`` the
estimator's, as far as :class:`~robodyn_ros.control.base_parameter_update.BaseParameterUpdate` (the parameter
gate on the measured joint torques) lets it through, a newly applied ``β`` over a ramp of
``base_parameters.blend_time`` s (:mod:`~robodyn_ros.control.parameter_blend`); the payload estimate is a gated
candidate on top; its computed torque predicts over the hold of each command, the period of the joint states
(:class:`~robodyn_ros.control.sample_period.SamplePeriod`).
Friction the robot compensates itself (``robot_compensates_friction``): no law sends the URDF's friction; a
base-parameter law, once it has learned the joints' friction and the robot's compensation is identified from
this loop's commands and the measured efforts (:mod:`~robodyn_ros.control.robot_friction`), sends the
residual, the learned friction less the robot's.
Output: :class:`~robodyn_ros.control.torque_output.TorqueOutput` (stamp gate, watchdog, guard);
after a time reset the reference and trajectory times are re-based so that the desired motion continues,
and the Slotine-Li step and the MPC solution of the old time line are forgotten.
"""
from __future__ import annotations

import numpy as np

from ..identification.exciting_trajectory import FourierTrajectory
from ..kernels import compile_kernels
from ..model.errors import ModelError
from .base_parameter_control import MAX_HOLD, BaseParameterComputedTorque, BaseParameterSlotineLi
from .base_parameter_update import BaseParameterUpdate, effort_measurement, initial_parameters
from .command_guard import effort_bounds
from .parameter_blend import ParameterBlend
from .computed_torque import ComputedTorqueController, FastComputedTorque, GravityCompensation
from .kernel_dynamics import KernelDynamics
from .mpc.solution import describe_omitted, omitted_terms
from .adaptation_watchdog import AdaptationWatchdog
from .loop_diagnostics import apply_diagnostics_parameters, diagnostics_notes
from .payload_update import check_payload_plausible, payload_body_parameters
from .robot_friction import FrictionResidual, friction_learned
from .reference import ConstantReference, FourierSampler, fourier_reference
from .sample_period import SamplePeriod
from .slotine_li import SlotineLiController
from .torque_output import TorqueOutput
from .tracking_watchdog import TrackingWatchdog
from .trajectory_file import ApproachThenFollow, TrajectoryFileReference


class ControlLoop:
    """The per-state logic of the ``inverse_dynamics`` node (module docstring).

    robot: the node's robot (``model``, ``home`` (nv,), ``name``, ``command_order``, ``from_command``);
    config: the node's parameters (a mapping read at every call, so live changes apply: ``mode``, ``kp``,
    ``kd``, ``slotine_li.*``, ``reference``, ``generator.*``, ``state_timeout``, ``stale_action``,
    ``max_torque_rate``, ``payload_*``, ``friction_compensation``, ``gravity_compensated_by_robot``);
    publish(command): sends a guarded torque (command order); report(kind, text): events of the output stage.
    """

    def __init__(self, robot, config, publish, report=None):
        self.robot, self.config = robot, config
        model = robot.model
        self.kernels = compile_kernels(model, register=False, parts=("dynamics",))
        self.functions = KernelDynamics(model, self.kernels)
        self.pi_nominal = model.inertial_parameters()
        self.base_update = self._make_base_update()
        self.controller = self._make_controller()
        self.robot_friction = self._make_robot_friction()
        self.blend = ParameterBlend(self.base_update.beta_nominal, config["base_parameters.blend_time"]) \
            if self.base_update is not None else None
        self.fast_law = FastComputedTorque(self.controller) \
            if isinstance(self.controller, ComputedTorqueController) else None
        self.reference = self._sampler = self.trajectory = self.mpc = None
        self.file_reference = self._load_trajectory_file()
        self.t0 = self._t_prev = None
        self._hold = SamplePeriod(MAX_HOLD)   # the base-parameter computed torque's hold: the state period
        self.payload_updates = self.base_parameter_updates = 0
        self.implausible_payloads = 0   # payload estimates refused by check_payload_plausible
        gravity = None if config["gravity_compensated_by_robot"] else \
            (lambda q: self.functions.gravity(q, self.controller_parameters()))
        self.output = TorqueOutput(effort_bounds(model), gravity, config, publish, robot.command_order, report)
        self.tracking = TrackingWatchdog(model.joint_names, config["tracking_error.threshold"],
                                         config["tracking_error.window"])
        self.adaptation = AdaptationWatchdog(config["adaptation_timeout"]) if self.base_update is not None else None

    def _make_base_update(self):
        """:class:`BaseParameterUpdate` with ``use_base_parameters`` in computed_torque / slotine_li, else None."""
        c, model = self.config, self.robot.model
        if not (c["use_base_parameters"] and c["mode"] in ("computed_torque", "slotine_li")):
            return None
        from ..identification.base_parameters import compute_base_parameters
        base = compute_base_parameters(model, coulomb_width=c["base_parameters.coulomb_width"])
        update = BaseParameterUpdate(model, base, cutoff=c["base_parameters.cutoff"],
                                     payload_min_mass=c["payload_min_mass"],
                                     deterministic=c["base_parameters.deterministic"],
                                     measurement=effort_measurement(self.robot, c))
        initial_parameters(update, c["initial_parameters"])
        return update

    def _make_robot_friction(self):
        """A :class:`~robodyn_ros.control.robot_friction.FrictionResidual` when a base-parameter law is to send the
        friction residual (``robot_compensates_friction`` and ``friction_compensation``), else None."""
        c = self.config
        if not (c["robot_compensates_friction"] and c["friction_compensation"] and self.base_update is not None):
            return None
        gravity = (lambda q: self.functions.gravity(q, self.pi_nominal)) if c["gravity_compensated_by_robot"] \
            else None
        return FrictionResidual(self.robot.model.nv, self.base_update.base, effort_measurement(self.robot, c),
                                gravity)

    def _make_controller(self):
        c, model = self.config, self.robot.model
        flags = dict(gravity_compensated_by_robot=c["gravity_compensated_by_robot"],
                     friction_compensation=c["friction_compensation"] and not c["robot_compensates_friction"])
        if self.base_update is not None:
            u = self.base_update
            if c["mode"] == "computed_torque":
                return BaseParameterComputedTorque(model, u.base, u.beta_nominal, c["kp"], c["kd"], dynamics=u.dynamics,
                                                   **flags)
            kd = c["slotine_li.kd"] if c["slotine_li.kd"] >= 0 else \
                40.0 * np.diag(self.functions.mass(self.robot.home, model.inertial_parameters()))
            return BaseParameterSlotineLi(model, u.base, u.beta_nominal, Lambda=c["slotine_li.lambda"], kd=kd,
                                          compiled=True, **flags)
        common = dict(functions=self.functions, gravity_compensated_by_robot=c["gravity_compensated_by_robot"])
        if c["mode"] == "gravity_compensation":
            return GravityCompensation(model, c["kp"], c["kd"], **common)
        if c["mode"] == "slotine_li":
            kd = c["slotine_li.kd"] if c["slotine_li.kd"] >= 0 else \
                40.0 * np.diag(self.functions.mass(self.robot.home, model.inertial_parameters()))
            return SlotineLiController(model, Lambda=c["slotine_li.lambda"], kd=kd,
                                       gamma=c["slotine_li.gamma"], dead_zone=c["slotine_li.dead_zone"],
                                       friction_compensation=flags["friction_compensation"], **common)
        return ComputedTorqueController(model, c["kp"], c["kd"], friction_compensation=flags["friction_compensation"],
                                        **common)

    def start(self):
        """A new activation: reference time from the next state, output stage reset."""
        self.t0 = self._t_prev = None
        self._hold.reset()
        self.output.start()
        if self.robot_friction is not None:
            self.robot_friction.restart()
        self.tracking.restart()
        if self.adaptation is not None:
            self.adaptation.restart()

    def apply_live(self, changed):
        """Apply changed live parameters (``kp``, ``kd``, ``max_torque_rate``, ``tracking_error.*``,
        ``adaptation_timeout``)."""
        for name in ("kp", "kd"):
            if name in changed and hasattr(self.controller, name):
                setattr(self.controller, name, np.full(self.robot.model.nv, float(changed[name])))
        if "max_torque_rate" in changed:
            self.output.set_max_torque_rate(changed["max_torque_rate"])
        apply_diagnostics_parameters(changed, self.tracking, self.adaptation)

    def controller_parameters(self):
        """The inertial parameters (10 nb,) the control law uses now (the nominal ones for a base-parameter law)."""
        if self.base_update is not None:
            return self.pi_nominal
        return self.controller.pi_hat if hasattr(self.controller, "pi_hat") else self.controller.pi

    # ------------------------------------------------------------------------------------ reference
    def _make_reference(self, q):
        c = self.config
        if c["reference"] == "hold":
            return ConstantReference(q.copy())
        if c["reference"] == "file":
            return ApproachThenFollow(self.file_reference, q, 0.0, self.robot.model.velocity_limit)
        center = self.robot.from_command(np.asarray(c["generator.center"])) if c["generator.center"] else \
            (self.robot.home if self.robot.home_known else q.copy())
        return fourier_reference(center, c["generator.amplitude"], c["generator.period"], c["generator.harmonics"])

    def _load_trajectory_file(self):
        """With ``reference: file``, the trajectory of ``trajectory_file`` (checked against the joint limits
        when loaded: a bad file fails the node's configuration with one line), looping if periodic."""
        c = self.config
        if c["reference"] != "file":
            return None
        if not c["trajectory_file"]:
            raise ModelError("reference: file needs trajectory_file (the CSV of robodyn excite)")
        model = self.robot.model
        probe = TrajectoryFileReference(c["trajectory_file"], model.joint_names, model=model)
        return TrajectoryFileReference(c["trajectory_file"], model.joint_names, loop=probe.periodic, model=model,
                                       speed=c["trajectory_speed"])

    def desired(self, t, q):
        """``(q_d, v_d, a_d)`` (nv,) at joint-state time t (the first state's q starts a held reference)."""
        if self.trajectory is not None:
            traj, start = self.trajectory
            return traj.sample(t - start)
        if self.reference is None:
            self.reference = self._make_reference(q)
            self._sampler = FourierSampler(self.reference) if isinstance(self.reference, FourierTrajectory) else None
        if self._sampler is not None:
            return self._sampler.evaluate(t - self.t0)
        return self.reference.evaluate(t - self.t0)

    def set_trajectory(self, trajectory, start_stamp):
        """Follow ``trajectory`` (``sample(t) -> (q_d, v_d, a_d)``) from ``start_stamp`` (<= 0: from the last
        state's time)."""
        start = start_stamp if start_stamp > 0 else (self._t_prev if self._t_prev else 0.0)
        self.trajectory = (trajectory, start)

    # -------------------------------------------------------------------------------------- control
    def on_state(self, t, q, v, effort=None):
        """One valid joint state: ``(tau, e)``, the published torque and the tracking error ``q - q_d`` (nv,
        model order each), or None when the stamp gate drops the state. ``effort`` (nv,): the measured joint
        torques, for the base-parameter gate's window (after the command is out)."""
        newest = self.output.gate.newest
        verdict = self.output.accept_state(t, q)
        if verdict is None:
            return None
        if verdict == "reset":
            self._rebase_time(t - newest)
        if self.t0 is None:
            self.t0 = t
        q_d, v_d, a_d = self.desired(t, q)
        if self.robot_friction is not None:
            self._robot_friction_update(q, effort)
        mode = self.config["mode"]
        blended = self.blend.due(t) if self.blend is not None else None
        if blended is not None:
            self.controller.set_parameters(blended)
        if mode == "gravity_compensation":
            tau, _ = self.controller.compute(q, v, q_d)
        elif mode == "slotine_li":
            dt = t - self._t_prev if self._t_prev is not None else 0.0
            tau, _ = self.controller.compute(q, v, q_d, v_d, a_d, min(max(dt, 0.0), 0.01))
        elif mode == "mpc" and self.mpc is not None:
            tau = self.mpc[1].torque(np.concatenate([q, v]), t - self.mpc[0])
        elif self.fast_law is not None:  # computed torque, also in mode mpc until the first solution arrives
            tau = self.fast_law.compute(q, v, q_d, v_d, a_d)
        elif self.base_update is not None:   # computed torque on base parameters, held until the next state
            tau, _ = self.controller.compute(q, v, q_d, v_d, a_d, self._hold.update(t))
        else:
            tau, _ = self.controller.compute(q, v, q_d, v_d, a_d)
        self._t_prev = t
        published = self.output.publish(tau, t)
        if self.robot_friction is not None:
            self.robot_friction.commanded(v, published, self.output.commands)
        if self.base_update is not None and effort is not None and self.base_update.observe(t, q, v, effort):
            decision = self.base_update.offer_initial()
            if decision is not None:
                self._take(decision)
        error = q - q_d
        self.tracking.update(t, error)
        if self.adaptation is not None:
            self.adaptation.observe(t)
        return published, error

    def _robot_friction_update(self, q, effort):
        """The robot's friction compensation: a sample from ``effort`` (the answer to the last command); the law
        sends the friction residual once the robot's compensation is identified and the law's friction learned
        (:func:`~robodyn_ros.control.robot_friction.friction_learned`: an applied estimate or
        ``initial_parameters``, not after ``~/reset``), no friction of its own before."""
        residual = self.robot_friction.update(q, effort, friction_learned(self.blend, self.robot_friction.columns),
                                              self.output.commands)
        if residual != self.controller.friction_compensation:
            self.controller.friction_compensation = residual
            self.controller.robot_friction = self.robot_friction.fit.torque if residual else None

    def _rebase_time(self, jump):
        """After a time reset by ``jump`` s (< 0): shift the reference and trajectory start times, forget the
        Slotine-Li step and the MPC solution of the old time line."""
        if self.t0 is not None:
            self.t0 += jump
        if self.base_update is not None:
            self.base_update.restart()
            self.blend.shift(jump)
        if self.trajectory is not None:
            self.trajectory = (self.trajectory[0], self.trajectory[1] + jump)
        self._t_prev = None
        self._hold.reset()
        self.mpc = None

    # ------------------------------------------------------------------------------------- updates
    def apply_payload(self, link, m, com, I_c):
        """A payload estimate (mass m, centre of mass com (3,) in ``link``'s frame, inertia I_c (3, 3) about
        it) as the model of the next commands. ValueError on a link that is not a moving link;
        :class:`~robodyn_ros.control.payload_update.ImplausiblePayload` (counted) when it is refused."""
        body, pi_body = payload_body_parameters(self.robot.model, link, m, com, I_c)
        c = self.config
        try:
            check_payload_plausible(m, com, I_c, link, c["payload_min_mass"], c["payload_max_mass"],
                                    c["payload_max_com_distance"])
        except ValueError:
            self.implausible_payloads += 1
            raise
        if self.base_update is not None:     # a candidate for the gate (apply_base_parameters)
            self.base_update.set_payload(body, pi_body)
            self.payload_updates += 1
            return
        pi = self.pi_nominal.copy()
        if abs(m) >= c["payload_min_mass"]:
            pi[10 * body:10 * body + 10] += pi_body
        if hasattr(self.controller, "pi_hat"):
            self.controller.pi_hat = pi
        else:
            self.controller.set_parameters(pi)
        self.payload_updates += 1

    def apply_base_parameters(self, beta, covariance=None):
        """The estimator's base parameters ``β`` (r,) (and their covariance (r, r), else the last one received)
        through the gate; the control law takes the decision's ``β``. Returns the gate's status."""
        u = self.base_update
        if covariance is not None:
            u.set_covariance(covariance)
        decision = u.offer(beta)
        self._take(decision)
        return decision.status

    def _take(self, decision):
        """The control law takes the gate's ``decision.beta`` over ``base_parameters.blend_time``."""
        u = self.base_update
        if decision.status == "accepted":
            self.adaptation.applied()
        if not np.array_equal(decision.beta, self.blend.target):     # taken over base_parameters.blend_time
            t = u.t if u.t is not None else 0.0
            self.blend.switch(decision.beta, t, self.config["base_parameters.blend_time"])
            self.base_parameter_updates += 1

    def reset_parameters(self):
        """``~/reset`` (a tool change): the nominal parameters from the next command on, without a ramp (the
        gate's applied set, the payload and a pending ``initial_parameters`` dropped; without base parameters
        the payload added to the nominal inertias)."""
        if self.base_update is not None:
            u = self.base_update
            u.reset()
            self.blend.switch(u.beta_nominal, u.t if u.t is not None else 0.0)
            self.controller.set_parameters(u.beta_nominal.copy())
        elif hasattr(self.controller, "pi_hat"):
            self.controller.pi_hat = self.pi_nominal.copy()
        else:
            self.controller.set_parameters(self.pi_nominal.copy())

    def close(self):
        """Stop the base-parameter worker thread (if any)."""
        if self.base_update is not None:
            self.base_update.close()

    def set_mpc_solution(self, t0, solution):
        """Apply an MPC solution planned at joint-state time t0 from the next state on; False (dropped) when
        t0 lies ahead of the newest state by more than ``state_timeout`` (planned before a time reset).
        ValueError (dropped) when its feed-forward does not leave out what this loop's
        ``gravity_compensated_by_robot`` and ``friction_compensation`` leave out: applied, it would send the
        robot gravity twice, or none."""
        c = self.config
        expected = omitted_terms(c["gravity_compensated_by_robot"],
                                 c["friction_compensation"] and not c["robot_compensates_friction"])
        if solution.omitted != expected:
            raise ValueError(f"the MPC solution leaves {describe_omitted(solution.omitted)} out of its torques, this "
                             f"controller {describe_omitted(expected)}: set gravity_compensated_by_robot, "
                             f"friction_compensation and robot_compensates_friction alike on the mpc and "
                             f"inverse_dynamics nodes")
        newest = self.output.gate.newest
        if newest is not None and t0 > newest + self.config["state_timeout"]:
            return False
        self.mpc = (t0, solution)
        return True

    def diagnostic_values(self):
        values = {**self.output.diagnostic_values(), "payload_updates": self.payload_updates,
                  "implausible_payloads": self.implausible_payloads, **self.tracking.values()}
        if self.base_update is not None:
            values.update(base_parameter_updates=self.base_parameter_updates, **self.base_update.diagnostic_values())
        if self.robot_friction is not None:
            values.update(self.robot_friction.fit.diagnostic_values(),
                          friction_residual_sent=self.controller.friction_compensation)
        return values

    def status(self, rejected=None):
        """``(level, message, values)`` of the node's /diagnostics: WARN while the joint states are stale, after
        dropped malformed messages (``rejected``: the node's ``{kind: count}``), while a joint tracks worse than
        ``tracking_error.threshold``, and while adaptation is on and nothing has been applied
        (``adaptation_timeout``, with the gate's reason); OK ("controlling") otherwise."""
        notes = ["joint states stale: holding"] if self.output.stale else []
        if rejected:
            notes.append(f"dropped malformed messages: {dict(rejected)}")
        notes += diagnostics_notes(self.tracking, self.adaptation, self.base_update)
        return ("WARN" if notes else "OK"), ("; ".join(notes) or "controlling"), self.diagnostic_values()
