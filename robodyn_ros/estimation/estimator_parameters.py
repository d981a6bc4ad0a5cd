"""The estimator's parameters, one schema (:mod:`robodyn_ros.model.parameter_schema`) for the library and the
``estimator`` node: :class:`~robodyn_ros.estimation.online_estimator.OnlineEstimator` validates its
configuration against it (:func:`~robodyn_ros.estimation.online_estimator.estimator_config`), the node
declares it (:data:`robodyn_ros.ros.node_parameters.ESTIMATOR`, with the robot, the topics and what only the
node has: its input polling and the covariance it publishes).
"""
from __future__ import annotations

from ..model.parameter_schema import ParameterSpec as P

COULOMB_WIDTH = 0.02
"""rad/s: the default width of the Coulomb column's sign ``tanh(v / coulomb_width)``."""
PAYLOAD_REFERENCES = ("nominal", "before_change")
"""What a payload from joint torques is measured against (``payload_reference``)."""
EFFORT_KINDS = ("torque", "gravity_compensated", "current")
"""What a robot's ``/joint_states`` effort is (``effort.kind``; :mod:`robodyn_ros.estimation.effort_measurement`)."""

ESTIMATION = (
    P("decimation", int, 1, "Use every n-th joint state (the estimator decimates when 1 kHz is too much).",
      range=(1, 1000)),
    P("use_wrench", bool, True, "Estimate the payload from the wrist F/T sensor (wrench_topic)."),
    P("estimate_bias", bool, True, "Estimate the F/T sensor bias along with the payload."),
    P("base_parameters", bool, True, "Run the joint-torque RLS on the base parameters (publishes them; gives "
      "the payload when use_wrench is false)."),
    P("filter.cutoff", float, 20.0, "Causal Butterworth cutoff for q, v, a, tau and the wrench, Hz.",
      range=(0.1, 500.0)),
    P("filter.order", int, 2, "Causal Butterworth order.", range=(2, 6)),
    P("effort.kind", str, "torque", "What the joint states' effort is: torque (the joint torque, gravity "
      "included: Franka's tau_J, KUKA's measured torque, a simulator), gravity_compensated (the joint torque "
      "minus the robot's gravity compensation: UR drivers reporting torques; g(q) of the URDF and "
      "effort.payload_mass is added back), current (motor currents, A: times effort.torque_constants).",
      choices=EFFORT_KINDS),
    P("effort.torque_constants", list[float], [], "effort.kind current: N m per A per joint (joint order), the "
      "joint torque per motor current (gear ratio included).", range=(1e-6, None)),
    P("effort.filter_cutoff", float, 0.0, "The driver's first-order low-pass filter of the efforts, Hz (0: "
      "unfiltered; lbr_fri_ros2_stack: 10): the same filter is applied to the joint positions and velocities "
      "before the regressor, so that torques and regressor carry the same lag.", range=(0.0, 10000.0)),
    P("effort.payload_mass", float, 0.0, "effort.kind gravity_compensated: the payload mass set on the robot, kg "
      "(its gravity is compensated by the robot too), at effort.payload_com of the wrist link.",
      range=(0.0, 1000.0)),
    P("effort.payload_com", list[float], [0.0, 0.0, 0.0], "Centre of mass of effort.payload_mass in the wrist "
      "link's frame, m."),
    P("effort.check", bool, True, "Check the first seconds of motion against the URDF: efforts far from its "
      "torques in scale or sign (currents read as torques, gravity-compensated efforts read as torques, a wrong "
      "torque constant) stop the estimate with one /diagnostics ERROR naming the likely cause."),
    P("initial_parameters", str, "", "A parameter file of robodyn identify, replay or the estimator's ~/save to "
      "start from: judged over the first 2 s of motion against the URDF and taken only when it predicts the joint "
      "torques better (else refused with a /diagnostics line, and the estimate starts from the URDF); empty: the "
      "URDF."),
    P("forgetting", float, 1.0, "RLS forgetting factor.", range=(0.9, 1.0)),
    P("force_noise", float, 0.5, "F/T force noise std assumed by the RLS, N.", range=(1e-6, None)),
    P("torque_noise", float, 0.05, "F/T torque noise std assumed by the RLS, N m.", range=(1e-6, None)),
    P("effort_noise", float, 0.0, "Joint torque noise std assumed by the base-parameter estimate, N m; 0: "
      "learnt from the data (the residual of the estimate, per joint).", range=(0.0, None)),
    P("effort_noise_per_joint", list[float], [], "Joint torque noise std per joint (joint order), N m; empty: "
      "effort_noise.", range=(1e-6, None)),
    P("coulomb_width", float, COULOMB_WIDTH, "Velocity scale of the Coulomb friction's sign tanh(v / width) in the "
      "base-parameter regressor, rad/s.", range=(1e-9, None)),
    P("payload_reference", str, "before_change", "Payload from joint torques (use_wrench false): the load "
      "explaining the torque residual of the base-parameter estimate held just before the detected change "
      "(before_change), or the change of the last body's parameters from the nominal model (nominal: only "
      "when the model is the robot).", choices=PAYLOAD_REFERENCES),
    P("payload_change_holdoff", float, 0.0, "payload_reference before_change: changes detected within this many "
      "seconds of the first base-parameter update are ignored for the payload (the detector arms itself once "
      "the estimate has converged).", range=(0.0, None)),
    P("change_ratio", float, 4.0, "Joint-torque change detector: a change when the residual variance over "
      "change_time stays this many times the level the estimate has learnt.", range=(1.0, None)),
    P("change_time", float, 0.0, "Joint-torque change detector: averaging time, s (longer than the residual of "
      "a velocity reversal lasts); 0: 3 / filter.cutoff, six samples of independent noise behind the filter.",
      range=(0.0, None)),
    P("payload_mass_std", float, 10.0, "Prior / boost std of the payload mass, kg.", range=(1e-6, None)),
    P("change_threshold", float, 25.0, "CUSUM alarm level h of the wrench payload-change detector.",
      range=(0.0, None)),
    P("change_alarms.count", int, 3, "/diagnostics turn WARN when the payload-change detector reports this many "
      "changes within change_alarms.window seconds: a model that does not fit the robot, or noise levels set "
      "below the real ones, make it alarm again and again (0: off).", range=(0, 1000)),
    P("change_alarms.window", float, 10.0, "Window of change_alarms.count, s (joint-state time).",
      range=(0.1, None)),
    P("payload_publish_std.mass", float, 0.5, "Publishing the payload: while the wrench estimate's mass std "
      "(kg) or first-moment std (payload_publish_std.first_moment) is above its bound the last published "
      "payload is repeated; while only the inertia std is above payload_publish_std.inertia, the mass is "
      "published as a point mass at its centre of mass (0: no bound).", range=(0.0, None)),
    P("payload_publish_std.first_moment", float, 0.1, "Bound on the std of the payload's first moments m c, "
      "kg m (payload_publish_std.mass; 0: no bound).", range=(0.0, None)),
    P("payload_publish_std.inertia", float, 0.02, "Bound on the std of the payload's rotational inertia "
      "entries, kg m^2 (payload_publish_std.mass; 0: no bound).", range=(0.0, None)),
    P("publish_rate", float, 100.0, "Rate of the payload and base-parameter messages "
      "(in joint-state time), Hz.", range=(0.1, 1000.0)),
    P("diagnostics_rate", float, 10.0, "Rate of the estimator's /diagnostics messages (joint-state time, at "
      "most publish_rate), Hz.", range=(0.1, 1000.0)),
    *(P(f"wrench_saturation.{part}", float, 0.0, f"F/T sensor {part} range, {unit}: a wrench with any "
        f"|{symbol}_i| at or beyond it is saturated and kept out of the payload estimate (0: off).",
        range=(0.0, None)) for part, unit, symbol in (("force", "N", "f"), ("torque", "N m", "t"))),
    P("effort_saturation", float, 1.0, "A joint torque at or beyond this fraction of the URDF effort limit is "
      "saturated and kept out of the base-parameter estimate (0: off).", range=(0.0, None)),
    P("time_jump_threshold", float, 0.5, "A stamp more than this many seconds before or after the previous one "
      "is a clock jump (simulation reset, bag loop, gap): filters restart, estimate kept; a repeated or "
      "slightly older stamp is dropped.", range=(1e-3, None)),
    P("filter.max_interval", float, 0.0, "Largest time between two estimator updates (s) for which the filtered "
      "accelerations are trusted (0: 1 / filter.cutoff, one period of the cutoff); after a longer gap (a node that falls behind, a "
      "decimation too coarse for the cutoff) the estimates pause until the filters have settled again.",
      range=(0.0, None)),
)
"""The estimation parameters, in the order the node lists them."""


def estimation_spec(name):
    """The :class:`~robodyn_ros.model.parameter_schema.ParameterSpec` named ``name``."""
    return _BY_NAME[name]


_BY_NAME = {spec.name: spec for spec in ESTIMATION}
