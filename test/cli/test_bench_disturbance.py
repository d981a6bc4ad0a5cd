"""The figures of ``robodyn bench disturbance`` (:func:`disturbance_response`) on error traces whose answer is
known: the undisturbed level one period earlier, the peak after the disturbance, the recovery time to within
twice the undisturbed level, and None while the error is still above it."""
import numpy as np
import pytest

from robodyn_ros.benchmarks.disturbance import disturbance_response

T = np.arange(0.0, 12.0, 1e-3)
PERIOD, T_D = 4.0, 8.0


def trace(decay):
    """A periodic error of amplitude 0.01 plus, from T_D, a bump 0.1 exp(-(t - T_D) / decay)."""
    e = 0.01 * np.abs(np.sin(2 * np.pi * T / PERIOD))
    after = T >= T_D
    e[after] += 0.1 * np.exp(-(T[after] - T_D) / decay)
    return e


def test_undisturbed_level_peak_and_recovery_of_a_decaying_bump():
    undisturbed, peak, recovery = disturbance_response(T, trace(0.05), T_D, PERIOD, window=3.0)
    assert undisturbed == pytest.approx(0.01, rel=1e-6)
    assert peak == pytest.approx(0.1, rel=1e-3)
    # above 2 undisturbed = 0.02 until 0.1 exp(-s / 0.05) + the periodic part falls below it
    s = T[T >= T_D] - T_D
    above = s[trace(0.05)[T >= T_D] > 0.02]
    assert recovery == pytest.approx(above.max(), abs=1e-9) and 0.07 < recovery < 0.09


def test_no_recovery_while_the_error_stays_above_twice_the_undisturbed_level():
    assert disturbance_response(T, trace(50.0), T_D, PERIOD, window=3.0)[2] is None
    assert disturbance_response(T, 0.01 * np.ones_like(T), T_D, PERIOD, window=3.0) == (0.01, 0.01, 0.0)
    with pytest.raises(ValueError, match="no joint states"):
        disturbance_response(T[T < 5.0], trace(0.05)[T < 5.0], T_D, PERIOD, window=3.0)
