"""The MPC with live parameters, as a 1 kHz torque law: a solve at ``rate`` (its NLP parameters
``θ = [π, f_v, f_c, f_o]`` set from the gated estimate, :mod:`robodyn_ros.control.consistent_parameters`,
nothing rebuilt), and between solves the solution's feedforward and time-varying LQR gains
``τ = τ_ff,k + K_k (x - x_plan(t))`` (:meth:`robodyn_ros.control.mpc.MPCSolution.torque`).

The Coulomb friction is compensated in the 1 kHz stage, ``+ f_c tanh(v / ε)`` at the measured velocity, and
left out of the NLP's prediction (its ``f_c`` is set to zero): on a light wrist (the Panda identified from
real data has about 1.8e-3 kg m² about joint 7) the slope ``f_c / ε`` of a smoothed Coulomb term over the
link inertia is a time constant of a fraction of a millisecond, which the MPC's 10-ms RK4 intervals cannot
integrate (the prediction diverges); at 1 kHz it is a measured-velocity feedforward like computed torque's."""
from __future__ import annotations

import numpy as np

from .command_guard import CommandGuard, ControlStatus, effort_bounds
from .mpc import MPCConfig, ModelPredictiveController, parameter_vector


class AdaptiveMPC:
    """``model``: the nominal model; ``reference``: ``evaluate(t) -> (q, v, a)``; ``rate``: solves per second;
    ``beta``: the base parameters the current θ stands for (bookkeeping for the caller); ``config``: an
    :class:`MPCConfig` (default: RTI, N = 20, 10 ms, the Coulomb width ``coulomb_smoothing``, ``time_limit``
    s per solve: a simulation that is not in real time passes a large one, so that a loaded machine does
    not turn solves into fallbacks)."""

    def __init__(self, model, reference, rate=100.0, beta=None, config=None, coulomb_smoothing=0.05, time_limit=0.05):
        self.model, self.reference, self.period = model, reference, 1.0 / float(rate)
        self.config = config or MPCConfig(solver="rti", coulomb_smoothing=coulomb_smoothing, time_limit=time_limit)
        self.mpc = ModelPredictiveController(model, self.config)
        self.beta = None if beta is None else np.array(beta, dtype=float)
        self.guard = CommandGuard(effort_bounds(model))
        self.solution, self.solved_at = None, None
        self.solves = 0
        self.statuses = {}
        self.coulomb = np.zeros(model.nv)
        self.coulomb_smoothing = float(self.config.coulomb_smoothing)
        self.set_parameters(self.beta if self.beta is not None else np.zeros(0), self.mpc.theta)

    @property
    def theta(self):
        return self.parameters

    def set_parameters(self, beta, theta=None):
        """Use ``theta = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) from the next solve on; ``beta`` (r,) is what it
        stands for. The Coulomb part ``f_c`` goes to the 1 kHz output stage, the rest to the NLP (module
        docstring)."""
        if theta is not None:
            theta = np.array(theta, dtype=float)
            n_in, nv = 10 * self.model.nbodies, self.model.nv
            self.coulomb = theta[n_in + nv:n_in + 2 * nv].copy()
            theta[n_in + nv:n_in + 2 * nv] = 0.0
            self.mpc.set_parameters(theta)
        self.beta = np.array(beta, dtype=float)

    @property
    def parameters(self):
        """``θ`` as given to :meth:`set_parameters`: the NLP's with the output stage's Coulomb coefficients."""
        theta = self.mpc.theta.copy()
        n_in, nv = 10 * self.model.nbodies, self.model.nv
        theta[n_in + nv:n_in + 2 * nv] = self.coulomb
        return theta

    def nominal_theta(self):
        return parameter_vector(self.model)

    def compute(self, t, q, v):
        """Torque ``τ`` (nv,) and status at time ``t`` for the measured ``(q, v)``: a new solve when
        ``rate`` calls for one, else the last solution's feedforward plus feedback."""
        status = ControlStatus()
        if not self.guard.check_finite(status, "nonfinite_state", q=q, v=v):
            return self.guard.hold(), status
        if self.solution is None or t - self.solved_at >= self.period - 1e-9:
            self.solution, self.solved_at = self.mpc.solve(q, v, self.reference, t), t
            self.solves += 1
            self.statuses[self.solution.status] = self.statuses.get(self.solution.status, 0) + 1
        tau = self.solution.torque(np.concatenate([q, v]), t - self.solved_at)
        tau = tau + self.coulomb * np.tanh(np.asarray(v, dtype=float) / self.coulomb_smoothing)
        return self.guard.accept(tau, status), status
