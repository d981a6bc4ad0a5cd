"""Torques a driver low-pass filtered (lbr_fri_ros2_stack: 10 Hz by default) and read as unfiltered are caught by
the effort check's :class:`~robodyn_ros.estimation.effort_check.DriverFilterTest` before anything learned from
them is published; unfiltered torques of plants that differ from their URDF (perturbed inertias, friction and the
rotor inertia a URDF lacks) are not, and neither are the real Panda's (Gaz et al. 2019) with the estimator's
defaults.

The plants are drawn by :func:`~robodyn_ros.simulation.perturbed_plant.perturbed_plant` around three arms (the
bundled UR5 and iiwa, example-robot-data's UR3, whose light wrists carry rotor inertia comparable to their
links'); their joint torques come from the plant's own inverse dynamics and friction with 0.05 N m of noise,
along a two-sine motion of each joint, then filtered as the driver does.
"""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import erd_path
from robodyn_ros.estimation.effort_check import FILTER_EVIDENCE
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.plant import load_plant

RATE = 250.0
NOISE = 0.05               # N m
DURATION = 3.2             # s: 2 s of motion for the check, after the estimator's settling time


def two_sines(home, t):
    """q, v, a (N, nv): two sines per joint around ``home`` (0.17 and 0.08 rad, 0.31-1.5 Hz)."""
    j = np.arange(len(home))
    out = [np.broadcast_to(home, (len(t), len(home))).copy(), np.zeros((len(t), len(home))),
           np.zeros((len(t), len(home)))]
    for amp, freq, phase in ((0.175, 0.31 + 0.07 * j, 0.5 * j), (0.075, 0.83 + 0.11 * j, 1.3 * j)):
        w = 2 * np.pi * freq
        s, c = np.sin(w * t[:, None] + phase), np.cos(w * t[:, None] + phase)
        out[0] += amp * s
        out[1] += amp * w * c
        out[2] -= amp * w * w * s
    return out


def lowpass(t, X, cutoff):
    """A driver's first-order low-pass filter of ``X`` (N, nv) sampled at ``t``."""
    Y = np.array(X, dtype=float)
    for k in range(1, len(t)):
        alpha = 1.0 - np.exp(-2.0 * np.pi * cutoff * (t[k] - t[k - 1]))
        Y[k] = Y[k - 1] + alpha * (X[k] - Y[k - 1])
    return Y


@pytest.fixture(scope="module", params=["ur5", "iiwa", "ur3"])
def robot(request):
    robot = (request.param if request.param != "ur3" else erd_path("ur_description/urdf/ur3_robot.urdf"))
    return load_robot(resolve_node_config("estimator", {"robot": robot}))


def recording(robot, seed):
    """``(t, Q, V, TAU)`` of the plant ``perturbed:SEED`` around ``robot``."""
    plant = load_plant(f"perturbed:{seed}", robot.model).model
    t = np.arange(0.0, DURATION, 1.0 / RATE)
    Q, V, A = two_sines(robot.home, t)
    TAU = np.array([rd.rnea(plant, q, v, a) + rd.friction_torque(plant, v) for q, v, a in zip(Q, V, A)])
    return t, Q, V, TAU + np.random.default_rng(seed).normal(0.0, NOISE, TAU.shape)


def check(robot, t, Q, V, E, **config):
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False, **config})
    for ti, q, v, e in zip(t, Q, V, E):
        est.update(ti, q, v, e)
    return est


@pytest.mark.parametrize("seed", [0, 1])
def test_filtered_torques_read_as_unfiltered_are_caught_and_unfiltered_ones_pass(robot, seed):
    t, Q, V, TAU = recording(robot, seed)
    plain = check(robot, t, Q, V, TAU).effort_check
    assert plain.verdict == "consistent", plain.reason
    assert plain.filter_evidence < 1.0, plain.values()

    filtered = lowpass(t, TAU, 10.0)
    est = check(robot, t, Q, V, filtered)
    caught = est.effort_check
    assert caught.verdict == "mismatch", caught.values()
    assert caught.filter_evidence > FILTER_EVIDENCE
    assert "set effort.filter_cutoff to the driver's cutoff" in caught.reason, caught.reason
    assert est.withheld and est.publish() is None

    declared = check(robot, t, Q, V, filtered, **{"effort.filter_cutoff": 10.0}).effort_check
    assert declared.verdict == "consistent", declared.reason


def test_the_real_panda_torques_are_not_taken_for_filtered_ones(panda_log):
    """The real robot's ``tau_J`` (measured at 1 kHz, not filtered by the driver) with the estimator's defaults:
    the check passes them, the unfiltered hypothesis fitting at least as well as the filtered one."""
    t, q, v, tau = panda_log
    robot = load_robot(resolve_node_config("estimator", {}))
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False})
    for k in range(len(t)):
        est.update(t[k], q[k], v[k], tau[k])
        if est.effort_check.verdict != "pending":
            break
    assert est.effort_check.verdict == "consistent", est.effort_check.reason
    assert est.effort_check.filter_evidence < FILTER_EVIDENCE, est.effort_check.values()
