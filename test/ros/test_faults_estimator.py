"""Fault injection on the estimator node (issue #9; docs/FAULTS.md): a payload removed as well
as added, a saturating F/T sensor, and joint-state time that repeats, goes out of order or jumps back.

The node runs in-process in an isolated ROS domain and its callbacks are fed messages directly (no DDS
transport: the faults are about what the node does with the samples, and this keeps the runs exact and
fast). The measurements come from an independent path: the NumPy batch body-wrench regressor
(:func:`robodyn_ros.identification.batch_regressor.batch_body_wrench_regressor`, checked against Pinocchio
in test_identification) on an analytic exciting trajectory, plus a sensor bias and Gaussian noise; the
node estimates with its compiled sensor-wrench kernel behind a causal filter.
"""
import numpy as np

from estimator_feeds import MASS_TOL, PAYLOAD, RATE, exciting_trajectory, feed, segment, settling_time
from robodyn_ros.ros.messages import array_to_wrench_stamped, make_joint_state


def test_payload_added_then_removed_is_detected_and_reestimated(estimator_factory):
    """0 kg -> 2 kg at t = 4 s -> 0 kg at t = 8 s (the load is put down): both changes are detected within
    0.1 s and reported in the diagnostics, and the mass estimate settles within 0.1 kg of the new payload
    (2 kg, then 0 kg) within 0.5 s and stays there; the other parameters follow (first moment within
    0.01 kg m)."""
    node = estimator_factory()
    none = np.zeros(10)
    stamps, masses = [], []
    phases = ((0.0, none), (4.0, PAYLOAD.pi), (8.0, none))
    for i, (t0, pi) in enumerate(phases):
        s, m = feed(node, *segment(node, t0, 4.0, pi, seed=i))
        stamps.append(s)
        masses.append(m)
        if i == 0:
            assert abs(node.estimator.payload_parameters()[0]) < MASS_TOL and not node.estimator.payload_events
        if i == 1:
            assert_payload_close(node.estimator.payload_parameters(), PAYLOAD.pi)
            level, text, values = node.diagnostic_status(4.0 + 0.5)
            assert values["payload_changes"] == 1 and "payload change detected" in text
            assert abs(values["last_payload_change_mass_before"]) < MASS_TOL
    stamps, masses = np.concatenate(stamps), np.concatenate(masses)
    events = [t for t, _ in node.estimator.payload_events]
    print("payload events", node.estimator.payload_events)
    added = [t for t in events if 4.0 <= t < 8.0]
    removed = [t for t in events if t >= 8.0]
    assert added and added[0] - 4.0 <= 0.1 and removed and removed[0] - 8.0 <= 0.1, events
    assert len(events) <= 4, events                 # no alarm storm
    assert all(t >= 4.0 for t in events)            # no false alarm while the payload does not change
    t_add = settling_time(stamps, masses, PAYLOAD.mass, 4.0, 8.0)
    t_remove = settling_time(stamps, masses, 0.0, 8.0, 12.0)
    print(f"settling to within {MASS_TOL} kg: added {t_add:.3f} s, removed {t_remove:.3f} s")
    assert t_add <= 0.5 and t_remove <= 0.5
    assert_payload_close(node.estimator.payload_parameters(), np.zeros(10))
    level, text, values = node.diagnostic_status(stamps[-1])
    assert values["payload_changes"] == len(events) and values["last_payload_change"] == events[-1]
    assert abs(values["last_payload_change_mass_before"] - PAYLOAD.mass) < 0.5


def assert_payload_close(pi, expected):
    assert abs(pi[0] - expected[0]) <= MASS_TOL, (pi[0], expected[0])
    assert np.abs(pi[1:4] - expected[1:4]).max() <= 0.01, (pi[1:4], expected[1:4])


FORCE_RANGE, TORQUE_RANGE = 290.0, 10.0     # config/panda.yaml's wrench_saturation (an ATI Mini45's range)


def test_saturated_wrench_samples_are_excluded_and_counted(estimator_factory):
    """A 2 kg payload; from t = 3.0 to 3.4 s the tool is pushed (400 N along z at 0.1 m from the sensor)
    and the sensor reports its range, 290 N and 10 N m, clipped. With the saturation check
    (``wrench_saturation`` = 290 N, 10 N m, as in panda.yaml) the 100 saturated samples are counted and left
    out: no payload change is declared and the mass estimate stays within 0.1 kg of the truth throughout.
    Without it the clipped samples, persistent outliers, end up declared a payload change and taken."""
    runs = {}
    for check in (True, False):
        node = estimator_factory(**{"wrench_saturation.force": FORCE_RANGE if check else 0.0,
                                    "wrench_saturation.torque": TORQUE_RANGE if check else 0.0})
        t, Q, V, W = segment(node, 0.0, 5.0, PAYLOAD.pi, seed=3)
        contact = (t >= 3.0) & (t < 3.4)
        push = np.array([0.0, 0.0, -400.0, 40.0, 0.0, 0.0])     # f and its moment (0, 0.1, 0) x f
        limit = np.array([FORCE_RANGE] * 3 + [TORQUE_RANGE] * 3)
        W[contact] = np.clip(W[contact] + push, -limit, limit)
        stamps, masses = feed(node, t, Q, V, W, record_every=1)
        after = stamps >= 2.0
        runs[check] = (np.abs(masses[after] - PAYLOAD.mass).max(), node)
    error, node = runs[True]
    error_unchecked, unchecked = runs[False]
    print(f"max |mass error| from t = 2 s: {error:.4f} kg with the check ({node.estimator.wrench_saturated} saturated "
          f"samples), {error_unchecked:.3f} kg without ({len(unchecked.estimator.payload_events)} false payload changes)")
    assert node.estimator.wrench_saturated == int(contact.sum()) == 100
    assert error <= MASS_TOL and not node.estimator.payload_events
    assert_payload_close(node.estimator.payload_parameters(), PAYLOAD.pi)
    level, text, values = node.diagnostic_status(3.45)
    assert values["wrench_saturated"] == 100 and level == "WARN" and "wrench saturated" in text
    assert node.diagnostic_status(5.0)[0] == "OK"            # the pause ends when the filter has settled
    assert unchecked.estimator.wrench_saturated == 0 and unchecked.estimator.payload_events and error_unchecked > 1.0


def test_effort_at_the_limit_pauses_the_base_parameter_estimate(estimator_factory):
    """Joint torques at the URDF effort limit (a clipped drive) are counted and the base-parameter RLS
    does not take them: its estimate is unchanged by a burst of saturated samples."""
    node = estimator_factory(base_parameters=True, use_wrench=False)
    names = list(node.robot.joints)
    limit = node.robot.model.effort_limit
    t = np.arange(200) / RATE
    Q, V, _ = exciting_trajectory(node.robot.home, t)
    tau = np.zeros(7)
    for k in range(100):                                   # settle, then estimate on consistent zero torques
        node._on_state(make_joint_state(float(t[k]), names, Q[k], V[k], tau))
    assert node.estimator.base_estimator.updates > 0
    beta, updates = node.estimator.base_estimator.beta.copy(), node.estimator.base_estimator.updates
    for k in range(100, 150):                              # joint 2 pinned at its limit
        node._on_state(make_joint_state(float(t[k]), names, Q[k], V[k], np.where(np.arange(7) == 1, limit, 0.0)))
    assert node.estimator.effort_saturated == 50 and node.estimator.base_estimator.updates == updates
    assert np.array_equal(node.estimator.base_estimator.beta, beta)
    level, text, values = node.diagnostic_status(t[149])
    assert values["effort_saturated"] == 50 and level == "WARN" and "effort saturated" in text


def test_duplicate_out_of_order_and_backward_jumping_stamps(estimator_factory):
    """Repeated and slightly older stamps (joint states and wrenches) are dropped and counted, leaving the
    estimate untouched; a backward jump of more than ``time_jump_threshold`` (a simulation reset at t = 5 s
    back to 0) restarts the filters and keeps the estimate, which stays within 0.1 kg while estimation
    resumes on the new timeline; publishing resumes at once (the schedule restarts too)."""
    node = estimator_factory()
    names, link = list(node.robot.joints), node.robot.wrist_link
    t, Q, V, W = segment(node, 0.0, 5.0, PAYLOAD.pi, seed=5)
    feed(node, t, Q, V, W)
    assert_payload_close(node.estimator.payload_parameters(), PAYLOAD.pi)
    beta, updates = node.estimator.wrench_rls.beta.copy(), node.estimator.wrench_rls.updates
    published = []
    node.publish = lambda stamp: published.append(stamp)
    # duplicates and out-of-order samples (within the 0.5 s threshold), both topics
    for k in (-1, -1, -2, -50, -100):
        node._on_wrench(array_to_wrench_stamped(float(t[k]), link, W[k] + 100.0))   # wrong values: must not count
        node._on_state(make_joint_state(float(t[k]), names, Q[k] + 0.3, V[k]))
    assert node.estimator.dropped_stamps == 10 and node.rejected == {"joint_states_stamp": 5, "wrench_stamp": 5}
    assert node.estimator.time_jumps == 0 and node.estimator.wrench_rls.updates == updates and np.array_equal(node.estimator.wrench_rls.beta, beta)
    assert not published
    level, text, values = node.diagnostic_status(t[-1])
    assert values["dropped_stamps"] == 10 and values["rejected_messages"] == 0
    # the simulation is reset: time restarts at 0 (the wrench arrives first, as it may)
    t2, Q2, V2, W2 = segment(node, 0.0, 3.0, PAYLOAD.pi, seed=6)
    node._on_wrench(array_to_wrench_stamped(float(t2[0]), link, W2[0]))
    node._on_state(make_joint_state(float(t2[0]), names, Q2[0], V2[0]))
    assert node.estimator.time_jumps == 1 and len(published) == 1       # publishing restarted with the new timeline
    assert np.array_equal(node.estimator.wrench_rls.beta, beta)            # estimate kept
    stamps, masses = feed(node, t2[1:], Q2[1:], V2[1:], W2[1:])
    assert node.estimator.wrench_rls.updates > updates + 0.8 * len(t2)   # estimation resumed (after the filter settled)
    assert node.estimator.time_jumps == 1 and node.estimator.dropped_stamps == 10 and not node.estimator.payload_events
    assert np.abs(masses - PAYLOAD.mass).max() <= MASS_TOL       # never disturbed by the reset
    assert_payload_close(node.estimator.payload_parameters(), PAYLOAD.pi)
    assert len(published) >= 0.95 * len(t2) / 3   # publish_rate 100 Hz on a 4 ms grid: every third sample
    # a forward gap (the sensor stream paused for 2 s) is a jump too: filters restart, estimate kept
    t3, Q3, V3, W3 = segment(node, t2[-1] + 2.0, 1.0, PAYLOAD.pi, seed=7)
    feed(node, t3, Q3, V3, W3)
    assert node.estimator.time_jumps == 2 and not node.estimator.payload_events
    assert_payload_close(node.estimator.payload_parameters(), PAYLOAD.pi)
