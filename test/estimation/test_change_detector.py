"""The base-parameter estimator's change detector on a model that already is the robot: it must arm once the
estimate predicts within the noise, however far the wide prior put the first predictions, and then see a
change at once (estimation/base_parameter_estimator.py, module docstring).

Synthetic and independent of any robot: 20 parameters, 6 rows, regressors drawn per sample, torques from the
prior's own parameters plus 0.01 N m of noise, 100 samples/s behind a 20-Hz filter. The prior (std 10 on
unit regressors) makes the first predictions uncertain by about 10⁷ σ², as a URDF prior does on a robot whose
torques are measured to 0.01 N m (the UR10 of example-robot-data simulated as its own URDF: 1.8e6 in the first
samples, below 1 within 1-2 s)."""
import numpy as np

from robodyn_ros.estimation.base_parameter_estimator import BaseParameterEstimator

R, ROWS, RATE, NOISE = 20, 6, 100.0, 0.01
CHANGE_AT = 6.0


def _run(change, seconds=8.0, seed=4):
    rng = np.random.default_rng(seed)
    beta = rng.normal(size=R)
    est = BaseParameterEstimator(beta, 10.0, ROWS, bandwidth=20.0, sigma_floor=1e-4, sigma_time=2.0,
                                 boost_indices=np.arange(4), boost_variance=1.0)
    armed_at = detected_at = None
    for k in range(int(seconds * RATE)):
        t = k / RATE
        Y = rng.normal(size=(ROWS, R))
        tau = Y @ beta + NOISE * rng.normal(size=ROWS)
        if t >= CHANGE_AT:
            tau = tau + Y[:, :4] @ change          # a payload: a change of the parameters it moves
        update = est.update(t, Y, tau)
        if armed_at is None and est.armed:
            armed_at = t
        if update.change_detected and detected_at is None:
            detected_at = t
    return est, armed_at, detected_at


def test_detector_arms_on_an_exact_model_and_sees_a_change_at_once():
    est, armed_at, detected_at = _run(np.array([0.5, -0.3, 0.2, 0.1]))
    # armed after 2 sigma_time of data (4 s), well before the change; the uncertainty then is far below 1
    assert armed_at is not None and armed_at <= 4.5, armed_at
    assert detected_at is not None and CHANGE_AT <= detected_at <= CHANGE_AT + 0.3, detected_at
    assert est.changes == 1


def test_detector_does_not_alarm_without_a_change():
    est, armed_at, detected_at = _run(np.zeros(4), seconds=10.0)
    assert armed_at is not None and detected_at is None and est.changes == 0
    assert est.uncertainty < 0.1, est.uncertainty      # an order of magnitude inside the arming bound
