"""The controller and simulator runtime as library objects, without rclpy (the nodes only convert messages
around them): the stamp gate's verdicts, the output stage's watchdog, guard and command order, the control
loop's time reset, the payload plausibility check, and the simulator runtime's lockstep and command timeout
(test_layers checks that none of them imports rclpy).
"""
import time

import numpy as np
import pytest

from robodyn_ros.control.control_loop import ControlLoop
from robodyn_ros.control.payload_update import ImplausiblePayload, check_payload_plausible
from robodyn_ros.control.torque_output import StampGate, TorqueOutput
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.runtime import SimulationRuntime


def test_stamp_gate_verdicts():
    gate = StampGate()
    verdicts = [gate.classify(t, 0.05, stale) for t, stale in
                ((1.0, False), (1.001, False), (1.001, False), (0.99, False), (0.9, False), (0.95, False),
                 (0.949, True))]
    assert verdicts == ["first", "new", "duplicate", "older", "reset", "new", "reset"]


def test_torque_output_guards_orders_and_holds_when_states_stop():
    tau_max = np.array([10.0, 5.0, 2.0])
    sent, events = [], []
    config = {"state_timeout": 0.02, "stale_action": "gravity_hold", "max_torque_rate": 0.0}
    out = TorqueOutput(tau_max, lambda q: 0.5 * q, config, sent.append, command_order=[2, 0, 1],
                       report=lambda kind, text: events.append(kind))
    q = np.array([1.0, 2.0, 3.0])
    assert out.accept_state(1.0, q) == "first"
    np.testing.assert_array_equal(out.publish(np.array([20.0, -1.0, 0.5]), 1.0), [10.0, -1.0, 0.5])  # clamped
    np.testing.assert_array_equal(sent[-1], [0.5, 10.0, -1.0])                                         # command order
    assert out.accept_state(1.0, q) is None and out.dropped["duplicate"] == 1
    np.testing.assert_array_equal(out.publish(np.array([np.nan, 0.0, 0.0]), 1.001), [10.0, -1.0, 0.5])  # held
    assert out.non_finite == 1 and out.saturated == 1
    time.sleep(0.03)
    out.on_watchdog()
    assert out.stale and events[-1] == "stale"
    np.testing.assert_allclose(sent[-1], [1.5, 0.5, 1.0])                 # g(q_last) = q / 2, command order
    assert out.accept_state(1.002, q) == "new" and not out.stale and events[-1] == "resumed"
    config["stale_action"] = "zero"                                    # live: read at every call
    time.sleep(0.03)
    out.on_watchdog()
    np.testing.assert_array_equal(sent[-1], np.zeros(3))


@pytest.fixture(scope="module")
def panda():
    return load_robot(resolve_node_config("inverse_dynamics", {}))


def test_control_loop_reference_continues_after_a_time_reset(panda):
    config = resolve_node_config("inverse_dynamics", {})
    sent = []
    loop = ControlLoop(panda, config, sent.append)
    v = np.zeros(panda.model.nv)
    for k in range(100):
        tau, error = loop.on_state(10.0 + 1e-3 * k, panda.home, v)
    q_d_before = loop.desired(10.099, panda.home)[0]
    tau, error = loop.on_state(0.0, panda.home, v)          # the simulator restarted at t = 0
    assert loop.output.time_resets == 1 and len(sent) == 101
    np.testing.assert_allclose(panda.home - error, loop.desired(0.0, panda.home)[0], atol=1e-15)
    np.testing.assert_allclose(loop.desired(0.0, panda.home)[0], q_d_before, atol=1e-12)   # continues
    assert np.all(np.abs(tau) <= loop.output.guard.tau_max + 1e-12)


def test_payload_plausibility():
    I_box = np.diag([0.004, 0.004, 0.003])
    check_payload_plausible(2.0, [0.0, 0.0, 0.05], I_box, "flange", 0.05, 20.0, 0.5)
    check_payload_plausible(0.01, [3.0, 0.0, 0.0], -I_box, "flange", 0.05, 20.0, 0.5)   # below min mass: none
    for m, com, I_c in ((-4.8, [0, 0, 0.05], I_box), (25.0, [0, 0, 0.05], I_box), (1.9, [1.46, 1.97, 0.85], I_box),
                        (2.0, [0, 0, 0.05], np.diag([0.01, 0.01, -1.05]))):
        with pytest.raises(ImplausiblePayload, match="implausible payload"):
            check_payload_plausible(m, com, I_c, "flange", 0.05, 20.0, 0.5)


def test_simulation_runtime_lockstep_and_command_timeout(panda):
    config = resolve_node_config("simulator", {"real_time_factor": 0.0, "lockstep": True, "command_timeout": 0.005,
                                               "publish_decimation": 2})
    robot = load_robot(config)
    published, logs = [], []
    runtime = SimulationRuntime(robot, config, lambda: published.append(runtime.sim.t),
                                lambda level, kind, text: logs.append(kind))
    runtime.start()
    runtime.publish_state()
    gravity = runtime.kernels.rnea(runtime.sim.q, np.zeros(robot.model.nv), np.zeros(robot.model.nv))
    runtime.set_command(robot.to_command(gravity))          # answers the published state: two steps now
    assert runtime.steps == 2 and len(published) == 2 and runtime.sim.t == pytest.approx(0.002)
    runtime.set_command(robot.to_command(gravity))
    assert runtime.steps == 4 and np.abs(runtime.sim.v).max() < 1e-3          # held by its gravity torque
    for _ in range(5):                                     # no more commands: zero torque after 5 ms
        runtime.step_to_next_publish()
    assert runtime.command_timed_out and logs.count("command_timeout") == 1
    runtime.set_command(robot.to_command(gravity))
    assert not runtime.command_timed_out and logs[-1] == "commands_back"
    runtime.stop()


def test_simulation_runtime_stops_for_good_on_a_diverged_step():
    """The xArm7 simulated with the explicit rk4 (its light wrist's damping is far beyond rk4's stability):
    a warning at construction names the joint; the first diverged step stops the runtime: nothing it published
    is absurd or non-finite, one error line names joint 7 and the cure, on_stop is called once, and no timer
    tick, command or publish steps or publishes again. A stepping thread ends by itself when its state
    diverges."""
    import os

    from conftest import erd_path
    from robodyn_ros.simulation.divergence import DivergenceCheck

    urdf = erd_path("xarm_description/urdf/xarm7.urdf")
    if not os.path.isfile(urdf):
        pytest.skip(f"{urdf} missing from example-robot-data")
    config = resolve_node_config("simulator", {"urdf_path": urdf, "integrator": "rk4", "real_time_factor": 0.0,
                                               "lockstep": False})
    robot = load_robot(config)
    published, logs, stops = [], [], []
    runtime = SimulationRuntime(robot, config, lambda: published.append((runtime.sim.q, runtime.sim.v)),
                                lambda level, kind, text: logs.append((level, text)), lambda: stops.append(1))
    assert [level for level, _ in logs] == ["warning"] and "joint joint7's damping" in logs[0][1]
    check = DivergenceCheck(runtime.sim.model, runtime.sim.config, runtime.sim.q)
    runtime.start()
    runtime.publish_state()
    zero = np.zeros(robot.model.nv)
    for _ in range(100):
        runtime.set_command(robot.to_command(runtime.kernels.rnea(runtime.sim.q, zero, zero)))
        runtime.step_and_publish()
    assert runtime.fault is not None and runtime.fault.joint == "joint7" and runtime.steps < 10
    assert all(check.within(q, v) for q, v in published) and len(published) == runtime.steps + 1
    errors = [text for level, text in logs if level == "error"]
    assert len(errors) == 1 and "joint joint7's velocity" in errors[0] and "rk4_implicit" in errors[0]
    assert stops == [1]
    steps, count = runtime.steps, len(published)
    runtime.on_free_run_tick()
    runtime.on_real_time_tick()
    runtime.step_to_next_publish()
    runtime.publish_state()
    assert (runtime.steps, len(published), len(logs), stops) == (steps, count, 2, [1])
    runtime.stop()

    panda = SimulationRuntime(load_robot(resolve_node_config("simulator", {"real_time_factor": 0.0,
                                                                           "lockstep": False})),
                              resolve_node_config("simulator", {"real_time_factor": 0.0, "lockstep": False}),
                              lambda: None, lambda level, kind, text: None)
    panda.sim.v = np.full(panda.sim.model.nv, 1e35)
    panda.start()
    panda.start_thread()
    panda.thread.join(timeout=30.0)
    assert not panda.thread.is_alive() and panda.fault is not None
    panda.stop()
