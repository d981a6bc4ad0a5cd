"""The MPC with live parameters, as a 1 kHz torque law: a solve at ``rate`` (its NLP parameters
``θ = [π, f_v, f_c, f_o]`` set from the gated estimate, :mod:`robodyn_ros.control.consistent_parameters`,
nothing rebuilt), and between solves the solution's feedforward and time-varying LQR gains
``τ = τ_ff,k + K_k (x - x_plan(t))`` (:meth:`robodyn_ros.control.mpc.MPCSolution.torque`).

The Coulomb friction is compensated in the 1 kHz stage, ``+ f_c tanh(v_d / ε)`` at the reference velocity
(friction feed-forward, as the base-parameter laws of :mod:`robodyn_ros.control.base_parameter_control`), and
left out of the NLP's prediction (its ``f_c`` is set to zero): on a light wrist (the Panda identified from
real data has about 1.8e-3 kg m² about joint 7) the slope ``f_c / ε`` of a smoothed Coulomb term over the
link inertia is a time constant of a fraction of a millisecond, which the MPC's 10-ms RK4 intervals cannot
integrate (the prediction diverges); at 1 kHz it is a feed-forward like computed torque's.

New parameters reach the NLP only if the MPC stays sound with them (:class:`MpcSoundness`): before, the mass
matrix they give is positive definite and the stiffest joint mode they give (viscous friction over inertia) is
one the NLP's RK4 intervals integrate stably, at the current and the reference configuration; after, the first
solve with them is not a fallback and plans velocities within the limits. Otherwise the parameters in use
before are restored (and the solve redone with them): :attr:`AdaptiveMPC.refused` and
:attr:`AdaptiveMPC.restored` count both cases, and :attr:`AdaptiveMPC.beta` always names the parameters in use."""
from __future__ import annotations

import numpy as np

from .command_guard import CommandGuard, ControlStatus, effort_bounds
from .mpc import MPCConfig, ModelPredictiveController, parameter_vector
from .mpc.config import coulomb_apart

RK4_STABILITY = 2.785   # |h λ| of the real-axis stability limit of the classical Runge-Kutta method


class MpcSoundness:
    """Whether an MPC on ``model`` with intervals of ``dt`` s stays sound with parameters ``θ = [π, f_v, f_c,
    f_o]`` (module docstring): :meth:`admissible` before (the mass matrix ``M(q; π)`` positive definite, the
    largest eigenvalue ``λ`` of ``M⁻¹ diag(f_v)`` with ``dt λ <= margin RK4_STABILITY``), :meth:`sound` after
    (the solve not a fallback, finite, planned |v| within ``velocity_margin`` times the velocity limits)."""

    def __init__(self, model, dt, margin=0.8, velocity_margin=1.2):
        self.model, self.dt = model, float(dt)
        self.margin, self.velocity_margin = float(margin), float(velocity_margin)
        limit = np.asarray(model.velocity_limit, dtype=float)
        self.v_max = np.where(np.isfinite(limit) & (limit > 0), limit, np.inf) * self.velocity_margin

    def admissible(self, theta, configurations):
        """``(ok, reason)`` of parameters θ (10 nb + 3 nv,) at the configurations (each (nq,))."""
        import scipy.linalg
        from ..dynamics.crba import crba
        theta = np.asarray(theta, dtype=float)
        nb, nv = self.model.nbodies, self.model.nv
        if not np.all(np.isfinite(theta)):
            return False, "non-finite parameters"
        pi, viscous = theta[:10 * nb], np.maximum(theta[10 * nb:10 * nb + nv], 0.0)
        for q in configurations:
            M = crba(self.model, np.asarray(q, dtype=float), pi=pi)
            try:
                lam = scipy.linalg.eigh(np.diag(viscous), M, eigvals_only=True)
            except (np.linalg.LinAlgError, ValueError):
                return False, "mass matrix not positive definite"
            if self.dt * lam[-1] > self.margin * RK4_STABILITY:
                return False, (f"viscous friction over inertia {lam[-1]:.0f} 1/s: {self.dt * 1e3:.0f}-ms RK4 "
                               "intervals cannot integrate it")
        return True, ""

    def sound(self, solution):
        """``(ok, reason)`` of a solve's :class:`~robodyn_ros.control.mpc.MPCSolution`."""
        if solution.status not in ("solved", "rti"):
            return False, f"solve fell back ({solution.status}: {solution.solver_status})"
        X = np.asarray(solution.x_pred, dtype=float)
        if not np.all(np.isfinite(X)):
            return False, "non-finite plan"
        v = np.abs(X[:, self.model.nv:])
        if np.any(v > self.v_max):
            j = int(np.argmax(np.max(v / self.v_max, axis=0)))
            return False, f"planned velocity of {self.model.joint_names[j]} {v[:, j].max():.2f} rad/s beyond the limit"
        return True, ""


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
        self.soundness = MpcSoundness(self.mpc.ocp.model, self.config.dt)     # the prediction model
        self.refused = self.restored = 0
        self.last_reason = ""
        self._q = None
        self._in_use = None          # (β, θ) in use before the last change, while the change is on trial
        self._apply(self.beta if self.beta is not None else np.zeros(0), self.mpc.theta)

    @property
    def theta(self):
        return self.parameters

    def set_parameters(self, beta, theta=None):
        """Use ``theta = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) from the next solve on, if admissible (module
        docstring; returns whether it was taken); ``beta`` (r,) is what it stands for. The Coulomb part ``f_c``
        goes to the 1 kHz output stage, the rest to the NLP."""
        if theta is not None:
            configurations = [np.asarray(self.reference.evaluate(self.solved_at or 0.0)[0], dtype=float)]
            if self._q is not None:
                configurations.append(self._q)
            ok, reason = self.soundness.admissible(theta, configurations)
            if not ok:
                self.refused += 1
                self.last_reason = reason
                return False
            self._in_use = (None if self.beta is None else self.beta.copy(), self.parameters)
        self._apply(beta, theta)
        return True

    def _apply(self, beta, theta=None):
        if theta is not None:
            theta, self.coulomb = coulomb_apart(theta, self.model.nbodies, self.model.nv)
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
        self._q = np.array(q, dtype=float)
        if self.solution is None or t - self.solved_at >= self.period - 1e-9:
            self.solution, self.solved_at = self.mpc.solve(q, v, self.reference, t), t
            if self._in_use is not None:          # the first solve with new parameters: keep them if sound
                ok, reason = self.soundness.sound(self.solution)
                if not ok:
                    self.restored += 1
                    self.last_reason = reason
                    self._apply(*self._in_use)
                    self.solution = self.mpc.solve(q, v, self.reference, t)
                self._in_use = None
            self.solves += 1
            self.statuses[self.solution.status] = self.statuses.get(self.solution.status, 0) + 1
        tau = self.solution.torque(np.concatenate([q, v]), t - self.solved_at)
        v_d = np.asarray(self.reference.evaluate(t)[1], dtype=float)
        tau = tau + self.coulomb * np.tanh(v_d / self.coulomb_smoothing)
        return self.guard.accept(tau, status), status
