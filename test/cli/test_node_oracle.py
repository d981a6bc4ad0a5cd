"""The oracle run over the nodes (``robodyn demo --oracle``): the ``inverse_dynamics`` node's loop given the exact
model of the plant the ``simulator`` node integrates (:class:`robodyn_ros.cli.demo_twin_nodes.NodeOracle`), checked
without ROS on the two objects the nodes hold: the torque it commands is the plant's inverse dynamics (rigid
bodies and armature by :func:`robodyn_ros.rnea` on the plant's model, and the plant's friction with its own
Coulomb width), the payload's included from the instant it is attached; under the ``ur`` driver less the gravity
the robot adds (its own model's) and less the robot's friction compensation, exactly."""
import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.cli.demo_twin_nodes import NodeOracle
from robodyn_ros.control.control_loop import ControlLoop
from robodyn_ros.identification.sensor_wrench import link_inertia_in_body
from robodyn_ros.model.driver_profiles import with_driver
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.adaptive_loop import plant_coulomb_width
from robodyn_ros.simulation.runtime import SimulationRuntime


def oracle_pair(robot, plant, driver):
    """``(loop, runtime, nominal_loop)``: a simulator runtime on ``plant``, the oracle loop on it, and the same
    loop left on the URDF."""
    overrides = with_driver({"simulator": {"robot": robot, "plant": plant, "real_time_factor": 0.0, "lockstep": True,
                                           "payload.mass": 2.0, "payload.com": [0.01, -0.02, 0.05]},
                             "inverse_dynamics": {"robot": robot, "mode": "computed_torque", "reference": "hold",
                                                  "use_base_parameters": True, "use_estimates": False}}, driver)
    sim_config = resolve_node_config("simulator", overrides["simulator"])
    runtime = SimulationRuntime(load_robot(sim_config), sim_config, lambda: None, lambda *entry: None)
    width = plant_coulomb_width(runtime.sim.plant)
    config = resolve_node_config("inverse_dynamics", {**overrides["inverse_dynamics"],
                                                      "base_parameters.coulomb_width": width})
    robot_of = load_robot(config)
    loop, nominal = (ControlLoop(robot_of, config, lambda command: None) for _ in range(2))
    NodeOracle(loop, runtime)
    return loop, runtime, nominal, width


def plant_torque(model, pi, q, v, a, width):
    """The plant's inverse dynamics with parameters ``pi`` (10 nb,): rigid bodies and armature
    (:func:`robodyn_ros.rnea` includes the model's armature), friction."""
    return (rd.rnea(model, q, v, a, pi=pi) + model.viscous * v
            + model.coulomb * np.tanh(v / width) + model.friction_offset)


@pytest.mark.parametrize("robot, plant, driver", [("panda", "perturbed:1", "generic"), ("ur5", "perturbed:2", "ur")])
def test_the_oracle_commands_the_plants_inverse_dynamics_and_its_payload_from_the_attachment(robot, plant, driver):
    loop, runtime, nominal, width = oracle_pair(robot, plant, driver)
    model, plant_model = loop.robot.model, runtime.sim.plant.model
    rng = np.random.default_rng(3)
    q = loop.robot.home + rng.uniform(-0.4, 0.4, model.nv)
    v, a = rng.uniform(-1.0, 1.0, model.nv), rng.uniform(-2.0, 2.0, model.nv)

    def sent(law_loop):           # the law's torque with zero tracking error (q_d, v_d = q, v)
        return law_loop.controller.compute(q, v, q, v, a, 0.0)[0]   # at the sampled state (no hold)

    robot_adds = np.zeros(model.nv)
    if driver == "ur":            # the robot adds its own model's gravity and its friction compensation
        robot_adds = rd.gravity_torque(model, q) + runtime.driver.friction(v)
    pi = plant_model.inertial_parameters()
    expected = plant_torque(plant_model, pi, q, v, a, width) - robot_adds
    scale = np.abs(expected).max()
    np.testing.assert_allclose(sent(loop), expected, atol=1e-6 * scale)
    assert np.abs(sent(nominal) - expected).max() > 1e-2 * scale          # the URDF is not the plant

    runtime.attach()                                                      # the payload, and at once the oracle
    payload = runtime.payload
    body = model.frames[payload.link].body
    pi[10 * body:10 * body + 10] += link_inertia_in_body(model, payload.pi, payload.link)
    with_payload = plant_torque(plant_model, pi, q, v, a, width) - robot_adds
    assert np.abs(with_payload - expected).max() > 1e-2 * scale
    np.testing.assert_allclose(sent(loop), with_payload, atol=1e-6 * scale)


def test_the_demo_refuses_oracle_where_it_does_not_run_it(capsys):
    """``--oracle`` is the nodes' third run of computed torque and Slotine-Li: with the MPC, the library loop
    (which always has its oracle) or the payload scenario, one line and exit 2, before anything runs."""
    from robodyn_ros.cli.demo import main
    for extra in (["--controller", "mpc"], ["--library"], ["--scenario", "payload"]):
        assert main(["--oracle", "--headless", *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--oracle" in err[0], err
