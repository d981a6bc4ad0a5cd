"""How heavy a payload a robot carries along a motion within its effort limits (simulation/payload_capacity.py),
checked by the inverse dynamics with the payload added to the link's parameters (a path other than the batched
regressor the capacity is computed with), and the demo's use of it."""
import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.cli.demo_robot import carried_payload, demo_robot
from robodyn_ros.identification.sensor_wrench import link_inertia_in_body
from robodyn_ros.simulation.payload_capacity import MARGIN, payload_capacity
from robodyn_ros.simulation.simulator import Payload

COM = (0.0, 0.0, 0.05)


def effort_ratio(model, reference, link, mass, duration):
    """The largest |τ_j| / τ_max,j along the reference every 10 ms, by RNEA with the payload's inertia added to
    its body and the model's friction and armature (the Coulomb sign as the capacity's)."""
    pi = model.inertial_parameters().copy()
    body = model.frames[link].body
    pi[10 * body:10 * body + 10] += link_inertia_in_body(model, Payload.box(link, mass, COM).pi, link)
    worst = np.zeros(model.nv)
    for t in np.arange(0.0, duration + 1e-9, 0.01):
        q, v, a = (np.asarray(x, dtype=float) for x in reference.evaluate(t))
        tau = rd.rnea(model, q, v, a, pi=pi) + model.viscous * v + model.coulomb * np.tanh(v / 0.02)
        worst = np.maximum(worst, np.abs(tau) / model.effort_limit)
    return worst


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_the_capacity_loads_its_joint_to_the_margin_and_no_joint_beyond(robot):
    setup = demo_robot(robot)
    model, link = setup.model, setup.robot.wrist_link
    capacity = payload_capacity(model, setup.reference, link, COM, 8.0)
    assert 0.5 < capacity.mass < 100.0 and capacity.joint in model.joint_names
    at = effort_ratio(model, setup.reference, link, capacity.mass, 8.0)
    j = model.joint_names.index(capacity.joint)
    assert at[j] == pytest.approx(MARGIN, abs=1e-6) and np.all(at <= MARGIN + 1e-6), at
    assert effort_ratio(model, setup.reference, link, 1.01 * capacity.mass, 8.0)[j] > MARGIN
    np.testing.assert_allclose(capacity.motion_ratio, effort_ratio(model, setup.reference, link, 0.0, 8.0),
                               rtol=1e-6, atol=1e-9)


def test_the_demo_attaches_what_the_robot_carries_and_says_why():
    setup = demo_robot("panda")
    assert carried_payload(setup, 2.0, 15.0) == (2.0, None)
    capacity = payload_capacity(setup.model, setup.reference, setup.robot.wrist_link, COM, 15.0).mass
    mass, note = carried_payload(setup, 2.0 * capacity, 15.0)
    assert capacity - 0.1 < mass <= capacity and round(10 * mass) == 10 * mass
    assert f"a {2.0 * capacity:g}-kg payload at panda_link8 needs more of panda_joint" in note
    assert note.endswith(f"a {mass:g}-kg payload attached instead")
