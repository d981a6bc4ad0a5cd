"""Whether a simulated state has diverged, which joint shows it and the likely cause.

A state has diverged when a joint's position or velocity is not finite, or is absurd: a velocity beyond
``max(VELOCITY_FACTOR x its URDF velocity limit, MIN_ABSURD_VELOCITY)`` (rad/s, or m/s for a prismatic
joint), or a position beyond one of its limits by more than ``max(its range, MIN_POSITION_MARGIN)``. The
bounds are far from anything a simulated arm reaches, and not a small multiple of the velocity limits: an arm
without damping falling chaotically under gravity (the Kinova Jaco 2) whips a light wrist to tens of times
its URDF limit, and that is sound; an explicit integrator that has lost stability grows the velocity by
orders of magnitude per step and passes the bounds at once. Joints without limits (continuous joints, limit
stops switched off) are bounded only by ``UNLIMITED_POSITION``.

The likely cause, for :meth:`DivergenceCheck.diagnose`: an explicit integrator (``rk4``,
``semi_implicit_euler``) is stable for a joint's damping ``w`` on its effective inertia ``m`` (``1 /
(M⁻¹)_jj``, the joint moved alone with the others free) while ``h w / m`` stays below about 2.8 (RK4) or 2
(semi-implicit Euler), ``h`` the integration step; ``w`` is the viscous damping plus the slope of the
smoothed Coulomb friction at rest, ``coulomb / eps``, or, at a limit, the stops' ``damping + h stiffness``.
``rk4_implicit`` and MuJoCo integrate the joint torques implicitly, so there the cause is the rigid-body
motion or the command (a joint without an effort limit, inertias a URDF gives implausibly small).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .joint_torques import SIGN_WIDTH

VELOCITY_FACTOR = 100.0
"""A velocity beyond this many times the joint's URDF velocity limit (and MIN_ABSURD_VELOCITY) is absurd."""
MIN_ABSURD_VELOCITY = 1.0e3
"""rad/s (m/s): the absurd velocity of a joint whose URDF limit is low or missing."""
MIN_POSITION_MARGIN = 1.0
"""rad (m): a position beyond a limit by more than the joint's range, and at least this, is absurd."""
UNLIMITED_POSITION = 1.0e12
"""rad (m): the bound of a joint without limits (only an overflowing or non-finite position exceeds it)."""
EXPLICIT_STABILITY = {"rk4": 2.78, "semi_implicit_euler": 2.0}
"""``h w / m`` up to which the explicit integrators are stable for a joint of damping ``w`` and inertia ``m``
(the real-axis stability limit of RK4; 2 for the semi-implicit Euler step)."""


@dataclass(frozen=True)
class Divergence:
    """A diverged state: ``joint`` (name), ``quantity`` (``"position"`` or ``"velocity"``), ``value`` (the
    joint's value, possibly non-finite), ``bound`` (the absurd value it passed; nan when not finite),
    ``unit``, ``t`` (simulated s) and ``cause`` (a sentence: the likely cause and what to change)."""

    joint: str
    quantity: str
    value: float
    bound: float
    unit: str
    t: float
    cause: str

    def message(self):
        """One line naming the joint, what is wrong with it and the likely cause."""
        if not np.isfinite(self.value):
            what = f"{self.quantity} is not finite"
        else:
            what = f"{self.quantity} {self.value:.3g} {self.unit} beyond the absurd {self.bound:.3g} {self.unit}"
        return f"simulation diverged at t = {self.t:.3f} s: joint {self.joint}'s {what}; likely cause: {self.cause}"


class DivergenceCheck:
    """The divergence test of a simulator's states (module docstring). ``model``: the simulated model (joint
    names, limits, friction, inertias); ``config``: its SimulatorConfig (integrator, engine, step, friction
    smoothing, limit stops); ``q_reference`` (nq,): a configuration at which to evaluate inertias when the
    diverged state's positions are unusable (e.g. the initial one).

    :meth:`within` (allocation-free, for every step) says whether a state is sound; :meth:`diagnose` says
    what is wrong with one that is not."""

    def __init__(self, model, config, q_reference):
        self.model, self.config = model, config
        self.q_reference = np.array(q_reference, dtype=float)
        n = model.nv
        limit = np.asarray(model.velocity_limit, dtype=float)
        limit = np.where(np.isfinite(limit) & (limit > 0), limit, 0.0)
        self.velocity_bound = np.maximum(VELOCITY_FACTOR * limit, MIN_ABSURD_VELOCITY)
        lower, upper = np.asarray(model.lower, dtype=float), np.asarray(model.upper, dtype=float)
        stops = config.engine != "robodyn" or config.limit_stiffness > 0 or config.limit_damping > 0
        limited = np.isfinite(lower) & np.isfinite(upper) & stops
        margin = np.maximum(np.where(limited, upper - lower, 0.0), MIN_POSITION_MARGIN)
        self.position_low = np.where(limited, lower - margin, -UNLIMITED_POSITION)
        self.position_high = np.where(limited, upper + margin, UNLIMITED_POSITION)
        self._center = 0.5 * (self.position_low + self.position_high)
        self._inverse_half_span = 2.0 / (self.position_high - self.position_low)
        self._inverse_velocity_bound = 1.0 / self.velocity_bound
        self._q, self._v = np.zeros(n), np.zeros(n)

    def within(self, q, v):
        """Whether ``q`` and ``v`` (nv,) are finite and within the bounds (NaN fails every comparison)."""
        sq, sv = self._q, self._v
        np.subtract(q, self._center, out=sq)
        np.abs(sq, out=sq)
        np.multiply(sq, self._inverse_half_span, out=sq)
        np.abs(v, out=sv)
        np.multiply(sv, self._inverse_velocity_bound, out=sv)
        return bool(sv.max() <= 1.0) and bool(sq.max() <= 1.0)

    def check(self, q, v, t, q_last=None, v_last=None):
        """None when the state is sound, else its :class:`Divergence` (:meth:`diagnose`)."""
        return None if self.within(q, v) else self.diagnose(q, v, t, q_last, v_last)

    def diagnose(self, q, v, t, q_last=None, v_last=None):
        """:class:`Divergence` of the state ``q``, ``v`` (nv,) at ``t``, which :meth:`within` refused or a step
        reported not finite; ``q_last``, ``v_last``: the last sound state, if known (it names the joint when
        every joint is non-finite)."""
        q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
        if self.within(q, v):        # a step that failed on a state an engine reset (MuJoCo): not finite
            q, v = np.full_like(q, np.nan), np.full_like(v, np.nan)
        j, quantity = self._culprit(q, v, q_last, v_last)
        value = float((v if quantity == "velocity" else q)[j])
        if quantity == "velocity":
            bound = float(self.velocity_bound[j])
        else:
            bound = float(self.position_low[j] if value < self._center[j] else self.position_high[j])
        if not np.isfinite(value):
            bound = float("nan")
        unit = ("m" if self._prismatic(j) else "rad") + ("/s" if quantity == "velocity" else "")
        q_inertia = q if self.within(q, np.zeros_like(v)) else (
            np.asarray(q_last, dtype=float) if q_last is not None and np.all(np.isfinite(q_last)) else self.q_reference)
        return Divergence(self.model.joint_names[j], quantity, value, bound, unit, float(t),
                          self.likely_cause(q_inertia, j))

    def _culprit(self, q, v, q_last, v_last):
        """``(joint index, "position" or "velocity")``: the first non-finite entry of a field only partly
        non-finite; for a wholly non-finite field, the fastest joint (relative to its bound) of the last sound
        state; else the largest excess over a bound."""
        bad_v, bad_q = ~np.isfinite(v), ~np.isfinite(q)
        for bad, quantity in ((bad_v, "velocity"), (bad_q, "position")):
            if bad.any() and not bad.all():
                return int(np.argmax(bad)), quantity
        if bad_v.any() or bad_q.any():      # a whole field non-finite
            quantity = "velocity" if bad_v.any() else "position"
            if v_last is not None and np.all(np.isfinite(v_last)):
                return int(np.argmax(np.abs(v_last) / self.velocity_bound)), quantity
            return 0, quantity
        over_v = np.abs(v) / self.velocity_bound
        over_q = np.abs(q - self._center) * self._inverse_half_span
        if over_v.max() >= over_q.max():
            return int(np.argmax(over_v)), "velocity"
        return int(np.argmax(over_q)), "position"

    def _prismatic(self, j):
        return "prismatic" in getattr(self.model.joints[j], "kind", "")

    def effective_inertia(self, q):
        """(nv,) ``1 / (M⁻¹(q))_jj``: each joint's inertia when it moves alone, the others free."""
        from ..dynamics.crba import crba
        return 1.0 / np.diag(np.linalg.inv(crba(self.model, q)))

    def explicit_instability(self, q):
        """A sentence naming the joint whose damping (friction, or limit stops) an explicit integrator cannot
        integrate at this step (``h w / m`` beyond its stability limit at ``q`` (nq), module docstring), and
        what to change; None when the integrator is implicit (``rk4_implicit``, MuJoCo) or stable here."""
        c, model = self.config, self.model
        if c.engine != "robodyn" or c.integrator not in EXPLICIT_STABILITY:
            return None
        limit, h = EXPLICIT_STABILITY[c.integrator], c.dt / c.substeps
        try:
            m = self.effective_inertia(q)
        except (np.linalg.LinAlgError, ValueError):
            return None
        if not (np.all(np.isfinite(m)) and np.all(m > 0)):
            return None
        eps = max(c.coulomb_smoothing, SIGN_WIDTH)
        ratio = h * (np.asarray(model.viscous, dtype=float) + np.asarray(model.coulomb, dtype=float) / eps) / m
        k = int(np.argmax(ratio))
        if ratio[k] > limit:
            return (f"the explicit integrator {c.integrator} against joint {model.joint_names[k]}'s damping: "
                    f"h w / m = {ratio[k]:.3g}, beyond {c.integrator}'s stability limit of about {limit:g} "
                    f"(w = {model.viscous[k]:g} N m s/rad viscous + {model.coulomb[k]:g} N m Coulomb over "
                    f"tanh(v / {eps:g} rad/s), m = {m[k]:.3g} kg m² effective inertia, h = {h * 1e3:g} ms); "
                    "use the integrator rk4_implicit (the default), stable for any damping")
        stops = h * (c.limit_damping + h * c.limit_stiffness) / m
        k = int(np.argmax(stops))
        if stops[k] > limit:
            return (f"the explicit integrator {c.integrator} against joint {model.joint_names[k]}'s limit stops "
                    f"(once it reaches a limit): h (damping + h stiffness) / m = {stops[k]:.3g}, beyond {c.integrator}'s stability limit of "
                    f"about {limit:g} (limits.stiffness {c.limit_stiffness:g}, limits.damping "
                    f"{c.limit_damping:g}, m = {m[k]:.3g} kg m²); leave limits.* at -1 (automatic) or use the "
                    "integrator rk4_implicit")
        return None

    def likely_cause(self, q, joint):
        """A sentence: why the state most likely diverged (module docstring), from the integrator, the
        joints' damping on their effective inertias at ``q`` (nq,) and the joint ``joint`` (index) that
        shows it."""
        explicit = self.explicit_instability(q)
        if explicit is not None:
            return explicit
        c, model = self.config, self.model
        stepper = "MuJoCo" if c.engine != "robodyn" else f"the integrator {c.integrator}"
        effort = model.effort_limit[joint]
        if not (np.isfinite(effort) and effort > 0):
            return (f"joint {model.joint_names[joint]} has no effort limit in the URDF, so a large command reaches "
                    "it as it is; add <limit effort=...>")
        return (f"not the joint damping, which {stepper} integrates stably: the rigid-body motion outran the "
                f"step of {c.dt / c.substeps * 1e3:g} ms (check the URDF's inertias with robodyn info --strict, "
                "or raise rate or substeps)")
