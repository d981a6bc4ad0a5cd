"""The Cramér–Rao bound on the model error (robodyn_ros/estimation/cramer_rao_bound.py), checked against what it
claims independently of its own algebra: closed forms (one joint; equal noise and inertia), the spread of least-squares fits to simulated
noisy torques (the best linear unbiased estimator meets the bound, one that ignores the noise's per-joint sizes
does not beat it), the 1/√T law, and the 2 x-oracle relation of computed torque."""
import numpy as np
import pytest

from robodyn_ros.estimation.cramer_rao_bound import (fisher_information, learning_bound, model_error,
                                                     model_error_for_oracle)


def test_one_joint_closed_form():
    """τ = m_e a + n (one parameter, the effective inertia): F̄ = mean(a²) / σ², Ḡ = mean(a²) / m², so ε₁ = σ / (m
    √rate) whatever the motion."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=500)
    m, sigma, rate = 0.7, 0.05, 1000.0
    bound = learning_bound(a[:, None, None], np.full((500, 1, 1), 1.0 / m), sigma, rate)
    assert bound.epsilon_1s == pytest.approx(sigma / (m * np.sqrt(rate)), rel=1e-12)
    assert bound.model_error(4.0) == pytest.approx(bound.epsilon_1s / 2.0, rel=1e-12)
    assert bound.time_to(bound.epsilon_1s / 3.0) == pytest.approx(9.0, rel=1e-12)
    assert (bound.directions, bound.parameters) == (1, 1)


def test_with_equal_noise_and_inertia_the_bound_does_not_depend_on_the_motion():
    """M = m I and σ equal on every joint: Ḡ = F̄ σ² / (nv m²), so ε₁ = (σ / m) sqrt(r / (nv rate)) for any motion
    that excites all r parameters: the information a motion gives and the error it makes felt grow together."""
    rng = np.random.default_rng(4)
    n, nv, r, m, sigma, rate = 300, 3, 8, 0.4, 0.05, 500.0
    for scale in (0.1, 1.0, 30.0):              # slow or fast, small or large: the same bound
        Y = scale * rng.normal(size=(n, nv, r)) * rng.uniform(0.1, 10.0, size=r)
        bound = learning_bound(Y, np.broadcast_to(np.eye(nv) / m, (n, nv, nv)), sigma, rate)
        assert bound.epsilon_1s == pytest.approx(sigma / m * np.sqrt(r / (nv * rate)), rel=1e-9)


def random_motion(rng, n=400, nv=3, r=8):
    """A regressor with every direction excited, a mass matrix per sample and unequal noise per joint."""
    Y = rng.normal(size=(n, nv, r)) * rng.uniform(0.5, 2.0, size=r)
    B = rng.normal(size=(n, nv, nv))
    M = np.einsum("kij,klj->kil", B, B) + 0.5 * np.eye(nv)
    return Y, np.linalg.inv(M), np.array([0.02, 0.2, 0.05])


def test_least_squares_fits_to_noisy_torques_meet_the_bound_and_do_not_beat_it():
    """1 s of the motion at 400 Hz (the samples once each), 600 noise draws: weighted least squares (the best
    linear unbiased estimate) has the bound's RMS model error to within the draws' spread; ordinary least squares,
    which weighs the noisy joint like the quiet ones, is worse."""
    rng = np.random.default_rng(1)
    Y, Minv, sigma = random_motion(rng)
    n, nv, r = Y.shape
    bound = learning_bound(Y, Minv, sigma, rate=float(n))
    beta = rng.normal(size=r)
    tau = np.einsum("kir,r->ki", Y, beta)
    A_w = (Y / sigma[None, :, None]).reshape(n * nv, r)
    A = Y.reshape(n * nv, r)
    weighted, ordinary = [], []
    for _ in range(600):
        measured = tau + rng.normal(size=(n, nv)) * sigma
        b_w = np.linalg.lstsq(A_w, (measured / sigma).reshape(-1), rcond=None)[0]
        b_o = np.linalg.lstsq(A, measured.reshape(-1), rcond=None)[0]
        weighted.append(b_w - beta)
        ordinary.append(b_o - beta)
    rms_w = np.sqrt(np.mean(model_error(Y, Minv, np.array(weighted)) ** 2))
    rms_o = np.sqrt(np.mean(model_error(Y, Minv, np.array(ordinary)) ** 2))
    assert bound.directions == r
    assert rms_w == pytest.approx(bound.model_error(1.0), rel=0.06), (rms_w, bound.model_error(1.0))
    assert rms_o > 1.2 * bound.model_error(1.0), (rms_o, bound.model_error(1.0))


def test_the_information_adds_up_over_samples_and_scales_with_the_noise():
    rng = np.random.default_rng(2)
    Y, Minv, sigma = random_motion(rng, n=50)
    F = fisher_information(Y, sigma)
    assert np.allclose(F, fisher_information(Y[:20], sigma) + fisher_information(Y[20:], sigma))
    assert np.allclose(fisher_information(Y, 2.0 * sigma), F / 4.0)
    twice = learning_bound(Y, Minv, 2.0 * sigma, rate=100.0)
    assert twice.epsilon_1s == pytest.approx(2.0 * learning_bound(Y, Minv, sigma, rate=100.0).epsilon_1s, rel=1e-9)


def test_a_direction_the_motion_does_not_excite_is_left_out():
    """A parameter whose column is zero along the motion: no estimate learns it, the motion does not feel it; the
    bound is that of the other parameters."""
    rng = np.random.default_rng(3)
    Y, Minv, sigma = random_motion(rng, n=200, r=5)
    padded = np.concatenate([Y, np.zeros(Y.shape[:2] + (1,))], axis=2)
    full, bound = learning_bound(Y, Minv, sigma, 100.0), learning_bound(padded, Minv, sigma, 100.0)
    assert (bound.directions, bound.parameters) == (5, 6)
    assert bound.epsilon_1s == pytest.approx(full.epsilon_1s, rel=1e-9)


def test_the_oracle_relation_and_bad_input():
    """Within 2 x the oracle's RMS e_o: (ε / k_P)² at most 3 e_o²; a zero or negative noise is refused."""
    assert model_error_for_oracle(400.0, 1e-5) == pytest.approx(np.sqrt(3.0) * 400.0 * 1e-5)
    assert model_error_for_oracle(400.0, 1e-5, factor=1.0) == 0.0
    with pytest.raises(ValueError, match="positive"):
        learning_bound(np.ones((3, 1, 1)), np.ones((3, 1, 1)), 0.0, 1000.0)
