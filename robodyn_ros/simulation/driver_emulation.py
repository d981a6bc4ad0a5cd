"""The robot's own driver as the simulator emulates it (the ``driver`` profiles,
:mod:`robodyn_ros.model.driver_profiles`; the drivers' documented behaviour is in docs/DRIVERS.md): what the
robot adds to the torques it receives, what it reports as joint effort, and its watchdogs.

Commands, per simulator step at time ``t`` (:meth:`DriverEmulation.applied`):

* ``driver_max_torque_rate`` > 0: the received torque's rate is limited as libfranka's ``limitRate`` does,
  ``τ_k = τ_{k-1} + clip(τ_cmd - τ_{k-1}, ±rate dt)`` (on the command, before the robot adds anything);
* ``robot_adds_gravity``: ``+ g(q)`` of the controllers' model (the URDF the node loads, not the plant: a real
  robot's own gravity model is not the truth) and of the payload set on the robot (:meth:`set_payload`; none
  unless set);
* ``robot_friction_scale`` s > 0: ``+ s (f_v v + f_c tanh(v / FRICTION_SIGN_WIDTH) + f_o)`` at the robot's
  velocity, with the simulated robot's own friction coefficients (the plant's: UR's controller compensates its
  robot's friction with the model it has of it, scaled per joint by the driver's friction-model parameters),
  scaled by s and with a sharper sign than the plant's Coulomb smoothing: what the robot leaves, the residual,
  is not zero and not a multiple of the plant's friction;
* ``receive_timeout`` T > 0 (UR's ``robot_receive_timeout``): more than T s of missed cycles (steps without a
  new command) in a row stop the robot; ``missed_command_limit`` N > 0 (Franka): N consecutive missed cycles
  trip the ``communication_constraints_violation`` reflex (a step without one reuses the last command, as
  libfranka does with a lost packet). Both watchdogs are armed by the first command (the driver's control
  loop starts with it). A cycle is missed only when it was ``due``: the controller had a cycle's time to
  answer the state before it. A real robot's cycle is its own hardware clock; a simulator starved of CPU
  catches up on several steps at once, microseconds apart, and those are the simulator's lateness, not the
  controller's: they neither count nor reset the run of missed cycles. ``missed_cycles`` counts every missed
  cycle since the driver was made (commands later than one cycle: what libfranka tolerates 19 of in a row).
  A stopped robot holds the position where it stopped (its own gravity model and a critically damped
  joint-space hold at ``HOLD_FREQUENCY``: the brakes, within the model's gravity error) and ignores commands:
  after a UR stop until :meth:`reset` (the simulator node deactivated and activated again: the driver's program
  restarted), after a Franka reflex until :meth:`error_recovery`. Every driver, ``generic`` included, holds the
  same way from a start (:meth:`reset`) until the first command: a robot waits on its brakes for its controller,
  so a controller that comes up late finds the arm where it was, not fallen under gravity.

Efforts (:meth:`effort_into`), from the applied torque with the sensor noise already added (so the noise is
on the torque, before any conversion): ``effort.kind`` ``torque`` as it is; ``gravity_compensated`` minus
``g(q)`` of the controllers' model and the set payload (0 at rest), at the configuration the torque was applied
from when the robot added that gravity to it (a real robot removes the gravity of the instant it measures, the
one in the torque then: the simulated torque is held over the step); ``current`` divided by
``effort.torque_constants`` (empty: ``DEFAULT_TORQUE_CONSTANT`` per joint); then ``effort.filter_cutoff``
``f_c`` > 0: ``y += α (x - y)``, ``α = 1 - exp(-2π f_c Δt)`` with ``Δt`` the time since the last effort
(lbr_fri_ros2_stack's 10-Hz filter of the measured torque).
"""
from __future__ import annotations

import numpy as np

from ..identification.sensor_wrench import link_inertia_in_body
from ..kernels import compile_kernels
from ..model.driver_profiles import PROFILES, check_driver

EMULATION_DEFAULTS = {"robot_adds_gravity": False, "robot_friction_scale": 0.0, "effort.kind": "torque",
                      "effort.torque_constants": [], "effort.filter_cutoff": 0.0, "receive_timeout": 0.0,
                      "missed_command_limit": 0, "driver_max_torque_rate": 0.0}
"""The simulator's driver parameters when nothing is emulated (the ``generic`` driver: the schema's defaults)."""
DEFAULT_TORQUE_CONSTANT = 10.0   # N m/A per joint when effort.kind is current and no constant is given
FRICTION_SIGN_WIDTH = 0.02       # rad/s: the friction compensation's Coulomb sign, tanh(v / width)
HOLD_FREQUENCY = 10.0            # Hz: the stopped robot's joint-space hold, critically damped


def driver_config(driver):
    """The driver parameters (the keys of :data:`EMULATION_DEFAULTS`) and ``rate`` of profile ``driver``
    for a simulator that takes the rest from its defaults (the library loop)."""
    profile = PROFILES["simulator"].get(check_driver(driver), {})
    return {"driver": driver, "rate": profile.get("rate", 1000.0), **EMULATION_DEFAULTS,
            **{k: v for k, v in profile.items() if k in EMULATION_DEFAULTS}}


class DriverEmulation:
    """The driver of the module docstring for ``model`` (the controllers' model, joint order of ``model``),
    stepped every ``dt`` s. ``config``: the simulator node's parameters (the keys of
    :data:`EMULATION_DEFAULTS`, ``driver`` optional); ``log(level, kind, text)``: as the runtime's;
    ``friction_model``: the simulated robot (its friction coefficients are what the robot compensates;
    default ``model``). ValueError (one line naming the parameter) for torque constants of the wrong length."""

    def __init__(self, model, config, dt, log=lambda level, kind, text: None, friction_model=None):
        self.model, self.dt, self.log = model, float(dt), log
        f = friction_model if friction_model is not None else model
        self._friction = tuple(np.array(x, dtype=float) for x in (f.viscous, f.coulomb, f.friction_offset))
        self.driver = config.get("driver", "generic")
        self.adds_gravity = bool(config["robot_adds_gravity"])
        self.friction_scale = float(config["robot_friction_scale"])
        self.kind = config["effort.kind"]
        self.cutoff = float(config["effort.filter_cutoff"])
        self.receive_timeout = float(config["receive_timeout"])
        self.missed_limit = int(config["missed_command_limit"])
        self.max_rate = float(config["driver_max_torque_rate"])
        k = np.asarray(config["effort.torque_constants"], dtype=float)
        if k.size == 0:
            k = np.full(model.nv, DEFAULT_TORQUE_CONSTANT)
        if k.shape != (model.nv,):
            raise ValueError(f"effort.torque_constants: one value (N m/A) per joint, {model.nv}; got {k.size}")
        self.torque_constants = k
        kernels = compile_kernels(model, register=False, parts=("dynamics",))
        self._regressor, self._crba = kernels.regressor, kernels.crba
        self._pi_robot = model.inertial_parameters()
        self._pi = self._pi_robot.copy()
        self.payload = None
        self._zero = np.zeros(model.nv)
        self.stops = self.reflexes = self.missed_cycles = 0
        self.reset()

    @property
    def emulating(self):
        """Whether the driver changes anything (False: the generic driver's full-torque pass-through)."""
        return (self.adds_gravity or self.friction_scale > 0.0 or self.kind != "torque" or self.cutoff > 0.0
                or self.receive_timeout > 0.0 or self.missed_limit > 0 or self.max_rate > 0.0)

    def describe(self):
        """One line saying what is emulated."""
        parts = [p for p, on in (
            ("gravity added", self.adds_gravity),
            (f"{self.friction_scale:g} x the robot's friction added", self.friction_scale > 0.0),
            (f"efforts {self.kind}", self.kind != "torque"),
            (f"efforts filtered at {self.cutoff:g} Hz", self.cutoff > 0.0),
            (f"stop after {self.receive_timeout:g} s without a command", self.receive_timeout > 0.0),
            (f"reflex after {self.missed_limit} missed commands", self.missed_limit > 0),
            (f"torque rate limited to {self.max_rate:g} N m/s", self.max_rate > 0.0)) if on]
        return f"emulating the {self.driver} driver at {1.0 / self.dt:g} Hz: " + (", ".join(parts) or "nothing added")

    # ---------------------------------------------------------------------------------------- state
    def reset(self):
        """A new start (the simulator node activated): holding until the first command, which arms the
        watchdogs; the rate limiter and the effort filter from scratch. The stop, reflex and missed-cycle counts
        are kept."""
        self.stopped = None          # None, "receive_timeout" or "reflex"
        self.armed = False
        self.missed = 0              # missed cycles in a row
        self._last_tau = np.zeros(self.model.nv)
        self._hold = None
        self._filtered = None
        self._added_gravity = None     # the gravity in the last applied torque (its configuration's)

    def error_recovery(self):
        """Franka's error recovery: ``(success, message)``; clears a reflex (commands are taken again,
        the watchdog re-armed by the next one); nothing else to recover from otherwise."""
        if self.stopped == "reflex":
            self.reset()
            self.log("info", "error_recovery", f"{self.driver}: error recovery: reflex cleared, commands taken again")
            return True, "reflex cleared"
        if self.stopped == "receive_timeout":
            return False, ("the robot stopped after its receive timeout: deactivate and activate the simulator "
                           "(the driver's program restarted)")
        return True, "no error"

    def set_payload(self, payload):
        """The payload set on the robot (``payload.link``, ``payload.pi`` about that link's frame; None:
        none), whose gravity the robot adds and compensates in the efforts."""
        self._pi = self._pi_robot.copy()
        if payload is not None:
            body = self.model.frames[payload.link].body
            self._pi[10 * body:10 * body + 10] += link_inertia_in_body(self.model, payload.pi, payload.link)
        self.payload = payload

    def gravity(self, q):
        """``g(q)`` (nv,) of the controllers' model and the set payload."""
        return np.asarray(self._regressor(q, self._zero, self._zero)) @ self._pi

    # -------------------------------------------------------------------------------------- commands
    def applied(self, t, q, v, command, fresh, due=True):
        """The torque (nv,) the robot applies over the step at time ``t`` from state ``(q, v)`` (nv,) given
        the last received ``command`` (nv,); ``fresh``: a new command arrived since the last step; ``due``: the
        controller had a cycle's time to send it (False for a simulator's catch-up step: module docstring)."""
        if self.stopped is None:
            self._watch(fresh, due)
        if self.stopped is not None or not self.armed:       # stopped, or waiting for the first command
            return self._hold_torque(q, v)
        tau = command
        if self.max_rate > 0.0:
            step = self.max_rate * self.dt
            tau = self._last_tau + np.clip(tau - self._last_tau, -step, step)
            self._last_tau = tau
        if self.adds_gravity:
            self._added_gravity = self.gravity(q)
            tau = tau + self._added_gravity
        if self.friction_scale > 0.0:
            tau = tau + self.friction(v)
        return tau

    def friction(self, v):
        """The friction compensation the robot adds at the velocity ``v`` (nv,) (zeros without
        ``robot_friction_scale``)."""
        viscous, coulomb, offset = self._friction
        return self.friction_scale * (viscous * v + coulomb * np.tanh(v / FRICTION_SIGN_WIDTH) + offset)

    def _watch(self, fresh, due):
        """The watchdogs (module docstring) at one step."""
        if fresh:
            if not self.armed:
                self._hold = None            # the wait's hold is over: a later stop holds where it stops
            self.armed, self.missed = True, 0
            return
        if not self.armed or not due:
            return
        self.missed += 1
        self.missed_cycles += 1
        silent = self.missed * self.dt
        if self.receive_timeout > 0.0 and silent > self.receive_timeout + 1e-9:
            self._stop("receive_timeout", f"{self.driver}: no command for {silent:.3f} s: program "
                                          f"stopped (robot_receive_timeout {self.receive_timeout:g} s); the robot "
                                          f"holds until the simulator is deactivated and activated again")
        elif self.missed_limit > 0 and self.missed >= self.missed_limit:
            self._stop("reflex", f"{self.driver}: {self.missed} consecutive commands missed: "
                                 f"communication_constraints_violation reflex; the robot holds until ~/error_recovery")

    def _stop(self, why, text):
        self.stopped = why
        if why == "reflex":
            self.reflexes += 1
        else:
            self.stops += 1
        self.log("error", why, text)

    def _hold_torque(self, q, v):
        """The stopped (or waiting) robot's torque: its own gravity and a critically damped hold of the position
        where it stopped (stiffness ``ω² M_ii``, damping ``2 ω M_ii`` at the stop's configuration)."""
        if self._hold is None:
            m = np.diag(self._crba(q)).copy()
            w = 2.0 * np.pi * HOLD_FREQUENCY
            self._hold = (np.array(q, dtype=float), w * w * m, 2.0 * w * m)
        q_hold, kp, kd = self._hold
        self._added_gravity = self.gravity(q)
        return self._added_gravity + kp * (q_hold - q) - kd * v

    # --------------------------------------------------------------------------------------- efforts
    def effort_into(self, t, q, tau):
        """Turn ``tau`` (nv,), the applied torque measured at time ``t`` and configuration ``q``, into the
        effort the driver reports, in place (module docstring)."""
        if self.kind == "gravity_compensated":     # what the robot added to this torque, as a robot removes it
            tau -= self.gravity(q) if self._added_gravity is None else self._added_gravity
        elif self.kind == "current":
            tau /= self.torque_constants
        if self.cutoff <= 0.0:
            return
        if self._filtered is None or t <= self._filtered[0]:
            self._filtered = (t, tau.copy())
            return
        t_last, y = self._filtered
        y += (1.0 - np.exp(-2.0 * np.pi * self.cutoff * (t - t_last))) * (tau - y)
        self._filtered = (t, y)
        np.copyto(tau, y)
