"""Efforts as drivers report them (currents, gravity-compensated, filtered torques) turned into joint torques,
and the check that catches efforts that are not what the estimator was told, before anything learned from them
is published.

The robot is the Panda twin identified from a real robot (not the URDF the estimator starts from), moved along
an analytic exciting trajectory; its joint torques come from the twin's own inverse dynamics and friction
(an independent path), with noise, then reported as each driver would.
"""
import numpy as np
import pytest

import robodyn_ros as rd
from estimator_feeds import exciting_trajectory, lowpass
from robot_data import plant_gravity, plant_rnea
from robodyn_ros.estimation.effort_measurement import EffortMeasurement
from robodyn_ros.estimation.online_estimator import estimator_config
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.plant import load_plant

RATE = 250.0
TORQUE_CONSTANTS = np.array([10.0, 12.0, 9.0, 11.0, 8.0, 8.0, 7.0])   # N m/A at the joint


@pytest.fixture(scope="module")
def robot():
    return load_robot(resolve_node_config("estimator", {}))


@pytest.fixture(scope="module")
def recording(robot):
    """``(t, Q, V, TAU, G)``: 3.2 s of the twin at 250 Hz, its joint torques with 0.05 N m noise, and the
    URDF's gravity torques (what a robot compensating gravity with its own model removes)."""
    model = robot.model
    plant = load_plant("panda_twin", model).model
    t = np.arange(0.0, 3.2, 1.0 / RATE)
    Q, V, A = exciting_trajectory(robot.home, t)
    Q, V, A = robot.home + 0.5 * (Q - robot.home), 0.5 * V, 0.5 * A
    TAU = plant_rnea(plant, Q, V, A) + np.array([rd.friction_torque(plant, v) for v in V])
    TAU += np.random.default_rng(0).normal(0.0, 0.05, TAU.shape)
    G = plant_gravity(model, Q)
    return t, Q, V, TAU, G



def run(robot, t, Q, V, E, **config):
    """The estimator (joint torques only) over the recording; returns it and the time of the check's verdict."""
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False, **config})
    decided = None
    for ti, q, v, e in zip(t, Q, V, E):
        est.update(ti, q, v, e)
        if decided is None and est.effort_check.verdict != "pending":
            decided = ti
    return est, decided


def test_efforts_become_joint_torques(robot):
    """Currents times the torque constants; gravity-compensated efforts plus the URDF's gravity and the set
    payload's (a point mass at the wrist, against the RNEA of the URDF with that mass added); the driver's
    first-order filter with the step response ``1 - exp(-2π f_c t)``."""
    from robodyn_ros.control.payload_update import payload_body_parameters
    model = robot.model
    q = robot.home + 0.1
    effort = np.linspace(-1.0, 1.0, model.nv)
    config = estimator_config({"effort.kind": "current", "effort.torque_constants": list(TORQUE_CONSTANTS)})
    np.testing.assert_allclose(EffortMeasurement(model, config, "panda_link8").torque(q, effort),
                               TORQUE_CONSTANTS * effort)
    with pytest.raises(ValueError, match="effort.torque_constants: effort.kind current needs one torque constant"):
        EffortMeasurement(model, estimator_config({"effort.kind": "current"}), "panda_link8")
    config = estimator_config({"effort.kind": "gravity_compensated", "effort.payload_mass": 1.5,
                               "effort.payload_com": [0.0, 0.02, 0.08]})
    body, pi_payload = payload_body_parameters(model, "panda_link8", 1.5, [0.0, 0.02, 0.08], np.zeros((3, 3)))
    pi = model.inertial_parameters()
    pi[10 * body:10 * body + 10] += pi_payload
    g_robot = rd.gravity_torque(model.with_inertial_parameters(pi), q)
    np.testing.assert_allclose(EffortMeasurement(model, config, "panda_link8").torque(q, effort), effort + g_robot,
                               atol=1e-9)
    assert np.abs(g_robot - rd.gravity_torque(model, q)).max() > 0.5        # the payload is in it
    lag = EffortMeasurement(model, estimator_config({"effort.filter_cutoff": 10.0}), "panda_link8")
    ones, zero = np.ones(model.nv), np.zeros(model.nv)
    lag.lag(0.0, zero, zero)
    for k in range(1, 51):
        q_l, v_l = lag.lag(k * 1e-3, ones, ones)
    np.testing.assert_allclose(q_l, 1.0 - np.exp(-2.0 * np.pi * 10.0 * 0.05), rtol=1e-12)


MISMATCHES = {
    "currents read as torques": (lambda t, TAU, G: TAU / TORQUE_CONSTANTS, {}, "effort.kind: current"),
    "gravity-compensated read as torques": (lambda t, TAU, G: TAU - G, {}, "effort.kind: gravity_compensated"),
    "torques read as gravity-compensated": (lambda t, TAU, G: TAU, {"effort.kind": "gravity_compensated"},
                                            "effort.kind: torque"),
    "a wrong torque constant": (lambda t, TAU, G: TAU / TORQUE_CONSTANTS,
                                {"effort.kind": "current",
                                 "effort.torque_constants": list(TORQUE_CONSTANTS * [1, 1, 1, 3, 1, 1, 1])},
                                "panda_joint4"),
}


@pytest.mark.parametrize("case", list(MISMATCHES))
def test_a_mismatch_is_caught_within_two_seconds_of_motion_and_nothing_is_published(robot, recording, case):
    t, Q, V, TAU, G = recording
    efforts, config, advice = MISMATCHES[case]
    est, decided = run(robot, t, Q, V, efforts(t, TAU, G), **config)
    check = est.effort_check
    assert check.verdict == "mismatch", (case, check.values())
    assert decided <= t[0] + 2.0 + est.settle_time + 0.3, decided
    assert advice in check.reason, check.reason
    assert est.withheld and est.publish() is None
    level, message, values = est.status(t[-1])
    assert level == "ERROR" and "nothing learned from the joint torques is published" in message
    assert values["effort_check"] == "mismatch"


MATCHES = {
    "torques": (lambda t, TAU, G: TAU, {}),
    "currents with their constants": (lambda t, TAU, G: TAU / TORQUE_CONSTANTS,
                                      {"effort.kind": "current", "effort.torque_constants": list(TORQUE_CONSTANTS)}),
    "gravity-compensated, so declared": (lambda t, TAU, G: TAU - G, {"effort.kind": "gravity_compensated"}),
    "filtered at 10 Hz, so declared": (lambda t, TAU, G: lowpass(t, TAU, 10.0), {"effort.filter_cutoff": 10.0}),
    "the ur profile's gravity-compensated efforts": (lambda t, TAU, G: TAU - G, {"driver": "ur"}),
    "the lbr profile's filtered torques": (lambda t, TAU, G: lowpass(t, TAU, 10.0), {"driver": "lbr"}),
}


@pytest.mark.parametrize("case", list(MATCHES))
def test_efforts_as_declared_pass_the_check(robot, recording, case):
    t, Q, V, TAU, G = recording
    efforts, config = MATCHES[case]
    est, _ = run(robot, t, Q, V, efforts(t, TAU, G), **config)
    assert est.effort_check.verdict == "consistent", (case, est.effort_check.reason)
    assert not est.withheld
    assert 0.7 < est.effort_check.scale < 1.3


def test_without_the_check_currents_are_learnt_as_a_robot_a_tenth_as_heavy(robot, recording):
    """What the check prevents: with ``effort.check: false`` the currents are fitted, published, and the learnt
    gravity at home is about 1/k of the robot's."""
    t, Q, V, TAU, G = recording
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False, "effort.check": False})
    for ti, q, v, e in zip(t, Q, V, TAU / TORQUE_CONSTANTS):
        est.update(ti, q, v, e)
    assert est.effort_check is None and not est.withheld
    base = est.base
    z = np.zeros(robot.model.nv)
    Y = base.regressor(robot.model, robot.home[None], z[None], z[None])[0]
    learnt, nominal = Y @ est.base_estimator.beta, Y @ est.beta_nominal
    joint = np.argmax(np.abs(nominal))
    assert abs(learnt[joint]) < 0.3 * abs(nominal[joint]), (learnt, nominal)
