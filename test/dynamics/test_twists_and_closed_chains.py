"""Kwon: derivatives w.r.t. joint twists (Algorithm 1), kinematic calibration, the spherical five-bar."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close, erd_path
from robodyn_ros.identification.calibration import calibrate_joint_twists, link_pose, pose_error, pose_twist_jacobian
from robodyn_ros.dynamics.closed_chain import (SphericalFiveBar, five_bar_actuator_torque_derivatives,
                                               five_bar_actuator_torques)
from robodyn_ros.dynamics.twist_derivatives import joint_twists, twist_derivatives, with_twist_corrections

ARMS = {"ur5": ("ur_description/urdf/ur5_robot.urdf", {}, "tool0"),
        "panda": ("panda_description/urdf/panda.urdf", {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}, "panda_hand")}


@pytest.fixture(params=list(ARMS))
def arm(request):
    path, locked, tool = ARMS[request.param]
    return rd.Model.from_urdf(erd_path(path), locked_joints=locked).with_armature(0.1), tool


def central(f, x, h):
    return np.column_stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def test_twist_derivatives_match_perturbed_models(arm, rng):
    model, _ = arm
    model = with_twist_corrections(model, rng.normal(size=(model.nbodies, 6)) * 0.05)  # generic screw axes
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    de, dq, dv, da = twist_derivatives(model, q, v, a)
    tau_eta = lambda e: rd.rnea(with_twist_corrections(model, e.reshape(model.nbodies, 6)), q, v, a)
    assert_close(de, central(tau_eta, np.zeros(6 * model.nbodies), 1e-5), rtol=1e-7, what="dtau/deta")
    assert_close(dq, central(lambda x: rd.rnea(model, x, v, a), q, 1e-5), rtol=1e-7, what="dtau/dq")
    assert_close(dv, central(lambda x: rd.rnea(model, q, x, a), v, 1e-5), rtol=1e-7, what="dtau/dv")
    assert_close(da, rd.crba(model, q), rtol=1e-12, what="dtau/da = M")


def test_twist_corrections_keep_joint_constraints(arm, rng):
    model, _ = arm
    A = joint_twists(with_twist_corrections(model, rng.normal(size=(model.nbodies, 6)) * 0.1))
    assert_close(np.linalg.norm(A[:, 3:], axis=1), np.ones(model.nbodies), rtol=1e-14)
    assert_close(np.einsum("ij,ij->i", A[:, 3:], A[:, :3]), np.zeros(model.nbodies), atol=1e-14)


def test_pose_jacobian(arm, rng):
    model, tool = arm
    q = model.random_configuration(rng)
    f = lambda e: pose_error(link_pose(with_twist_corrections(model, e.reshape(model.nbodies, 6)), q, tool),
                             link_pose(model, q, tool))
    assert_close(pose_twist_jacobian(model, q, tool), central(f, np.zeros(6 * model.nbodies), 1e-6), rtol=1e-8)


def test_calibration_recovers_axis_errors(arm, rng):
    """Axis errors of 1e-2 rad (and 1e-2 m offsets) recovered to 1e-6 from torques and tool poses."""
    nominal, tool = arm
    truth = with_twist_corrections(nominal, rng.normal(size=(nominal.nbodies, 6)) * 1e-2)
    err0 = np.abs(joint_twists(truth) - joint_twists(nominal)).max()
    assert err0 > 5e-3
    torques, poses = [], []
    for _ in range(25):
        q, v, a = truth.random_configuration(rng), rng.normal(size=truth.nv), rng.normal(size=truth.nv)
        torques.append((q, v, a, rd.rnea(truth, q, v, a)))
        poses.append((q, link_pose(truth, q, tool)))
    result = calibrate_joint_twists(nominal, torques, poses, tool)
    assert np.abs(joint_twists(result.model) - joint_twists(truth)).max() < 1e-6
    assert result.torque_rms < 1e-8 and result.pose_rms < 1e-10


@pytest.fixture
def five_bar():
    axes = [[0, 0, 1], [1, 0, 1], [0, 1, 1], [0.3, 0, 1], [-1, 1, 1]]
    coms = [[0.1, 0, 0.2], [0, 0.1, 0.2], [0.1, 0.1, 0.1], [-0.1, 0, 0.2]]
    return SphericalFiveBar(axes, [1.0, 0.8, 0.6, 0.9], coms, [0.01, 0.012, 0.008, 0.01])


def test_five_bar_closure_and_passive_jacobian(five_bar):
    th = five_bar.solve_passive([0.2, -0.1])
    assert np.linalg.norm(five_bar.closure_residual(th)) < 1e-12
    ta = np.array([0.2, -0.1])
    fd = central(lambda x: five_bar.solve_passive(x, th[[1, 2, 4]])[[1, 2, 4]], ta, 1e-5)
    assert_close(five_bar.passive_jacobian(th), fd, rtol=1e-7)


def test_five_bar_projection_balances_power(five_bar):
    """τ_pr · θ̇_a = d/dt (kinetic + potential energy) along a smooth motion of the closed chain."""
    model = five_bar.tree
    ta = lambda t: np.array([0.2 + 0.3 * np.sin(1.3 * t), -0.1 + 0.2 * np.sin(0.9 * t + 0.4)])
    tad = lambda t: np.array([0.39 * np.cos(1.3 * t), 0.18 * np.cos(0.9 * t + 0.4)])
    tadd = lambda t: np.array([-0.507 * np.sin(1.3 * t), -0.162 * np.sin(0.9 * t + 0.4)])
    guess = [np.zeros(3)]

    def state(t):
        th = five_bar.solve_passive(ta(t), guess[0])
        guess[0] = th[[1, 2, 4]]
        thd, thdd = five_bar.passive_rates(th, tad(t), tadd(t))
        return th, thd, thdd

    def energy(t):
        th, thd, _ = state(t)
        pot = sum(-model.gravity @ (pi[0] * p + R @ pi[1:4]) for (R, p), pi in zip(rd.forward_kinematics(model, th[:4]), model.inertias))
        return 0.5 * thd[:4] @ rd.crba(model, th[:4]) @ thd[:4] + pot

    h = 1e-4
    for t in (0.3, 1.1, 2.0):
        th, thd, thdd = state(t)
        power = five_bar_actuator_torques(five_bar, th, thd, thdd) @ tad(t)
        dE = (energy(t - 2 * h) - 8 * energy(t - h) + 8 * energy(t + h) - energy(t + 2 * h)) / (12 * h)
        assert abs(power - dE) < 1e-7 * max(1.0, abs(dE))
        # the passive accelerations are the time derivatives of the passive rates
        thd_fd = (state(t + h)[1] - state(t - h)[1]) / (2 * h)
        assert_close(thdd, thd_fd, rtol=1e-6)


def test_five_bar_torque_derivative_eq14(five_bar, rng):
    th = five_bar.solve_passive([0.2, -0.1])
    thd, thdd = rng.normal(size=5), rng.normal(size=5)
    x = np.concatenate([th, thd, thdd])
    fd = central(lambda x: five_bar_actuator_torques(five_bar, x[:5], x[5:10], x[10:]), x, 1e-6)
    assert_close(five_bar_actuator_torque_derivatives(five_bar, th, thd, thdd), fd, rtol=1e-8)
