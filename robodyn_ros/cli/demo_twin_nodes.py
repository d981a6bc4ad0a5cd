"""``robodyn demo --scenario twin`` through the ROS nodes over DDS (computed_torque, slotine_li, mpc).

The in-process bringup of ``launch/simulation.launch.py`` with the robot's parameter file (``config/panda.yaml``,
a ``robodyn config`` file, or the one written for a URDF; private domain, as fast as possible, lockstep,
``/clock``), changed only where the scenario needs it, with the estimator's and the gate's own defaults
(nothing tuned to the plant):

* simulator: ``plant`` (``panda_twin``, ``perturbed:SEED``, a parameter file) integrated by ``engine``
  (robodyn or mujoco), the payload at ``attach_time`` on the wrist link; lockstep with a long
  ``lockstep_timeout`` (the controller may wait for a consistent-parameter fit, below);
* estimator: joint torques only (``use_wrench: false``), ``publish_covariance: true``, and one callback per
  joint state (``input_poll_rate: 0``): the simulation runs faster than real time, and a wall-clock poll at
  200 Hz would see them in wall-clock bursts (its queue, 50 deep when this was chosen, overflowed); a callback
  that finds several states waiting estimates from all of them in order;
* inverse_dynamics: the nominal model and the base-parameter law (``use_base_parameters``) with
  ``base_parameters.deterministic`` (each consistent-parameter fit takes effect at its due simulated time,
  waited for if need be, so the same command gives the same report); in the paired nominal run the same law
  with no estimates (its estimate topics point where nothing is published, ``use_estimates`` false), so it
  keeps the nominal parameters;
* ``--controller mpc``: the mpc node instead of inverse_dynamics, ``output: commands`` (its solution's
  ``tau_ff + K (x - x_plan)`` and the Coulomb compensation at the joint-state rate through the same output
  stage), solves at its configured 100 Hz (RTI, N = 20, 10 ms) with ``time_limit`` 10 s because the run is
  not in real time, ``use_base_parameters`` as above; the tracking error is taken from the joint states
  against the node's reference.

The nominal and the adapted run see the same noise (same seed). The report has the fields of the library
loop's (:func:`robodyn_ros.simulation.adaptive_loop.twin_experiment`); those of the oracle run
(``tracking_rms_oracle``, ``oracle_window_ratios``, ``time_to_oracle``) with ``oracle`` (``--oracle``): a third
run through the same nodes, same noise, whose controller is given the plant's exact model (:class:`NodeOracle`,
:class:`NodeMpcOracle`, as the library loop's :class:`~robodyn_ros.simulation.adaptive_loop.OracleLoop`): it
costs as much wall time as another run (the MPC's: and a build of its functions on the plant's model).
"""
from __future__ import annotations

import time

import numpy as np

# wall s the lockstep simulation waits for a command: the controllers wait for their consistent-parameter
# fits at fixed simulated times (base_parameters.deterministic), which takes up to a second on a loaded machine
LOCKSTEP_TIMEOUT = 30.0


def twin_overrides(adapt, controller, attach_time, payload_mass, seed=0, plant="panda_twin", engine="robodyn",
                   driver="generic"):
    """Per-node parameter overrides of one run (module docstring), on the ``driver`` profile of every node
    (:func:`robodyn_ros.model.driver_profiles.with_driver`)."""
    from ..model.driver_profiles import with_driver
    return with_driver(_twin_overrides(adapt, controller, attach_time, payload_mass, seed, plant, engine), driver)


def _twin_overrides(adapt, controller, attach_time, payload_mass, seed, plant, engine):
    simulator = {"real_time_factor": 0.0, "lockstep": True, "lockstep_timeout": LOCKSTEP_TIMEOUT, "clock_rate": 100.0,
                 "plant": plant, "noise.seed": int(seed), "engine": engine}
    if attach_time is not None:
        simulator.update({"payload.mass": float(payload_mass), "payload.attach_time": float(attach_time)})
    nominal_run = {} if adapt else {"base_parameters_topic": "/nominal_run/base_parameters",
                                    "base_covariance_topic": "/nominal_run/base_covariance"}
    controllers = {"use_base_parameters": True, "use_estimates": bool(adapt), "base_parameters.deterministic": True,
                   **nominal_run}
    return {
        "simulator": simulator,
        "estimator": {"use_wrench": False, "decimation": 1, "input_poll_rate": 0.0, "publish_covariance": True},
        "mpc": {"output": "commands", "state_timeout": 0.5, "time_limit": 10.0, **controllers},
        "inverse_dynamics": {"state_timeout": 0.5, "mode": controller, **controllers},
    }


class NodeOracle:
    """The ``inverse_dynamics`` node's loop (a :class:`~robodyn_ros.control.control_loop.ControlLoop` with a
    base-parameter law and no estimates) given the exact model of the plant the ``simulator`` node's ``runtime``
    integrates: the law's base parameters ``β = K π_plant`` (armature and friction included; the loop's
    ``base_parameters.coulomb_width`` must be the plant's), and at the instant a payload is attached (the
    runtime's ``on_attach``, before the next step) the plant's with the payload's inertia added to its body. A
    robot that compensates friction (``ur``) is sent the plant's friction less the robot's exact compensation,
    the driver's own. The gravity a driver adds stays the robot's own model's (the law's ``beta_robot``), as in
    the nominal and adapted runs. ModelError when the plant does not move as the model does or its base
    parameters are other columns (no oracle for a robot of another structure)."""

    def __init__(self, loop, runtime):
        from ..identification.base_parameters import compute_base_parameters, full_parameters
        from ..model.errors import ModelError
        from ..simulation.adaptive_loop import same_kinematics

        sim, model, base = runtime.sim, loop.robot.model, loop.base_update.base
        simulated = sim.plant.model if sim.plant is not None else sim.model
        if not same_kinematics(model, simulated):
            raise ModelError("--oracle: the plant does not move as the robot's model does (other joints, axes or "
                             "placements): no oracle for it")
        if not np.array_equal(compute_base_parameters(simulated, coulomb_width=base.coulomb_width).independent,
                              base.independent):
            raise ModelError("--oracle: the plant's base parameters are not the model's: no oracle for it")
        self.loop, self.model, self.base = loop, model, base
        self.pi_full = full_parameters(simulated)
        self.payload_applied = None
        loop.controller.set_parameters(base.from_full(self.pi_full))
        if loop.robot_friction is not None:       # the exact residual: no fit of the robot's compensation
            loop.robot_friction = None
            loop.controller.friction_compensation = True
            loop.controller.robot_friction = runtime.driver.friction
        runtime.on_attach = self.attach

    def attach(self, payload):
        """The plant's parameters with ``payload`` (a :class:`~robodyn_ros.simulation.simulator.Payload`)."""
        from ..identification.sensor_wrench import link_inertia_in_body
        pi_full = self.pi_full.copy()
        body = self.model.frames[payload.link].body
        pi_full[10 * body:10 * body + 10] += link_inertia_in_body(self.model, payload.pi, payload.link)
        self.loop.controller.set_parameters(self.base.from_full(pi_full))
        self.payload_applied = True


class _ExactRobotFriction:
    """The loop's :class:`~robodyn_ros.control.robot_friction.FrictionResidual` (``residual``) with the robot's
    friction compensation known exactly (``friction(v)``, the driver's own): the oracle sends the plant's friction
    less it from the first state on; the fit goes on observing (its diagnostics), unused."""

    def __init__(self, residual, friction):
        self._residual = residual
        self.fit = _ExactFit(residual.fit, friction)

    def update(self, q, effort, learned, commands=None):
        self._residual.update(q, effort, learned, commands)
        return True

    def __getattr__(self, name):
        return getattr(self._residual, name)


class _ExactFit:
    """A :class:`~robodyn_ros.control.robot_friction.RobotFrictionFit` whose ``torque`` is ``friction``."""

    def __init__(self, fit, friction):
        self._fit, self.torque = fit, friction

    def __getattr__(self, name):
        return getattr(self._fit, name)


class NodeMpcOracle:
    """The ``mpc`` node's loop (:class:`~robodyn_ros.control.mpc_loop.MpcLoop`, no estimates) given the exact
    model of ``plant`` (a :class:`~robodyn_ros.simulation.plant.Plant`, the one the ``simulator`` node integrates),
    as the library loop's :class:`~robodyn_ros.simulation.adaptive_loop.OracleLoop` gives its MPC: the MPC built
    again on the plant's model (its armature is in the prediction model, which ``θ = [π, f_v, f_c, f_o]`` does not
    carry; built in the background as the node's own), with the plant's ``θ`` (the Coulomb part compensated at the
    joint-state rate with ``output: commands``, as the loop does), and, once :meth:`follow` has been given the
    simulator's runtime, at the instant a payload is attached the plant's ``θ`` with the payload's inertia if the
    MPC is sound with it (:class:`~robodyn_ros.control.adaptive_mpc.MpcSoundness` on the plant's prediction model;
    else ``payload_applied`` False and it goes on without). The gravity a driver adds stays the robot's own
    model's (the loop's ``theta_robot``); a robot that compensates friction (``ur``) is sent the plant's friction less
    the robot's exact compensation, the driver's own (as :class:`NodeOracle`). ModelError when the plant does not
    move as the robot's model does."""

    def __init__(self, node, plant):
        from ..control.adaptive_mpc import MpcSoundness
        from ..control.mpc import BackgroundController
        from ..control.mpc.config import parameter_vector
        from ..control.mpc.stage import prediction_model
        from ..model.errors import ModelError
        from ..simulation.adaptive_loop import same_kinematics

        loop = node.loop
        if not same_kinematics(loop.model, plant.model):
            raise ModelError("--oracle: the plant does not move as the robot's model does (other joints, axes or "
                             "placements): no oracle for it")
        config = loop.mpc.config
        loop.mpc.close()
        loop.mpc = node.mpc = BackgroundController(plant.model, config)
        loop.soundness = MpcSoundness(prediction_model(plant.model, config), config.dt)
        self.loop, self.plant, self.sim = loop, plant, None
        self.theta = parameter_vector(plant.model)
        self.payload_applied = None
        self._set(self.theta)

    def follow(self, runtime):
        """The simulator node's ``runtime``: checked to integrate this plant (ModelError otherwise); its payload
        reaches the MPC's model at the instant it is attached."""
        from ..identification.base_parameters import full_parameters
        from ..model.errors import ModelError
        simulated = runtime.sim.plant.model if runtime.sim.plant is not None else runtime.sim.model
        if not np.allclose(full_parameters(simulated), full_parameters(self.plant.model), rtol=1e-12, atol=1e-12):
            raise ModelError("--oracle: the simulator integrates another plant than the oracle's")
        self.sim = runtime.sim
        runtime.on_attach = self.attach
        loop = self.loop
        if loop.robot_friction is not None:       # the exact residual: no fit of the robot's compensation
            from ..control.mpc.solution import omitted_terms
            loop.robot_friction = _ExactRobotFriction(loop.robot_friction, runtime.driver.friction)
            loop.friction_compensation = True
            loop.omitted = omitted_terms(loop.gravity_compensated_by_robot, True)

    def _set(self, theta):
        """θ to the NLP, its Coulomb part to the loop's output stage with ``output: commands``."""
        from ..control.mpc.config import coulomb_apart
        loop = self.loop
        if loop.output is not None:
            theta, loop.coulomb = coulomb_apart(theta, loop.model.nbodies, loop.model.nv)
        loop.mpc.set_parameters(theta)

    def attach(self, payload):
        """The plant's θ with ``payload`` (the simulator's own inertial parameters of robot plus payload)."""
        from ..control.mpc.config import replace_inertial_parameters
        loop = self.loop
        theta = replace_inertial_parameters(self.theta, self.sim.inertial_parameters, loop.model.nbodies)
        ok, _ = loop.soundness.admissible(theta, loop.soundness_configurations())
        if ok:
            self._set(theta)
        self.payload_applied = bool(ok)


def run_nodes_once(duration, attach_time, payload_mass, controller, adapt, params_file, plant="panda_twin", seed=0,
                   timeout=1200.0, engine="robodyn", driver="generic", oracle=None):
    """One run over DDS: ``{"t", "error" (N, nv), "t_estimate", "payload_mass", "t_coulomb", "coulomb",
    "non_finite_commands", "diagnostics", "wall_seconds", "completed", "first_parameter_update"}`` (the
    simulated time of the first gated parameter set applied, None if none was) and ``"estimator"`` (its
    ``samples``, ``updates``, ``skipped_overload`` and ``payload_events`` times). ``params_file``: the nodes'
    parameter file (the robot's), ``plant``: the simulator's ``plant`` parameter. ``oracle``: None, or the
    plant's Coulomb width (with ``adapt`` False): the controller is given the plant's exact model
    (:class:`NodeOracle`, :class:`NodeMpcOracle` with the MPC; ``"payload_applied"`` in the result)."""
    from std_msgs.msg import Float64MultiArray

    from ..control.parameter_gate import friction_from_base
    from ..ros import qos
    from ..ros.bringup import Bringup
    from ..ros.launch_description_data import NodeEntry
    from ..ros.testing import ros_context
    from .demo_recorder import DemoRecorder

    overrides = twin_overrides(adapt, controller, attach_time, payload_mass, seed, plant, engine, driver)
    node = "mpc" if controller == "mpc" else "inverse_dynamics"
    if oracle is not None:   # the law's Coulomb sign as the plant's: its β then holds the plant's friction exactly
        overrides[node]["base_parameters.coulomb_width"] = float(oracle)
    entries = [NodeEntry("simulator", "simulator", "simulator"), NodeEntry("estimator", "estimator", "estimator"),
               NodeEntry("mpc", "mpc", "mpc") if controller == "mpc" else
               NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics")]
    with ros_context() as context:
        with Bringup(entries, context, params_file, overrides=overrides, use_sim_time=True) as up:
            recorder_node = up.plain_node("twin_recorder")
            sim = up.nodes["simulator"]
            up.activate(order=[name for name in up.nodes if name != "simulator"])
            mpc_oracle = None
            if controller == "mpc" and oracle is not None:
                from ..simulation.plant import load_plant
                mpc_oracle = NodeMpcOracle(up.nodes["mpc"], load_plant(plant, up.nodes["mpc"].loop.model))
            if controller == "mpc":   # both runs compare solved MPCs, not the gravity hold served while it builds
                mpc = up.nodes["mpc"].mpc
                if not mpc.wait(timeout):
                    raise RuntimeError(f"the MPC was not built within {timeout} s: {mpc.error or 'still building'}")
            up.activate(order=["simulator"])
            # the simulator's runtime exists from its configuration on; its first state waits for the executor,
            # so the oracle's model is in place before the controller answers it
            exact = mpc_oracle
            if mpc_oracle is not None:
                mpc_oracle.follow(sim.runtime)
            elif oracle is not None:
                exact = NodeOracle(up.nodes["inverse_dynamics"].loop, sim.runtime)
            nv = sim.robot.model.nv
            estimator = up.nodes["estimator"]
            recorder = DemoRecorder(recorder_node, sim.config["command_topic"], estimator.config["payload_topic"], nv)
            if controller == "mpc":       # no inverse_dynamics node: q - q_d from the joint states
                _record_mpc_tracking(recorder_node, up.nodes["mpc"].loop, sim.robot, recorder.errors)
            coulomb = []     # (time of the last tracking error, the estimator's Coulomb coefficients (nv,))
            recorder_node.create_subscription(
                Float64MultiArray, estimator.config["base_parameters_topic"],
                lambda m: coulomb.append((recorder.t, friction_from_base(estimator.estimator.base, np.array(m.data))
                                          ["coulomb"])), qos.ESTIMATE_QOS)
            loop = up.nodes["mpc" if controller == "mpc" else "inverse_dynamics"].loop
            first_update = []   # the simulated time at which the first gated base-parameter set was applied

            def done():
                updates = loop.parameter_updates if controller == "mpc" else loop.base_parameter_updates
                if updates and not first_update:
                    first_update.append(recorder.t)
                return recorder.t >= duration

            start = time.monotonic()
            completed = up.spin_until(done, timeout)
            wall = time.monotonic() - start
            diagnostics = loop.diagnostic_values(loop.solution[1]) if controller == "mpc" else loop.diagnostic_values()
            non_finite = loop.output.non_finite
            est = estimator.estimator
            driver_events = {"stops": sim.driver_stops, "reflexes": sim.driver_reflexes}
            estimator_counts = {"samples": est.samples, "updates": est.updates,
                                "skipped_overload": estimator.skipped_overload,
                                "payload_events": [round(t, 3) for t, _ in est.payload_events]}
    errors = np.array(recorder.errors) if recorder.errors else np.zeros((0, 1 + nv))
    payload = np.array(recorder.payload) if recorder.payload else np.zeros((0, 2))
    return {"t": errors[:, 0], "error": errors[:, 1:], "t_estimate": payload[:, 0], "payload_mass": payload[:, 1],
            "t_coulomb": np.array([c[0] for c in coulomb]), "coulomb": np.array([c[1] for c in coulomb]).reshape(-1, nv),
            "non_finite_commands": int(non_finite + recorder.non_finite_commands),
            "diagnostics": diagnostics, "wall_seconds": wall, "completed": bool(completed),
            "first_parameter_update": first_update[0] if first_update else None, "estimator": estimator_counts,
            "driver_events": driver_events, "payload_applied": exact.payload_applied if exact is not None else None}


def _record_mpc_tracking(node, loop, robot, errors):
    """Append ``[t, q - q_d]`` of every joint state to ``errors``, ``q_d`` the mpc loop's reference."""
    from sensor_msgs.msg import JointState

    from ..ros import messages as rm
    from ..ros import qos

    cache = {}

    def on_state(msg):
        if loop.t0 is None:
            return
        t, q, _, _ = rm.joint_state_to_arrays(msg, robot.model.joint_names, cache)
        errors.append(np.concatenate([[t], robot.to_command(q - loop.reference.evaluate(t - loop.t0)[0])]))

    node.create_subscription(JointState, "/joint_states", on_state, qos.SENSOR_INPUT_QOS)


def run_twin_nodes(duration=15.0, attach_time=None, payload_mass=2.0, controller="computed_torque", seed=0,
                   timeout=1200.0, robot="panda", plant="twin", engine="robodyn", driver="generic", oracle=False):
    """The paired runs (nominal, adapted) over DDS for ``robot`` simulated as ``plant`` by ``engine`` (as
    :func:`robodyn_ros.cli.demo.run_twin`), and with ``oracle`` the oracle run (module docstring; its series
    under the adapted run's ``"oracle"``); returns ``(report, {"adapted", "nominal"})``."""
    from ..estimation.estimator_parameters import COULOMB_WIDTH
    from ..identification.base_parameters import compute_base_parameters
    from ..simulation.adaptive_loop import (AdaptiveLoopConfig, oracle_report, plant_coulomb_width, rms, time_to_within,
                                            window_report)
    from ..simulation.learning_limit import learning_report
    from ..simulation.plant import load_plant
    from .demo_robot import carried_payload, demo_robot, plant_description, plant_source

    if controller not in ("computed_torque", "slotine_li", "mpc"):
        raise ValueError(f"the twin scenario over the nodes runs computed_torque, slotine_li or mpc, not {controller!r}")
    setup = demo_robot(robot)
    source = plant_source(plant, setup)
    plant_model = load_plant(source, setup.model)
    payload_mass, payload_note = carried_payload(setup, payload_mass, duration)
    attach_time = None if payload_mass <= 0.0 else duration / 2.0 if attach_time is None else attach_time
    end = attach_time if attach_time is not None else duration      # the tracking window: the last third before it
    runs = {name: run_nodes_once(duration, attach_time, payload_mass, controller, adapt, setup.params_file, source,
                                 seed, timeout, engine, driver) for name, adapt in (("nominal", False), ("adapted", True))}
    nominal, adapted = runs["nominal"], runs["adapted"]
    every = [nominal, adapted]
    if oracle:     # as the library loop's report has it: the oracle's series under the adapted run's
        adapted["oracle"] = run_nodes_once(duration, attach_time, payload_mass, controller, False, setup.params_file,
                                           source, seed, timeout, engine, driver,
                                           oracle=plant_coulomb_width(plant_model))
        every.append(adapted["oracle"])
    lo = end * 2.0 / 3.0
    r_nom, r_ad = rms(nominal["error"], nominal["t"], lo, end), rms(adapted["error"], adapted["t"], lo, end)
    diag = adapted["diagnostics"]
    settle = None if attach_time is None else \
        time_to_within(adapted["t_estimate"], adapted["payload_mass"], payload_mass, attach_time)
    after = (attach_time if attach_time is not None else 0.0) + 3.0
    report = {
        "scenario": "twin", "robot": robot, "plant": plant_description(plant, source),
        "model": f"nominal {setup.model.name or robot}", "runtime": "ROS nodes over DDS (in-process bringup)",
        "engine": engine, "driver": driver,
        "driver_events": {name: run["driver_events"] for name, run in runs.items()},
        "controller": controller, "duration": float(duration), "simulated_time": float(duration),
        "tracking_window": [float(lo), float(end)],
        "tracking_rms_nominal": r_nom, "tracking_rms_adapted": r_ad,
        "tracking_ratio": r_nom / r_ad if r_ad > 0 else float("inf"),
        "payload_attach_time": None if attach_time is None else float(attach_time),
        "payload_mass_true": float(payload_mass),
        "payload_mass_estimated": float(adapted["payload_mass"][-1]) if len(adapted["payload_mass"]) else float("nan"),
        "payload_source": "joint_torques", "payload_time_to_5_percent": settle,
        "tracking_rms_after_payload_adapted": rms(adapted["error"], adapted["t"], after, np.inf),
        "tracking_rms_after_payload_nominal": rms(nominal["error"], nominal["t"], after, np.inf),
        "non_finite_commands": int(adapted["non_finite_commands"] + nominal["non_finite_commands"]),
        **window_report(adapted, nominal),
        "gate": {k[len("gate_"):]: int(v) for k, v in diag.items() if k.startswith("gate_")},
        "rollbacks": int(diag.get("rollbacks", 0)),
        "base_parameter_updates": int(diag.get("base_parameter_updates", diag.get("parameter_updates", 0))),
        "first_parameter_update": adapted["first_parameter_update"],
        "consistent_fits": int(diag.get("consistent_fits", 0)),
        "consistent_failures": int(diag.get("consistent_failures", 0)),
        "estimator": adapted["estimator"],
        "completed": all(run["completed"] for run in every),
        "wall_seconds": round(sum(run["wall_seconds"] for run in every), 2),
        "joints": list(plant_model.model.joint_names),
        "coulomb_true": [float(x) for x in plant_model.model.coulomb],
        "coulomb_estimated": [float(x) for x in adapted["coulomb"][-1]] if len(adapted["coulomb"]) else [],
    }
    if payload_note is not None:
        report["payload_note"] = payload_note
    if oracle:
        report.update(oracle_report(adapted, adapted["oracle"], lo, end))
        # the bound of the run's torques (the nodes keep no estimate series: the summary only)
        config = AdaptiveLoopConfig(controller=controller, duration=duration, attach_time=attach_time,
                                    kp=setup.config["kp"], kd=setup.config["kd"], driver=driver)
        base = compute_base_parameters(setup.model, coulomb_width=COULOMB_WIDTH)
        report.update(learning_report(setup.model, plant_model, base, setup.reference, config, {},
                                      report["tracking_rms_oracle"]))
    return report, runs
