"""Small dense solves of the estimators' updates, through LAPACK directly.

At one update per joint state (1 kHz) the wrappers of ``scipy.linalg`` and ``numpy.linalg`` (argument checks,
batching, LU where the matrix is symmetric positive definite) cost more than the factorisations of the
estimators' matrices themselves (r x r information matrices, r about 50-90; innovation covariances of at most
16 rows): the Panda's estimator step 157 µs a joint state through these against 247 µs through
``scipy.linalg``, ``numpy.linalg`` and ``numpy.median``, the same estimate (``benchmarks/estimator_update.py``,
docs/PERFORMANCE.md)."""
from __future__ import annotations

import numpy as np
import scipy.linalg

_POTRF, _POTRS, _TRTRS, _POSV = scipy.linalg.get_lapack_funcs(("potrf", "potrs", "trtrs", "posv"), dtype=np.float64)


def cholesky_lower(A):
    """The lower Cholesky factor of the symmetric positive definite ``A`` (r, r) as LAPACK's ``dpotrf`` leaves
    it (the upper triangle unspecified); ``numpy.linalg.LinAlgError`` when ``A`` is not positive definite."""
    c, info = _POTRF(A, lower=1, clean=0)
    if info != 0:
        raise np.linalg.LinAlgError(f"the matrix is not positive definite (dpotrf info {info})")
    return c


def cholesky_solve(c, b):
    """``A⁻¹ b`` for ``b`` (r,) or (r, k), ``c`` the :func:`cholesky_lower` factor of A."""
    x, info = _POTRS(c, b, lower=1)
    if info != 0:
        raise ValueError(f"dpotrs: illegal argument {-info}")
    return x


def lower_solve(c, B):
    """``L⁻¹ B`` for ``B`` (r, k), ``L`` the lower triangle of ``c``."""
    x, info = _TRTRS(c, B, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"a singular triangular factor (dtrtrs info {info})")
    return x


def spd_solve(S, b):
    """``S⁻¹ b`` for a symmetric positive definite ``S`` (m, m) and ``b`` (m,) or (m, k) (``dposv``);
    ``numpy.linalg.solve`` when ``S`` is not positive definite."""
    _, x, info = _POSV(S, b, lower=1)
    return x if info == 0 else np.linalg.solve(S, b)


def spd_inverse(S):
    """``S⁻¹`` of a symmetric positive definite ``S`` (m, m) (:func:`spd_solve` of the identity)."""
    return spd_solve(S, np.eye(S.shape[0]))


def median(x):
    """``numpy.median`` of a small 1-D ``x`` (NaN when any entry is), without its general-purpose overhead."""
    x = np.sort(x)
    n = x.size
    if n == 0 or np.isnan(x[-1]):
        return float("nan")
    return float(x[n // 2]) if n % 2 else 0.5 * (float(x[n // 2 - 1]) + float(x[n // 2]))
