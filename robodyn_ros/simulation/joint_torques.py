"""The torques the joints add to the command in the simulator: friction (viscous, smoothed Coulomb, offset)
and the spring-damper stops beyond the position limits, and the implicit step that keeps them stable for
any ratio of damping to inertia.

Why implicit: a vendor URDF may give a light wrist a large damping. The xArm7's joint 7 has 2 N m s/rad of
viscous damping on about 1.4e-4 kg m² of inertia (a 70 µs time constant) and 1 N m of Coulomb friction,
whose smoothed sign ``tanh(v / eps)`` (eps = 1e-3 rad/s) has the slope ``coulomb / eps`` = 1000 N m s/rad
near rest: an explicit step of 1 ms (RK4 is stable up to ``h d / m`` of about 2.8) would need thousands of
substeps. Integrated implicitly in the joint velocity (as MuJoCo integrates joint damping in its
``implicit`` and ``implicitfast`` integrators) the step is stable for any inertia.

:func:`implicit_joint_torque` is the joint torque held over one step ``h`` (integrator ``rk4_implicit`` of
:mod:`robodyn_ros.simulation.simulator`): a linearly implicit step of the whole arm,

    (M(q) + h B W) dv = h (tau + tau_joint(q, v) - h K v - C(q, v) v - g(q)),

solved as the ABA with the armature ``armature + h B W`` (no mass matrix formed), gives the joint torque
over the step, ``tau_joint(q, v) - h K v - B W dv`` (the stops' spring ``K (q + h (v + dv) - limit)``
included); the rigid-body motion is then integrated by RK4 under ``tau`` plus that torque, held. ``W`` is
the joints' damping ``-d tau_joint / dv`` plus ``h K``: the tangent of the friction, right while a joint
keeps its direction (a saturated ``tanh`` has no slope: the step is then explicit in it, as it should be),
and on the joints whose velocity a tangent implicit Euler step reverses, the secant through rest
(``coulomb tanh(v / eps) / v``): a non-negative damping whose step stops a joint at rest instead of
throwing it across, as the tangent of a saturated ``tanh`` would. Without friction or active stops
(``W = 0``) the step is the classic RK4 of the rigid body, unchanged.

``B = diag(1 - phi(x))`` makes each joint's step the exact one of a first-order relaxation: a joint of
damping ``w`` and articulated inertia ``m`` (the ABA's ``D``, armature included), ``x = h w / m``, relaxes
from ``v`` towards ``v_inf`` as ``v_inf + (v - v_inf) e^-x``, which is the step above with ``B = 1 -
phi(x)``, :func:`relaxation_weight` ``phi(x) = 1/x - 1/(e^x - 1)``: ``B`` = 1/2 (the trapezoidal rule,
second order) for light damping, 1 (implicit Euler, L-stable) for stiff damping. Under the held torque RK4
moves a joint along the straight velocity ramp, ``q+ = q + h (v + v+) / 2``, where the relaxation travels
``q+ = q + h (v+ + phi(x) (v - v+))``: each joint's position takes the latter (``phi`` = 1/2 without
damping: RK4's). Implicit Euler in the velocity and RK4's ramp in the position would leave ``h/2`` of each
step's velocity change behind: on the xArm7, Z1 and the flying arm (light wrists with 2-5 N m s/rad of
damping, ``x`` up to 14) 1.5-2.2e-4 rad of tracking error at 1 kHz, 1e-5 with this step.
"""
from __future__ import annotations

import numpy as np

from ..dynamics.aba import aba

SECANT_SERIES = 1e-4
"""|v / eps| below which ``tanh(x) / x`` is evaluated as ``1 - x²/3`` (equal to rounding, no 0 / 0)."""
RELAXATION_SERIES = 1e-2
"""``x`` below which :func:`relaxation_weight` is its series ``1/2 - x/12 + x³/720`` (equal to rounding)."""
SIGN_WIDTH = 1e-9
"""rad/s: the Coulomb width that stands for ``sign(v)`` when ``coulomb_smoothing`` is 0 (the secant slope of
``sign`` is infinite at rest; ``tanh(v / 1e-9)`` is ``sign(v)`` to rounding above 4e-8 rad/s)."""


def smoothed_coulomb(ops, coulomb, v, coulomb_smoothing):
    """``(coulomb tanh(v / eps), its slope, its secant slope through rest coulomb tanh(v / eps) / v)`` (nv,)
    each: the smoothed Coulomb friction at ``v`` (eps ``coulomb_smoothing``, :data:`SIGN_WIDTH` when 0)
    and the two dampings of the implicit step."""
    eps = ops.fmax(coulomb_smoothing, SIGN_WIDTH) if ops.is_symbolic() else max(coulomb_smoothing, SIGN_WIDTH)
    x = v / eps
    direction = ops.tanh(x)
    small = ops.fabs(x) < SECANT_SERIES
    return (coulomb * direction, coulomb / eps * (1.0 - direction * direction),
            coulomb / eps * ops.if_else(small, 1.0 - x * x / 3.0, direction / ops.if_else(small, 1.0, x)))


def joint_torque(ops, model, q, v, limit_stiffness, limit_damping, coulomb_smoothing):
    """``(tau_joint, tangent, secant, stiffness)`` (nv,) each at ``(q, v)``:

    * ``tau_joint``: the torque the joints add to the command, ``-(viscous v + coulomb tanh(v / eps) +
      offset)`` (eps ``coulomb_smoothing``; :data:`SIGN_WIDTH` when 0, i.e. ``sign(v)``), plus on each
      joint beyond a finite limit the spring-damper stop ``-limit_stiffness (q - limit) - limit_damping
      max(v, 0)`` (upper; ``min(v, 0)`` at the lower limit);
    * ``tangent``: ``-d tau_joint / dv`` (diagonal): ``viscous + coulomb / eps (1 - tanh²(v / eps))``
      plus ``limit_damping`` on a joint beyond a limit moving further out;
    * ``secant``: the same with the Coulomb term's secant slope through rest,
      ``coulomb tanh(v / eps) / v`` (``coulomb / eps`` at rest);
    * ``stiffness``: ``limit_stiffness`` on each joint beyond a limit, else 0.

    One formula for both backends: ``ops`` NUMPY (terms that are zero, no Coulomb friction or no joint
    beyond a limit, the usual case, are skipped) or CASADI (``q``, ``v`` (nv, 1) and the three constants SX
    symbols: the compiled step of :mod:`robodyn_ros.simulation.simulation_step`, every stop term behind
    ``if_else``)."""
    symbolic = ops.is_symbolic()
    nv = model.nv
    viscous = ops.const(model.viscous)
    tau = -viscous * v
    if model.friction_offset.any():
        tau = tau - ops.const(model.friction_offset)
    tangent = secant = viscous
    stiffness = ops.zeros(nv) if symbolic else 0.0
    if model.coulomb.any():
        friction, slope, chord = smoothed_coulomb(ops, ops.const(model.coulomb), v, coulomb_smoothing)
        tau, tangent, secant = tau - friction, tangent + slope, secant + chord
    for limit, beyond, outward in ((model.upper, lambda x, y: x > y, lambda w: w > 0),
                                   (model.lower, lambda x, y: x < y, lambda w: w < 0)):
        finite = np.isfinite(limit)
        if not finite.any():
            continue
        bound = ops.const(np.where(finite, limit, 0.0))
        active = beyond(q, bound)
        if symbolic:
            if not finite.all():
                active = active * ops.const(finite.astype(float))
            zero = ops.zeros(nv)
        else:
            active = active & finite
            if not active.any():
                continue
            zero = 0.0
        damping = ops.if_else(active, ops.if_else(outward(v), limit_damping + zero, zero), zero)
        tau = tau - ops.if_else(active, limit_stiffness * (q - bound), zero) - damping * v
        tangent, secant = tangent + damping, secant + damping
        stiffness = stiffness + ops.if_else(active, limit_stiffness + zero, zero)
    return tau, tangent, secant, stiffness


def applied_torque(ops, model, q, v, tau_command, limit_stiffness, limit_damping, coulomb_smoothing):
    """Torque reaching the rigid bodies (nv,) at ``(q, v)``: ``tau_command`` plus the joint torque of
    :func:`joint_torque`. What the explicit integrators (``rk4``, ``semi_implicit_euler``) apply at each
    stage."""
    return tau_command + joint_torque(ops, model, q, v, limit_stiffness, limit_damping, coulomb_smoothing)[0]


def relaxation_weight(ops, x):
    """``phi(x) = 1/x - 1/(e^x - 1)`` (module docstring), elementwise on ``x = h w / m >= 0``: the share of
    the velocity change ``v - v+`` that a first-order relaxation over a step adds to ``h v+`` in position;
    from ``1/2`` at ``x = 0`` down to ``1/x``. Written ``1/2 + 1/x - 1/(2 tanh(x/2))``; the series
    ``1/2 - x/12 + x³/720`` below :data:`RELAXATION_SERIES`."""
    small = x < RELAXATION_SERIES
    y = ops.if_else(small, 1.0, x)
    return ops.if_else(small, 0.5 - x / 12.0 + x * x * x / 720.0, 0.5 + 1.0 / y - 0.5 / ops.tanh(0.5 * y))


def relaxed_position(q_rk4, v, v_next, phi, h):
    """Each joint's position at the end of a step of ``h`` s (module docstring): RK4's ``q_rk4`` under the held
    torque, which travels ``h (v + v+) / 2`` along the velocity ramp, moved to the first-order relaxation's
    ``h (v+ + phi (v - v+))``. Plain arithmetic: NumPy arrays or CasADi symbols alike."""
    return q_rk4 + h * (phi - 0.5) * (v - v_next)


def implicit_joint_torque(ops, model, q, v, tau, pi, h, limit_stiffness, limit_damping, coulomb_smoothing):
    """``(tau_held, phi)``: the joint torque (nv,) held over a step of ``h`` s under the clamped command
    ``tau`` (nv,), ``pi`` (10 nbodies,) the true inertial parameters (module docstring), and each joint's
    :func:`relaxation_weight` ``phi`` (nv,). Two ABA: an implicit Euler step (armature ``armature + h W``,
    ``W`` the tangent damping plus ``h`` times the stops' stiffness) gives each joint's articulated
    inertia ``m`` and which joints it reverses (their ``W`` the secant damping instead); then the step
    with armature ``armature + h (1 - phi) W``, ``phi`` of ``x = h W / m``. On NUMPY, ``(joint torque at
    (q, v), None)`` when ``W`` is zero (no friction, no active stop: ``phi`` is 1/2, RK4's)."""
    tau_joint, tangent, secant, stiffness = joint_torque(ops, model, q, v, limit_stiffness, limit_damping,
                                                        coulomb_smoothing)
    rhs = tau + tau_joint - h * stiffness * v          # the spring's torque at q + h v
    armature = ops.const(model.armature)
    w = tangent + h * stiffness
    if not ops.is_symbolic() and not np.any(w):
        return tau_joint, None
    a, d = aba(model, q, v, rhs, pi=pi, armature=armature + h * w, joint_inertia=True)
    m = ops.fmax(d - h * w, 1e-12 * d)                # each joint's own articulated inertia
    if model.coulomb.any():
        w = ops.if_else(v * (v + h * a) > 0, tangent, secant) + h * stiffness
    phi = relaxation_weight(ops, h * w / m)
    w = (1.0 - phi) * w                               # the exponential's implicit share (module docstring)
    dv = h * aba(model, q, v, rhs, pi=pi, armature=armature + h * w)
    return tau_joint - h * stiffness * v - w * dv, phi
