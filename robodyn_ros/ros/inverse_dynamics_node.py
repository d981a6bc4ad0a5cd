"""``inverse_dynamics`` lifecycle node: computed torque, gravity compensation, Slotine-Li adaptive control or
MPC feedforward + gains (:mod:`robodyn_ros.control`), one command per ``/joint_states`` message.

Reference: the built-in Fourier generator around the home pose, ``~/joint_trajectory``
(trajectory_msgs/JointTrajectory, sampled like joint_trajectory_controller), or the first measured
configuration held. Reference time is the joint-state stamp, so the node follows simulated time.
Model updates: the estimator's payload (geometry_msgs/InertiaStamped, ``frame_id`` a link of the robot)
is added to the nominal parameters of that link's body from the next command on (certainty equivalence;
in ``slotine_li`` mode it also resets the adapted estimate). Watchdog: without a valid joint state for
``state_timeout`` wall seconds the node stops commanding motion and publishes ``g(q_last)``
(``gravity_hold``) or zeros, until states come back. Also publishes ``~/tracking_error``
(Float64MultiArray ``[stamp, q - q_d]``, labelled).

Every torque this node (and the mpc node's ``output: commands``) publishes goes through
:class:`TorqueOutput` (issue #9): clamped to the URDF effort limits, rate limited to ``max_torque_rate``
(:func:`robodyn_ros.control.command_guard.torque_rate_bounds`), a non-finite torque replaced by the last
safe command. Joint-state stamps are checked by :class:`StampGate`: a duplicated stamp or one older than
the newest accepted (out of order, by less than ``state_timeout``) is dropped with a throttled warning; a
jump backwards by ``state_timeout`` or more (bag loop, simulator reset), or any older stamp once the
watchdog has fired, is a time reset: the node re-bases its reference time so that the reference continues
where it was, forgets the per-step time differences (Slotine-Li's adaptation step, the rate limiter's
stamp interval) and the MPC solution of the old time line, and warns once per reset.
"""
from __future__ import annotations

import math
import time
from array import array

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import InertiaStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from ..control import ComputedTorqueController, ConstantReference, GravityCompensation, SlotineLiController
from ..control.command_guard import CommandGuard, effort_bounds, torque_rate_bounds
from ..control.kernel_dynamics import KernelDynamics
from ..control.mpc import MPCSolution
from ..control.reference import fourier_reference
from ..identification.exciting_trajectory import FourierTrajectory
from ..kernels import compile_kernels
from ..identification.sensor_wrench import link_inertia_in_body
from ..model.spatial import numpy_inertia_params
from . import messages as rm
from . import qos
from .base_node import RobodynNode


LATENCY_WINDOW = 10000
INERTIA_NEGATIVE_TOLERANCE = 0.25   # of m R^2: payload principal moments below -0.25 m R^2 are refused


def inertia_stamped_to_body_parameters(msg, model):
    """``(body index, pi (10,) about the body frame)`` of a payload message; MessageRejected if unusable."""
    link = msg.header.frame_id
    if link not in model.frames or model.frames[link].body < 0:
        raise rm.MessageRejected(f"InertiaStamped.header.frame_id '{link}' is not a moving link of the robot")
    i = msg.inertia
    values = np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz])
    if not np.isfinite(values).all():
        raise rm.MessageRejected("InertiaStamped.inertia is not finite")
    Ic = np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]])
    pi = numpy_inertia_params(i.m, values[1:4], Ic)
    return model.frames[link].body, link_inertia_in_body(model, pi, link)


def check_payload_plausible(msg, min_mass, max_mass, max_com_distance):
    """Raise MessageRejected when a payload estimate is not a load the robot could carry: a mass below
    ``-min_mass`` or above ``max_mass`` (kg), or, for a mass of at least ``min_mass``, a centre of mass
    farther than ``max_com_distance`` (m) from the link origin. A starved or diverging estimator can publish
    such values (-4.8 kg, a centre of mass 2.6 m from the flange were seen); adding them to the model would
    command large wrong torques, so the controller keeps its last accepted model instead. Likewise
    principal moments about the centre of mass above m R² or below -INERTIA_NEGATIVE_TOLERANCE m R²
    (R = ``max_com_distance``): gross violations only (comment below)."""
    m = msg.inertia.m
    if m < -min_mass or m > max_mass:
        raise rm.MessageRejected(f"implausible payload estimate: mass {m:.3f} kg outside [0, {max_mass:g}] kg "
                                 "(payload_max_mass); model kept")
    if m < min_mass:
        return
    c = msg.inertia.com
    distance = float(np.sqrt(c.x * c.x + c.y * c.y + c.z * c.z))
    if distance > max_com_distance:
        raise rm.MessageRejected(f"implausible payload estimate: centre of mass {distance:.3f} m from "
                                 f"'{msg.header.frame_id}' (payload_max_com_distance {max_com_distance:g} m); "
                                 "model kept")
    # principal moments about the centre of mass of a body within R of it lie in [0, m R^2] (I_axis =
    # sum m_i d_i^2, d_i <= R); R = payload_max_com_distance. An RLS estimate of weakly excited inertias
    # is often slightly negative (down to -0.06 kg m^2 for 2 kg in the demo, whose tracking is best with
    # these estimates taken as they are), so only gross violations are refused: in a 20-s soak that lost
    # tracking the estimates reached -1.05 kg m^2 (an indefinite payload inertia).
    i = msg.inertia
    eig = np.linalg.eigvalsh(np.array([[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]]))
    bound = m * max_com_distance ** 2
    if eig[0] < -INERTIA_NEGATIVE_TOLERANCE * bound or eig[-1] > bound:
        raise rm.MessageRejected(f"implausible payload estimate: principal moments {np.round(eig, 4).tolist()} "
                                 f"kg m^2 outside [-{INERTIA_NEGATIVE_TOLERANCE:g}, 1] m R^2 = {bound:.3g} kg m^2 "
                                 "(R = payload_max_com_distance); model kept")


def mpc_solution_from_message(msg, nv, tau_max):
    """:class:`MPCSolution` from the mpc node's Float64MultiArray ``[t0, N, dt, tau_ff (N nv), x_pred
    ((N+1) 2nv), K (N nv 2nv)]``; returns ``(t0, solution)``."""
    data = np.asarray(msg.data, dtype=float)
    if len(data) < 3 or not np.isfinite(data).all():
        raise rm.MessageRejected("MPC solution is empty or not finite")
    t0, N, dt = data[0], int(data[1]), data[2]
    nx = 2 * nv
    sizes = (N * nv, (N + 1) * nx, N * nv * nx)
    if N < 1 or len(data) != 3 + sum(sizes) or dt <= 0:
        raise rm.MessageRejected(f"MPC solution has {len(data)} numbers, not 3 + {sum(sizes)} for N = {N}")
    tau_ff, x_pred, K = np.split(data[3:], np.cumsum(sizes)[:2])
    return t0, MPCSolution(tau_ff.reshape(N, nv), x_pred.reshape(N + 1, nx), K.reshape(N, nv, nx), "mpc",
                           dt=dt, tau_max=tau_max)


class FourierSampler:
    """``(q_d, v_d, a_d)`` (nv,) of a :class:`FourierTrajectory` at one time ``t`` with one ``sin`` and one
    ``cos`` call for all three orders (FourierTrajectory.evaluate makes three calls of ``derivatives``, each
    building its basis: ~110 us per sample at 1 kHz, this ~15 us). Same formula, eq. of
    :func:`robodyn_ros.identification.exciting_trajectory._harmonic_basis`: with w_k = w_f k and phase r pi / 2,

        q^(r)(t) = sum_k w_k^(r-1) [sin(w_k t + r pi/2) a_jk - cos(w_k t + r pi/2) b_jk]  (+ q0 for r = 0),

    evaluated as one (3, K) basis times a^T, b^T (K, n); equal to ``evaluate`` to rounding (test_nodes)."""

    def __init__(self, trajectory):
        K = trajectory.harmonics
        w = trajectory.omega_f * np.arange(1, K + 1)
        self.w = w
        self.phase = (np.arange(3.0) * np.pi / 2)[:, None]           # (3, 1)
        self.scale = np.stack([w ** (r - 1) for r in range(3)])       # (3, K)
        self.aT, self.bT = trajectory.a.T.copy(), trajectory.b.T.copy()
        self.q0 = trajectory.q0
        self.has_b = bool(np.any(trajectory.b))

    def evaluate(self, t):
        angle = t * self.w + self.phase                                # (3, K)
        value = (np.sin(angle) * self.scale) @ self.aT
        if self.has_b:
            value -= (np.cos(angle) * self.scale) @ self.bT
        value[0] += self.q0
        return value[0], value[1], value[2]


class FastComputedTorque:
    """The 1 kHz form of :meth:`ComputedTorqueController.compute` for the node: the controller's own law
    (:meth:`ComputedTorqueController.torque`) and guard (:meth:`CommandGuard.clamp_and_limit`, no rate
    limit), without the per-call argument checks and status object. ``q``, ``v`` come from
    :func:`joint_state_to_arrays` (finite, bounded); a non-finite or out-of-limit reference, or a non-finite
    torque, goes to ``controller.compute`` itself (its clipping warning, fault status and hold). Returns
    ``tau`` (nv,)."""

    def __init__(self, controller):
        self.c = controller
        self.lo = controller.model.lower + controller.limit_margin
        self.hi = controller.model.upper - controller.limit_margin

    def compute(self, q, v, q_d, v_d, a_d):
        c = self.c
        if not (np.isfinite(v_d).all() and np.isfinite(a_d).all()) or (q_d < self.lo).any() or (q_d > self.hi).any() \
                or not np.isfinite(q_d).all():
            return c.compute(q, v, q_d, v_d, a_d)[0]
        tau = c.torque(q, v, q_d, v_d, a_d)
        if not np.isfinite(tau).all():
            return c.compute(q, v, q_d, v_d, a_d)[0]
        return c.guard.clamp_and_limit(tau, None)[0]


class StampGate:
    """Classifies joint-state stamps against the newest accepted one (module docstring):
    :meth:`classify` returns ``"first"``, ``"new"`` (later than the newest), ``"duplicate"`` (equal: drop),
    ``"older"`` (earlier by less than ``reset_gap`` s while not stale: drop) or ``"reset"`` (earlier by
    ``reset_gap`` or more, or earlier at all while ``stale``); only first, new and reset are accepted."""

    def __init__(self):
        self.newest = None

    def classify(self, t, reset_gap, stale):
        if self.newest is None:
            verdict = "first"
        elif t > self.newest:
            verdict = "new"
        elif t == self.newest:
            return "duplicate"
        elif stale or self.newest - t >= reset_gap:
            verdict = "reset"
        else:
            return "older"
        self.newest = t
        return verdict


class TorqueOutput:
    """The last stage before the command topic of ``node`` (a RobodynNode with ``state_timeout``,
    ``stale_action``, ``max_torque_rate`` and ``command_topic`` parameters): stamp checks, the stale-state
    watchdog, and the :class:`CommandGuard` (clamp to ``tau_max`` (nv,), rate limit, hold on non-finite).

    ``gravity(q)`` (nv,) is the gravity-hold torque (None: hold zeros). The rate limiter's Δt is the
    stamp difference to the previous state-driven command when it lies in (0, state_timeout], else (first
    command after a gap, a reset, a watchdog command) the steady wall time since the previous command."""

    def __init__(self, node, tau_max, gravity):
        self.node = node
        self.gravity = gravity
        self.guard = CommandGuard(tau_max, max_rate=torque_rate_bounds(tau_max, node.config["max_torque_rate"]))
        self.publisher = node.pub(Float64MultiArray, node.config["command_topic"], qos.COMMAND_QOS)
        # one message reused for every command (its layout is built once; publish serialises it at once)
        self._msg = rm.make_float64_multiarray(np.zeros(len(self.guard.tau_max)))
        self._order = node.robot.command_order
        self.gate = StampGate()
        self.commands = self.non_finite = self.rate_limited = self.saturated = 0
        self.dropped = {"duplicate": 0, "older": 0}
        self.time_resets = 0
        self.start()

    def start(self):
        """Forget everything of the previous activation (no previous command, no state yet)."""
        self.guard.reset()
        self.gate.newest = None
        self.stale = False
        self.last_state_wall = None
        self.q_last = None
        self._command_stamp = None
        self._command_wall = None

    def set_max_torque_rate(self, value):
        self.guard.max_rate = torque_rate_bounds(self.guard.tau_max, value)

    def accept_state(self, t, q):
        """The stamp verdict of a valid joint state at ``t`` with positions ``q`` (nv,): ``None`` when it is
        dropped (duplicate or out of order: counted, throttled warning), else ``"first"``, ``"new"`` or
        ``"reset"`` (the caller re-bases its time; warned about once per reset). An accepted state feeds
        the watchdog."""
        node, timeout = self.node, self.node.config["state_timeout"]
        newest = self.gate.newest
        verdict = self.gate.classify(t, timeout, self.stale)
        if verdict in ("duplicate", "older"):
            self.dropped[verdict] += 1
            node.warn_throttled(f"stamp_{verdict}", f"dropped joint state with {verdict} stamp {t:.6f} s (newest "
                                f"{newest:.6f} s; {self.dropped[verdict]} so far)")
            return None
        if verdict == "reset":
            self.time_resets += 1
            self._command_stamp = None
            node.get_logger().warning(f"joint-state time jumped back from {newest:.6f} s to {t:.6f} s (reset "
                                      f"#{self.time_resets}, bag loop or simulator reset?): re-basing time")
        self.last_state_wall = time.monotonic()
        self.q_last = q
        if self.stale:
            node.get_logger().info("joint states are back: resuming control")
            self.stale = False
        return verdict

    def publish(self, tau, stamp=None):
        """Guard and publish the model-order torque ``tau`` (nv,) answering the state at ``stamp`` (None:
        a watchdog command); returns the published torque (model order)."""
        now = time.monotonic()
        dt = None
        if stamp is not None and self._command_stamp is not None \
                and 0.0 < stamp - self._command_stamp <= self.node.config["state_timeout"]:
            dt = stamp - self._command_stamp
        elif self._command_wall is not None:
            dt = now - self._command_wall
        guard = self.guard
        tau = np.asarray(tau, dtype=float)
        if np.isfinite(tau).all():
            tau, saturated, limited = guard.clamp_and_limit(tau, dt)
        else:  # counted; the last safe command is held
            self.non_finite += 1
            tau, saturated, limited = guard.hold(), False, False
        self.saturated += bool(np.any(saturated))
        self.rate_limited += bool(np.any(limited))
        if stamp is not None:
            self._command_stamp = stamp
        self._command_wall = now
        self.commands += 1
        self._msg.data = array("d", tau[self._order].tobytes())
        self.publisher.publish(self._msg)
        return tau

    def on_watchdog(self):
        """Timer callback: once no state was accepted for ``state_timeout`` wall seconds, publish the
        ``stale_action`` torque (gravity at the last measured q, or zeros) through the guard."""
        node = self.node
        if not node.active or self.last_state_wall is None:
            return
        age = time.monotonic() - self.last_state_wall
        if age < node.config["state_timeout"]:
            return
        if not self.stale:
            node.get_logger().warning(f"no valid joint state for {age * 1e3:.0f} ms (timeout "
                                      f"{node.config['state_timeout'] * 1e3:.0f} ms): "
                                      f"{node.config['stale_action']} until they come back")
            self.stale = True
        if node.config["stale_action"] == "gravity_hold" and self.q_last is not None and self.gravity is not None:
            tau = self.gravity(self.q_last)
        else:
            tau = np.zeros(len(self.guard.tau_max))
        self.publish(tau)

    def diagnostic_values(self):
        return {"commands": self.commands, "stale": self.stale, "non_finite_commands": self.non_finite,
                "saturated_commands": self.saturated, "rate_limited_commands": self.rate_limited,
                "dropped_duplicate_stamps": self.dropped["duplicate"], "dropped_older_stamps": self.dropped["older"],
                "time_resets": self.time_resets}


class InverseDynamicsNode(RobodynNode):
    kind = "inverse_dynamics"

    def setup(self):
        c, model = self.config, self.robot.model
        self.kernels = compile_kernels(model, register=False)
        self.functions = KernelDynamics(model, self.kernels)
        self.pi_nominal = model.inertial_parameters()
        self.controller = self._make_controller()
        self.fast_law = FastComputedTorque(self.controller) \
            if isinstance(self.controller, ComputedTorqueController) else None
        self.reference = None
        self._sampler = None
        self.trajectory = None
        self.t0 = None
        self._t_prev = None
        self.payload_updates = 0
        self.implausible_payloads = 0   # payload estimates dropped by check_payload_plausible
        self.mpc = None
        gravity = None if c["gravity_compensated_by_robot"] else \
            (lambda q: self.functions.gravity(q, self.controller_parameters()))
        self.output = TorqueOutput(self, effort_bounds(model), gravity)
        self.error_pub = self.pub(Float64MultiArray, "~/tracking_error", qos.ESTIMATE_QOS)
        # the labelled layout is built once: 8 MultiArrayDimension objects per message cost ~0.1 ms
        self._error_msg = rm.make_float64_multiarray(np.zeros(model.nv + 1), labels=["stamp"] + list(self.robot.joints))
        self.sub(JointState, c["joint_states_topic"], self._on_state, qos.SENSOR_INPUT_QOS)
        self.sub(JointTrajectory, "~/joint_trajectory", self._on_trajectory, qos.TRAJECTORY_QOS)
        if c["use_estimates"]:
            self.sub(InertiaStamped, c["payload_topic"], self._on_payload, qos.ESTIMATE_QOS, group=self.service_group)
        if c["mode"] == "mpc":
            self.sub(Float64MultiArray, c["mpc_topic"], self._on_mpc, qos.ESTIMATE_QOS)
        self._state_cache = {}
        self._watchdog = None
        # latency of the 1 kHz path (state callback entry -> command published), last LATENCY_WINDOW samples
        self.latency_ns = np.zeros(LATENCY_WINDOW, dtype=np.int64)
        self.latency_cpu_ns = np.zeros(LATENCY_WINDOW, dtype=np.int64)
        self.states_received = 0
        self.diag_pub = self.pub(DiagnosticArray, "/diagnostics", qos.DIAGNOSTICS_QOS)
        self.timer(1.0, self._publish_diagnostics, steady=True, group=self.service_group)

    def _make_controller(self):
        c, model = self.config, self.robot.model
        common = dict(functions=self.functions, gravity_compensated_by_robot=c["gravity_compensated_by_robot"])
        if c["mode"] == "gravity_compensation":
            return GravityCompensation(model, c["kp"], c["kd"], **common)
        if c["mode"] == "slotine_li":
            kd = c["slotine_li.kd"] if c["slotine_li.kd"] >= 0 else \
                40.0 * np.diag(self.functions.mass(self.robot.home, model.inertial_parameters()))
            return SlotineLiController(model, Lambda=c["slotine_li.lambda"], kd=kd,
                                       gamma=c["slotine_li.gamma"], dead_zone=c["slotine_li.dead_zone"],
                                       friction_compensation=c["friction_compensation"], **common)
        return ComputedTorqueController(model, c["kp"], c["kd"], friction_compensation=c["friction_compensation"],
                                        **common)

    def apply_live(self, changed):
        for name in ("kp", "kd"):
            if name in changed and hasattr(self.controller, name):
                setattr(self.controller, name, np.full(self.robot.model.nv, float(changed[name])))
        if "max_torque_rate" in changed:
            self.output.set_max_torque_rate(changed["max_torque_rate"])

    # the watchdog's and the output stage's state, read by diagnostics and tests
    stale = property(lambda self: self.output.stale)
    q_last = property(lambda self: self.output.q_last)
    commands = property(lambda self: self.output.commands)
    non_finite_commands = property(lambda self: self.output.non_finite)

    def start(self):
        self.t0 = None
        self._t_prev = None
        self.output.start()
        self._watchdog = self.timer(self.config["state_timeout"] / 4.0, self.output.on_watchdog, steady=True)

    def stop(self):
        if self._watchdog is not None:
            self.destroy_entity(self._watchdog)
            self._watchdog = None

    # ------------------------------------------------------------------------------------ reference
    def _make_reference(self, q):
        c = self.config
        if c["reference"] == "hold":
            return ConstantReference(q.copy())
        center = self.robot.from_command(np.asarray(c["generator.center"])) if c["generator.center"] else \
            (self.robot.home if self.robot.name in ("panda", "ur5", "iiwa") else q.copy())
        return fourier_reference(center, c["generator.amplitude"], c["generator.period"], c["generator.harmonics"])

    def desired(self, t, q):
        if self.trajectory is not None:
            traj, start = self.trajectory
            return traj.sample(t - start)
        if self.reference is None:
            self.reference = self._make_reference(q)
            self._sampler = FourierSampler(self.reference) if isinstance(self.reference, FourierTrajectory) else None
        if self._sampler is not None:
            return self._sampler.evaluate(t - self.t0)
        return self.reference.evaluate(t - self.t0)

    # -------------------------------------------------------------------------------------- control
    def _on_state(self, msg):
        if not self.active:
            return
        start = time.perf_counter_ns()
        cpu_start = time.thread_time_ns()
        state = self.joint_state_with_velocity(msg, self._state_cache, "controller")
        if state is None:
            return
        t, q, v = state
        newest = self.output.gate.newest
        verdict = self.output.accept_state(t, q)
        if verdict is None:
            return
        if verdict == "reset":
            self._rebase_time(t - newest)
        if self.t0 is None:
            self.t0 = t
        q_d, v_d, a_d = self.desired(t, q)
        mode = self.config["mode"]
        if mode == "gravity_compensation":
            tau, status = self.controller.compute(q, v, q_d)
        elif mode == "slotine_li":
            dt = t - self._t_prev if self._t_prev is not None else 0.0
            tau, status = self.controller.compute(q, v, q_d, v_d, a_d, min(max(dt, 0.0), 0.01))
        elif mode == "mpc" and self.mpc is not None:
            tau = self.mpc[1].torque(np.concatenate([q, v]), t - self.mpc[0])
        elif self.fast_law is not None:  # computed torque, also in mode mpc until the first solution arrives
            tau = self.fast_law.compute(q, v, q_d, v_d, a_d)
        else:
            tau, status = self.controller.compute(q, v, q_d, v_d, a_d)
        self._t_prev = t
        self.output.publish(tau, t)
        slot = self.states_received % LATENCY_WINDOW
        self.latency_ns[slot] = time.perf_counter_ns() - start
        # this thread's CPU time over the same span: a wall latency far above it was preemption (RT throttling,
        # other processes), not work of the callback
        self.latency_cpu_ns[slot] = time.thread_time_ns() - cpu_start
        self.states_received += 1
        error = np.empty(len(q) + 1)
        error[0], error[1:] = t, self.robot.to_command(q - q_d)
        self._error_msg.data = array("d", error.tobytes())
        self.error_pub.publish(self._error_msg)

    def _rebase_time(self, jump):
        """After a time reset by ``jump`` s (< 0): shift the reference and trajectory start times so that the
        desired motion continues where it was, forget the Slotine-Li step and the MPC solution of the old
        time line."""
        if self.t0 is not None:
            self.t0 += jump
        if self.trajectory is not None:
            self.trajectory = (self.trajectory[0], self.trajectory[1] + jump)
        self._t_prev = None
        self.mpc = None

    def _percentiles_us(self, samples_ns):
        """(p50, p99, max) of the filled part of a LATENCY_WINDOW ring of nanoseconds, us."""
        n = min(self.states_received, LATENCY_WINDOW)
        if n == 0:
            return (0.0, 0.0, 0.0)
        x = samples_ns[:n] / 1e3
        return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(x.max())

    def latency_percentiles_us(self):
        """(p50, p99, max) of the state -> command latency over the last LATENCY_WINDOW states, us."""
        return self._percentiles_us(self.latency_ns)

    def cpu_percentiles_us(self):
        """(p50, p99, max) of this thread's CPU time over the same spans as :meth:`latency_percentiles_us`, us."""
        return self._percentiles_us(self.latency_cpu_ns)

    def _publish_diagnostics(self):
        if not self.active:
            return
        p50, p99, worst = self.latency_percentiles_us()
        c50, c99, cworst = self.cpu_percentiles_us()
        level = "WARN" if self.stale or self.rejected else "OK"
        text = "joint states stale: holding" if self.stale else (
            f"dropped malformed messages: {dict(self.rejected)}" if self.rejected else "controlling")
        values = {"mode": self.config["mode"], "states_received": self.states_received,
                  "latency_p50_us": p50, "latency_p99_us": p99, "latency_max_us": worst,
                  "cpu_p50_us": c50, "cpu_p99_us": c99, "cpu_max_us": cworst,
                  "latency_window": min(self.states_received, LATENCY_WINDOW), **self.output.diagnostic_values(),
                  "payload_updates": self.payload_updates, "implausible_payloads": self.implausible_payloads,
                  "rejected_messages": sum(self.rejected.values())}
        self.diag_pub.publish(rm.make_diagnostic_array(self.get_clock().now().to_msg(),
                                                       f"{self.get_name()}: inverse dynamics", level, text, values,
                                                       hardware_id=self.robot.name))

    def controller_parameters(self):
        return self.controller.pi_hat if hasattr(self.controller, "pi_hat") else self.controller.pi

    # ------------------------------------------------------------------------------------- updates
    def _on_trajectory(self, msg):
        try:
            traj = rm.joint_trajectory_to_reference(msg, self.robot.model.joint_names)
        except rm.MessageRejected as exc:
            self.reject("joint_trajectory", exc)
            return
        start = traj.start_stamp if traj.start_stamp > 0 else (self._t_prev if self._t_prev else 0.0)
        self.trajectory = (traj, start)

    def _on_payload(self, msg):
        try:
            body, pi_body = inertia_stamped_to_body_parameters(msg, self.robot.model)
        except rm.MessageRejected as exc:
            self.reject("payload", exc)
            return
        try:  # well formed but not a load the robot could carry (an estimate still converging, or starved)
            c = self.config
            check_payload_plausible(msg, c["payload_min_mass"], c["payload_max_mass"], c["payload_max_com_distance"])
        except rm.MessageRejected as exc:
            self.implausible_payloads += 1
            self.warn_throttled("implausible_payload", f"{exc} ({self.implausible_payloads} so far)")
            return
        pi = self.pi_nominal.copy()
        if abs(msg.inertia.m) >= self.config["payload_min_mass"]:
            pi[10 * body:10 * body + 10] += pi_body
        if hasattr(self.controller, "pi_hat"):
            self.controller.pi_hat = pi
        else:
            self.controller.set_parameters(pi)
        self.payload_updates += 1

    def _on_mpc(self, msg):
        try:
            t0, solution = mpc_solution_from_message(msg, self.robot.model.nv, self.controller.guard.tau_max)
        except rm.MessageRejected as exc:
            self.reject("mpc_solution", exc)
            return
        newest = self.output.gate.newest
        if newest is not None and t0 > newest + self.config["state_timeout"]:
            self.warn_throttled("mpc_future", f"dropped MPC solution of t = {t0:.3f} s, ahead of the newest joint "
                                f"state ({newest:.3f} s): planned before a time reset")
            return
        self.mpc = (t0, solution)
