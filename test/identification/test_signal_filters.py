"""Filters against analytic sinusoids: derivative errors on noisy, quantised, non-uniform samples, and
the causal filter's gain and phase against the Butterworth/Tustin theory."""

import numpy as np
import pytest


from robodyn_ros.model.errors import ModelError
from robodyn_ros.identification.signal_filters import (
    CausalButterworthFilter,
    butterworth_response,
    encoder_resolution,
    filter_joint_signals,
    quantize,
)

AMPLITUDE = np.array([0.5, 0.3])
FREQUENCY = np.array([0.7, 1.9])  # Hz
PHASE = np.array([0.2, 1.0])
RESOLUTION = encoder_resolution(2**16)


def _sinusoid(t, derivative=0, frequency=FREQUENCY, amplitude=AMPLITUDE, phase=PHASE):
    """d^k/dt^k of amplitude * sin(w t + phase), (N, n)."""
    w = 2 * np.pi * np.asarray(frequency)
    return amplitude * w**derivative * np.sin(w * np.asarray(t)[:, None] + phase + derivative * np.pi / 2)


def _jittered_times(n_samples, seed=0):
    """Sampling at 1 kHz on average with steps uniform in [0.5, 1.5] ms."""
    return np.cumsum(np.random.default_rng(seed).uniform(0.5e-3, 1.5e-3, n_samples))


def _measured_positions(t, seed=1):
    noise = np.random.default_rng(seed).normal(0.0, 1e-4, (len(t), 2))
    return quantize(_sinusoid(t) + noise, RESOLUTION)


def _relative_rms(estimate, truth):
    return np.sqrt(np.mean((estimate - truth) ** 2)) / np.sqrt(np.mean(truth**2))


def _complex_gain(t, y, frequency):
    """G such that y ~ Im(G exp(j w t)) = |G| sin(w t + arg G), by least squares (one channel)."""
    w = 2 * np.pi * frequency
    basis = np.stack([np.sin(w * t), np.cos(w * t), np.ones_like(t)], axis=1)
    c = np.linalg.lstsq(basis, y, rcond=None)[0]
    return c[0] + 1j * c[1]


def test_quantize_snaps_to_resolution():
    x = np.random.default_rng(0).normal(size=1000)
    xq = quantize(x, RESOLUTION)
    assert np.max(np.abs(xq - x)) <= RESOLUTION / 2 + 1e-15
    np.testing.assert_allclose(xq / RESOLUTION, np.round(xq / RESOLUTION), atol=1e-9)
    assert RESOLUTION == pytest.approx(2 * np.pi / 65536)


def test_offline_derivatives_from_noisy_quantised_non_uniform_positions():
    t = _jittered_times(10_000)
    q_measured = _measured_positions(t)
    filtered = filter_joint_signals(t, q_measured, cutoff_hz=10.0)
    inside = filtered.valid
    assert inside.sum() > 0.9 * len(t)
    errors = [_relative_rms(x[inside], _sinusoid(t[inside], k)) for k, x in
              enumerate((filtered.q, filtered.v, filtered.a))]
    print(f"\noffline, positions only: relative RMS errors q {errors[0]:.2e}, v {errors[1]:.2e}, a {errors[2]:.2e}")
    assert errors[0] < 3e-4 and errors[1] < 2e-3 and errors[2] < 1e-2
    # the problem is not trivial: differencing the raw samples twice is useless
    raw_a = np.gradient(np.gradient(q_measured, t, axis=0), t, axis=0)
    assert _relative_rms(raw_a[inside], _sinusoid(t[inside], 2)) > 1.0
    # near the ends (quadratic extension) the acceleration is still usable
    assert np.max(np.abs(filtered.a - _sinusoid(t, 2))) < 0.25 * np.max(np.abs(_sinusoid(t, 2)))


def test_offline_acceleration_from_measured_velocity():
    t = _jittered_times(10_000, seed=2)
    v_measured = _sinusoid(t, 1) + np.random.default_rng(3).normal(0.0, 1e-2, (len(t), 2))
    filtered = filter_joint_signals(t, _measured_positions(t), v_measured, cutoff_hz=10.0)
    inside = filtered.valid
    err_v = _relative_rms(filtered.v[inside], _sinusoid(t[inside], 1))
    err_a = _relative_rms(filtered.a[inside], _sinusoid(t[inside], 2))
    print(f"\noffline, measured v: relative RMS errors v {err_v:.2e}, a {err_a:.2e}")
    assert err_v < 3e-3 and err_a < 1e-2


def test_offline_joints_without_velocity_or_torque_interface():
    """read_joint_states gives NaN columns for missing interfaces; those joints fall back to positions."""
    t = _jittered_times(4000, seed=10)
    q_measured = _measured_positions(t, seed=11)
    v_measured = _sinusoid(t, 1)
    v_measured[:, 1] = np.nan
    tau = _sinusoid(t)
    tau[:, 0] = np.nan
    filtered = filter_joint_signals(t, q_measured, v_measured, tau, cutoff_hz=10.0)
    positions_only = filter_joint_signals(t, q_measured, cutoff_hz=10.0)
    np.testing.assert_array_equal(filtered.v[:, 1], positions_only.v[:, 1])
    inside = filtered.valid
    assert _relative_rms(filtered.v[inside, 0], _sinusoid(t[inside], 1)[:, 0]) < 1e-3
    assert np.isnan(filtered.tau[:, 0]).all() and np.isfinite(filtered.tau[:, 1]).all()


def test_offline_filter_is_shared_by_torque_near_cutoff():
    """tau = 2 a + 3 q stays true between filtered signals although F attenuates them."""
    t = _jittered_times(6000, seed=4)
    frequency, amplitude = np.array([7.0, 9.0]), np.array([0.1, 0.05])
    q = _sinusoid(t, 0, frequency, amplitude)
    tau = 2.0 * _sinusoid(t, 2, frequency, amplitude) + 3.0 * q
    filtered = filter_joint_signals(t, q, tau=tau, cutoff_hz=8.0)
    inside = filtered.valid
    attenuation = _relative_rms(filtered.a[inside], _sinusoid(t[inside], 2, frequency, amplitude))
    mismatch = _relative_rms(filtered.tau[inside], 2.0 * filtered.a[inside] + 3.0 * filtered.q[inside])
    assert attenuation > 0.2  # F matters at these frequencies
    assert mismatch < 1e-3


def test_offline_rejects_bad_input():
    t = _jittered_times(1000)
    q = _sinusoid(t)
    with pytest.raises(ModelError, match="strictly increasing"):
        filter_joint_signals(t[::-1], q, cutoff_hz=5.0)
    with pytest.raises(ModelError, match="Nyquist"):
        filter_joint_signals(t, q, cutoff_hz=800.0)
    q[3, 0] = np.nan
    with pytest.raises(ModelError, match="NaN"):
        filter_joint_signals(t, q, cutoff_hz=5.0)


def _run_causal(filt, t, q, v=None, tau=None):
    outputs = [filt.update(t[i], q[i], None if v is None else v[i], None if tau is None else tau[i])
               for i in range(len(t))]
    return [np.array([o[k] for o in outputs]) for k in range(4 if tau is not None else 3)]


@pytest.mark.parametrize("order", [2, 3])
@pytest.mark.parametrize("frequency", [2.0, 10.0, 20.0])
def test_causal_gain_and_phase_match_tustin_theory(order, frequency):
    h, cutoff = 1e-3, 20.0
    t = np.arange(3000) * h
    u = np.sin(2 * np.pi * frequency * t)
    q_f, v_f, _ = _run_causal(CausalButterworthFilter(1, cutoff, order), t, u[:, None])
    steady = t > 1.0
    measured = _complex_gain(t[steady], q_f[steady, 0], frequency)
    theory = butterworth_response(frequency, cutoff, order, step=h)
    assert abs(measured - theory) < 1e-6
    # the velocity state is the derivative of the filtered signal: (j w_h) F(j w_h), w_h the warped frequency
    w, w_h = 2 * np.pi * frequency, 2 / h * np.tan(np.pi * frequency * h)
    measured_v = _complex_gain(t[steady], v_f[steady, 0], frequency)
    assert abs(measured_v - 1j * w_h * theory) < 1e-6 * w
    # and the warped response is close to the analog one at these frequencies
    assert abs(theory - butterworth_response(frequency, cutoff, order)) < 3e-3


@pytest.mark.parametrize("order, delay", [(2, np.sqrt(2)), (3, 2.0)])
def test_causal_low_frequency_delay(order, delay):
    cutoff, frequency = 20.0, 0.5
    filt = CausalButterworthFilter(1, cutoff, order)
    assert filt.low_frequency_delay == pytest.approx(delay / (2 * np.pi * cutoff))
    t = np.arange(6000) * 1e-3
    q_f, _, _ = _run_causal(filt, t, np.sin(2 * np.pi * frequency * t)[:, None])
    steady = t > 1.0
    lag = -np.angle(_complex_gain(t[steady], q_f[steady, 0], frequency)) / (2 * np.pi * frequency)
    print(f"\norder {order}: delay {lag * 1e3:.2f} ms measured, {filt.low_frequency_delay * 1e3:.2f} ms theory")
    assert lag == pytest.approx(filt.low_frequency_delay, rel=2e-3)


def _filtered_sinusoid(t, derivative, cutoff, order):
    """The analog filter's steady-state output for the test sinusoids, differentiated."""
    gain = butterworth_response(FREQUENCY, cutoff, order)
    return _sinusoid(t, derivative, FREQUENCY, AMPLITUDE * np.abs(gain), PHASE + np.angle(gain))


def test_causal_on_noisy_quantised_non_uniform_samples():
    cutoff, order = 20.0, 3
    t = _jittered_times(5000, seed=5)
    q_f, v_f, a_f = _run_causal(CausalButterworthFilter(2, cutoff, order), t, _measured_positions(t, seed=6))
    steady = t > 0.5
    errors = [_relative_rms(x[steady], _filtered_sinusoid(t[steady], k, cutoff, order))
              for k, x in enumerate((q_f, v_f, a_f))]
    print(f"\ncausal, positions only: relative RMS errors q {errors[0]:.2e}, v {errors[1]:.2e}, a {errors[2]:.2e}")
    assert errors[0] < 1e-3 and errors[1] < 5e-3 and errors[2] < 5e-2


def test_causal_with_measured_velocity_and_torque_share_one_filter():
    cutoff, order = 20.0, 2
    t = _jittered_times(5000, seed=7)
    rng = np.random.default_rng(8)
    v_measured = _sinusoid(t, 1) + rng.normal(0.0, 1e-2, (len(t), 2))
    q_exact = _sinusoid(t)
    tau = 2.0 * _sinusoid(t, 2) + 3.0 * q_exact
    q_f, v_f, a_f, tau_f = _run_causal(CausalButterworthFilter(2, cutoff, order), t,
                                       _measured_positions(t, seed=9), v_measured, tau)
    steady = t > 0.5
    assert _relative_rms(v_f[steady], _filtered_sinusoid(t[steady], 1, cutoff, order)) < 5e-3
    assert _relative_rms(a_f[steady], _filtered_sinusoid(t[steady], 2, cutoff, order)) < 2e-2
    assert _relative_rms(tau_f[steady], 2.0 * a_f[steady] + 3.0 * q_f[steady]) < 2e-2


def test_causal_reset_and_input_errors():
    filt = CausalButterworthFilter(2, 10.0)
    first = filt.update(0.0, [1.0, 2.0])
    np.testing.assert_array_equal(first[0], [1.0, 2.0])
    np.testing.assert_array_equal(first[1], [0.0, 0.0])
    moved = filt.update(0.001, [1.5, 2.0])
    assert moved[0][0] > 1.0 and moved[1][0] > 0.0
    repeated = filt.update(0.001, [9.0, 9.0])
    np.testing.assert_array_equal(repeated[0], moved[0])
    with pytest.raises(ModelError, match="backwards"):
        filt.update(0.0, [1.0, 2.0])
    with pytest.raises(ModelError, match="every update"):
        filt.update(0.002, [1.0, 2.0], v=[0.0, 0.0])
    with pytest.raises(ModelError, match="shape"):
        filt.update(0.002, [1.0, 2.0, 3.0])
    filt.reset()
    restarted = filt.update(-5.0, [3.0, 4.0], v=[0.5, 0.0])
    np.testing.assert_array_equal(restarted[0], [3.0, 4.0])
    np.testing.assert_array_equal(restarted[1], [0.5, 0.0])
    with pytest.raises(ModelError, match="order"):
        CausalButterworthFilter(2, 10.0, order=1)


def test_real_panda_velocity_from_positions_agrees_with_measured_velocity(panda_log):
    """Gaz et al. 2019 Panda log: non-uniform steps (0.7-8.8 ms). Velocity differentiated from filtered
    positions must agree with the robot's measured velocity passed through the same filter."""
    t, q, v, _ = panda_log
    from_positions = filter_joint_signals(t, q, cutoff_hz=5.0)
    from_velocity = filter_joint_signals(t, q, v, cutoff_hz=5.0)
    inside = from_positions.valid
    for k in range(7):
        error_v = _relative_rms(from_positions.v[inside, k], from_velocity.v[inside, k])
        error_a = _relative_rms(from_positions.a[inside, k], from_velocity.a[inside, k])
        assert error_v < 0.02 and error_a < 0.06, (k, error_v, error_a)
    causal_q, causal_v = CausalButterworthFilter(7, 5.0), CausalButterworthFilter(7, 5.0)
    v_q = np.array([causal_q.update(ti, qi)[1] for ti, qi in zip(t, q)])
    v_v = np.array([causal_v.update(ti, qi, vi)[1] for ti, qi, vi in zip(t, q, v)])
    steady = t > 1.0
    assert max(_relative_rms(v_q[steady, k], v_v[steady, k]) for k in range(7)) < 0.02
