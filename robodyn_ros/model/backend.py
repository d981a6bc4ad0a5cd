"""The small math interface every algorithm is written against (STYLE rule 5).

An algorithm receives ``ops`` and uses only these operations, so the same code runs on NumPy arrays
(numeric evaluation) and on CasADi SX symbols (derivatives, code generation, the MPC).

Shapes: a vector of length n is ``(n,)`` on NumPy and ``(n, 1)`` on CasADi; matrices are 2-D on both.
Constant NumPy matrices may be mixed with symbolic operands through :meth:`mtimes`.
"""
from __future__ import annotations

import numpy as np

try:  # CasADi is a hard dependency of the package, but the numeric path must not need it at import.
    import casadi as ca
except ImportError:  # pragma: no cover
    ca = None


class NumpyOps:
    """Dense NumPy float64 implementation."""

    name = "numpy"

    def zeros(self, n, m=None):
        return np.zeros(n) if m is None else np.zeros((n, m))

    def const(self, x):
        """A numeric constant in this backend's type (vectors stay 1-D)."""
        return np.asarray(x, dtype=float)

    def eye(self, n):
        return np.eye(n)

    def vec(self, *xs):
        return np.array(xs, dtype=float)

    def vcat(self, parts):
        return np.concatenate([np.atleast_1d(p) for p in parts])

    def hcat(self, cols):
        return np.column_stack(cols)

    def blocks(self, rows):
        # np.block is general but slow (half the time of the NumPy derivatives); the algorithms pass 2-D blocks
        try:
            return np.concatenate([np.concatenate(r, axis=1) for r in rows], axis=0)
        except ValueError:
            return np.block(rows)

    def sin(self, x):
        return np.sin(x)

    def cos(self, x):
        return np.cos(x)

    def sqrt(self, x):
        return np.sqrt(x)

    def tanh(self, x):
        return np.tanh(x)

    def diag(self, x):
        """The square matrix with the vector ``x`` (n,) on its diagonal."""
        return np.diag(x)

    def fabs(self, x):
        return np.abs(x)

    def sign(self, x):
        return np.sign(x)

    def fmax(self, a, b):
        return np.maximum(a, b)

    def fmin(self, a, b):
        return np.minimum(a, b)

    def if_else(self, cond, a, b):
        """Elementwise ``a`` where ``cond`` else ``b`` (both evaluated)."""
        return np.where(cond, a, b)

    def cross(self, a, b):
        return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])

    def dot(self, a, b):
        return a @ b

    def mtimes(self, A, b):
        return A @ b

    def T(self, A):
        return A.T

    def outer(self, a, b):
        return np.outer(a, b)

    def skew(self, a):
        return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])

    def solve(self, A, b):
        return np.linalg.solve(A, b)

    def inv(self, A):
        return np.linalg.inv(A)

    def col(self, A, j):
        return A[:, j]

    def is_symbolic(self):
        return False


class CasadiOps:
    """CasADi SX (or MX) implementation; vectors are column matrices."""

    name = "casadi"

    def zeros(self, n, m=None):
        return ca.SX.zeros(n, 1 if m is None else m)

    def const(self, x):
        """A numeric constant as a CasADi DM (vectors become columns)."""
        if isinstance(x, (ca.SX, ca.MX, ca.DM)):
            return x
        return ca.DM(np.asarray(x, dtype=float))

    def eye(self, n):
        return ca.SX.eye(n)

    def vec(self, *xs):
        return ca.vertcat(*xs)

    def vcat(self, parts):
        return ca.vertcat(*parts)

    def hcat(self, cols):
        return ca.horzcat(*cols)

    def blocks(self, rows):
        return ca.vertcat(*[ca.horzcat(*r) for r in rows])

    def sin(self, x):
        return ca.sin(x)

    def cos(self, x):
        return ca.cos(x)

    def sqrt(self, x):
        return ca.sqrt(x)

    def tanh(self, x):
        return ca.tanh(x)

    def diag(self, x):
        return ca.diag(x)

    def fabs(self, x):
        return ca.fabs(x)

    def sign(self, x):
        return ca.sign(x)

    def fmax(self, a, b):
        return ca.fmax(a, b)

    def fmin(self, a, b):
        return ca.fmin(a, b)

    def if_else(self, cond, a, b):
        """Elementwise ``a`` where ``cond`` else ``b`` (the branch not taken contributes 0, even NaN)."""
        return ca.if_else(cond, a, b)

    def cross(self, a, b):
        return ca.vertcat(a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])

    def dot(self, a, b):
        return ca.dot(a, b)

    def mtimes(self, A, b):
        if isinstance(A, np.ndarray):
            A = ca.DM(A) if A.ndim == 2 else ca.DM(A.reshape(-1, 1))
        if isinstance(b, np.ndarray):
            b = ca.DM(b) if b.ndim == 2 else ca.DM(b.reshape(-1, 1))
        return ca.mtimes(A, b)

    def T(self, A):
        if isinstance(A, np.ndarray):
            return A.T
        return A.T

    def outer(self, a, b):
        return ca.mtimes(a, ca.transpose(b))

    def skew(self, a):
        return ca.vertcat(ca.horzcat(0, -a[2], a[1]), ca.horzcat(a[2], 0, -a[0]), ca.horzcat(-a[1], a[0], 0))

    def solve(self, A, b):
        return ca.solve(A, b)

    def inv(self, A):
        return ca.inv(A)

    def col(self, A, j):
        return A[:, j]

    def is_symbolic(self):
        return True


NUMPY = NumpyOps()
CASADI = CasadiOps()


def ops_for(*xs):
    """The backend matching the arguments: CasADi when any of them is a CasADi type, else NumPy."""
    if ca is not None:
        for x in xs:
            if isinstance(x, (ca.SX, ca.MX, ca.DM)):
                return CASADI
    return NUMPY
