"""The controllers' dynamics interface (:class:`DynamicsFunctions`) on the compiled kernels' regressor, for
1 kHz loops whose inertial parameters change at run time.

The kernels are compiled for fixed parameters, but the joint-torque regressor is parameter-free
(Atkeson, An and Hollerbach 1986; Garofalo et al. eq. 15):

    rnea(q, v, a; pi) = Y(q, v, a) pi + D_a a          (D_a: armature, the model's)
    g(q; pi)          = Y(q, 0, 0) pi

so a new estimate ``pi`` costs nothing and each call is one compiled regressor (a few microseconds) and
one (nv, 10 nb) matrix-vector product, against tens of microseconds of Python overhead per CasADi call.
``slotine_li(q, v, v_r, a_r)`` is not among the kernels: it comes from :class:`DynamicsFunctions`
(compiled CasADi, built on first use).
"""
from __future__ import annotations

import numpy as np


class KernelDynamics:
    """``rnea``, ``gravity``, ``regressor``, ``mass`` and ``slotine_li`` of ``model`` from ``kernels``
    (:func:`robodyn_ros.kernels.compile_kernels`), with the signatures of :class:`DynamicsFunctions`."""

    def __init__(self, model, kernels):
        self.model = model
        self.kernels = kernels
        self._zero = np.zeros(model.nv)
        self._armature = np.asarray(model.armature, dtype=float)
        self._functions = None

    def rnea(self, q, v, a, pi):
        """``tau`` (nv,) = Y(q, v, a) pi + armature a."""
        a = np.asarray(a, dtype=float)
        return self.kernels.regressor(q, v, a) @ pi + self._armature * a

    def gravity(self, q, pi):
        """``g(q)`` (nv,) for the parameters ``pi``."""
        return self.kernels.regressor(q, self._zero, self._zero) @ pi

    def regressor(self, q, v, a):
        return self.kernels.regressor(q, v, a)

    def mass(self, q, pi):
        """``M(q)`` (nv, nv) column by column from the regressor (armature on the diagonal)."""
        nv = self.model.nv
        M = np.empty((nv, nv))
        for j in range(nv):
            e = np.zeros(nv)
            e[j] = 1.0
            M[:, j] = self.kernels.regressor(q, self._zero, e) @ pi - self.kernels.regressor(q, self._zero, self._zero) @ pi
        return M + np.diag(self._armature)

    def slotine_li(self, q, v, v_r, a_r):
        """Slotine-Li regressor (nv, 10 nb) (compiled CasADi, built on first use)."""
        if self._functions is None:
            from ..kernels.compiled_functions import DynamicsFunctions
            self._functions = DynamicsFunctions(self.model, compiled=True)
        return self._functions.slotine_li(q, v, v_r, a_r)
