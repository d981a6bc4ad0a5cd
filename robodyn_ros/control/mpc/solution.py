"""The result of one MPC solve, the torque law between solves, and the two fallback solutions."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np


@dataclass
class MPCSolution:
    """One MPC solve: ``tau_ff`` (N, nu), predicted states ``x_pred`` (N+1, nx), gains ``K`` (N, nu, nx),
    ``status`` ('solved', 'rti', 'fallback_shifted', 'fallback_gravity'), the solver's own
    ``solver_status`` string, ``solve_time`` (s: for RTI the preparation and the feedback phase of this
    iteration), ``feedback_time`` (s: the part of ``solve_time`` spent after the measurement arrived, the
    delay of the command; all of it for fatrop, ipopt and the fallbacks), ``iterations``, ``dt``, ``tau_max`` (nu,);
    ``omitted``: the terms left out of ``tau_ff`` because the robot adds them (:data:`OMIT_GRAVITY` |
    :data:`OMIT_FRICTION`, :func:`without_robot_terms`; 0: the whole torque of the model)."""

    tau_ff: np.ndarray
    x_pred: np.ndarray
    K: np.ndarray
    status: str
    solver_status: str = ""
    solve_time: float = 0.0
    iterations: int = 0
    dt: float = 0.01
    tau_max: np.ndarray = field(default_factory=lambda: np.zeros(0))
    feedback_time: float = 0.0
    omitted: int = 0

    def state_reference(self, elapsed):
        """The planned state (nx,) ``elapsed`` s after the solve (:func:`planned_states`)."""
        return planned_states(self.x_pred, self.dt, elapsed)

    def torque(self, x, elapsed):
        """``τ = τ_ff,k + K_k (x - x_ref(elapsed))`` (nu,) for the state ``x`` (nx,) ``elapsed`` seconds
        after the solve (``k = floor(elapsed / dt)``, the last interval beyond the horizon; ``x_ref`` of
        :meth:`state_reference`), clamped to the effort limits; the feedforward alone when ``x`` is not
        finite."""
        k = min(int(max(elapsed, 0.0) / self.dt + 1e-9), self.tau_ff.shape[0] - 1)
        tau = self.tau_ff[k]
        dx = np.asarray(x, dtype=float) - self.state_reference(elapsed)
        if np.all(np.isfinite(dx)):
            tau = tau + self.K[k] @ dx
        return np.clip(tau, -self.tau_max, self.tau_max)


def _interval_index(elapsed, dt, N):
    """The interval ``k = floor(elapsed / dt)`` (clamped to ``[0, N - 1]``) of each time of ``elapsed``."""
    return np.minimum((np.maximum(elapsed, 0.0) / dt + 1e-9).astype(int), N - 1)


def planned_states(x_pred, dt, elapsed):
    """The planned states of ``x_pred`` (N+1, nx) ``elapsed`` s (a number, (nx,) returned, or an array (m,),
    (m, nx) returned) after its first node: cubic Hermite interpolation of the planned positions and velocities
    between the nodes (so that ``q̇_ref = v_ref``), held after the last node."""
    N = x_pred.shape[0] - 1
    if np.ndim(elapsed) == 0:                   # one time (the 1-kHz torque law): Python scalars, no arrays
        k = min(int(max(elapsed, 0.0) / dt + 1e-9), N - 1)
        s = min(max(elapsed / dt - k, 0.0), 1.0)
    else:
        t = np.asarray(elapsed, dtype=float)
        k = _interval_index(t, dt, N)
        s = np.clip(t / dt - k, 0.0, 1.0)[..., None]
    n = x_pred.shape[1] // 2
    q0, v0 = x_pred[k, :n], x_pred[k, n:]
    q1, v1 = x_pred[k + 1, :n], x_pred[k + 1, n:]
    h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
    d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
    q = h00 * q0 + h10 * dt * v0 + h01 * q1 + h11 * dt * v1
    v = (d00 * q0 + d01 * q1) / dt + d10 * v0 + d11 * v1
    return np.concatenate([q, v], axis=-1)


def shifted_plan(x_pred, u, dt, shift):
    """The plan ``x_pred`` (N+1, nx), ``u`` (N, ...: torques, gains) moved ``shift`` s on, as the warm start
    of a solve that comes ``shift`` s after the plan's: the states at ``shift + k dt`` (:func:`planned_states`,
    the last held), ``u`` of the interval each ``shift + k dt`` falls in (the last repeated). A shift of one
    interval is the usual shift by one node."""
    N = u.shape[0]
    nodes = shift / dt
    if abs(nodes - round(nodes)) < 1e-9:              # whole intervals (a timer at 1 / dt): nodes, no interpolation
        index = np.minimum(np.arange(N + 1) + max(int(round(nodes)), 0), N)
        return x_pred[index], u[np.minimum(index[:N], N - 1)]
    times = shift + dt * np.arange(N + 1)
    return planned_states(x_pred, dt, times), u[_interval_index(times[:N], dt, N)]


OMIT_GRAVITY = 1
"""Bit of :attr:`MPCSolution.omitted`: ``g(q)`` of the robot's own model (what its driver adds) is left out of
``tau_ff``."""
OMIT_FRICTION = 2
"""Bit of :attr:`MPCSolution.omitted`: the model's joint friction is left out of ``tau_ff``."""


def omitted_terms(gravity_compensated_by_robot, friction_compensation):
    """The :attr:`MPCSolution.omitted` bits of the controllers' two options: gravity left out when the robot
    adds it, friction left out when it is not compensated by the controller."""
    return (OMIT_GRAVITY if gravity_compensated_by_robot else 0) | (0 if friction_compensation else OMIT_FRICTION)


def describe_omitted(omitted):
    """``"gravity and friction"``, ``"gravity"``, ``"friction"`` or ``"nothing"`` for the bits ``omitted``."""
    names = [name for bit, name in ((OMIT_GRAVITY, "gravity"), (OMIT_FRICTION, "friction")) if omitted & bit]
    return " and ".join(names) or "nothing"


def without_robot_terms(solution, gravity, friction, omitted):
    """``solution`` with the terms of ``omitted`` subtracted from its feed-forward at the planned states:
    ``τ_ff,k - g(q_k) - τ_f(v_k)`` for :data:`OMIT_GRAVITY` and :data:`OMIT_FRICTION` (``gravity(q)``: what the
    robot adds, ``friction(v)`` (nv,): the plan's model's, ``(q_k, v_k)`` its predicted state at the start of interval
    ``k``). The feedback gains are unchanged: the robot adds the omitted terms at its measured state."""
    if not omitted:
        return solution
    n = solution.tau_ff.shape[1]
    tau_ff = solution.tau_ff.copy()
    for k, x in enumerate(solution.x_pred[:-1]):
        if omitted & OMIT_GRAVITY:
            tau_ff[k] -= gravity(x[:n])
        if omitted & OMIT_FRICTION:
            tau_ff[k] -= friction(x[n:])
    return replace(solution, tau_ff=tau_ff, omitted=solution.omitted | omitted)


def shifted_solution(previous, solver_status, elapsed, shift=None):
    """``previous`` (an :class:`MPCSolution`) moved ``shift`` s on (default one interval; :func:`shifted_plan`),
    its last interval repeated: the fallback ``fallback_shifted`` while a recent plan exists."""
    shift = previous.dt if shift is None else shift
    N, nu = previous.tau_ff.shape
    x_pred, u = shifted_plan(previous.x_pred, np.hstack([previous.tau_ff, previous.K.reshape(N, -1)]),
                             previous.dt, shift)                 # torques and gains of the same intervals
    return MPCSolution(tau_ff=u[:, :nu], x_pred=x_pred, K=u[:, nu:].reshape(previous.K.shape),
                       status="fallback_shifted", solver_status=solver_status, solve_time=elapsed, dt=previous.dt,
                       tau_max=previous.tau_max, feedback_time=elapsed, omitted=previous.omitted)


def gravity_solution(g, x, horizon, dt, tau_max, solver_status, elapsed=0.0):
    """The fallback ``fallback_gravity``: the torque ``g`` (nu,) held over the ``horizon`` at the state
    ``x`` (nx,), zero gains; non-finite entries of ``g`` and ``x`` replaced by zero, ``g`` clamped to
    ``±tau_max``, so that it is never non-finite."""
    g = np.clip(np.nan_to_num(np.asarray(g, dtype=float).reshape(-1), nan=0.0, posinf=0.0, neginf=0.0),
                -tau_max, tau_max)
    x = np.nan_to_num(np.asarray(x, dtype=float))
    return MPCSolution(tau_ff=np.tile(g, (horizon, 1)), x_pred=np.tile(x, (horizon + 1, 1)),
                       K=np.zeros((horizon, g.size, x.size)), status="fallback_gravity", solver_status=solver_status,
                       solve_time=elapsed, dt=dt, tau_max=tau_max, feedback_time=elapsed)
