"""CommandGuard without ROS: clamping to the effort bounds, the torque rate limit on step changes (applied
after the clamp, libfranka's limitRate rule), the hold of the last safe command on non-finite torques, and
the parameter convention of torque_rate_bounds."""
import math

import numpy as np
import pytest

from conftest import assert_close
from robodyn_ros.control.command_guard import (AUTOMATIC_RISE_TIME, CommandGuard, ControlStatus,
                                               torque_rate_bounds)

TAU_MAX = np.array([87.0, 87.0, 12.0])


def test_clamp_to_effort_bounds_marks_saturated_joints():
    guard = CommandGuard(TAU_MAX)
    status = ControlStatus()
    tau = guard.accept([100.0, -50.0, -30.0], status)
    assert_close(tau, [87.0, -50.0, -12.0])
    assert status.saturated.tolist() == [True, False, True]
    assert status.ok and status.fault == ""
    assert_close(guard.hold(), tau)                      # remembered as the last safe command


def test_rate_limit_ramps_a_step_at_the_bound_per_joint():
    rate = 1000.0                                         # N m/s, Franka's kMaxTorqueRate
    guard = CommandGuard(TAU_MAX, max_rate=rate)
    status = ControlStatus()
    first = guard.accept([0.0, 0.0, 0.0], status, dt=0.001)
    assert_close(first, [0.0, 0.0, 0.0])                  # no previous command: nothing to limit against
    target = np.array([50.0, -3.0, 0.5])
    out = []
    for _ in range(60):
        out.append(guard.accept(target, status := ControlStatus(), dt=0.001))
        if _ == 0:
            # 1 N m per 1 ms step: joints 0, 1 cut, joint 2 (0.5 N m) passes
            assert_close(out[0], [1.0, -1.0, 0.5])
            assert status.rate_limited.tolist() == [True, True, False]
    out = np.array(out)
    steps = np.abs(np.diff(np.vstack([first, out]), axis=0))
    assert steps.max() <= rate * 0.001 + 1e-12
    assert_close(out[2], [3.0, -3.0, 0.5])               # joint 1 reached its target after 3 ms
    assert_close(out[49], target)                        # joint 0 after 50 ms
    assert not status.rate_limited.any()


def test_rate_limit_applies_after_the_clamp_and_scales_with_dt():
    guard = CommandGuard(TAU_MAX, initial=np.zeros(3), max_rate=np.array([1000.0, 1000.0, 100.0]))
    status = ControlStatus()
    tau = guard.accept([500.0, -500.0, 500.0], status, dt=0.01)      # clamp first, then 10 N m / 1 N m
    assert_close(tau, [10.0, -10.0, 1.0])
    assert status.saturated.all() and status.rate_limited.all()
    tau = guard.accept([500.0, -500.0, 500.0], ControlStatus(), dt=1.0)
    assert_close(tau, [87.0, -87.0, 12.0])               # long interval: up to the clamped bound, not beyond
    # dt = 0 (duplicate time) holds the previous command; negative dt counts as 0
    assert_close(guard.accept([0.0, 0.0, 0.0], ControlStatus(), dt=0.0), [87.0, -87.0, 12.0])
    assert_close(guard.accept([0.0, 0.0, 0.0], ControlStatus(), dt=-0.5), [87.0, -87.0, 12.0])
    # no dt: not rate limited (the controllers' own guards)
    assert_close(guard.accept([0.0, 0.0, 0.0], ControlStatus()), [0.0, 0.0, 0.0])


def test_reset_forgets_the_previous_command():
    guard = CommandGuard(TAU_MAX, max_rate=1.0)
    guard.accept([0.0, 0.0, 0.0], ControlStatus(), dt=0.001)
    assert_close(guard.accept([5.0, 5.0, 5.0], ControlStatus(), dt=0.001), [0.001] * 3)
    guard.reset()
    assert_close(guard.hold(), [0.0, 0.0, 0.0])
    assert_close(guard.accept([5.0, 5.0, 5.0], ControlStatus(), dt=0.001), [5.0, 5.0, 5.0])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_torque_holds_the_last_safe_command(bad):
    guard = CommandGuard(TAU_MAX, max_rate=1000.0)
    guard.accept([10.0, -2.0, 1.0], ControlStatus(), dt=0.001)
    status = ControlStatus()
    tau = guard.accept([1.0, bad, 1.0], status, dt=0.001)
    assert_close(tau, [10.0, -2.0, 1.0])
    assert not status.ok and status.fault == "nonfinite_command" and "[1]" in status.message
    # the hold did not become a new reference: the next finite command is limited from the held one
    assert_close(guard.accept([10.0, -2.0, 3.0], ControlStatus(), dt=0.001), [10.0, -2.0, 2.0])


def test_torque_rate_bounds_parameter_convention():
    assert_close(torque_rate_bounds(TAU_MAX, 1000.0), [1000.0] * 3)
    assert np.all(np.isinf(torque_rate_bounds(TAU_MAX, 0.0)))
    assert np.all(np.isinf(torque_rate_bounds(TAU_MAX, math.inf)))
    assert_close(torque_rate_bounds(TAU_MAX, -1.0), TAU_MAX / AUTOMATIC_RISE_TIME)
    # disabled: a full-range step passes in one command
    guard = CommandGuard(TAU_MAX, initial=np.zeros(3), max_rate=torque_rate_bounds(TAU_MAX, 0.0))
    assert_close(guard.accept([-87.0, 87.0, 12.0], ControlStatus(), dt=1e-6), [-87.0, 87.0, 12.0])
    with pytest.raises(ValueError, match="max_rate"):
        CommandGuard(TAU_MAX, max_rate=0.0)
