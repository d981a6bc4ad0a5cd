"""The simulator emulates each robot's driver (docs/DRIVERS.md): gravity (and UR's friction compensation) added to
the commands, efforts as the driver reports them, its rate limit, UR's receive timeout and Franka's
missed-command reflex; in the library, without ROS."""
import numpy as np
import pytest

import robodyn_ros as rd
from robodyn_ros.ros.node_parameters import SCHEMAS, load_robot, resolve_node_config
from robodyn_ros.simulation.driver_emulation import (EMULATION_DEFAULTS, FRICTION_SIGN_WIDTH, DriverEmulation,
                                                      driver_config)
from robodyn_ros.simulation.runtime import SimulationRuntime
from robodyn_ros.simulation.simulator import Payload

QUIET = {"real_time_factor": 0.0, "lockstep": True, "command_timeout": 1e6, "payload.mass": 0.0,
         "noise.position": 0.0, "noise.velocity": 0.0, "noise.effort": 0.0, "noise.force": 0.0, "noise.torque": 0.0}


def runtime_of(overrides):
    """A lockstep SimulationRuntime of the simulator's parameters ``overrides`` (on QUIET), started, its first
    state published; ``runtime.logs`` holds ``(level, kind, text)``."""
    config = resolve_node_config("simulator", {**QUIET, **overrides})
    logs = []
    runtime = SimulationRuntime(load_robot(config), config, lambda: None, lambda *entry: logs.append(entry))
    runtime.logs = logs
    runtime.start()
    runtime.publish_state()
    return runtime


def emulation(driver, robot="panda", **overrides):
    config = resolve_node_config("simulator", {"robot": robot, "driver": driver, **overrides})
    logs = []
    model = load_robot(config).model
    driver = DriverEmulation(model, config, 1.0 / config["rate"], lambda *entry: logs.append(entry))
    driver.logs = logs
    return driver, model


def test_the_emulation_defaults_are_the_schema_defaults_and_the_profiles_rates():
    schema = {spec.name: spec.default for spec in SCHEMAS["simulator"]}
    assert {k: schema[k] for k in EMULATION_DEFAULTS} == EMULATION_DEFAULTS
    assert [driver_config(d)["rate"] for d in ("generic", "franka", "ur", "lbr")] == [1000.0, 1000.0, 500.0, 500.0]
    for driver in ("franka", "ur", "lbr"):   # the node takes the profile's rate (no file in between)
        assert resolve_node_config("simulator", {"driver": driver})["rate"] == driver_config(driver)["rate"]
    assert not emulation("generic")[0].emulating


@pytest.mark.parametrize("driver, holds", [("franka", True), ("generic", False)])
def test_the_panda_under_zero_commands_stays_put_only_where_the_robot_adds_gravity(driver, holds):
    runtime = runtime_of({"driver": driver})
    home, zero = runtime.sim.q.copy(), np.zeros(runtime.robot.model.nv)
    for _ in range(500):                                   # 0.5 s of zero-torque commands, one per step
        runtime.set_command(zero)
    drift = np.abs(runtime.sim.q - home).max()
    assert runtime.steps == 500
    if holds:
        assert drift < 1e-6 and runtime.driver.reflexes == 0
    else:
        assert drift > 0.05                                # it falls


@pytest.mark.parametrize("driver", ["generic", "franka", "ur"])
def test_before_its_first_command_the_robot_holds_where_it_started_and_no_timeout_runs(driver):
    """A controller that comes up late (a loaded machine, a slow first build) finds the arm where it started,
    not fallen under gravity with zero torque; the command timeout runs from the first command on."""
    runtime = runtime_of({"driver": driver, "real_time_factor": 0.0, "lockstep": False, "command_timeout": 0.1,
                          "noise.effort": 0.01})
    home, dt = runtime.sim.q.copy(), 1.0 / runtime.config["rate"]
    for _ in range(round(0.5 / dt)):                       # 0.5 s without a command
        runtime.step_and_publish()
    assert np.abs(runtime.sim.q - home).max() < 0.01 and np.abs(runtime.sim.v).max() < 0.05
    assert not runtime.command_timed_out and runtime.driver.stops == runtime.driver.reflexes == 0
    assert [kind for _, kind, _ in runtime.logs if kind in ("waiting", "command_timeout", "receive_timeout",
                                                            "reflex")] == ["waiting"]     # said once
    zero = np.zeros(runtime.robot.model.nv)
    runtime.set_command(zero)                              # one command, then silence: the timeout runs
    for _ in range(round(0.5 / dt)):
        runtime.step_and_publish()
    assert runtime.command_timed_out or runtime.driver.stops + runtime.driver.reflexes == 1
    if driver == "generic":                                # zero torque after the timeout: it falls
        assert np.abs(runtime.sim.q - home).max() > 0.05


def test_ur_adds_its_friction_compensation_scaled_from_the_simulated_robots():
    config = resolve_node_config("simulator", {"robot": "ur5", "driver": "ur"})
    urdf = load_robot(config).model                  # the bundled UR5's URDF has no friction
    model = urdf.with_friction([2.0, 2.0, 1.5, 0.5, 0.5, 0.5], [3.0, 3.0, 2.0, 1.0, 1.0, 1.0], [0.1] * 6)
    ur = DriverEmulation(urdf, config, 0.002, friction_model=model)     # the simulated robot has friction
    rng = np.random.default_rng(1)
    q, v = rng.uniform(-1.0, 1.0, model.nv), rng.uniform(-0.5, 0.5, model.nv)
    command = rng.normal(0.0, 1.0, model.nv)
    friction = model.viscous * v + model.coulomb * np.tanh(v / FRICTION_SIGN_WIDTH) + model.friction_offset
    added = ur.applied(0.0, q, v, command, True) - command - ur.gravity(q)
    np.testing.assert_allclose(added, 0.85 * friction, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ur.gravity(q), rd.gravity_torque(urdf, q), atol=1e-9)   # its gravity: the URDF's
    # the simulator node's: of the plant it simulates (the URDF's friction without one)
    runtime = runtime_of({"robot": "ur5", "driver": "ur", "plant": "perturbed:3"})
    plant = runtime.sim.plant.model
    assert np.all(plant.viscous > 0.0)
    np.testing.assert_allclose(runtime.driver.friction(v), 0.85 * (plant.viscous * v + plant.coulomb * np.tanh(
        v / FRICTION_SIGN_WIDTH) + plant.friction_offset), rtol=1e-12, atol=1e-12)
    franka = DriverEmulation(model, resolve_node_config("simulator", {"robot": "ur5", "driver": "franka"}), 0.001)
    np.testing.assert_allclose(franka.applied(0.0, q, v, command, True), command + franka.gravity(q), atol=1e-12)


def test_efforts_as_currents_and_gravity_compensated():
    ur, model = emulation("ur", robot="ur5", **{"effort.kind": "current",
                                               "effort.torque_constants": [2.0, 4.0, 5.0, 8.0, 10.0, 20.0]})
    tau = np.arange(1.0, 7.0)
    effort = tau.copy()
    ur.effort_into(0.0, np.zeros(6), effort)
    np.testing.assert_allclose(effort, tau / [2.0, 4.0, 5.0, 8.0, 10.0, 20.0])
    default, _ = emulation("ur", robot="ur5", **{"effort.kind": "current"})
    effort = tau.copy()
    default.effort_into(0.0, np.zeros(6), effort)
    np.testing.assert_allclose(effort, tau / 10.0)
    with pytest.raises(ValueError, match=r"effort.torque_constants: one value \(N m/A\) per joint, 6; got 2"):
        emulation("ur", robot="ur5", **{"effort.kind": "current", "effort.torque_constants": [1.0, 2.0]})

    runtime = runtime_of({"robot": "ur5", "driver": "ur"})     # gravity-compensated: 0 at rest
    assert runtime.sim.config.dt == pytest.approx(0.002)       # UR's 500 Hz
    for _ in range(50):
        runtime.set_command(np.zeros(6))
    q, v, effort = np.zeros(6), np.zeros(6), np.zeros(6)
    runtime.measure_joints_into(q, v, effort)
    assert np.abs(runtime.sim.tau_command).max() > 5.0         # the robot applies its gravity ...
    assert np.abs(effort).max() < 1e-6                         # ... and reports none of it
    without = runtime.sim.tau_command.copy()
    runtime.driver.set_payload(Payload.box(runtime.robot.wrist_link, 2.0, (0.0, 0.0, 0.05)))
    runtime.set_command(np.zeros(6))
    runtime.measure_joints_into(q, v, effort)
    assert np.abs(runtime.sim.tau_command - without).max() > 0.5   # the set payload's gravity is added ...
    assert np.abs(effort).max() < 1e-6                              # ... and compensated in the efforts alike


def test_the_ten_hertz_filter_step_response():
    lbr, model = emulation("lbr", robot="iiwa")
    assert lbr.cutoff == 10.0 and lbr.dt == pytest.approx(0.002)
    times = 0.002 * np.arange(60)
    out = []
    for t in times:
        effort = np.zeros(model.nv) if t == 0.0 else np.ones(model.nv)
        lbr.effort_into(t, np.zeros(model.nv), effort)
        out.append(effort[0])
    np.testing.assert_allclose(out[1:], 1.0 - np.exp(-2.0 * np.pi * 10.0 * times[1:]), rtol=1e-12)
    assert abs(np.interp(1.0 / (2.0 * np.pi * 10.0), times, out) - (1.0 - np.exp(-1.0))) < 0.01   # 15.9 ms


def test_ur_stops_after_40_ms_without_commands_not_before_and_holds():
    ur, model = emulation("ur", robot="ur5")
    q, v, dt = np.full(model.nv, 0.3), np.zeros(model.nv), 0.002
    ur.applied(0.0, q, v, np.zeros(model.nv), True)            # the last command
    for k in range(1, 21):                                     # 2 .. 40 ms: the last command still holds
        ur.applied(k * dt, q, v, np.zeros(model.nv), False)
        assert ur.stopped is None, k
    ur.applied(21 * dt, q, v, np.zeros(model.nv), False)       # 42 ms: stopped
    assert ur.stopped == "receive_timeout" and ur.stops == 1
    assert ur.logs == [("error", "receive_timeout", "ur: no command for 0.042 s: program stopped "
                        "(robot_receive_timeout 0.04 s); the robot holds until the simulator is deactivated and "
                        "activated again")]
    hold = ur.applied(22 * dt, q, v, np.full(model.nv, 50.0), True)   # commands are ignored
    np.testing.assert_allclose(hold, ur.gravity(q), atol=1e-12)
    assert ur.error_recovery()[0] is False and ur.stopped == "receive_timeout"
    ur.reset()                                                 # the simulator reactivated
    assert ur.stopped is None and ur.applied(0.0, q, v, np.ones(model.nv), True)[0] != hold[0]

    runtime = runtime_of({"robot": "ur5", "driver": "ur"})    # and the simulated robot stays where it stopped
    rng = np.random.default_rng(0)
    for _ in range(50):
        runtime.set_command(rng.normal(0.0, 3.0, 6))
    for _ in range(100):
        runtime.step_to_next_publish()
    stopped_at = runtime.sim.q.copy()
    for _ in range(200):
        runtime.set_command(np.full(6, 20.0))
    assert runtime.driver.stopped == "receive_timeout"
    assert np.abs(runtime.sim.q - stopped_at).max() < 1e-3 and np.abs(runtime.sim.v).max() < 1e-2
    assert [entry[1] for entry in runtime.logs].count("receive_timeout") == 1


def test_franka_reflex_after_20_missed_commands_not_19_and_recovery():
    franka, model = emulation("franka")
    q, v, zero = np.full(model.nv, 0.1), np.zeros(model.nv), np.zeros(model.nv)
    t = 0.0
    for missed in (19, 20):
        franka.applied(t, q, v, zero, True)
        for _ in range(missed):
            t += 1e-3
            franka.applied(t, q, v, zero, False)
        assert franka.stopped == (None if missed == 19 else "reflex"), missed
    assert franka.reflexes == 1 and franka.logs[-1][:2] == ("error", "reflex")
    assert "20 consecutive commands missed: communication_constraints_violation reflex" in franka.logs[-1][2]
    np.testing.assert_allclose(franka.applied(t, q, v, np.full(model.nv, 5.0), True), franka.gravity(q), atol=1e-12)
    assert franka.stopped == "reflex"                          # a command does not clear it
    assert franka.error_recovery() == (True, "reflex cleared")
    np.testing.assert_allclose(franka.applied(t, q, v, np.full(model.nv, 0.5), True) - franka.gravity(q), 0.5)
    assert franka.stopped is None and franka.reflexes == 1


def test_franka_limits_the_torque_rate():
    franka, model = emulation("franka")
    q, v = np.full(model.nv, 0.1), np.zeros(model.nv)
    target = np.array([10.0, -10.0, 0.5, 0.0, 3.0, 0.0, 0.0])
    applied = [franka.applied(1e-3 * k, q, v, target, True) - franka.gravity(q) for k in range(12)]
    np.testing.assert_allclose(applied[0], np.clip(target, -1.0, 1.0), atol=1e-12)     # 1000 N m/s x 1 ms
    np.testing.assert_allclose(applied[4], np.clip(target, -5.0, 5.0), atol=1e-12)
    np.testing.assert_allclose(applied[11], target, atol=1e-12)


def test_cycles_the_controller_had_no_time_for_neither_count_nor_reset_the_missed_run():
    franka, model = emulation("franka")
    q, v, zero = np.full(model.nv, 0.1), np.zeros(model.nv), np.zeros(model.nv)
    franka.applied(0.0, q, v, zero, True)
    for k in range(19):
        franka.applied(1e-3 * (k + 1), q, v, zero, False)                # 19 missed cycles
    for k in range(40):
        franka.applied(0.02 + 1e-3 * k, q, v, zero, False, due=False)    # a catch-up burst: not the controller's
    assert franka.stopped is None and franka.missed_cycles == 19
    franka.applied(0.06, q, v, zero, False)                              # the 20th missed cycle in a row
    assert franka.stopped == "reflex" and franka.missed_cycles == 20

    ur, model = emulation("ur", robot="ur5")
    q, v, zero = np.full(model.nv, 0.3), np.zeros(model.nv), np.zeros(model.nv)
    ur.applied(0.0, q, v, zero, True)
    for k in range(20):
        ur.applied(0.002 * (k + 1), q, v, zero, False)                   # 40 ms without a command
    for k in range(50):
        ur.applied(0.042 + 0.002 * k, q, v, zero, False, due=False)
    assert ur.stopped is None
    ur.applied(0.2, q, v, zero, False)                                   # 42 ms of cycles without one
    assert ur.stopped == "receive_timeout" and "no command for 0.042 s" in ur.logs[-1][2]


@pytest.mark.parametrize("driver, robot, period, limit", [("franka", "panda", 1e-3, 20), ("ur", "ur5", 2e-3, 21)])
def test_a_starved_simulator_catching_up_trips_no_watchdog_a_silent_controller_does(monkeypatch, driver, robot,
                                                                                       period, limit):
    """In real time on a clock the test moves: the simulator starved of CPU for 45 cycles catches up at once
    (the controller could answer none of those states: no stop, no reflex), then a controller silent while the
    simulator keeps time trips the driver's watchdog at its limit (Franka 20 cycles, UR 40 ms), not before."""
    import robodyn_ros.simulation.runtime as runtime_module
    clock = [100.0]
    monkeypatch.setattr(runtime_module, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
    runtime = runtime_of({"robot": robot, "driver": driver, "real_time_factor": 1.0, "lockstep": False})
    nv = runtime.robot.model.nv

    def tick(cycles=1):
        clock[0] += cycles * period
        runtime.on_real_time_tick()

    for _ in range(5):                                   # the controller answers every state
        runtime.set_command(np.zeros(nv))
        tick()
    steps = runtime.steps
    tick(45)                                             # starved: 45 steps in one burst
    assert runtime.steps - steps == 45 and runtime.catch_up_steps == 44
    assert runtime.driver.stopped is None and runtime.driver.missed_cycles == 1
    runtime.set_command(np.zeros(nv))
    tick()
    for k in range(limit - 1):                           # the controller silent, the simulator on time
        tick()
        assert runtime.driver.stopped is None, k
    tick()
    assert runtime.driver.stopped == ("reflex" if driver == "franka" else "receive_timeout")
    assert runtime.driver.missed_cycles == 1 + limit
