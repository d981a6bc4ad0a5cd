"""The estimators' direct LAPACK solves against NumPy's general ones, on random symmetric positive definite
matrices of the estimators' sizes (an information matrix of r = 70, innovation covariances of 6-16 rows), and
what they do with a matrix that is not positive definite."""
import numpy as np
import pytest

from robodyn_ros.estimation.dense_solves import (cholesky_lower, cholesky_solve, lower_solve, median, spd_inverse,
                                                 spd_solve)


def spd(rng, n, condition=1e6):
    """A random symmetric positive definite (n, n) matrix of the given condition number."""
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * np.logspace(0, np.log10(condition), n)) @ Q.T


@pytest.mark.parametrize("n", [1, 6, 16, 70])
def test_solves_equal_numpy(n):
    rng = np.random.default_rng(n)
    A = spd(rng, n)
    B = rng.normal(size=(n, 3))
    A0, B0 = A.copy(), B.copy()
    c = cholesky_lower(A)
    L = np.tril(c)
    assert np.allclose(L @ L.T, A, rtol=1e-12, atol=1e-12 * np.abs(A).max())
    assert np.allclose(cholesky_solve(c, B), np.linalg.solve(A, B), rtol=1e-8, atol=1e-10)
    assert np.allclose(cholesky_solve(c, B[:, 0]), np.linalg.solve(A, B[:, 0]), rtol=1e-8, atol=1e-10)
    assert np.allclose(lower_solve(c, B), np.linalg.solve(L, B), rtol=1e-8, atol=1e-10)
    assert np.allclose(spd_solve(A, B[:, 1]), np.linalg.solve(A, B[:, 1]), rtol=1e-8, atol=1e-10)
    assert np.allclose(spd_inverse(A) @ A, np.eye(n), atol=1e-8)
    assert np.array_equal(A, A0) and np.array_equal(B, B0)          # the inputs are not overwritten


def test_not_positive_definite():
    S = np.array([[1.0, 2.0], [2.0, 1.0]])          # eigenvalues 3 and -1
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        cholesky_lower(S)
    b = np.array([1.0, -1.0])
    assert np.allclose(spd_solve(S, b), np.linalg.solve(S, b))     # the general solve takes over


@pytest.mark.parametrize("x", [[3.0], [2.0, 1.0], [5.0, -1.0, 2.0, 7.0, 0.5, 0.5, 9.0], [4.0, 1.0, 3.0, 2.0],
                               [1.0, np.inf, 2.0]])
def test_median_equals_numpy(x):
    assert median(np.array(x)) == np.median(x)


def test_median_of_nan_is_nan():
    assert np.isnan(median(np.array([1.0, np.nan, 2.0]))) and np.isnan(median(np.array([])))
