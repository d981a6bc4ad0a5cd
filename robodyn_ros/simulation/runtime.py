"""The simulator as a running robot, without ROS: a :class:`~robodyn_ros.simulation.simulator.Simulator`
built from the ``simulator`` node's parameters, its payload (attached at ``payload.attach_time``, by
request, or replaced when the ``payload.*`` parameters change), the command with its timeout, and the
pacing (real time, or as fast as possible). The node converts commands, publishes the state from the
``publish`` callback and serves services; it calls the tick methods from its timers, or lets
:meth:`SimulationRuntime.start_thread` step in a thread of its own.

Timing: ``real_time_factor > 0`` steps to the wall clock, catching up whole steps and dropping wall time
when more than ``MAX_CATCH_UP_STEPS`` behind; ``0`` runs as fast as possible, in ``lockstep`` stepping as
soon as a command answers the last published state (or after ``lockstep_timeout`` wall seconds). From a start
until the first command the robot holds its position, as a robot on its brakes waits for its controller (the
driver's hold); after it, a command older than ``command_timeout`` simulated seconds is replaced by zero
torque. The robot's driver (``driver`` and the driver parameters:
:class:`~robodyn_ros.simulation.driver_emulation.DriverEmulation`, ``self.driver``) then turns the command
into the applied torque (gravity and friction compensation added, its rate limit, its watchdogs' stop and
hold) and the applied torque into the reported effort. A push (``push.*``:
:class:`~robodyn_ros.simulation.torque_pulse.TorquePulse`) adds its joint torques to the applied torque over
its steps, not to the reported effort. ``publish_decimation`` k > 1
publishes after every k-th step only.

Divergence: after every step the state is checked (:class:`~robodyn_ros.simulation.divergence.DivergenceCheck`);
a step whose result is not finite or absurd (a velocity or position no simulated arm reaches) stops the
runtime for good: that state is never published, one error line names the joint and the likely cause,
stepping and publishing end (``fault`` holds the :class:`~robodyn_ros.simulation.divergence.Divergence`,
``on_stop()`` is called once) and stay stopped; a new runtime (the node configured again) starts afresh. The stepping thread (real time: sleeps until the absolute wall time of
the next step; as fast as possible: back to back, offering the GIL every ``FREE_RUN_BURST`` wall seconds)
and the callbacks are serialised by one lock (``lock``): steps, payload changes and stopping.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..dynamics.aba import aba
from ..identification.sensor_wrench import SensorWrenchRegressor
from ..kernels import compile_kernels
from ..model.errors import ModelError
from .divergence import DivergenceCheck
from .driver_emulation import DriverEmulation
from .simulation_step import engine_step
from .plant import Plant, load_plant
from .simulator import DivergedStep, Payload, SensorNoise, Simulator, SimulatorConfig
from .torque_pulse import TorquePulse

MAX_CATCH_UP_STEPS = 50
FREE_RUN_BURST = 1e-3    # s of stepping per free-running tick (timer) or between two GIL offers (thread)


def stable_limit_stops(model, kernels, q, dt):
    """``(stiffness, damping)`` of the joint-limit stops that an explicit step ``dt`` integrates stably for
    the lightest joint: with ``m = 1 / max diag(M⁻¹(q))`` (the smallest effective inertia), ``k dt² / m``
    and ``c dt / m`` of 0.5 (RK4 is stable up to about 2.8; the library's defaults, 2e4 and 2e2, make the
    Panda's wrist diverge at 1 kHz when it falls into a stop)."""
    m = 1.0 / float(np.max(np.diag(np.linalg.inv(kernels.crba(q)))))
    return 0.5 * m / dt**2, 0.5 * m / dt


def configured_payload(config, wrist_link):
    """The box of the ``payload.*`` parameters (None for mass 0; its link defaults to ``wrist_link``)."""
    if config["payload.mass"] <= 0.0:
        return None
    return Payload.box(config["payload.link"] or wrist_link, config["payload.mass"], tuple(config["payload.com"]),
                       tuple(config["payload.size"]))


def robot_locked_joints(robot, plant_source):
    """Joints to lock in a URDF plant: those of its file that the robot's model does not move (at 0)."""
    if not str(plant_source).lower().endswith((".urdf", ".xml")) and not str(plant_source).lstrip().startswith("<"):
        return None
    from ..model.model import Model
    full = Model.from_urdf(plant_source)
    return {j: 0.0 for j in full.joint_names if j not in robot.model.joint_names} or None


class SimulationRuntime:
    """robot: the node's robot (``model``, ``home``, ``wrist_link``, ``from_command``); config: the
    simulator node's parameters (a mapping read live); publish(): publishes the current state (called after
    every ``publish_decimation``-th step); log(level, kind, text): ``level`` one of ``"info"``,
    ``"warning"``, ``"throttled"`` (at most one per kind and period), ``"error"``; on_stop(): called once
    when a diverged step stops the runtime (module docstring), e.g. to cancel the caller's timers.
    ``on_attach(payload)``: an attribute called by :meth:`attach` with the attached
    :class:`~robodyn_ros.simulation.simulator.Payload` (at ``payload.attach_time`` or on request), before the next
    step (the oracle run of ``robodyn demo --oracle`` gives it to its controller at that instant); a load replaced
    live through the ``payload.*`` parameters (:meth:`apply_payload_parameters`) is not reported."""

    def __init__(self, robot, config, publish, log, on_stop=lambda: None):
        c = self.config = config
        self.robot, self.publish, self.log, self.on_stop = robot, publish, log, on_stop
        self.on_attach = lambda payload: None
        plant = load_plant(c["plant"], robot.model, locked_joints=robot_locked_joints(robot, c["plant"])) \
            if c.get("plant") else None
        model = plant.model if plant is not None else robot.model
        if not c["friction"]:
            model = model.with_friction(np.zeros(model.nv), np.zeros(model.nv), np.zeros(model.nv))
        if plant is not None:
            plant = Plant(model, plant.coulomb_width, plant.effort_noise, plant.source)
        self.payload = configured_payload(c, robot.wrist_link)
        self.push = TorquePulse.from_config(c, robot)
        self._push_told = False
        if c["initial_positions"] and len(c["initial_positions"]) != model.nv:
            raise ModelError(f"initial_positions: one value per joint, {model.nv}; got {len(c['initial_positions'])}")
        # the kernels compile beside the step (two compilers on two cores on a first start; the step needs only
        # the engine and integrator of the configuration)
        with ThreadPoolExecutor(max_workers=1) as pool:
            kernels = pool.submit(compile_kernels, model, register=False, parts=("dynamics",))
            step_function = engine_step(plant if plant is not None else model,
                                        SimulatorConfig(integrator=c["integrator"], engine=c.get("engine", "robodyn")),
                                        lambda exc: log("warning", "compile",
                                                        f"stepping in CasADi's virtual machine (no compiled step): {exc}"))
            self.kernels = kernels.result()
        q0 = robot.from_command(np.asarray(c["initial_positions"], dtype=float)) if c["initial_positions"] \
            else robot.home
        noise = SensorNoise(c["noise.position"], c["noise.velocity"], c["noise.effort"], c["noise.force"],
                            c["noise.torque"])
        if plant is not None:
            noise = plant.sensor_noise(noise)
        stiffness, damping = stable_limit_stops(model, self.kernels, q0, 1.0 / c["rate"])
        sim_config = SimulatorConfig(dt=1.0 / c["rate"], integrator=c["integrator"], noise=noise,
                                     wrench_bias=tuple(c["wrench_bias"]), seed=c["noise.seed"],
                                     limit_stiffness=stiffness if c["limits.stiffness"] < 0 else c["limits.stiffness"],
                                     limit_damping=damping if c["limits.damping"] < 0 else c["limits.damping"],
                                     substeps=int(c.get("substeps", 1)), engine=c.get("engine", "robodyn"),
                                     coulomb_smoothing=(plant.coulomb_width if plant is not None and plant.coulomb_width
                                                        else SimulatorConfig.coulomb_smoothing))
        self.sim = Simulator(robot.model if plant is not None else model, sim_config, q0,
                             forward_dynamics=self.robot_dynamics, sensor_link=robot.wrist_link,
                             wrench_regressor=SensorWrenchRegressor(model, robot.wrist_link),
                             step_function=step_function, plant=plant)
        if self.payload is not None:
            self.sim.attach_payload(self.payload)      # validates the link (nothing to compile: pi is an input)
            self.sim.detach_payload()
        self.divergence = DivergenceCheck(self.sim.model, self.sim.config, q0)
        unstable = self.divergence.explicit_instability(q0)
        if unstable is not None:
            log("warning", "integrator", f"the simulation will likely diverge: {unstable}")
        self.fault = None               # the Divergence that stopped the runtime
        self.driver = DriverEmulation(robot.model, c, 1.0 / c["rate"], log, friction_model=model)
        if self.driver.emulating:
            log("info", "driver", self.driver.describe())
        self.command = np.zeros(model.nv)
        self._fresh_command = False
        self._zero_command = np.zeros(model.nv)
        self._auto_attached = False
        self.lock = threading.Lock()     # one step, a payload change or a stop at a time
        self.thread = self._thread_id = self._thread_cpu_total = None
        self.active = self._running = False
        self.last_command_time = 0.0
        self.commands_received = self.steps = 0
        self.catch_up_steps = 0          # real time: steps taken less than half a step's wall period after a publish
        self.command_timed_out = self.awaiting_command = self.commanded = self._told_waiting = False
        self.last_step_wall = self._published_wall = time.monotonic()

    def robot_dynamics(self, q, v, tau, pi):
        return self.kernels.aba(q, v, tau)

    def payload_dynamics(self, q, v, tau, pi):
        """``sim.forward_dynamics`` with a payload: the interpreted ABA with the parameters ``pi`` (any load
        on any link, nothing compiled; the step itself is the compiled step, which takes ``pi`` as input)."""
        return aba(self.sim.model, q, v, tau, pi=pi)

    # ------------------------------------------------------------------------------------ lifecycle
    def start(self):
        """Activation: time references from now (the caller publishes the first state)."""
        self.active = True
        self.last_command_time = self.sim.t
        # a command arrived (the timeout runs from it); one received while inactive is taken at the first step
        self.commanded = self._fresh_command
        self.driver.reset()
        self._told_waiting = False
        self._wall_start, self._sim_start = time.monotonic(), self.sim.t

    def threaded(self):
        """Whether the configuration steps in a thread (``step_thread``, unless lockstep)."""
        c = self.config
        return c["step_thread"] and (c["real_time_factor"] > 0.0 or not c["lockstep"])

    def start_thread(self, context_ok=lambda: True):
        self._running = True
        loop = self._real_time_loop if self.config["real_time_factor"] > 0.0 else self._free_run_loop
        self.thread = threading.Thread(target=self._thread_main, args=(loop, context_ok), name="simulator_step",
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.active = self._running = False
        if self.thread is not None:
            if self.thread is not threading.current_thread():
                self.thread.join(timeout=5.0)
            self.thread = None

    def stepping_cpu_seconds(self):
        """CPU seconds (user + system) used so far by the stepping thread (None without one); after the
        thread ended, its total."""
        if self._thread_id is None:
            return None
        if self.thread is None or not self.thread.is_alive():
            return self._thread_cpu_total
        try:
            with open(f"/proc/self/task/{self._thread_id}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    # -------------------------------------------------------------------------------------- stepping
    def _thread_main(self, loop, context_ok):
        self._thread_id, self._thread_cpu_total = threading.get_native_id(), None
        try:
            loop()
        except Exception as exc:  # noqa: BLE001 - e.g. the context shut down under a publish: stop stepping
            if self._running and context_ok():
                self.log("error", "thread", f"stepping thread stopped: {type(exc).__name__}: {exc}")
        finally:
            self._running = False
            self._thread_cpu_total = time.thread_time()

    def _real_time_loop(self):
        """Real time in the stepping thread: :meth:`on_real_time_tick`, then a sleep until the absolute
        wall time at which the next step is due."""
        dt, factor = self.sim.config.dt, self.config["real_time_factor"]
        while self._running and self.fault is None:
            with self.lock:
                if not self._running:
                    break
                self.on_real_time_tick()
                due = self._wall_start + (self.sim.t + dt - self._sim_start) / factor
            delay = due - time.monotonic()
            if delay > 0.0:
                time.sleep(min(delay, 0.05))

    def _free_run_loop(self):
        """As fast as possible in the stepping thread: steps back to back, offering the GIL to the executor
        thread every ``FREE_RUN_BURST`` wall seconds (else it waits for Python's 5 ms switch interval)."""
        lock, step = self.lock, self.step_and_publish
        end = time.monotonic() + FREE_RUN_BURST
        while self._running and self.fault is None:
            with lock:
                if not self._running:
                    break
                step()
            if self.last_step_wall >= end:
                time.sleep(0)
                end = self.last_step_wall + FREE_RUN_BURST

    def on_real_time_tick(self):
        if self.fault is not None:
            return
        target = self._sim_start + (time.monotonic() - self._wall_start) * self.config["real_time_factor"]
        steps = int((target - self.sim.t) / self.sim.config.dt + 1e-9)
        if steps > MAX_CATCH_UP_STEPS:  # too slow for real time: drop wall time instead of bursting
            self.log("throttled", "behind", f"simulator behind real time by {steps} steps; slowing down")
            self._wall_start, self._sim_start = time.monotonic(), self.sim.t
            steps = MAX_CATCH_UP_STEPS
        for _ in range(max(steps, 0)):
            self.step_and_publish()

    def on_lockstep_tick(self):
        if time.monotonic() - self.last_step_wall >= self.config["lockstep_timeout"]:
            self.step_to_next_publish()

    def on_free_run_tick(self):
        end = time.monotonic() + FREE_RUN_BURST
        while self.active and self.fault is None:
            self.step_and_publish()
            if self.last_step_wall >= end:
                break

    def step_to_next_publish(self):
        """Step until the state is published (one step unless ``publish_decimation`` > 1)."""
        for _ in range(self.config["publish_decimation"]):
            if self.step_and_publish():
                return

    def step_and_publish(self):
        """One step; publishes the state after every ``publish_decimation``-th. Returns whether it did. A
        diverged step stops the runtime instead (module docstring)."""
        if not self.active or self.fault is not None:
            return False
        sim, c = self.sim, self.config
        if c["payload.attach_time"] >= 0.0 and self.payload is not None and sim.payload is None \
                and not self._auto_attached and sim.t + 1e-12 >= c["payload.attach_time"]:
            self._auto_attached = True
            self.attach()
        tau = self.command                 # validated on receipt (set_command)
        if not self.commanded and not self._told_waiting:
            self._told_waiting = True
            self.log("info", "waiting", "holding the start position until the first command")
        if self.commanded and sim.t - self.last_command_time > c["command_timeout"]:
            if not self.command_timed_out:
                self.log("warning", "command_timeout", f"no command for {sim.t - self.last_command_time:.3f} s "
                                                       f"(timeout {c['command_timeout']} s): applying zero torque")
            self.command_timed_out = True
            tau = self._zero_command
        tau = self.driver.applied(sim.t, sim.q, sim.v, tau, self._fresh_command, self._command_due())
        self._fresh_command = False
        external = self.push.at(sim.t) if self.push is not None else None
        if external is not None and not self._push_told:
            self._push_told = True
            self.log("info", "push", f"push from t = {sim.t:.3f} s for {self.push.duration} s: "
                                     f"{list(c['push.torque'])} N m (joint order)")
        q_last, v_last = sim.q, sim.v         # the step replaces the arrays, never writes into them
        try:
            sim.step_validated(tau, external)
        except DivergedStep as exc:
            self._stop_diverged(self.divergence.diagnose(exc.q, exc.v, sim.t + sim.config.dt, q_last, v_last))
            return False
        if not self.divergence.within(sim.q, sim.v):
            self._stop_diverged(self.divergence.diagnose(sim.q, sim.v, sim.t, q_last, v_last))
            return False
        self.steps += 1
        self.last_step_wall = time.monotonic()
        if self.steps % c["publish_decimation"]:
            return False
        self.publish_state()
        return True

    def _command_due(self):
        """Whether the controller had a cycle to answer the last published state before this step: in real
        time, half a step's wall period has passed since it was published (else this is a catch-up step of a
        simulator that was starved of CPU, counted in ``catch_up_steps``; the driver's watchdogs do not count
        it against the controller); as fast as possible and in lockstep, always."""
        factor = self.config["real_time_factor"]
        if factor <= 0.0 or time.monotonic() - self._published_wall >= 0.5 * self.sim.config.dt / factor:
            return True
        self.catch_up_steps += 1
        return False

    def _stop_diverged(self, divergence):
        """Stop for good after a diverged step (module docstring): one error line, no more steps or publishing."""
        self.fault = divergence
        self._running = False
        self.log("error", "diverged", f"{divergence.message()}. Stopped: no more steps and no more joint states "
                                      "until the simulator is configured again")
        self.on_stop()

    def publish_state(self):
        """Publish the current state (the ``publish`` callback); in lockstep the next step waits for its command.
        Nothing once a diverged step stopped the runtime."""
        if self.fault is not None:
            return
        self.publish()
        self._published_wall = time.monotonic()
        self.awaiting_command = True

    def measure_joints_into(self, q, v, tau):
        """The joint state the robot's driver publishes, written into ``q`` (nq,), ``v``, ``tau`` (nv,), model
        order: positions, velocities, and the applied torque with its noise as the driver reports it
        (``effort.kind``, ``effort.filter_cutoff``); returns the time."""
        t = self.sim.measure_joints_into(q, v, tau)
        if self.driver.kind != "torque" or self.driver.cutoff > 0.0:
            self.driver.effort_into(t, q, tau)
        return t

    def error_recovery(self):
        """Franka's error recovery (:meth:`DriverEmulation.error_recovery`): ``(success, message)``."""
        with self.lock:
            return self.driver.error_recovery()

    def set_robot_payload(self):
        """Tell the robot's driver about the payload of the ``payload.*`` parameters (mass 0: none), as
        Franka's ``set_load`` and UR's ``set_payload`` do; returns it."""
        with self.lock:
            self.driver.set_payload(self.payload)
        return self.payload

    def set_command(self, command):
        """A command (nv,) in command order, validated by the caller; in lockstep it answers the last
        published state, so the next steps are taken now."""
        self.command = self.robot.from_command(command)
        self._fresh_command = self.commanded = True
        self.last_command_time = self.sim.t
        self.commands_received += 1
        if self.command_timed_out:
            self.log("info", "commands_back", "commands are back")
            self.command_timed_out = False
        c = self.config
        if self.active and c["real_time_factor"] == 0.0 and c["lockstep"] and self.awaiting_command:
            self.awaiting_command = False
            self.step_to_next_publish()

    # --------------------------------------------------------------------------------------- payload
    def attach(self):
        """Attach the configured payload; ModelError when none is configured."""
        if self.payload is None:
            raise ModelError("no payload configured (payload.mass is 0)")
        self.sim.attach_payload(self.payload)
        self.sim.forward_dynamics = self.payload_dynamics
        self.log("info", "attached", f"payload of {self.payload.mass} kg attached to {self.payload.link} at "
                                     f"t = {self.sim.t:.3f} s")
        self.on_attach(self.payload)

    def detach(self):
        self.sim.detach_payload()
        self.sim.forward_dynamics = self.robot_dynamics

    def apply_payload_parameters(self):
        """``payload.*`` changed: the next :meth:`attach` attaches the new load (to its link); a load attached
        now is replaced at once. An unknown link is refused (logged) and the previous load kept. Call with
        ``lock`` held."""
        payload = configured_payload(self.config, self.robot.wrist_link)
        previous = self.sim.payload
        try:
            if payload is not None:
                self.sim.attach_payload(payload)       # validates the link
                if previous is None:
                    self.sim.detach_payload()
            elif previous is not None:
                self.detach()
        except ModelError as exc:
            self.log("error", "payload", f"payload parameters refused, keeping the previous load: {exc}")
            return
        self.payload = payload
