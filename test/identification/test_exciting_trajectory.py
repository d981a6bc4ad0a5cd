"""Fourier trajectories: analytic derivatives against finite differences and the series itself,
periodicity, and designs that respect limits on a dense grid while lowering their cost."""

import time

import numpy as np
import pytest

from robodyn_ros.model.errors import ModelError
from robodyn_ros.identification.excitation_constraints import LimitConstraints, working_set
from robodyn_ros.identification.exciting_trajectory import (
    FourierTrajectory,
    _Coefficients,
    _excitation_cost,
    _objective,
    _optimise,
    design_exciting_trajectory,
)

LOWER = np.array([-1.0, -0.5, 0.2])
UPPER = np.array([1.5, 0.5, 2.0])
V_MAX = np.array([1.0, 0.8, 1.5])
A_MAX = np.array([3.0, 2.0, 4.0])


def _random_trajectory(n=3, harmonics=4, period=4.0, seed=0):
    rng = np.random.default_rng(seed)
    return FourierTrajectory(q0=rng.normal(size=n), a=rng.normal(size=(n, harmonics)),
                             b=rng.normal(size=(n, harmonics)), period=period)


def test_positions_follow_the_series_definition():
    traj = _random_trajectory()
    t = 0.37
    w = traj.omega_f * np.arange(1, traj.harmonics + 1)
    expected = traj.q0 + np.sum(traj.a / w * np.sin(w * t) - traj.b / w * np.cos(w * t), axis=1)
    np.testing.assert_allclose(traj.derivatives(t, 0), expected, rtol=1e-13)
    expected_v = np.sum(traj.a * np.cos(w * t) + traj.b * np.sin(w * t), axis=1)
    np.testing.assert_allclose(traj.evaluate(t)[1], expected_v, rtol=1e-13)
    assert traj.evaluate(np.linspace(0, 1, 7))[2].shape == (7, 3)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivatives_match_central_differences(order):
    traj = _random_trajectory(seed=order)
    t = np.linspace(0.0, traj.period, 37)
    step = 1e-5
    numeric = (traj.derivatives(t + step, order - 1) - traj.derivatives(t - step, order - 1)) / (2 * step)
    analytic = traj.derivatives(t, order)
    scale = np.max(np.abs(analytic))
    np.testing.assert_allclose(analytic, numeric, atol=1e-7 * scale)


def test_trajectory_is_periodic_in_every_derivative():
    traj = _random_trajectory(seed=7)
    t = np.array([0.0, 0.3])
    for order in range(5):
        np.testing.assert_allclose(traj.derivatives(t + traj.period, order), traj.derivatives(t, order),
                                   atol=1e-9 * max(1.0, np.max(np.abs(traj.derivatives(t, order)))))
    restored = FourierTrajectory.from_dict(traj.to_dict())
    for name in ("q0", "a", "b", "period"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(traj, name))


def test_default_excitation_cost_gradient_matches_finite_differences():
    coefficients = _Coefficients(2, 3, 5.0)
    cost = _excitation_cost(coefficients, np.linspace(0, 5.0, 60, endpoint=False),
                            np.array([1.0, 2.0, 0.5, 0.7, 3.0, 2.0]))
    x = np.random.default_rng(1).normal(size=coefficients.size) * 0.3
    value, gradient = cost(x)
    step = 1e-6
    numeric = np.array([(cost(x + step * e)[0] - cost(x - step * e)[0]) / (2 * step)
                        for e in np.eye(coefficients.size)])
    np.testing.assert_allclose(gradient, numeric, atol=1e-6 * np.max(np.abs(gradient)))


def _assert_within_limits(traj, margin=0.05, a_max=A_MAX):
    t = np.linspace(0.0, traj.period, 50_001)
    q, v, a = traj.evaluate(t)
    shrink = margin / 2 * (UPPER - LOWER)  # the guaranteed half margin on the dense grid
    assert np.all(q >= LOWER + shrink) and np.all(q <= UPPER - shrink)
    assert np.all(np.abs(v) <= (1 - margin / 2) * V_MAX)
    if a_max is not None:
        assert np.all(np.abs(a) <= (1 - margin / 2) * a_max)
    return q, v, a


def test_default_design_respects_limits_and_excites_every_joint():
    start = time.perf_counter()
    traj = design_exciting_trajectory(3, LOWER, UPPER, V_MAX, A_MAX, period=8.0, harmonics=4, seed=3)
    seconds = time.perf_counter() - start
    report = traj.design_report
    print(f"\ndefault design (3 joints, 4 harmonics): {seconds:.2f} s, cost {report.initial_cost:.2f} -> "
          f"{report.final_cost:.2f}, {report.iterations} iterations, scale {report.final_scale:.3f}")
    q, v, _ = _assert_within_limits(traj)
    assert report.final_cost < report.initial_cost - 1.0
    # excitation: every joint sweeps most of its range or reaches most of its speed limit
    sweep = (q.max(axis=0) - q.min(axis=0)) / (UPPER - LOWER)
    speed = np.abs(v).max(axis=0) / V_MAX
    assert np.all(np.maximum(sweep, speed) > 0.6)
    again = design_exciting_trajectory(3, LOWER, UPPER, V_MAX, A_MAX, period=8.0, harmonics=4, seed=3)
    np.testing.assert_array_equal(again.a, traj.a)
    other = design_exciting_trajectory(3, LOWER, UPPER, V_MAX, A_MAX, period=8.0, harmonics=4, seed=4)
    assert not np.allclose(other.a, traj.a)


def test_start_at_rest_from_a_given_configuration():
    q_start = np.array([0.1, 0.0, 1.0])
    traj = design_exciting_trajectory(3, LOWER, UPPER, V_MAX, period=6.0, harmonics=3, seed=0,
                                      start_at_rest=True, q_start=q_start)
    _assert_within_limits(traj, a_max=None)
    for t in (0.0, traj.period):
        q, v, a = traj.evaluate(t)
        np.testing.assert_allclose(q, q_start, atol=1e-9)
        np.testing.assert_allclose(v, 0.0, atol=1e-9)
        np.testing.assert_allclose(a, 0.0, atol=1e-9)


def _toy_regressor(traj):
    """A 2-joint regressor with inertial, gravity, coupling and friction columns on 120 instants of a period."""
    t = np.linspace(0.0, traj.period, 120, endpoint=False)
    q, v, a = traj.evaluate(t)
    zero = np.zeros_like(t)
    rows_1 = np.stack([a[:, 0], a[:, 1] * np.cos(q[:, 1]), np.sin(q[:, 0]), v[:, 0], zero], axis=1)
    rows_2 = np.stack([zero, a[:, 0] * np.cos(q[:, 1]) + a[:, 1], zero, zero, v[:, 1]], axis=1)
    return np.vstack([rows_1, rows_2])


def _toy_log_det_cost(traj):
    """A user's D-optimal cost: -log det(W^T W / N) of the toy regressor (smooth, so that SLSQP's differences
    of it converge alike on every CPU; a condition number's kinks make the iterates depend on rounding)."""
    W = _toy_regressor(traj)
    return -np.linalg.slogdet(W.T @ W / len(W))[1]


def test_user_cost_decreases_from_the_initial_guess():
    lower, upper = LOWER[:2], UPPER[:2]
    for seed in (1, 2):
        traj = design_exciting_trajectory(2, lower, upper, V_MAX[:2], A_MAX[:2], period=5.0, harmonics=3,
                                          cost=_toy_log_det_cost, seed=seed, max_iterations=30)
        report = traj.design_report
        print(f"\ntoy -log det {report.initial_cost:.2f} -> {report.final_cost:.2f} in {report.iterations} "
              f"iterations, {report.seconds:.2f} s: {report.message}")
        assert report.final_cost == pytest.approx(_toy_log_det_cost(traj))
        assert report.success, report.message       # converged within the 30 iterations
        # the information matrix's determinant grows at least e^5 (about 150) times
        assert report.final_cost < report.initial_cost - 5.0


def test_torque_limit_holds():
    inertia, gravity = np.array([0.5, 0.2]), np.array([4.0, 1.5])
    tau_max = np.array([3.0, 1.2])

    def pendulum_torques(q, v, a):
        return inertia * a + gravity * np.sin(q)

    lower, upper = np.array([-1.5, -1.5]), np.array([1.5, 1.5])
    traj = design_exciting_trajectory(2, lower, upper, 2.0, period=5.0, harmonics=3, seed=2,
                                      tau_check=pendulum_torques, tau_max=tau_max)
    q, v, a = traj.evaluate(np.linspace(0.0, traj.period, 20_001))
    tau = pendulum_torques(q, v, a)
    assert np.all(np.abs(tau) <= (1 - 0.025) * tau_max)
    assert np.all(np.abs(tau).max(axis=0) > 0.5 * tau_max)  # the torque limit shaped the motion


def test_design_rejects_bad_limits():
    with pytest.raises(ModelError, match="upper"):
        design_exciting_trajectory(2, [0.0, 1.0], [1.0, 0.5], 1.0)
    with pytest.raises(ModelError, match="together"):
        design_exciting_trajectory(2, [0.0, 0.0], [1.0, 1.0], 1.0, tau_check=lambda q, v, a: q)
    with pytest.raises(ModelError, match="q_start"):
        design_exciting_trajectory(2, [0.0, 0.0], [1.0, 1.0], 1.0, q_start=[0.5, 0.99])
    with pytest.raises(ModelError, match="no feasible starting trajectory: even a tiny motion about 0.0000 breaks "
                                         "the position, velocity or effort limits"):
        design_exciting_trajectory(1, [-1.0], [1.0], 1.0, tau_check=lambda q, v, a: 5.0 + q, tau_max=1.0)


def test_working_set_holds_rows_near_their_bounds_and_the_minima_of_every_series():
    """A dictionary of 2 blocks of 8 instants x 2 columns: the rows below a quarter of their scale, each series'
    periodic local minima with their neighbours in time, and the rows chosen before are in it; a dictionary
    without a scale keeps every row."""
    t = np.arange(8)
    series = np.stack([np.stack([2.0 + np.cos(2 * np.pi * t / 8), 3.0 + np.zeros(8)], axis=1),
                       np.stack([5.0 - t, 4.0 + np.sin(2 * np.pi * t / 4)], axis=1)])    # (2 blocks, 8, 2)
    scale = np.full(series.size, 4.0)
    rows = [{"type": "ineq", "fun": lambda x: series.ravel(), "columns": 2, "scale": scale},
            {"type": "eq", "fun": lambda x: np.zeros(3)}]
    masks = working_set(rows, np.zeros(1), 8)
    mask = masks[0].reshape(2, 8, 2)
    np.testing.assert_array_equal(np.flatnonzero(mask[0, :, 0]), [3, 4, 5])        # the minimum at t = 4
    assert mask[0, :, 1].all()                                                     # constant: every instant a minimum
    np.testing.assert_array_equal(np.flatnonzero(mask[1, :, 0]), [0, 5, 6, 7])      # below 1 (t >= 5), minimum at 7
    np.testing.assert_array_equal(np.sort(np.flatnonzero(mask[1, :, 1])), [0, 2, 3, 4, 6, 7])  # minima at 3, 7
    assert masks[1].all()
    chosen = [np.ones(series.size, dtype=bool), masks[1]]
    assert working_set(rows, np.zeros(1), 8, chosen)[0].all()


def test_a_design_under_the_working_set_breaks_no_row_and_reaches_rows_it_first_left_out():
    """SLSQP sees the rows near their bounds; the design still ends where no row of the grid is broken, at bounds
    that were far at the start (the set grew where the motion went)."""
    coefficients = _Coefficients(3, 4, 8.0)
    grid = np.linspace(0.0, 8.0, 80, endpoint=False)
    limits = LimitConstraints(coefficients, LOWER, UPPER, V_MAX, A_MAX, None, None)
    objective, with_gradient = _objective(coefficients, None, None, grid, LOWER, UPPER, V_MAX, A_MAX)
    rng = np.random.default_rng(3)
    x0 = coefficients.pack((LOWER + UPPER) / 2, 0.01 * rng.normal(size=(3, 4)), 0.01 * rng.normal(size=(3, 4)))
    rows = limits.slsqp_constraints(grid, 0.05)
    first = working_set(rows, x0, len(grid))[0]
    assert first.sum() < 0.2 * first.size
    x, _, result = _optimise(objective, with_gradient, x0, rows, grid, None, None, 0, 100)
    assert result.success, result.message
    slack = rows[0]["fun"](x)
    assert slack.min() >= -1e-9
    active = slack < 1e-6 * np.abs(rows[0]["scale"])
    assert np.sum(active & ~first) >= 3
    assert objective(x)[0] < objective(x0)[0] - 1.0
