"""The estimate written as a parameter file and read back as ``initial_parameters``: judged on the first
seconds of motion before it is trusted.

The robot is the Panda twin identified from a real robot (not the URDF the estimator starts from), moved along
an analytic exciting trajectory; its joint torques come from the twin's own inverse dynamics and friction (an
independent path from the estimator's regressor), with noise.
"""
import numpy as np
import pytest
import yaml

import robodyn_ros as rd
from estimator_feeds import exciting_trajectory
from robot_data import plant_rnea
from robodyn_ros.estimation.stored_parameters import estimate_document, stored_parameters, write_estimate
from robodyn_ros.identification.results import model_from_parameters, yaml_text
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.plant import load_plant

RATE = 250.0


@pytest.fixture(scope="module")
def robot():
    return load_robot(resolve_node_config("estimator", {}))


@pytest.fixture(scope="module")
def recording(robot):
    """``(t, Q, V, TAU)``: 8 s of the twin at 250 Hz with 0.05 N m torque noise."""
    plant = load_plant("panda_twin", robot.model).model
    t = np.arange(0.0, 8.0, 1.0 / RATE)
    Q, V, A = exciting_trajectory(robot.home, t)
    Q, V, A = robot.home + 0.5 * (Q - robot.home), 0.5 * V, 0.5 * A
    TAU = plant_rnea(plant, Q, V, A) + np.array([rd.friction_torque(plant, v) for v in V])
    TAU += np.random.default_rng(0).normal(0.0, 0.05, TAU.shape)
    return t, Q, V, TAU


def feed(robot, recording, until=None, **config):
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False, **config})
    for ti, q, v, tau in zip(*recording):
        if until is not None and ti >= until:
            break
        est.update(ti, q, v, tau)
    return est


@pytest.fixture(scope="module")
def saved(robot, recording, tmp_path_factory):
    """The estimate after 8 s written by write_estimate, and the estimator it came from."""
    est = feed(robot, recording)
    path = tmp_path_factory.mktemp("saved") / "panda.yaml"
    line = write_estimate(est.snapshot(), str(path), robot="panda")
    assert line.startswith(f"wrote {path}: the estimate at t = 7.99")
    return path, est


def relative_error(model, recording, lo=0.5):
    """Relative joint-torque error of ``model``'s inverse dynamics and friction on the recording from ``lo`` s."""
    t, Q, V, TAU = recording
    sel = (t >= lo) & (np.arange(len(t)) % 4 == 0)
    pred = np.array([rd.rnea(model, q, v, a) + rd.friction_torque(model, v)
                     for q, v, a in zip(Q[sel], V[sel], np.gradient(V, t, axis=0)[sel])])
    return float(np.linalg.norm(TAU[sel] - pred) / np.linalg.norm(TAU[sel]))


def test_the_saved_file_is_identify_s_format_and_predicts_the_robot(robot, recording, saved):
    """The file reads back onto the URDF (names, finite numbers) and predicts the twin's torques within 3 %,
    where the URDF is off by more than 15 % (both on every 4th sample of the recording, by an independent
    inverse dynamics)."""
    path, est = saved
    doc = yaml.safe_load(path.read_text())
    assert {"links", "joints", "base_parameters", "fit", "physical_consistency", "estimate"} <= set(doc)
    assert doc["fit"]["samples"] == est.base_estimator.updates and 0.0 < doc["fit"]["relative_error"] < 0.05
    assert doc["estimate"]["initial_parameters"] is None
    identified = model_from_parameters(robot.model, str(path))
    assert relative_error(identified, recording) < 0.03
    assert relative_error(robot.model, recording) > 0.15


def test_a_file_of_this_robot_is_taken_after_two_seconds_of_motion(robot, recording, saved):
    """Started from the file, the estimator takes it (its prior's mean becomes the file's β) after 2 s of motion
    and predicts the next samples better than the run started from the URDF did at the same time."""
    path, _ = saved
    est = feed(robot, recording, until=2.5, initial_parameters=str(path))
    assert est.stored_check.verdict == "taken", est.stored_check.reason
    eps_file, eps_urdf = est.stored_check.errors
    assert eps_file < 0.5 * eps_urdf
    np.testing.assert_array_equal(est.base_estimator.beta0, stored_parameters(robot.model, est.base, str(path)).beta)
    level, text, values = est.status(est.last_t)
    assert values["initial_parameters"] == "taken" and "refused" not in text


def test_the_file_of_another_tool_or_robot_is_refused(robot, recording, saved, tmp_path):
    """The same robot's file with 3 kg more at the wrist (another tool) is refused after 2 s of motion: the
    prior stays the URDF's and /diagnostics says so, naming the file; a file of another robot (the UR5's) is
    refused at once, naming the link the Panda does not have. Neither raises: the estimate starts from the URDF."""
    path, _ = saved
    doc = yaml.safe_load(path.read_text())
    wrist = doc["links"]["panda_link7"]
    m, c = wrist["mass"], np.array(wrist["com"])
    wrist["com"] = [float(x) for x in (m * c + 3.0 * np.array([0.0, 0.0, 0.15])) / (m + 3.0)]
    wrist["mass"] = m + 3.0
    other = tmp_path / "other_tool.yaml"
    other.write_text(yaml_text(doc))
    est = feed(robot, recording, until=2.5, initial_parameters=str(other))
    assert est.stored_check.verdict == "refused"
    np.testing.assert_array_equal(est.base_estimator.beta0, est.beta_nominal)
    level, text, _ = est.status(est.last_t)
    assert level == "WARN" and f"initial_parameters {other} refused" in text

    ur5 = load_robot(resolve_node_config("estimator", {"robot": "ur5"}))
    ur5_file = tmp_path / "ur5.yaml"
    ur5_file.write_text(yaml_text({"links": {name: {"mass": 1.0, "com": [0.0, 0.0, 0.0], "inertia": [0.01, 0, 0, 0.01, 0, 0.01]}
                                             for name in ur5.model.body_names}, "joints": {}}))
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False, "initial_parameters": str(ur5_file)})
    assert est.stored_check.verdict == "refused"
    assert f"{ur5_file}: link '{ur5.model.body_names[0]}' is not a body of" in est.stored_check.reason


def test_reset_returns_to_the_urdf(robot, recording):
    """reset_estimate: the estimate the URDF's again, no payload, the next samples learnt from there."""
    est = feed(robot, recording, until=3.0)
    assert not np.allclose(est.base_estimator.beta, est.beta_nominal)
    est.reset_estimate()
    np.testing.assert_allclose(est.base_estimator.beta, est.beta_nominal)
    assert est.base_estimator.updates == 0 and np.all(est.payload_parameters() == 0.0)


def test_no_estimate_no_file(robot, tmp_path):
    """Before the first joint-torque sample there is nothing to save: one line, no file."""
    est = rd.OnlineEstimator(robot.model, {"use_wrench": False})
    with pytest.raises(rd.ModelError, match="has taken no joint-torque sample yet"):
        est.snapshot()
    assert list(tmp_path.iterdir()) == []


def test_the_document_is_built_from_a_snapshot_not_the_live_estimator(robot, recording):
    """The node writes from a snapshot in a worker thread while the estimator goes on: the document of a
    snapshot does not change when the estimator learns more after it was taken."""
    est = feed(robot, recording, until=4.0)
    snap = est.snapshot()
    before = estimate_document(snap)["base_parameters"]["values"]
    for ti, q, v, tau in zip(*recording):
        if ti >= 4.0:
            est.update(ti, q, v, tau)
    assert estimate_document(snap)["base_parameters"]["values"] == before
    assert not np.allclose(est.base_estimator.beta, before)
