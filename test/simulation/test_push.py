"""A push on the simulated robot (the simulator's ``push.*`` parameters, :class:`TorquePulse`): over its steps the
robot moves exactly as under a command that adds the push's torques, while the effort it reports is the motors'
torque without them; before and after it nothing is added. A push parameter of the wrong length is one line
naming it."""
import numpy as np
import pytest

from test_driver_emulation import runtime_of

from robodyn_ros.model.errors import ModelError
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.simulator import Simulator, SimulatorConfig
from robodyn_ros.simulation.torque_pulse import TorquePulse

# Franka's driver adds gravity (zero commands hold the arm); its rate limit would smooth the commanded pulse
FRANKA = {"driver": "franka", "driver_max_torque_rate": 0.0}
PUSH = [0.0, 6.0, 0.0, -4.0, 0.0, 0.0, 1.0]        # joint order, N m
START, DURATION = 0.05, 0.1


def test_a_push_moves_the_robot_as_that_torque_commanded_but_is_not_in_the_effort():
    pushed = runtime_of({**FRANKA, "push.torque": PUSH, "push.time": START, "push.duration": DURATION})
    commanded = runtime_of(FRANKA)                   # the same torques sent as commands instead
    robot = pushed.robot
    nv = robot.model.nv
    q, v, tau_pushed, tau_commanded = np.empty(nv), np.empty(nv), np.empty(nv), np.empty(nv)
    home = pushed.sim.q.copy()
    moved_before = 0.0
    for step in range(300):
        t = pushed.sim.t
        during = START - 1e-12 <= t < START + DURATION - 1e-12
        pushed.set_command(np.zeros(nv))
        commanded.set_command(np.asarray(PUSH) if during else np.zeros(nv))
        np.testing.assert_allclose(pushed.sim.q, commanded.sim.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pushed.sim.v, commanded.sim.v, rtol=0, atol=1e-12)
        pushed.measure_joints_into(q, v, tau_pushed)
        commanded.measure_joints_into(q, v, tau_commanded)
        expected = robot.from_command(np.asarray(PUSH)) if during else np.zeros(nv)
        np.testing.assert_allclose(tau_commanded - tau_pushed, expected, rtol=0, atol=1e-9)
        if t + 1e-12 < START:
            moved_before = max(moved_before, np.abs(pushed.sim.q - home).max())
    assert moved_before < 1e-9                      # Franka's driver holds gravity: nothing before the push
    assert np.abs(pushed.sim.q - home).max() > 1e-3                  # the push moved the arm
    assert [kind for _, kind, _ in pushed.logs].count("push") == 1


def test_the_python_integrator_takes_the_external_torque_as_the_compiled_step_does():
    config = resolve_node_config("simulator", FRANKA)
    model = load_robot(config).model
    q0 = load_robot(config).home
    tau = np.linspace(-3.0, 3.0, model.nv)
    external = np.linspace(2.0, -1.0, model.nv)
    a, b = (Simulator(model, SimulatorConfig(dt=1e-3), q0) for _ in range(2))
    for _ in range(50):
        a.step_validated(tau, external)
        b.step_validated(tau + external)
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(a.measure_joints().tau, b.measure_joints().tau - external, rtol=0, atol=1e-12)


@pytest.mark.parametrize("torque, message", [([1.0, 2.0], "push.torque: one value (N m) per joint, 7; got 2")])
def test_a_push_of_the_wrong_length_names_the_parameter(torque, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        runtime_of({**FRANKA, "push.torque": torque, "push.time": 0.1})
    robot = load_robot(resolve_node_config("simulator", FRANKA))
    with pytest.raises(ModelError, match=r"push.torque: one value \(N m\) per joint, 7; got 2"):
        TorquePulse.from_config({"push.torque": [0.0, 0.0], "push.time": 0.1, "push.duration": 0.1}, robot)
    assert TorquePulse.from_config({"push.torque": [0.0] * 7, "push.time": 0.1, "push.duration": 0.1},
                                   robot) is None                   # no torque: no push
    assert TorquePulse.from_config({"push.torque": PUSH, "push.time": -1.0, "push.duration": 0.1},
                                   robot) is None                   # no push time: no push
