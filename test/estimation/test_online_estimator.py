"""``OnlineEstimator`` (the library object the estimator node wraps) against the node itself.

* Bit for bit: the node, fed messages through its callbacks (per-message and polled input), publishes
  exactly the payloads and base parameters that ``OnlineEstimator.update`` returns as published for the
  same samples, on a run with a payload change, saturated wrenches, repeated and out-of-order stamps, a
  backward clock jump and decimation 3; its diagnostics carry the same counters.
* Published payloads are physical: with no payload attached the live estimate fluctuates around zero
  (negative masses included), the published one never has a negative mass or a pseudo-inertia that is not
  positive semidefinite.
* Configuration: the defaults are the node's schema defaults; the node's YAML section (nested) is read as
  the node reads it; a wrong type is one error naming the parameter.
"""
import os
import re

import numpy as np
import pytest
import yaml
from rclpy.serialization import deserialize_message, serialize_message
from std_msgs.msg import Float64MultiArray

from conftest import CHECKOUT
from robodyn_ros import OnlineEstimator
from robodyn_ros.estimation.online_estimator import DEFAULTS, estimator_config
from robodyn_ros.identification.payload import is_physical_payload
from robodyn_ros.identification.physical_consistency import pseudo_inertia
from robodyn_ros.ros import estimator_node
from robodyn_ros.ros.messages import (array_to_wrench_stamped, joint_state_to_arrays, make_joint_state,
                                      wrench_stamped_to_array)
from robodyn_ros.ros.node_parameters import ESTIMATOR
from robodyn_ros.ros.parameters import validate
from estimator_feeds import PAYLOAD, segment
from robot_data import plant_rnea

CONFIG = os.path.join(CHECKOUT, "config", "panda.yaml")


class Recorder:
    def __init__(self):
        self.data = []

    def publish(self, msg):
        self.data.append(msg)


def _samples(node, saturate=True):
    """(t, q, v, tau, wrench) of a run with every fault the estimator handles (module docstring)."""
    segments = [segment(node, 0.0, 1.2, np.zeros(10), seed=1), segment(node, 1.2, 1.2, PAYLOAD.pi, seed=2),
                segment(node, 0.3, 0.8, PAYLOAD.pi, seed=3)]          # the clock jumps back by 2.1 s
    rng = np.random.default_rng(11)
    out = []
    for t, Q, V, W in segments:
        tau = 5.0 * rng.normal(size=Q.shape)
        for k in range(len(t)):
            w = W[k].copy()
            if saturate and 80 <= k < 90:
                w[2] = 300.0                      # beyond the 290 N range: saturated
            out.append((float(t[k]), Q[k], V[k], tau[k], w))
            if k in (150, 151):                  # a repeated stamp with wrong values, and an older one
                out.append((float(t[k]), Q[k] + 0.3, V[k], tau[k], w + 50.0))
                out.append((float(t[k - 5]), Q[k] + 0.3, V[k], tau[k], w + 50.0))
    return out


def _payload_message_values(msg):
    i = msg.inertia
    return np.array([i.m, i.com.x, i.com.y, i.com.z, i.ixx, i.ixy, i.ixz, i.iyy, i.iyz, i.izz])


def _expected_message_values(pi, frame):
    from robodyn_ros.ros.messages import inertial_parameters_to_inertia_stamped, make_inertia_stamped
    msg = (inertial_parameters_to_inertia_stamped(0.0, frame, pi) if abs(pi[0]) > 1e-6 else
           make_inertia_stamped(0.0, frame, pi[0], np.zeros(3), np.zeros((3, 3))))
    return _payload_message_values(msg)


def _messages(node, samples):
    link, names = node.robot.wrist_link, list(node.robot.joints)
    return [(array_to_wrench_stamped(t, link, w), make_joint_state(t, names, q, v, tau)) for t, q, v, tau, w in samples]


def _arrays(node, pairs):
    """The samples as the node converts its messages: ``(t, q, v, tau, wrench)`` (stamps in ns)."""
    out = []
    for wrench, state in pairs:
        t, q, v, tau = joint_state_to_arrays(state, node.robot.model.joint_names)
        out.append((t, q, v, tau, wrench_stamped_to_array(wrench)[2]))
        assert wrench_stamped_to_array(wrench)[0] == t
    return out


def _feed(node, pairs, polled):
    if not polled:
        for wrench, state in pairs:
            node._on_wrench(wrench)
            node._on_state(state)
        return
    for start in range(0, len(pairs), 7):
        part = pairs[start:start + 7]
        queues = {id(node.wrench_sub): [serialize_message(w) for w, _ in part],   # polled: CDR bytes
                  id(node.state_sub): [serialize_message(s) for _, s in part]}
        node.take_pending = lambda sub, limit, sequences=None, queues=queues: queues.pop(id(sub), [])
        node._poll_inputs()


@pytest.mark.parametrize("polled", [False, True])
def test_online_estimator_equals_the_node_bit_for_bit(estimator_factory, monkeypatch, polled):
    monkeypatch.setattr(estimator_node, "POLL_BUDGET", float("inf"))
    # the joint torques are noise (this compares the node with the library, not either with a robot): no effort
    # check, which would rightly withhold every base-parameter estimate from such torques
    params = {"base_parameters": True, "decimation": 3, "wrench_saturation.force": 290.0,
              "wrench_saturation.torque": 10.0, "effort.check": False}
    node = estimator_factory(**params)
    payloads, bases = Recorder(), Recorder()
    node.payload_pub, node.base_pub = payloads, bases
    pairs = _messages(node, _samples(node, saturate=not polled))
    _feed(node, pairs, polled)
    samples = _arrays(node, pairs)

    est = OnlineEstimator(node.robot.model, {**estimator_config(yaml.safe_load(open(CONFIG))["estimator"]), **params},
                          wrist_link=node.robot.wrist_link)
    published = [e for e in (est.update(*s) for s in samples) if e.published]
    assert len(published) == len(bases.data) > 100
    got_beta = np.array([deserialize_message(b, Float64MultiArray).data for b in bases.data])
    np.testing.assert_array_equal(got_beta, np.array([e.base_parameters for e in published]))
    expected = [_expected_message_values(e.payload, est.payload_frame) for e in published if e.payload is not None]
    assert len(expected) == len(payloads.data) > 50
    np.testing.assert_array_equal(np.array([_payload_message_values(m) for m in payloads.data]), np.array(expected))
    assert abs(published[-1].payload[0] - PAYLOAD.mass) < 0.1
    last, names = published[-1], list(published[-1].base_parameter_names)
    for j, joint in enumerate(node.robot.model.joint_names):     # friction: those base parameters by name
        for kind in ("viscous", "coulomb", "offset"):
            assert last.friction[kind][j] == last.base_parameters[names.index(f"{kind}_{joint}")]
            assert last.friction_std[kind][j] == last.base_parameters_std[names.index(f"{kind}_{joint}")] > 0
    _, _, node_values = node.diagnostic_status(samples[-1][0])
    _, _, values = published[-1].status
    for key in ("updates", "payload_changes", "dropped_stamps", "time_jumps", "wrench_saturated", "sparse_gaps",
                "payload_mass", "unconverged_publishes", "base_covariance_trace"):
        assert node_values[key] == values[key], key
    assert values["time_jumps"] == 1 and values["dropped_stamps"] == 2 * 2 * 3 * 2 and values["payload_changes"] >= 1
    assert values["wrench_saturated"] == (0 if polled else 30)


def test_published_payload_is_physical_without_a_payload():
    """2 s with nothing on the wrist: the live mass estimate goes negative at some samples; every published
    payload has a non-negative mass and a positive semidefinite pseudo-inertia."""
    from robodyn_ros import Model
    from robodyn_ros.robots import bundled_robot_info
    from estimator_feeds import exciting_trajectory, measured_wrenches
    info = bundled_robot_info("panda")
    model = Model.from_urdf(info["urdf"], locked_joints=dict(info["locked_joints"]))
    est = OnlineEstimator(model, {"base_parameters": False, "payload_publish_std.mass": 0.0,
                                  "payload_publish_std.first_moment": 0.0, "payload_publish_std.inertia": 0.0},
                          wrist_link=info["wrist_link"])
    home = np.zeros(7)
    home[[model.joint_names.index(j) for j in info["arm_joints"]]] = info["home"]
    t = np.arange(500) / 250.0
    Q, V, A = exciting_trajectory(home, t)
    W = measured_wrenches(model, info["wrist_link"], Q, V, A, np.zeros(10), seed=4)
    live, published = [], []
    for k in range(len(t)):
        e = est.update(t[k], Q[k], V[k], None, wrench=W[k])
        live.append(e.payload_estimate[0])
        if e.published:
            published.append(e.payload)
    assert min(live[-200:]) < 0.0, "the scenario must produce negative live masses"
    for pi in published:
        assert pi[0] >= 0.0 and np.linalg.eigvalsh(pseudo_inertia(pi))[0] >= -1e-12 and is_physical_payload(pi)


def test_configuration_follows_the_node_schema(tmp_path):
    schema = {spec.name: spec.default for spec in ESTIMATOR}
    for name, default in DEFAULTS.items():
        assert schema[name] == default, name
    section = yaml.safe_load(open(CONFIG))["estimator"]
    config = estimator_config(section)
    assert config["filter.cutoff"] == section["ros__parameters"]["filter"]["cutoff"]
    assert config["wrench_saturation.force"] == 290.0 and config["decimation"] == 1
    with pytest.raises(ValueError, match="filter.cutoff"):
        estimator_config({"filter": {"cutoff": "fast"}})
    with pytest.raises(ValueError, match="decimation"):
        estimator_config({"decimation": 0})
    # one schema: what the node refuses, the library refuses, with the node's range in the line
    for name, value in (("forgetting", 0.5), ("filter.order", 7)):
        node_errors = validate(ESTIMATOR, {name: value})
        assert node_errors, name
        with pytest.raises(ValueError, match=re.escape(node_errors[0])):
            estimator_config({name: value})
    assert estimator_config({"filter": {"cutoff": 20}})["filter.cutoff"] == 20.0   # an int where a float is due


def test_payload_from_joint_torques_on_the_twin_is_referenced_to_the_estimate_before_the_change():
    """On the Panda twin (a plant that is not the model: the nominal URDF predicts its torques with 18 %
    error), joint torques only, with the estimator's defaults (no noise level, Coulomb width or hold-off given:
    it learns the noise and arms its change detector once converged): a 2 kg point mass 0.15 m out on the last
    body from 7 s (the change detector arms once the estimate has converged, on this motion after about 5.5 s;
    a load attached before is learnt as part of the robot). Referenced to the nominal parameters the payload is
    the model error (mass below -0.3 kg with nothing attached); referenced to the estimate before the detected
    change (``payload_reference: before_change``, the default) it is zero before the change, the change is
    detected once, within 0.5 s, and the 2 kg is found within 5 % after; the noise learnt per joint follows
    the twin's."""
    import robodyn_ros as rd
    from robodyn_ros.identification.payload import point_mass_parameters
    from robodyn_ros.identification.batch_regressor import batch_regressor
    from robodyn_ros.robots import bundled_robot_info
    from robodyn_ros.simulation.plant import load_plant
    from estimator_feeds import exciting_trajectory

    info = bundled_robot_info("panda")
    model = rd.Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    plant = load_plant("panda_twin", model)
    twin, width, sigma = plant.model, plant.coulomb_width, np.asarray(plant.effort_noise)
    t = np.arange(11001) / 1000.0
    Q, V, A = exciting_trajectory(np.asarray(info["home"]), t)
    tau = plant_rnea(twin, Q, V, A)
    tau += twin.viscous * V + twin.coulomb * np.tanh(V / width) + twin.friction_offset
    last = 10 * (model.nbodies - 1)
    pi_payload = point_mass_parameters(2.0, 2.0 * np.array([0.0, 0.0, 0.15]))
    attached = t >= 7.0
    tau[attached] += batch_regressor(model, Q[attached], V[attached], A[attached])[:, :, last:last + 10] @ pi_payload
    tau += np.random.default_rng(3).normal(0.0, sigma, tau.shape)

    config = {"use_wrench": False}
    nominal = OnlineEstimator(model, {**config, "payload_reference": "nominal"})
    referenced = OnlineEstimator(model, config)
    mass_nominal, mass_referenced = {}, {}
    learnt_before = None
    for k in range(len(t)):
        for est, out in ((nominal, mass_nominal), (referenced, mass_referenced)):
            e = est.update(t[k], Q[k], V[k], tau[k])
            if k % 100 == 0:
                out[round(t[k], 1)] = e.payload_estimate[0]
        if k == 6999:
            learnt_before = referenced.effort_std.copy()
    learnt = referenced.effort_std if learnt_before is None else learnt_before
    print(f"\nnoise learnt {np.round(learnt, 4)} N m (filtered residual), the twin's {np.round(sigma, 3)} (raw)")
    assert np.corrcoef(np.log(learnt), np.log(sigma))[0, 1] > 0.8    # the noisy joints are found noisy
    before = [mass_referenced[round(x, 1)] for x in np.arange(5.0, 7.0, 0.1)]
    before_nominal = [mass_nominal[round(x, 1)] for x in np.arange(5.0, 7.0, 0.1)]
    print(f"\nno payload, 5-7 s: referenced {min(before):.3f}..{max(before):.3f} kg, nominal "
          f"{min(before_nominal):.3f}..{max(before_nominal):.3f} kg; with 2 kg at 11 s: {mass_referenced[11.0]:.3f} "
          f"kg (nominal reference {mass_nominal[11.0]:.3f} kg); changes referenced at {referenced.payload_references}")
    assert max(abs(m) for m in before) < 0.05 and max(before_nominal) < -0.3
    assert len(referenced.payload_references) == 1 and 7.0 <= referenced.payload_references[0] < 7.5
    assert len(referenced.payload_events) == 1
    after = [mass_referenced[round(x, 1)] for x in np.arange(8.0, 11.01, 0.1)]
    assert max(abs(m - 2.0) for m in after) < 0.1
    published = referenced.estimate(t[-1], published=True)
    assert published.base_parameters_covariance.shape == (len(published.base_parameters),) * 2
    np.testing.assert_allclose(np.sqrt(np.diag(published.base_parameters_covariance)), published.base_parameters_std)


def test_per_joint_effort_noise_needs_one_value_per_joint():
    import robodyn_ros as rd
    from robodyn_ros.robots import bundled_robot_info
    info = bundled_robot_info("panda")
    model = rd.Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    assert estimator_config({"effort_noise": [0.1] * 7})["effort_noise_per_joint"] == [0.1] * 7
    with pytest.raises(ValueError, match="effort_noise_per_joint: 3 values for 7 joints"):
        OnlineEstimator(model, {"use_wrench": False, "effort_noise_per_joint": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="effort_noise_per_joint"):
        estimator_config({"effort_noise_per_joint": [0.1, -1.0]})
    with pytest.raises(ValueError, match="payload_reference"):
        estimator_config({"payload_reference": "previous"})
