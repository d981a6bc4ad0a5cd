"""One step of :class:`robodyn_ros.simulation.simulator.Simulator` as one compiled C function.

The interpreted step costs about a hundred microseconds, almost all of it Python around four or five
compiled ABA calls of a microsecond each: clamping, friction, the joint-limit stops and the RK4 sums on
7-vectors, one NumPy call each. Here the same step (Simulator.step term for term, and the joint torques of
:mod:`robodyn_ros.simulation.joint_torques` themselves, written once against the backend) is traced once
with the core's :func:`robodyn_ros.dynamics.aba.aba` on CasADi SX symbols, compiled by
:func:`robodyn_ros.kernels.compiled_functions.compile_casadi_functions` (cached on disk) and called
through CasADi's function buffer, whose call costs well under a microsecond: a step is one C call.

The function is ``(x, tau_command, pi, c) -> (x+, a+, tau, check)`` with ``x = [q; v]`` (2 nv,),
``tau_command`` (nv,) before effort clamping, ``pi`` (10 nbodies,) the true inertial parameters (robot plus
payload: one function serves both), ``c = [dt, limit_stiffness, limit_damping, coulomb_smoothing]``;
``x+`` the state after one step, ``a+`` (nv,) the acceleration at ``x+`` under the same command (and,
``rk4_implicit``, the same held joint torque; what the force/torque sensor needs), ``tau`` (nv,) the clamped command and ``check`` (1,) ``sum(x+)``, finite
exactly when every entry of ``x+`` is (short of an overflow of the sum, itself a diverged state).
Friction (viscous, Coulomb, offset), joint limits and effort limits are the model's, built into the code.
"""
from __future__ import annotations

import math

import casadi as ca
import numpy as np

from ..dynamics.aba import aba
from ..model.backend import CASADI
from ..model.model import Model
from .joint_torques import applied_torque, implicit_joint_torque, relaxed_position
from .plant import plant_key
from .simulator import INTEGRATORS


def acceleration_function(model):
    """SX function ``(q, v, tau, pi, c) -> a`` (nv,): the ABA under the torque of
    :func:`robodyn_ros.simulation.joint_torques.applied_torque` (the Python step's formula, on the CASADI
    backend; ``c`` as in the module docstring), traced once from the core's ABA."""
    nv = model.nv
    q, v, tau = ca.SX.sym("q", nv), ca.SX.sym("v", nv), ca.SX.sym("tau", nv)
    pi, c = ca.SX.sym("pi", 10 * model.nbodies), ca.SX.sym("c", 4)
    a = aba(model, q, v, applied_torque(CASADI, model, q, v, tau, c[1], c[2], c[3]), pi=pi)
    return ca.Function("rd_sim_acceleration", [q, v, tau, pi, c], [a])


def rigid_acceleration_function(model):
    """SX function ``(q, v, tau, pi) -> a`` (nv,): the ABA under ``tau`` as it is (``rk4_implicit``'s stages,
    whose joint torque is held in ``tau``)."""
    nv = model.nv
    q, v, tau, pi = ca.SX.sym("q", nv), ca.SX.sym("v", nv), ca.SX.sym("tau", nv), ca.SX.sym("pi", 10 * model.nbodies)
    return ca.Function("rd_sim_rigid_acceleration", [q, v, tau, pi], [aba(model, q, v, tau, pi=pi)])


def held_torque_function(model):
    """SX function ``(q, v, tau, pi, c) -> (tau + tau_joint, phi)`` (nv,) each: the clamped command plus the
    joint torque of :func:`robodyn_ros.simulation.joint_torques.implicit_joint_torque` over a step ``c[0]``,
    and the joints' relaxation weights."""
    nv = model.nv
    q, v, tau = ca.SX.sym("q", nv), ca.SX.sym("v", nv), ca.SX.sym("tau", nv)
    pi, c = ca.SX.sym("pi", 10 * model.nbodies), ca.SX.sym("c", 4)
    tau_joint, phi = implicit_joint_torque(CASADI, model, q, v, tau, pi, c[0], c[1], c[2], c[3])
    return ca.Function("rd_sim_held_torque", [q, v, tau, pi, c], [tau + tau_joint, phi])


def step_function(model, integrator="rk4_implicit"):
    """CasADi function ``(x, tau_command, pi, c) -> (x+, a+, tau, check)`` of one step (module docstring).

    ``integrator`` (:data:`robodyn_ros.simulation.simulator.INTEGRATORS`): ``"rk4_implicit"`` (the joint
    torque of two implicit ABA, then four ABA of RK4 under it held, each joint's position by its relaxation
    weight), ``"rk4"`` (classic Runge-Kutta, four ABA) or ``"semi_implicit_euler"`` (one ABA, ``v+ = v + h
    a(q, v)``, ``q+ = q + h v+``); one more ABA gives ``a+``. An MX function calling SX functions at each
    stage, so the generated C holds the ABA once (gcc compiles a fifth of the code a fully inlined SX step
    would be)."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator must be one of {INTEGRATORS}, got {integrator!r}")
    nv = model.nv
    x, tau_command = ca.MX.sym("x", 2 * nv), ca.MX.sym("tau_command", nv)
    pi, c = ca.MX.sym("pi", 10 * model.nbodies), ca.MX.sym("c", 4)
    e = np.where(np.isfinite(model.effort_limit), model.effort_limit, np.inf)
    tau = ca.fmin(ca.fmax(tau_command, ca.DM(-e)), ca.DM(e))        # np.clip(tau, -effort, effort)
    h = c[0]
    q, v = x[:nv], x[nv:]
    if integrator == "rk4_implicit":
        rigid, (held, phi) = rigid_acceleration_function(model), held_torque_function(model)(q, v, tau, pi, c)

        def acceleration(q, v):
            return rigid(q, v, held, pi)
    else:
        accel = acceleration_function(model)

        def acceleration(q, v):
            return accel(q, v, tau, pi, c)

    if integrator != "semi_implicit_euler":   # the same sums, in the same order, as Simulator.step
        a1 = acceleration(q, v)
        q2, v2 = q + 0.5 * h * v, v + 0.5 * h * a1
        a2 = acceleration(q2, v2)
        q3, v3 = q + 0.5 * h * v2, v + 0.5 * h * a2
        a3 = acceleration(q3, v3)
        q4, v4 = q + h * v3, v + h * a3
        a4 = acceleration(q4, v4)
        q_next = q + h / 6.0 * (v + 2 * v2 + 2 * v3 + v4)
        v_next = v + h / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4)
        if integrator == "rk4_implicit":
            q_next = relaxed_position(q_next, v, v_next, phi, h)
    else:
        v_next = v + h * acceleration(q, v)
        q_next = q + h * v_next
    x_next = ca.vertcat(q_next, v_next)
    return ca.Function(f"rd_sim_step_{integrator}", [x, tau_command, pi, c],
                       [x_next, acceleration(q_next, v_next), tau, ca.sum1(x_next)],
                       ["x", "tau_command", "pi", "c"], ["x_next", "a_next", "tau", "check"])


class CompiledStep:
    """:func:`step_function` of ``model`` compiled to C (``compiled=False``: CasADi's SX virtual machine,
    for tests without a compiler), called through a function buffer bound to arrays it owns.

    ``step(q, v, tau_command, pi, config)`` -> ``(q+, v+, a+, tau, finite)``: new arrays (nv,) and
    whether ``q+`` and ``v+`` are finite (``config``: a SimulatorConfig). Raises :class:`robodyn_ros.kernels.compiled_functions.CompileError`
    when no C compiler works."""

    def __init__(self, model, integrator="rk4_implicit", compiled=True):
        function = step_function(model, integrator)
        if compiled:
            from ..kernels.compiled_functions import compile_casadi_functions

            function = compile_casadi_functions([function], f"sim_step:{integrator}:{plant_key(model)}")[
                function.name()]
        self.function, self.integrator, self.nv = function, integrator, model.nv
        self.plant_key = plant_key(model)
        nv = model.nv
        self._x, self._tau_command = np.zeros(2 * nv), np.zeros(nv)
        self._pi, self._c = np.zeros(10 * model.nbodies), np.zeros(4)
        self._x_next, self._a_next, self._tau, self._check = np.zeros(2 * nv), np.zeros(nv), np.zeros(nv), np.zeros(1)
        self._buffer, self._eval = function.buffer()
        for i, array in enumerate((self._x, self._tau_command, self._pi, self._c)):
            self._buffer.set_arg(i, memoryview(array))
        for i, array in enumerate((self._x_next, self._a_next, self._tau, self._check)):
            self._buffer.set_res(i, memoryview(array))

    def step(self, q, v, tau_command, pi, config):
        nv, c = self.nv, self._c
        self._x[:nv], self._x[nv:], self._tau_command[:], self._pi[:] = q, v, tau_command, pi
        c[0], c[1], c[2], c[3] = config.dt, config.limit_stiffness, config.limit_damping, config.coulomb_smoothing
        self._eval()
        return (self._x_next[:nv].copy(), self._x_next[nv:].copy(), self._a_next.copy(), self._tau.copy(),
                math.isfinite(self._check[0]))


def engine_step(plant, config, on_fallback=None):
    """The step function of ``config.engine`` (a SimulatorConfig) for ``plant`` (a
    :class:`~robodyn_ros.simulation.plant.Plant` or its Model): a
    :class:`~robodyn_ros.simulation.mujoco_engine.MujocoEngine` (``mujoco``; a plant's ``coulomb_width``
    keeps its smoothed friction) or a :class:`CompiledStep` of ``config.integrator`` (``robodyn``), stepping
    in CasADi's virtual machine when no C compiler works (``on_fallback(exc)`` is told why)."""
    model, width = (plant, None) if isinstance(plant, Model) else (plant.model, plant.coulomb_width)
    if config.engine == "mujoco":
        from .mujoco_engine import MujocoEngine
        return MujocoEngine(model, coulomb_width=width)
    from ..kernels.compiled_functions import CompileError
    try:
        return CompiledStep(model, config.integrator)
    except CompileError as exc:
        if on_fallback is not None:
            on_fallback(exc)
        return CompiledStep(model, config.integrator, compiled=False)
