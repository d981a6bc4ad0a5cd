"""The exciting-trajectory design's gradients, differenced through the samples (3 n + 1 evaluations), against
central differences of the same functions in the trajectory's coefficients, on real URDFs: the log condition
number of the base regressor (the design's cost) and the torques (its effort-limit rows)."""

import numpy as np
import pytest

from conftest import erd_path
from robodyn_ros.identification.base_parameters import compute_base_parameters
from robodyn_ros.identification.batch import predict_torques
from robodyn_ros.identification.excitation import log_condition_number, sample_jacobians
from robodyn_ros.identification.exciting_trajectory import _Coefficients
from robodyn_ros.model.model import Model
from robodyn_ros.robots import bundled_robot_info

ROBOTS = {
    "panda": None,
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",
    "iiwa": None,
}


def _model(name):
    if ROBOTS[name] is None:
        info = bundled_robot_info(name)
        return Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])
    return Model.from_urdf(erd_path(ROBOTS[name]))


def _motion(model, seed):
    """Coefficients x of a 5-harmonic, 10-s motion about the middle of the ranges, and the maps x -> q, v, a
    on 100 instants."""
    coefficients = _Coefficients(model.nv, 5, 10.0)
    grid = np.linspace(0.0, 10.0, 100, endpoint=False)
    rng = np.random.default_rng(seed)
    x = 0.2 * rng.normal(size=coefficients.size)
    bounded = np.isfinite(model.lower) & np.isfinite(model.upper)   # Kinova's continuous joints are not
    lower, upper = np.where(bounded, model.lower, 0.0), np.where(bounded, model.upper, 0.0)
    x[:model.nv] = (lower + upper) / 2.0
    maps = [coefficients.linear_map(grid, r).reshape(len(grid), model.nv, -1) for r in range(3)]
    return x, maps


def _central(f, x, step=1e-6):
    return np.stack([(f(x + step * e) - f(x - step * e)) / (2 * step) for e in np.eye(len(x))], axis=-1)


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_log_condition_number_gradient_matches_central_differences_in_the_coefficients(robot):
    model = _model(robot)
    base = compute_base_parameters(model, coulomb_width=0.05)
    x, maps = _motion(model, seed=1)

    def regressor(q, v, a):
        return base.regressor(model, q, v, a)

    def value(x):              # log κ by NumPy's condition number, one regressor evaluation
        return np.log(np.linalg.cond(regressor(*(G @ x for G in maps)).reshape(-1, base.count)))

    kappa, gradient = log_condition_number(regressor, *(G @ x for G in maps))
    chained = sum(np.einsum("ij,ijp->p", d, G) for d, G in zip(gradient, maps))
    expected = _central(value, x)
    assert kappa == pytest.approx(value(x), rel=1e-9)
    assert np.max(np.abs(chained - expected)) <= 1e-5 * np.max(np.abs(expected)), robot


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_torque_jacobian_matches_central_differences_in_the_coefficients(robot):
    model = _model(robot)
    x, maps = _motion(model, seed=2)

    def torques(q, v, a):
        return predict_torques(model, q, v, a, 0.05)

    tau, J = sample_jacobians(torques, *(G @ x for G in maps))
    N, n = tau.shape
    chained = sum(np.einsum("ikj,ijp->ikp", J[r], maps[r]) for r in range(3)).reshape(N * n, -1)
    expected = _central(lambda x: torques(*(G @ x for G in maps)).ravel(), x)
    assert np.array_equal(tau, torques(*(G @ x for G in maps)))
    assert np.max(np.abs(chained - expected)) <= 1e-5 * np.max(np.abs(expected)), robot
