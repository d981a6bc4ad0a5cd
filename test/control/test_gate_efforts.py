"""The controllers' parameter gate reads ``/joint_states`` effort as the driver profile says, as the estimator
does: a UR's gravity-compensated efforts and a KUKA LBR's 10-Hz filtered torques give the gate the same samples
as the joint torques they stand for. Without it the gate judged the estimator's estimates (of whole joint
torques) against efforts without gravity: on a perturbed UR5 under ``driver: ur`` over DDS, one estimate was
applied in 15 s, at 8.7 s, and the adapted loop tracked as the nominal one (ratio 1.00, 37.9 under ``generic``).

The robot is the Panda twin (identified from a real robot), moved along an analytic motion at 1 kHz; its joint
torques come from its own inverse dynamics and friction."""
import numpy as np
import pytest

import robodyn_ros as rd
from estimator_feeds import exciting_trajectory, lowpass
from robot_data import plant_gravity, plant_rnea
from robodyn_ros.control.base_parameter_update import BaseParameterUpdate, effort_measurement
from robodyn_ros.identification.base_parameters import compute_base_parameters
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.plant import load_plant

RATE = 1000.0


@pytest.fixture(scope="module")
def motion():
    """``(robot, base, t, Q, V, TAU, G)``: 1.5 s of the twin's motion, its joint torques, the URDF's gravity."""
    robot = load_robot(resolve_node_config("inverse_dynamics", {}))
    model = robot.model
    plant = load_plant("panda_twin", model).model
    t = np.arange(0.0, 1.5, 1.0 / RATE)
    Q, V, A = exciting_trajectory(robot.home, t)
    TAU = plant_rnea(plant, Q, V, A) + np.array([rd.friction_torque(plant, v) for v in V])
    G = plant_gravity(model, Q)
    return robot, compute_base_parameters(model, coulomb_width=0.02), t, Q, V, TAU, G



def gate_window(robot, base, t, Q, V, E, measurement=None):
    """The gate's samples ``(Y stacked, τ stacked)`` after feeding ``(t, Q, V, E)`` to a BaseParameterUpdate."""
    update = BaseParameterUpdate(robot.model, base, measurement=measurement)
    try:
        for sample in zip(t, Q, V, E):
            update.observe(*sample)
        return np.array(update.gate._Y), np.array(update.gate._tau)
    finally:
        update.close()


def test_each_profile_sets_what_the_controllers_read_as_effort(motion):
    robot = motion[0]
    for node in ("inverse_dynamics", "mpc"):
        kinds = {driver: effort_measurement(robot, resolve_node_config(node, {"driver": driver}))
                 for driver in ("generic", "franka", "ur", "lbr")}
        assert kinds["generic"] is None and kinds["franka"] is None
        assert kinds["ur"].kind == "gravity_compensated" and kinds["ur"].cutoff == 0.0
        assert kinds["lbr"].kind == "torque" and kinds["lbr"].cutoff == 10.0
        # one by one: a UR whose driver reports currents
        config = resolve_node_config(node, {"driver": "ur", "effort.kind": "current",
                                            "effort.torque_constants": [10.0] * 7})
        assert effort_measurement(robot, config).kind == "current"


def test_gravity_compensated_efforts_give_the_gate_the_joint_torques(motion):
    robot, base, t, Q, V, TAU, G = motion
    config = resolve_node_config("inverse_dynamics", {"driver": "ur", "use_base_parameters": True})
    Y_ref, tau_ref = gate_window(robot, base, t, Q, V, TAU)
    Y, tau = gate_window(robot, base, t, Q, V, TAU - G, effort_measurement(robot, config))
    assert len(tau_ref) > 50
    np.testing.assert_allclose(Y, Y_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tau, tau_ref, rtol=1e-9, atol=1e-9 * np.abs(tau_ref).max())
    # read as they come, they are not (what the gate judged on before the profile said what they are)
    _, tau_raw = gate_window(robot, base, t, Q, V, TAU - G)
    assert np.abs(tau_raw - tau_ref).max() > 0.1 * np.abs(tau_ref).max()


def test_filtered_torques_are_judged_against_the_motion_through_the_same_filter(motion):
    robot, base, t, Q, V, TAU, _ = motion
    config = resolve_node_config("mpc", {"driver": "lbr", "use_base_parameters": True})
    filtered = lowpass(t, TAU, 10.0)
    Y_ref, tau_ref = gate_window(robot, base, t, lowpass(t, Q, 10.0), lowpass(t, V, 10.0), filtered)
    Y, tau = gate_window(robot, base, t, Q, V, filtered, effort_measurement(robot, config))
    np.testing.assert_allclose(Y, Y_ref, rtol=1e-9, atol=1e-9 * np.abs(Y_ref).max())
    np.testing.assert_allclose(tau, tau_ref, rtol=1e-9, atol=1e-9 * np.abs(tau_ref).max())


def test_the_gate_samples_the_same_stretch_of_time_at_a_drivers_500_hz(motion):
    """The gate's window and warm-up are counted in its samples: taken every 10 ms of joint-state time at 1 kHz
    and at 500 Hz alike (every 10th state at 1 kHz, every 5th at 500 Hz), a 500-Hz driver's first estimate is not
    judged twice as late. (Every 10th state at 500 Hz: a UR5 and an iiwa under their drivers had their first
    estimate applied at 8.7 s, under generic at 4.2 s.)"""
    robot, base, t, Q, V, TAU, _ = motion
    fast = gate_window(robot, base, t, Q, V, TAU)[1]
    slow = gate_window(robot, base, t[::2], Q[::2], V[::2], TAU[::2])[1]
    assert len(fast) > 50 and abs(len(slow) - len(fast)) <= 1, (len(fast), len(slow))
