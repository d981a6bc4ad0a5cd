"""The oracle run over the nodes (``robodyn demo --oracle``): the ``inverse_dynamics`` node's loop given the exact
model of the plant the ``simulator`` node integrates (:class:`robodyn_ros.cli.demo_twin_nodes.NodeOracle`), checked
without ROS on the two objects the nodes hold: the torque it commands is the plant's inverse dynamics (rigid
bodies and armature by :func:`robodyn_ros.rnea` on the plant's model, and the plant's friction with its own
Coulomb width), the payload's included from the instant it is attached; under the ``ur`` driver less the gravity
the robot adds (its own model's) and less the robot's friction compensation, exactly. The ``mpc`` node's loop
likewise (:class:`~robodyn_ros.cli.demo_twin_nodes.NodeMpcOracle`): its MPC on the plant's model and parameters,
under ``ur`` the plant's friction less the robot's exact compensation."""
from types import SimpleNamespace

import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.cli.demo_twin_nodes import NodeMpcOracle, NodeOracle
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


@pytest.mark.parametrize("robot, plant, driver", [("panda", "perturbed:1", "generic"), ("ur5", "perturbed:2", "franka"),
                                                  ("ur5", "perturbed:1", "ur")])
def test_the_mpc_oracle_predicts_with_the_plants_model_and_its_payload_from_the_attachment(robot, plant, driver):
    """The ``mpc`` node's loop given the plant (:class:`NodeMpcOracle`): its MPC is built on the plant's model
    (armature included) with the plant's θ, the Coulomb part compensated at the joint-state rate; its gravity hold
    is the plant's; the robot's own gravity (what a driver adds) stays the URDF's; from the attachment its θ
    carries the payload, which the simulator integrates."""
    from robodyn_ros.control.mpc.config import parameter_vector
    from robodyn_ros.control.mpc.solution import OMIT_FRICTION
    from robodyn_ros.control.mpc_loop import MpcLoop
    from robodyn_ros.simulation.plant import load_plant

    overrides = with_driver({"simulator": {"robot": robot, "plant": plant, "real_time_factor": 0.0, "lockstep": True,
                                           "payload.mass": 2.0, "payload.com": [0.01, -0.02, 0.05]},
                             "mpc": {"robot": robot, "output": "commands", "use_base_parameters": True,
                                     "use_estimates": False, "compiled": False}}, driver)
    sim_config = resolve_node_config("simulator", overrides["simulator"])
    runtime = SimulationRuntime(load_robot(sim_config), sim_config, lambda: None, lambda *entry: None)
    config = resolve_node_config("mpc", overrides["mpc"])
    loop = MpcLoop(load_robot(config), config, publish=lambda command: None)
    node = SimpleNamespace(loop=loop, mpc=loop.mpc)
    try:
        oracle = NodeMpcOracle(node, load_plant(plant, loop.model))
        oracle.follow(runtime)
        plant_model, model = runtime.sim.plant.model, loop.model
        assert node.mpc is loop.mpc and loop.mpc.model is oracle.plant.model
        np.testing.assert_array_equal(loop.mpc.model.armature, plant_model.armature)
        assert np.abs(plant_model.armature - model.armature).max() > 1e-3        # the URDF's is not the plant's
        theta, nb, nv = parameter_vector(plant_model), model.nbodies, model.nv
        np.testing.assert_allclose(loop.coulomb, plant_model.coulomb, rtol=1e-12)
        sent = theta.copy()
        sent[10 * nb + nv:10 * nb + 2 * nv] = 0.0
        np.testing.assert_allclose(loop.mpc.theta, sent, rtol=1e-12, atol=1e-15)
        q = loop.reference.evaluate(0.3)[0]
        hold = rd.gravity_torque(plant_model, q) + plant_model.friction_offset
        np.testing.assert_allclose(loop.gravity(q), hold, atol=1e-9 * np.abs(hold).max())
        if driver != "generic":               # the robot adds its own model's gravity: the URDF's, not the plant's
            np.testing.assert_allclose(loop._robot_gravity(q), rd.gravity_torque(model, q), atol=1e-9)
        v = np.linspace(-0.8, 0.8, nv)
        if driver == "ur":                    # the plant's friction sent, less the robot's exact compensation
            assert loop.friction_compensation and not loop.omitted & OMIT_FRICTION
            assert loop.robot_friction.update(q, None, False)
            np.testing.assert_allclose(loop.robot_friction.fit.torque(v), runtime.driver.friction(v), rtol=1e-12)
            assert np.abs(runtime.driver.friction(v)).max() > 1e-2
        else:
            assert loop.robot_friction is None and loop.friction_compensation
        loop.start()                          # a state through the loop as the node gives it: commanded, reported
        assert np.all(np.isfinite(loop.on_state(0.0, q, v, np.zeros(nv))))
        assert loop.status(loop.solution[1])[0] in ("OK", "WARN")

        runtime.attach()
        pi = runtime.sim.inertial_parameters
        assert oracle.payload_applied is True
        np.testing.assert_allclose(loop.mpc.theta[:10 * nb], pi, rtol=1e-12)
        assert np.abs(pi - plant_model.inertial_parameters()).max() > 0.1       # the payload is in it
        np.testing.assert_allclose(loop.mpc.theta[10 * nb:], sent[10 * nb:], rtol=1e-12)
    finally:
        loop.close()


def test_the_demo_refuses_oracle_where_it_does_not_run_it(capsys):
    """``--oracle`` is the nodes' third run: with the library loop (which always has its oracle) or the payload
    scenario, one line and exit 2, before anything runs."""
    from robodyn_ros.cli.demo import main
    for extra in (["--library"], ["--scenario", "payload"]):
        assert main(["--oracle", "--headless", *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--oracle" in err[0], err
