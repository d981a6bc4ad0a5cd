"""The parameter schemas of the four nodes (one tuple of :class:`ParameterSpec` per node) and the one
place that turns a validated config into the robot the node works on.

Everything here is rclpy-free: the nodes declare these specs (:func:`declare_parameters`), the in-process
bringup and the tests resolve them from the YAML files without ROS (:func:`resolve_node_config`).

Robot selection, the same for every node: ``robot_description`` (URDF XML, what ``robot_state_publisher``
users already have), else ``urdf_path``, else ``robot``: a bundled robot (panda, ur5, iiwa) or a URDF file.
``robot`` may also name a parameter file written by ``robodyn config``: ``robodyn node``, ``ros2 run`` and
the launch files read it before the node starts, as a ``--params-file`` given first
(:mod:`robodyn_ros.ros.node_main`). ``joints`` names the commanded joints in command order
(JointGroupEffortController's ``joints``); joints of the URDF not listed are locked at their
``locked_joints`` value or at 0 (Panda's fingers). Empty: the bundled robot's arm joints, or every joint of
the URDF in chain order. ``home`` (joint order): the simulator's start, the generator's centre and the
configuration at which gains are derived from the mass matrix.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..control.base_parameter_update import EFFORT_PARAMETERS
from ..estimation.estimator_parameters import EFFORT_KINDS, ESTIMATION
from ..model.driver_profiles import DRIVERS, with_profile
from .parameters import ParameterSpec, resolve_config

P = ParameterSpec

# ----------------------------------------------------------------------------------------------- robot
ROBOT = (
    P("robot", str, "panda", "The robot when robot_description and urdf_path are empty: a bundled robot (panda, "
      "ur5, iiwa; it also gives the default joints, wrist link and home), a URDF file, or a parameter file "
      "written by robodyn config (robot:=PATH on the command line of robodyn node, ros2 run or a launch file).",
      read_only=True),
    P("robot_description", str, "", "URDF XML of the robot (takes precedence over urdf_path and robot).",
      read_only=True),
    P("urdf_path", str, "", "Path of the robot's URDF (used when robot_description is empty).", read_only=True),
    P("joints", list[str], [], "Commanded joints in command order; other URDF joints are locked (locked_joints, "
      "else at 0). Empty: the bundled robot's arm joints or every URDF joint.", read_only=True),
    P("locked_joints", list[str], [], "URDF joints held fixed, as NAME=VALUE (rad or m), e.g. a gripper's "
      "fingers; a URDF joint neither in joints nor here is locked at 0.", read_only=True),
    P("home", list[float], [], "Home configuration (joint order of joints), rad: the simulator's initial "
      "positions, the generator's centre, where gains are derived from the mass matrix (slotine_li.kd); empty: "
      "the bundled robot's home, else zero (and the generator centres on the first measured configuration).",
      read_only=True),
    P("wrist_link", str, "", "Link of the wrist force/torque sensor and payload (empty: the bundled robot's "
      "flange link, else the last link).", read_only=True),
    P("driver", str, "generic", "The robot's own driver: its profile sets the defaults of the parameters that say "
      "what the robot adds to the commands and what its joint efforts are (franka: gravity added, tau_J; ur: "
      "gravity and friction added, gravity-compensated efforts, /forward_effort_controller/commands; lbr: "
      "gravity added, efforts filtered at 10 Hz; generic: none); each can still be set (docs/DRIVERS.md).",
      choices=DRIVERS, read_only=True),
)


def _topic(name, default, description):
    """A topic name parameter: a read-only string (publishers and subscriptions are made once)."""
    return P(name, str, default, description, read_only=True)


TOPICS = (
    _topic("joint_states_topic", "/joint_states", "sensor_msgs/JointState topic."),
    _topic("wrench_topic", "/force_torque_sensor_broadcaster/wrench", "geometry_msgs/WrenchStamped topic of the wrist "
           "force/torque sensor."),
    _topic("command_topic", "/effort_controller/commands", "std_msgs/Float64MultiArray torque commands (joint order "
           "of 'joints')."),
)

ESTIMATE_TOPICS = (
    _topic("payload_topic", "/estimator/payload", "geometry_msgs/InertiaStamped payload estimate."),
    _topic("base_parameters_topic", "/estimator/base_parameters", "std_msgs/Float64MultiArray base parameters with "
           "labelled layout."),
    _topic("base_covariance_topic", "/estimator/base_parameters_covariance", "std_msgs/Float64MultiArray covariance "
           "(r x r, row-major) of the base parameters (estimator: publish_covariance)."),
)

# ---------------------------------------------------------------------- base parameters in controllers
BASE_PARAMETER_USE = (
    P("use_base_parameters", bool, False, "inverse_dynamics in computed_torque and slotine_li modes, and the mpc "
      "node: control from the estimator's base parameters and friction (base_parameters_topic, "
      "base_covariance_topic) through the parameter gate "
      "(inverse dynamics Y_base(q, v, a) beta; the MPC: the consistent full parameters as its NLP parameters), the "
      "payload (payload_topic) as a gated candidate on top.",
      read_only=True),
    P("initial_parameters", str, "", "use_base_parameters: a parameter file of robodyn identify, replay or the "
      "estimator's ~/save, offered to the parameter gate as the first candidate: applied once it has predicted "
      "this robot's joint torques better than the URDF, else refused with a /diagnostics line (empty: none).",
      read_only=True),
    P("base_parameters.coulomb_width", float, 0.02, "use_base_parameters: the estimator's coulomb_width, rad/s.",
      range=(1e-9, None), read_only=True),
    P("base_parameters.deterministic", bool, False, "use_base_parameters: simulated time in lockstep (the "
      "simulation waits for this node): wait for each consistent-parameter fit at its due time, so that a run "
      "repeats exactly whatever the machine's load (never on a real robot: the control loop would stall).",
      read_only=True),
    P("base_parameters.cutoff", float, 20.0, "use_base_parameters: cutoff of the gate's filter of the joint "
      "states, Hz (the estimator's filter.cutoff).", range=(0.1, 500.0), read_only=True),
    *(replace(spec, description="use_base_parameters (the parameter gate judges estimates on the joint "
              "states' efforts), as the estimator's: " + spec.description, read_only=True)
      for spec in ESTIMATION if spec.name in EFFORT_PARAMETERS),
    P("adaptation_timeout", float, 30.0, "use_base_parameters: /diagnostics turn WARN, with the parameter gate's "
      "last reason, while no estimate has been applied this many seconds (joint-state time) after the first "
      "joint state (0: off).", range=(0.0, None), live=True),
)

# ---------------------------------------------------------------------------- the controllers' diagnostics
TRACKING_DIAGNOSTICS = (
    P("tracking_error.threshold", float, 0.1, "/diagnostics turn WARN, naming the joints, while a joint's RMS "
      "tracking error over the last tracking_error.window seconds exceeds this, rad (0: off).",
      range=(0.0, None), live=True),
    P("tracking_error.window", float, 1.0, "Window of the RMS tracking error, s (joint-state time).",
      range=(0.01, 3600.0), live=True),
)

# ------------------------------------------------------------------------------------------- simulator
SIMULATOR = ROBOT + TOPICS + (
    P("rate", float, 1000.0, "Integration (and publishing) rate, Hz.", range=(1.0, 20000.0)),
    P("real_time_factor", float, 1.0, "Simulated seconds per wall second; 0 = as fast as possible "
      "(publish /clock and run the other nodes with use_sim_time).", range=(0.0, 100.0)),
    P("lockstep", bool, True, "As fast as possible only: step when a command for the last published state "
      "arrives (closed loop without dropped steps), or after lockstep_timeout."),
    P("lockstep_timeout", float, 0.05, "Wall seconds to wait for a command before stepping anyway.",
      range=(0.0, 60.0)),
    P("publish_clock", bool, True, "Publish rosgraph_msgs/Clock on /clock."),
    P("clock_rate", float, 1000.0, "Rate of /clock messages in simulated time, Hz (each costs every "
      "use_sim_time node a callback).", range=(1.0, 20000.0)),
    P("publish_decimation", int, 1, "Publish joint states, the wrench and /clock after every n-th step only "
      "(1: every step, as a robot's 1 kHz joint_state_broadcaster; in lockstep, n steps per command).",
      range=(1, 1000)),
    P("step_thread", bool, True, "Step in a thread of its own (real time: absolute-deadline sleeps; as fast as "
      "possible without lockstep: back to back) instead of on executor timers.", read_only=True),
    P("command_timeout", float, 0.1, "Simulated seconds without a command after which the simulator applies "
      "zero torque and warns (from the first command on: until then the robot holds where it started).",
      range=(0.0, 1e6), live=True),
    P("initial_positions", list[float], [], "Initial joint positions (joint order); empty: the bundled home."),
    P("engine", str, "robodyn", "What integrates the plant: robodyn (this package's dynamics, the integrator "
      "below) or mujoco (MuJoCo on the plant written as MJCF, implicitfast; needs pip install "
      "\"robodyn_ros[mujoco]\"). Topics, payloads and noise are the same for both.", choices=("robodyn", "mujoco"),
      read_only=True),
    P("integrator", str, "rk4_implicit", "Fixed-step integrator of the robodyn engine: rk4_implicit (joint "
      "friction and limit stops implicit in the velocity, the rigid body by RK4; stable for any URDF damping), "
      "rk4 or semi_implicit_euler (explicit).", choices=("rk4_implicit", "rk4", "semi_implicit_euler")),
    P("friction", bool, True, "Apply the URDF's joint friction (damping, friction)."),
    P("plant", str, "", "The simulated robot when it is not the controllers' model: a URDF path, a parameter "
      "YAML in robodyn identify's format applied on the robot's URDF, or a bundled twin (panda_twin: the "
      "Panda identified from a real robot's log, with its joint-torque noise, which replaces noise.effort); "
      "empty: the robot itself.", read_only=True),
    P("substeps", int, 1, "Integration steps per simulator step (the command is held over the step; 1 is enough "
      "with rk4_implicit or mujoco, whatever the URDF's damping; the explicit integrators may need more for a "
      "light link with stiff friction).", range=(1, 1000)),
    P("limits.stiffness", float, -1.0, "Joint-limit stop stiffness, N m/rad (< 0: the stiffest the integrator "
      "keeps stable for the lightest joint at this rate).", range=(None, None)),
    P("limits.damping", float, -1.0, "Joint-limit stop damping, N m s/rad (< 0: automatic, as above).",
      range=(None, None)),
    P("noise.position", float, 0.0, "Std of joint position noise, rad.", range=(0.0, None)),
    P("noise.velocity", float, 0.0, "Std of joint velocity noise, rad/s.", range=(0.0, None)),
    P("noise.effort", float, 0.0, "Std of measured effort noise, N m.", range=(0.0, None)),
    P("noise.force", float, 0.0, "Std of F/T sensor force noise, N.", range=(0.0, None)),
    P("noise.torque", float, 0.0, "Std of F/T sensor torque noise, N m.", range=(0.0, None)),
    P("noise.seed", int, 0, "Noise generator seed."),
    P("wrench_bias", list[float], [0.0] * 6, "Constant F/T sensor bias [fx fy fz tx ty tz]."),
    P("payload.mass", float, 0.0, "Payload mass, kg (0: no payload).", range=(0.0, 1000.0), live=True),
    P("payload.link", str, "", "Link the payload is attached to (empty: wrist_link).", live=True),
    P("payload.com", list[float], [0.0, 0.0, 0.05], "Payload centre of mass in the link frame, m.", live=True),
    P("payload.size", list[float], [0.1, 0.1, 0.1], "Payload box edges, m.", range=(0.0, None), live=True),
    P("payload.attach_time", float, -1.0, "Simulated time at which the payload is attached (< 0: only "
      "by the ~/attach_payload service).", range=(None, None)),
    P("push.torque", list[float], [], "A push: joint torques of an external force (joint order, N m) from push.time "
      "for push.duration; they move the robot and are not in the reported effort. Empty: none.", read_only=True),
    P("push.time", float, -1.0, "Simulated time at which the push starts (< 0: no push).", range=(None, None),
      read_only=True),
    P("push.duration", float, 0.1, "Duration of the push, simulated s.", range=(0.0, None), read_only=True),
    # the robot's driver, as the simulator emulates it (driver profiles: robodyn_ros.model.driver_profiles)
    P("robot_adds_gravity", bool, False, "Add gravity to every command received, as Franka's, UR's and KUKA's "
      "drivers do: g(q) of the controllers' model (the URDF, and the payload set with ~/set_payload), not of "
      "the plant.", read_only=True),
    P("robot_friction_scale", float, 0.0, "Add this fraction of the simulated robot's joint friction (the "
      "plant's, with a sharper Coulomb sign) at its velocity to every command, as UR's friction compensation "
      "does (0: none).", range=(0.0, 2.0), read_only=True),
    P("effort.kind", str, "torque", "What /joint_states effort reports: torque (the joint torque, gravity "
      "included), gravity_compensated (minus g(q) of the controllers' model and the set payload: 0 at rest), "
      "current (torque / effort.torque_constants, A).", choices=EFFORT_KINDS, read_only=True),
    P("effort.torque_constants", list[float], [], "effort.kind current: N m per A per joint (joint order); empty: "
      "10 N m/A.", range=(1e-6, None), read_only=True),
    P("effort.filter_cutoff", float, 0.0, "First-order low-pass filter of the reported effort, Hz (0: none; "
      "lbr_fri_ros2_stack: 10).", range=(0.0, 10000.0), read_only=True),
    P("receive_timeout", float, 0.0, "Simulated seconds without a command after which the robot "
      "stops (UR: robot_receive_timeout 0.04 s, the program stops) and holds until the simulator is "
      "reactivated (0: off; command_timeout still applies).", range=(0.0, 10.0), read_only=True),
    P("missed_command_limit", int, 0, "Consecutive steps without a new command after which a "
      "communication_constraints_violation reflex holds the robot until ~/error_recovery is called (Franka: "
      "20; 0: off).", range=(0, 100000), read_only=True),
    P("driver_max_torque_rate", float, 0.0, "The driver's own limit of the commanded torque rate, N m/s "
      "(libfranka: 1000; 0: none).", range=(0.0, None), read_only=True),
)

# ------------------------------------------------------------------------------------ inverse dynamics
TORQUE_RATE_HELP = ("Torque rate limit of the published commands, N m/s per joint (after clamping to the URDF "
                    "effort limits); 0 or .inf: no limit; < 0: each joint's effort limit per 10 ms. Franka's "
                    "libfranka limits the commanded torque rate to 1000 N m/s.")
CONTROL_MODES = ("computed_torque", "gravity_compensation", "slotine_li", "mpc")
MAX_KP = 1e6
"""1/s^2: a position gain beyond any sampled controller (kp = 1e6 is a 160 Hz closed-loop bandwidth, far
above what a 1 kHz loop keeps stable); larger values are typing mistakes."""
MAX_KD = 1e4
"""1/s: the same for the velocity gain and Slotine-Li's Lambda."""
COMMAND_CONVENTION = (
    P("friction_compensation", bool, True, "Add the model's joint friction torque to the commands (false: the "
      "robot compensates its own friction, or it has none); every control mode, with or without "
      "use_base_parameters.", read_only=True),
    P("robot_compensates_friction", bool, False, "The robot adds its own friction compensation to the torques it "
      "receives (UR e-series): the URDF's friction is never sent; with use_base_parameters and "
      "friction_compensation, once the joints' friction is learned and the robot's compensation identified from "
      "the commands and the measured efforts, the residual (learned friction less the robot's) is sent "
      "(inverse_dynamics laws, the mpc node's output: commands).", read_only=True),
    P("gravity_compensated_by_robot", bool, False, "The robot adds gravity to the torques it receives (Franka, UR "
      "e-series, KUKA LBR): g(q) of the controller's model is left out of every command, the MPC's feed-forward "
      "and the stale hold; every control mode, with or without use_base_parameters.", read_only=True),
)
"""What the robot's driver adds to the commanded torques: the controllers (inverse_dynamics, mpc) leave it out."""
INVERSE_DYNAMICS = ROBOT + TOPICS + ESTIMATE_TOPICS + (
    P("mode", str, "computed_torque", "Control law.", choices=CONTROL_MODES),
    P("kp", float, 400.0, "Computed torque / gravity compensation position gain, 1/s^2.", range=(0.0, MAX_KP),
      live=True),
    P("kd", float, 40.0, "Computed torque / gravity compensation velocity gain, 1/s.", range=(0.0, MAX_KD),
      live=True),
    P("slotine_li.lambda", float, 10.0, "Slotine-Li Lambda, 1/s.", range=(0.0, MAX_KD)),
    P("slotine_li.kd", float, -1.0, "Slotine-Li K_D, N m s/rad (< 0: per joint 40 M_jj(home) 1/s, so that the "
      "sampled loop stays stable for light wrist joints: K_D dt / M_jj << 1).", range=(None, None)),
    P("slotine_li.gamma", float, 1.0, "Slotine-Li adaptation gain.", range=(0.0, None)),
    P("slotine_li.dead_zone", float, 0.01, "Slotine-Li dead zone on |s|, rad/s.", range=(0.0, None)),
    P("reference", str, "generator", "Reference: built-in generator, ~/joint_trajectory messages, hold the "
      "first measured configuration, or a trajectory file (trajectory_file, e.g. from robodyn excite).",
      choices=("generator", "trajectory", "hold", "file")),
    P("trajectory_file", str, "", "With reference: file, the CSV 'time,<joint name>,...' of joint positions "
      "to follow (a periodic file loops); approached from the first measured configuration at 20 % of the "
      "velocity limits."),
    P("trajectory_speed", float, 1.0, "With reference: file, the fraction of the file's speed to follow it at "
      "(velocities scale by it, accelerations by its square; e.g. 0.25 for the first run on a real arm).",
      range=(0.01, 1.0)),
    P("generator.amplitude", float, 0.3, "Generator amplitude per joint, rad.", range=(0.0, 3.0)),
    P("generator.period", float, 4.0, "Generator period, s.", range=(0.1, None)),
    P("generator.harmonics", int, 2, "Generator harmonics.", range=(1, 10)),
    P("generator.center", list[float], [], "Generator centre (joint order); empty: the bundled home pose or "
      "the first measured configuration."),
    P("state_timeout", float, 0.05, "Wall seconds without a valid joint state after which the controller "
      "stops commanding motion (stale_action).", range=(0.001, 10.0), live=True),
    P("stale_action", str, "gravity_hold", "Command while joint states are stale.",
      choices=("gravity_hold", "zero"), live=True),
    P("max_torque_rate", float, -1.0, TORQUE_RATE_HELP, range=(None, None), live=True, allow_inf=True),
    P("use_estimates", bool, True, "Add the estimator's payload (payload_topic) to the model live."),
    P("payload_min_mass", float, 0.05, "Payload estimates lighter than this (kg) count as no payload: the "
      "first moments and inertias of a near-zero mass are mostly noise.", range=(0.0, None), live=True),
    P("payload_max_mass", float, 20.0, "Payload estimates heavier than this (kg), or below -payload_min_mass, "
      "are implausible: dropped with a warning, the last accepted model is kept.", range=(0.0, None), live=True),
    P("payload_max_com_distance", float, 0.5, "Payload estimates whose centre of mass is farther than this (m) "
      "from their link are implausible: dropped with a warning, the last accepted model is kept.",
      range=(0.0, None), live=True),
) + TRACKING_DIAGNOSTICS + BASE_PARAMETER_USE + COMMAND_CONVENTION + (
    P("base_parameters.blend_time", float, 0.5, "use_base_parameters: a newly applied parameter set enters the "
      "control law over a linear ramp this long from the one before, s (joint-state time; 0: at once).",
      range=(0.0, 10.0), live=True),
    _topic("mpc_topic", "/mpc/solution", "MPC feedforward + gains (mode mpc)."),
)

# ------------------------------------------------------------------------------------------- estimator
ESTIMATOR = ROBOT + TOPICS + ESTIMATE_TOPICS + ESTIMATION + (
    P("publish_covariance", bool, False, "Also publish the base parameters' covariance (base_covariance_topic) "
      "at publish_rate, for controllers with use_base_parameters.", read_only=True),
    P("input_poll_rate", float, 200.0, "Rate (wall clock, Hz) at which the estimator takes the joint states and "
      "wrenches waiting in its subscriptions' queues (1000 deep: 1 s at 1 kHz; losses counted in /diagnostics, "
      "lost_joint_states, lost_wrenches) and estimates from every due one; 0: one executor "
      "callback per message instead (an executor wake-up per message, and a backlog of events when behind).",
      range=(0.0, 10000.0), read_only=True),
    P("save_path", str, "", "File the ~/save service (std_srvs/Trigger) writes the current base-parameter estimate "
      "to, in the format of robodyn identify (the physically consistent parameters, friction, armature, the "
      "payload now): what initial_parameters reads at the next start. Empty: ~/save answers that it is not set.",
      live=True),
    P("save_on_shutdown", bool, False, "Also write save_path when the node shuts down (once it has an estimate).",
      live=True),
)
"""The estimator node's parameters: the robot, the topics, the estimation parameters of
:data:`robodyn_ros.estimation.estimator_parameters.ESTIMATION` and the node's own."""

# ------------------------------------------------------------------------------------------------- mpc
MPC = ROBOT + TOPICS + ESTIMATE_TOPICS + (
    P("rate", float, 100.0, "Solve rate, Hz (trigger joint_state: rounded to every k-th joint state; at least the "
      "joint-state rate: every state).", range=(1.0, 1000.0)),
    P("trigger", str, "timer", "When to solve: timer (at rate, on the newest joint state) or joint_state (on every "
      "k-th joint state, k = joint-state rate / rate rounded; rti: the feedback phase in the state's callback, the "
      "next step prepared after it).", choices=("timer", "joint_state")),
    P("output", str, "feedforward", "Publish torque commands itself (at the joint-state rate) or "
      "feedforward + gains for the inverse_dynamics node (mode mpc).", choices=("commands", "feedforward")),
    P("state_timeout", float, 0.05, "output commands: wall seconds without a valid joint state after which "
      "the node stops commanding motion (stale_action).", range=(0.001, 10.0)),
    P("stale_action", str, "gravity_hold", "output commands: command while joint states are stale.",
      choices=("gravity_hold", "zero"), live=True),
    P("max_torque_rate", float, -1.0, "output commands: " + TORQUE_RATE_HELP, range=(None, None), live=True,
      allow_inf=True),
    _topic("solution_topic", "/mpc/solution", "MPC feedforward + gains topic."),
    P("horizon", int, 20, "Horizon N (intervals).", range=(2, 200)),
    P("dt", float, 0.01, "Interval, s.", range=(1e-4, 1.0)),
    P("solver", str, "rti", "MPC solver.", choices=("rti", "fatrop", "ipopt")),
    P("compiled", bool, True, "Generate and compile C for the problem functions (cached)."),
    P("time_limit", float, 0.05, "Solve time limit, s.", range=(1e-4, 10.0)),
    P("q_weight", float, 1000.0, "Position weight.", range=(0.0, None)),
    P("v_weight", float, 1.0, "Velocity weight.", range=(0.0, None)),
    P("r_weight", float, 1e-3, "Torque weight.", range=(0.0, None)),
    P("generator.amplitude", float, 0.3, "Reference amplitude per joint, rad.", range=(0.0, 3.0)),
    P("generator.period", float, 4.0, "Reference period, s.", range=(0.1, None)),
    P("generator.harmonics", int, 2, "Reference harmonics.", range=(1, 10)),
    P("use_estimates", bool, True, "Add the estimator's payload to the model live."),
) + TRACKING_DIAGNOSTICS + BASE_PARAMETER_USE + COMMAND_CONVENTION

SCHEMAS = {"simulator": SIMULATOR, "inverse_dynamics": INVERSE_DYNAMICS, "estimator": ESTIMATOR, "mpc": MPC}
NODE_NAMES = tuple(SCHEMAS)

# Parameters every node has besides its schema: robodyn's autostart and rclpy's own.
NODE_EXTRAS = (
    P("autostart", bool, True, "Configure and activate on start (false: wait for a lifecycle manager, e.g. "
      "ros2 lifecycle set).", read_only=True),
    P("use_sim_time", bool, False, "rclpy: take the time from /clock."),
)
_ROS_OWNED = ("start_type_description_service",)
_ROS_OWNED_PREFIXES = ("qos_overrides.",)


def known_parameters(node=None):
    """Names of the parameters node ``node`` (a key of :data:`SCHEMAS`) has; None: those of any node."""
    schemas = SCHEMAS.values() if node is None else (SCHEMAS[node],)
    return {spec.name for schema in schemas for spec in schema} | {spec.name for spec in NODE_EXTRAS} | set(_ROS_OWNED)


def unknown_parameter_error(node, names, shared=False):
    """One phrase naming the parameters of ``names`` that node ``node`` does not have, each with the closest
    valid name, or None. ``shared``: names of a wildcard entry (``/**``) that other nodes read too, refused only
    when no node has them."""
    from .parameters import unknown_parameters
    names = [n for n in names if not n.startswith(_ROS_OWNED_PREFIXES)]
    error = unknown_parameters(names, known_parameters(None if shared else node))
    return None if error is None else f"{error} for node {node}"


def node_schema(node, driver="generic"):
    """The parameter specs of node ``node`` with the defaults of the ``driver`` profile
    (:func:`~robodyn_ros.model.driver_profiles.with_profile`)."""
    return with_profile(SCHEMAS[node], node, driver)


def resolve_node_config(node, overrides):
    """Validated ``{name: value}`` of node ``node`` (a key of :data:`SCHEMAS`) from ``overrides`` (e.g.
    :func:`load_params_yaml`), without ROS: the defaults of the ``driver`` profile it names, then the
    overrides; ValueError naming every bad parameter."""
    driver = overrides.get("driver", "generic")
    if driver not in DRIVERS:
        raise ValueError(f"invalid parameters: driver: {driver!r} is not one of {', '.join(DRIVERS)}")
    return resolve_config(node_schema(node, driver), overrides)


# ------------------------------------------------------------------------------------------ the robot
@dataclass(frozen=True)
class Robot:
    """What a node builds from the robot parameters: ``model`` (locked joints removed), ``joints``
    (command order), ``command_order`` (model index of each commanded joint), ``wrist_link``, ``home``
    (model order), ``name``, ``home_known`` (the home is the bundled robot's or the ``home`` parameter, not
    a zero stand-in)."""

    model: object
    joints: tuple
    command_order: np.ndarray
    wrist_link: str
    home: np.ndarray
    name: str
    home_known: bool = True

    def to_command(self, tau):
        """Model-order torques (nv,) -> command order (the Float64MultiArray layout)."""
        return np.asarray(tau, dtype=float)[self.command_order]

    def from_command(self, command):
        """Command-order values (nv,) -> model order."""
        out = np.empty(len(self.command_order))
        out[self.command_order] = command
        return out


PARAMETER_FILE_SUFFIXES = (".yaml", ".yml")


def robot_source(robot):
    """What the ``robot`` parameter names: ``("bundled", name)``, ``("urdf", path)`` or ``("parameters", path)``
    (a parameter file of ``robodyn config``); ModelError with the accepted forms otherwise."""
    import os

    from ..model.errors import ModelError
    from ..model.robot_names import BUNDLED_ROBOTS

    if robot in BUNDLED_ROBOTS:
        return "bundled", robot
    if robot.lower().endswith(PARAMETER_FILE_SUFFIXES):
        if not os.path.isfile(robot):
            raise ModelError(f"robot {robot}: no such parameter file")
        return "parameters", robot
    if os.path.isfile(robot):
        return "urdf", robot
    if robot.lower().endswith((".urdf", ".xml")) or os.sep in robot:
        raise ModelError(f"robot {robot}: no such URDF file")
    raise ModelError(f"unknown robot {robot!r}: not a bundled robot ({', '.join(BUNDLED_ROBOTS)}) nor a file; give "
                     "robot:=PATH of a URDF or of a parameter file written by 'robodyn config URDF --output FILE', "
                     "or urdf_path:=PATH")


def parse_locked_joints(entries):
    """``{joint: value}`` of ``locked_joints`` entries ``NAME=VALUE``; ModelError naming a malformed entry."""
    from ..model.errors import ModelError

    locked = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        try:
            locked[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip() or not np.isfinite(locked.get(name.strip(), np.nan)):
            raise ModelError(f"parameter locked_joints: {entry!r} is not NAME=VALUE with a finite number")
    return locked


def load_robot(config):
    """:class:`Robot` from a node config (module docstring for the precedence); ModelError on bad input."""
    from ..model.errors import ModelError
    from ..model.model import Model
    from ..robots import bundled_robot_info

    info = None
    if config["robot_description"]:
        source = config["robot_description"]
    elif config["urdf_path"]:
        source = config["urdf_path"]
    else:
        kind, source = robot_source(config["robot"])
        if kind == "parameters":
            raise ModelError(f"robot {source} is a parameter file: robodyn node, ros2 run and the launch files read "
                             "it given as robot:=PATH on their command line; elsewhere pass it as --params-file or "
                             "set urdf_path")
        if kind == "bundled":
            info = bundled_robot_info(source)
            source = info["urdf"]
    joints = tuple(config["joints"]) or (info["arm_joints"] if info else ())
    locked = dict(info["locked_joints"]) if info else {}
    requested = parse_locked_joints(config["locked_joints"])
    commanded_and_locked = sorted(set(requested) & set(joints))
    if commanded_and_locked:
        raise ModelError(f"parameters joints and locked_joints both name {commanded_and_locked}")
    full = Model.from_urdf(source, locked_joints=locked or None) if (joints or requested) else None
    if full is not None:
        for label, names in (("joints", joints), ("locked_joints", requested)):
            unknown = [j for j in names if j not in full.joint_names]
            if unknown:
                raise ModelError(f"parameter {label} names {unknown}, not movable joints of the URDF "
                                 f"({', '.join(full.joint_names)})")
        locked.update(requested)
        if joints:
            locked.update({j: 0.0 for j in full.joint_names if j not in joints and j not in requested})
    model = Model.from_urdf(source, locked_joints=locked) if locked else Model.from_urdf(source)
    joints = joints or tuple(model.joint_names)
    order = np.array([model.joint_names.index(j) for j in joints], dtype=np.intp)
    wrist = config["wrist_link"] or (info["wrist_link"] if info else model.body_names[-1])
    model.body_index(wrist)  # ModelError naming the links if unknown
    home = np.zeros(model.nv)
    if config["home"]:
        if len(config["home"]) != len(joints):
            raise ModelError(f"parameter home has {len(config['home'])} values for {len(joints)} joints "
                             f"({', '.join(joints)})")
        home[order] = config["home"]
        outside = [f"{name} {home[i]:g} outside [{model.lower[i]:g}, {model.upper[i]:g}]"
                   for i, name in enumerate(model.joint_names)
                   if model.nq == model.nv and not model.lower[i] <= home[i] <= model.upper[i]]
        if outside:
            raise ModelError(f"parameter home: {'; '.join(outside)}")
    elif info is not None:
        home[[model.joint_names.index(j) for j in info["arm_joints"]]] = info["home"]
    return Robot(model, joints, order, wrist, home, config["robot"] if info else model.name,
                 home_known=bool(config["home"]) or info is not None)
