"""The hold the inverse_dynamics node predicts over: the period of its joint states."""

from robodyn_ros.control.sample_period import SamplePeriod


def test_median_period_ignores_gaps_resets_and_jitter():
    """0 before two states; the median of the recent intervals, so one late state (a 5-ms gap) or a time
    reset (stamps going back) does not change it; jitter of ±0.2 ms around 1 ms gives 1 ms; reset forgets."""
    period = SamplePeriod(max_hold=0.01)
    assert period.update(10.0) == 0.0
    t, values = 10.0, []
    for k in range(20):
        t += 0.001 + (0.0002 if k % 2 else -0.0002)
        values.append(period.update(t))
    assert abs(values[-1] - 0.001) < 1e-4
    for _ in range(8):
        t += 0.001
        period.update(t)
    assert abs(period.update(t + 0.005) - 0.001) < 1e-4          # one late state
    assert abs(period.update(t + 0.006) - 0.001) < 1e-4
    assert abs(period.update(2.0) - 0.001) < 1e-4                # time went back: not an interval
    assert abs(period.update(2.02) - 0.001) < 1e-4               # a 20-ms gap: not a period
    period.reset()
    assert period.update(3.0) == 0.0
    assert abs(period.update(3.002) - 0.002) < 1e-12
