"""The mpc node's loop with ``trigger: joint_state`` (:class:`~robodyn_ros.control.mpc_loop.MpcLoop`): the
real-time iteration's feedback phase on every joint state, the next step prepared after it. Prepared ahead, the
step is the one a solve of both phases at that time computes (the same linearisation, the same Riccati
factorisation: checked against a second loop solving both phases on the same states); a state off its expected
time (a dropped state) is solved at its own stamp; below the joint-state rate, every k-th state is solved, the
others commanded from the last solution; the closed loop on the Panda tracks."""
import numpy as np
import pytest

from robodyn_ros.control.mpc_loop import MpcLoop
from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
from robodyn_ros.simulation.simulator import Simulator, SimulatorConfig

RATE = 1000.0


def make_loop(**overrides):
    config = resolve_node_config("mpc", {"compiled": False, "horizon": 5, "time_limit": 1.0, "output": "commands",
                                         "solver": "rti", **overrides})
    loop = MpcLoop(load_robot(config), config, publish=lambda command: None)
    assert loop.mpc.wait(120.0), loop.mpc.error
    return loop


@pytest.fixture(scope="module")
def loops():
    made = make_loop(trigger="joint_state", rate=RATE), make_loop(trigger="timer")
    yield made
    for loop in made:
        loop.close()


def test_prepared_steps_are_the_steps_of_a_solve_at_that_time(loops):
    on_state, timer = loops
    for loop in loops:
        loop.start()
    sim = Simulator(on_state.model, SimulatorConfig(dt=1.0 / RATE), on_state.reference.evaluate(0.0)[0])
    prepared = 0
    for step in range(150):
        m = sim.measure_joints()
        tau = on_state.on_state(m.t, m.q, m.v, m.tau)
        solved = on_state.take_solution()
        assert solved is not None and on_state.take_solution() is None      # one solution per state, taken once
        t, solution = solved
        assert t == pytest.approx(m.t, abs=1e-12) and solution.status == "rti", solution.status
        prepared += solution.solve_time > solution.feedback_time      # its preparation ran before the state
        timer.on_state(m.t, m.q, m.v, m.tau)
        first = timer.take_solution()                                 # the first state: solved as it came
        t_timer, both_phases = first if first is not None else timer.solve(t)    # both phases now, at that time
        np.testing.assert_allclose(solution.tau_ff, both_phases.tau_ff, rtol=0, atol=1e-9)
        np.testing.assert_allclose(solution.K, both_phases.K, rtol=0, atol=1e-6)
        np.testing.assert_allclose(solution.x_pred, both_phases.x_pred, rtol=0, atol=1e-12)
        if step > 0:
            assert on_state.prepare() > 0.0
        assert tau is not None                             # the first from a solve of it
        sim.step(tau)
    assert prepared == 148        # all but the first two states (no solution, then no interval to predict)
    q_ref = on_state.reference.evaluate(sim.t - on_state.t0)[0]
    assert np.max(np.abs(sim.q - q_ref)) < 0.02        # the closed loop tracks


def test_a_state_off_its_expected_time_is_solved_at_its_own_stamp(loops):
    loop = loops[0]
    loop.start()
    sim = Simulator(loop.model, SimulatorConfig(dt=1.0 / RATE), loop.reference.evaluate(0.0)[0])
    jitter = np.random.default_rng(3).uniform(-0.2e-3, 0.2e-3, 40)
    for step in range(40):
        m = sim.measure_joints()
        stamp = m.t + (jitter[step] if step > 1 else 0.0)
        tau = loop.on_state(stamp, m.q, m.v, m.tau)
        tau = np.zeros(7) if tau is None else tau
        t, _ = loop.take_solution()
        if step > 2:                          # within half an interval of the prepared time: timed from it
            assert t == prepared_for
            assert abs(t - stamp) <= 0.5 * loop.expected_interval()
        loop.prepare()
        prepared_for = loop._prepared_t
        sim.step(tau)
    for _ in range(3):                        # three states lost: the next is 4 intervals on
        sim.step(tau)
    m = sim.measure_joints()
    loop.on_state(m.t, m.q, m.v, m.tau)
    t, solution = loop.take_solution()
    assert t == m.t and prepared_for != pytest.approx(m.t, abs=1e-6) and solution.status == "rti"
    assert solution.feedback_time == solution.solve_time        # both phases after the state


def test_below_the_joint_state_rate_every_other_state_is_solved(loops):
    loop = loops[0]
    loop.rate = 500.0                         # the node's rate parameter, read at configure
    loop.start()
    try:
        sim = Simulator(loop.model, SimulatorConfig(dt=1.0 / RATE), loop.reference.evaluate(0.0)[0])
        solved_at = []
        for step in range(60):
            m = sim.measure_joints()
            tau = loop.on_state(m.t, m.q, m.v, m.tau)
            solved = loop.take_solution()
            if solved is not None:
                solved_at.append(step)
                assert solved[1].status == "rti"
                if step > 2:                  # prepared two intervals ahead, at the state it is solved on
                    assert solved[1].solve_time > solved[1].feedback_time and solved[0] == pytest.approx(m.t)
                loop.prepare()
            assert tau is not None and np.all(np.isfinite(tau))     # every state, the first from a solve of it
            sim.step(tau)
        assert solved_at[:2] == [0, 1] and np.all(np.diff(solved_at[1:]) == 2), solved_at
    finally:
        loop.rate = RATE


def test_the_first_state_is_commanded_from_a_solve_of_it_with_either_trigger(loops):
    """No state waits for the timer's first solve: a lockstep simulator, which steps on the command for its state,
    would wait for a tick of a clock it drives itself (and a Franka counts every uncommanded 1-ms cycle). The first
    state is solved at its own stamp, commanded from that solution, and the solution published (taken once); the
    next states are commanded from it until the timer (or the next due state) solves again."""
    for loop in loops:
        loop.start()
        assert loop.base_update is None                  # the command is the solution's torque law alone
        before = loop.solves
        sim = Simulator(loop.model, SimulatorConfig(dt=1.0 / RATE), loop.reference.evaluate(0.0)[0] + 0.01)
        m = sim.measure_joints()
        tau = loop.on_state(m.t, m.q, m.v, m.tau)
        solved = loop.take_solution()
        assert solved is not None and loop.take_solution() is None and solved[0] == pytest.approx(m.t, abs=1e-12)
        np.testing.assert_allclose(tau, solved[1].torque(np.concatenate([m.q, m.v]), 0.0), rtol=0, atol=1e-9)
        assert loop.solves == before + 1
        if loop.trigger == "timer":
            sim.step(tau)
            m = sim.measure_joints()
            assert loop.on_state(m.t, m.q, m.v, m.tau) is not None and loop.take_solution() is None
            assert loop.solves == before + 1             # from the first solution, until the timer's solve


def test_a_plan_moved_by_part_of_an_interval_is_the_plan_at_those_times():
    from robodyn_ros.control.mpc.solution import planned_states, shifted_plan

    dt, N = 0.01, 6
    times = dt * np.arange(N + 1)
    coefficients = np.array([[0.3, -1.0, 2.0, -5.0], [-0.2, 0.5, 4.0, 3.0]])     # two joints, cubic in t

    def q(t):
        return np.stack([np.polyval(c[::-1], t) for c in coefficients], axis=-1)

    def v(t):
        return np.stack([np.polyval(np.polyder(c[::-1]), t) for c in coefficients], axis=-1)
    x_pred = np.hstack([q(times), v(times)])
    u = np.arange(N, dtype=float)[:, None] * np.ones((1, 2))
    for shift in (0.0037, 0.0123, dt):
        X, U = shifted_plan(x_pred, u, dt, shift)
        inside = shift + times <= times[-1] + 1e-12
        # cubic Hermite interpolation is exact on a cubic: the states at shift + k dt
        np.testing.assert_allclose(X[inside], np.hstack([q(shift + times), v(shift + times)])[inside], atol=1e-12)
        np.testing.assert_allclose(X[~inside], np.tile(x_pred[-1], (int((~inside).sum()), 1)), atol=1e-12)
        np.testing.assert_array_equal(U[:, 0], np.minimum(np.floor((shift + times[:N]) / dt + 1e-9), N - 1))
        np.testing.assert_allclose(planned_states(x_pred, dt, shift), X[0], atol=1e-15)
    X, U = shifted_plan(x_pred, u, dt, dt)                     # one interval: the shift by one node
    np.testing.assert_allclose(X, np.vstack([x_pred[1:], x_pred[-1:]]), atol=1e-12)
    np.testing.assert_array_equal(U, np.vstack([u[1:], u[-1:]]))
