"""The ``mpc`` node's loop without ROS: :class:`~robodyn_ros.control.mpc.ModelPredictiveController` (built
in the background by :class:`~robodyn_ros.control.mpc.BackgroundController`, gravity compensation served
until it is ready) at a fixed rate on the newest joint state, tracking the built-in Fourier reference (time from the first
joint-state stamp), and, with ``output: commands``, the solution's torque ``tau_ff,k + K_k (x - x_k)`` at
the joint-state rate through :class:`~robodyn_ros.control.torque_output.TorqueOutput` (stamp gate, watchdog
with the MPC model's gravity hold, guard; no solves while stale; after a time reset the reference time is
re-based so that it continues and the solution of the old time line is dropped).
"""
from __future__ import annotations

import numpy as np

from .mpc import BackgroundController, MPCConfig
from .payload_update import payload_body_parameters
from .reference import fourier_reference
from .torque_output import TorqueOutput


class MpcLoop:
    """robot: the node's robot (``model``, ``home``, ``command_order``); config: the mpc node's parameters
    (a mapping read live); publish(command), report(kind, text): as for :class:`TorqueOutput`, used with
    ``output: commands`` only."""

    def __init__(self, robot, config, publish=None, report=None):
        c = config
        self.mpc = BackgroundController(robot.model, MPCConfig(       # gravity fallback while it builds
            horizon=c["horizon"], dt=c["dt"], solver=c["solver"], compiled=c["compiled"], time_limit=c["time_limit"],
            q_weight=c["q_weight"], v_weight=c["v_weight"], r_weight=c["r_weight"]))
        self.model = robot.model
        self.pi_nominal = robot.model.inertial_parameters()
        self.reference = fourier_reference(robot.home, c["generator.amplitude"], c["generator.period"],
                                           c["generator.harmonics"])
        self.solves = self.fallbacks = 0
        self.output = TorqueOutput(self.mpc.tau_max, self.gravity, config, publish, robot.command_order, report) \
            if c["output"] == "commands" else None
        self.start()

    def start(self):
        self.state = self.t0 = self.solution = None
        if self.output is not None:
            self.output.start()

    def gravity(self, q):
        """Gravity hold of the MPC's model (nv,) at ``q`` (with its friction offset)."""
        return self.mpc.gravity(q)

    def on_state(self, t, q, v):
        """A valid joint state: kept for the next solve; with ``output: commands`` returns the published
        torque (nv,) once a solution exists, None otherwise or when the stamp gate drops the state."""
        if self.output is not None:
            newest = self.output.gate.newest
            verdict = self.output.accept_state(t, q)
            if verdict is None:
                return None
            if verdict == "reset":
                self.t0 = None if self.t0 is None else self.t0 + (t - newest)
                self.solution = None
        if self.t0 is None:
            self.t0 = t
        self.state = (t, q, v)
        if self.output is not None and self.solution is not None:
            tau = self.solution[1].torque(np.concatenate([q, v]), t - self.solution[0])
            return self.output.publish(tau, t)
        return None

    def solve(self):
        """One solve from the newest state: ``(t_state, MPCSolution)``, or None (no state yet, or stale)."""
        if self.state is None or (self.output is not None and self.output.stale):
            return None
        t, q, v = self.state
        solution = self.mpc.solve(q, v, self.reference, t - self.t0)
        self.solution = (t, solution)
        self.solves += 1
        self.fallbacks += solution.status.startswith("fallback")
        return self.solution

    def apply_payload(self, link, m, com, I_c):
        """The payload estimate (as :meth:`ControlLoop.apply_payload`, unchecked) in the next solve's model."""
        body, pi_body = payload_body_parameters(self.model, link, m, com, I_c)
        pi = self.pi_nominal.copy()
        pi[10 * body:10 * body + 10] += pi_body
        self.mpc.set_inertial_parameters(pi)

    def diagnostic_values(self, solution):
        return {"solve_time_ms": solution.solve_time * 1e3, "iterations": solution.iterations,
                "status": solution.status, "solver_status": solution.solver_status, "solves": self.solves,
                "fallbacks": self.fallbacks, **(self.output.diagnostic_values() if self.output is not None else {})}
