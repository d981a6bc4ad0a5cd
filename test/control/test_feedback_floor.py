"""Each joint's position feedback overcomes the largest friction of a joint of its size
(robodyn_ros.dynamics.torque_scale.feedback_stiffness_floor): the floor's value, the computed-torque law with it,
and the UR10 of example-robot-data, whose light wrists (no armature in the URDF) stick under gains from the
model's inertia alone, adapting on a plant no development run used."""
import os

import numpy as np
import pytest

from conftest import erd_path
from robodyn_ros.cli.main import main
from robodyn_ros.control.base_parameter_control import BaseParameterComputedTorque
from robodyn_ros.dynamics.torque_scale import FRICTION_BOUND, feedback_stiffness_floor
from robodyn_ros.identification.base_parameters import compute_base_parameters
from robodyn_ros.robots import bundled_robot_info
import robodyn_ros as rd


def test_the_floor_is_the_friction_bound_over_the_error_and_adds_a_fixed_inertia_to_the_feedback():
    model = rd.Model.from_urdf(bundled_robot_info("ur5")["urdf"])
    floor = feedback_stiffness_floor(model, 0.05)
    assert np.allclose(floor, FRICTION_BOUND * np.asarray(model.effort_limit) / 0.05)
    assert np.array_equal(feedback_stiffness_floor(model, 0.0), np.zeros(model.nv))
    base = compute_base_parameters(model, coulomb_width=0.02)
    q0 = np.array([0.0, -1.2, 1.4, -1.5, -1.5, 0.3])
    plain = BaseParameterComputedTorque(model, base)
    floored = BaseParameterComputedTorque(model, base, min_stiffness=floor, q_ref=q0,
                                          dynamics=plain.dynamics)
    M = np.diag(plain.dynamics.mass_matrix(q0, plain.beta))
    assert np.allclose(floored.D, np.maximum(floor / 400.0 - M, 0.0))
    assert floored.D[:5].max() == 0.0 < floored.D[5]      # wrist_3 only: its kp M is below the floor
    rng = np.random.default_rng(1)
    q, v = q0 + rng.normal(0, 1e-3, 6), rng.normal(0, 1e-2, 6)
    q_d, v_d, a_d = q0, np.zeros(6), np.zeros(6)
    tau_plain, _ = plain.compute(q, v, q_d, v_d, a_d)
    tau_floored, _ = floored.compute(q, v, q_d, v_d, a_d)
    assert np.allclose(tau_floored - tau_plain, floored.D * (-40.0 * (v - v_d) - 400.0 * (q - q_d)), atol=1e-12)


def test_the_ur10s_wrists_adapt_with_the_floor_on_a_plant_no_development_run_used(tmp_path):
    """The UR10 (``robodyn config`` with the README's home) on ``perturbed:31`` under computed torque: with gains
    from the inertia alone the wrists stick and the nominal loop tracks to 0.2 rad RMS; with the default floor
    the nominal loop tracks more than 5 times better, the adapted loop 3 times better still before the payload
    and better than without the floor, no second from 1 s is worse than 1.2 times the nominal loop's."""
    from robodyn_ros.cli.demo_robot import demo_robot
    from robodyn_ros.simulation.adaptive_loop import AdaptiveLoopConfig, twin_experiment
    from robodyn_ros.simulation.plant import load_plant

    urdf = erd_path("ur_description/urdf/ur10_robot.urdf")
    if not os.path.isfile(urdf):
        pytest.skip(f"{urdf} missing from example-robot-data")
    robot_file = tmp_path / "ur10.yaml"
    assert main(["config", urdf, "--home", "0,-1.571,1.571,-1.571,-1.571,0", "--output", str(robot_file)]) == 0
    setup = demo_robot(str(robot_file), str(tmp_path))
    plant = load_plant("perturbed:31", setup.model)
    reports = {}
    for error in (0.0, AdaptiveLoopConfig.stiffness_error):
        config = AdaptiveLoopConfig(controller="computed_torque", duration=15.0, attach_time=7.5,
                                    payload_link=setup.robot.wrist_link, kp=setup.config["kp"], kd=setup.config["kd"],
                                    stiffness_error=error)
        reports[error], _, _ = twin_experiment(setup.model, plant, setup.reference, config)
    inertia_only, floored = reports[0.0], reports[AdaptiveLoopConfig.stiffness_error]
    print(f"\nratio inertia only {inertia_only['tracking_ratio']:.2f} (nominal {inertia_only['tracking_rms_nominal']:.3g}"
          f" rad), with the floor {floored['tracking_ratio']:.2f} (nominal {floored['tracking_rms_nominal']:.3g} rad); "
          f"worst second {floored['worst_window_ratio']:.3f}")
    assert floored["tracking_rms_nominal"] < inertia_only["tracking_rms_nominal"] / 5.0
    assert floored["tracking_ratio"] >= 3.0
    assert floored["tracking_rms_adapted"] < inertia_only["tracking_rms_adapted"]
    assert floored["worst_window_ratio"] <= 1.2, floored["window_ratios"]
    assert floored["payload_time_to_5_percent"] is not None and floored["payload_time_to_5_percent"] <= 3.0
    assert floored["non_finite_commands"] == 0
