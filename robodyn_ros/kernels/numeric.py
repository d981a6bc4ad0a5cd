"""The public numeric dynamics functions: compiled kernels when ``compile_kernels(model)`` has been called
for this model (:mod:`robodyn_ros.kernels.registry`), the interpreted algorithms otherwise.

Each function has the signature and result of the algorithm it wraps (shapes in those docstrings). The
kernel path is taken for NumPy-like inputs without the optional arguments the kernels do not take
(``f_ext``, ``pi``, ``snap``); CasADi symbols always go to the algorithm. Inputs are checked here
(shape and finiteness: ``ValueError`` / ``ModelError`` naming the argument, as on the interpreted path)
with a fast path for float64 arrays that costs well under a microsecond. A non-finite result of the
compiled ``aba`` or ``aba_derivatives`` (a singular articulated inertia: a moving body whose subtree has
no inertia) is recomputed by the algorithm, which raises ModelError naming the body.
"""
from __future__ import annotations

import math

import numpy as np

from ..dynamics import dynamic_matrices as _dm
from ..dynamics.aba import aba as _aba
from ..dynamics.crba import crba as _crba
from ..dynamics.regressor import regressor as _regressor
from ..dynamics.rnea import rnea as _rnea
from ..model.backend import NUMPY, ops_for
from .registry import get as _kernels_of

__all__ = ["rnea", "aba", "crba", "nonlinear_effects", "gravity_torque", "coriolis_matrix", "regressor",
           "rnea_derivatives", "aba_derivatives", "rnea_time_derivatives"]


def _vector(model, name, x, n):
    """``x`` as a finite float64 (n,) array: a fast check for float64 arrays (``x·x`` is finite exactly
    when every entry is, barring overflow, which the slow path then sorts out), else ``check_vector``."""
    if type(x) is np.ndarray and x.dtype == np.float64 and x.shape == (n,) and math.isfinite(x.dot(x)):
        return x
    return model.check_vector(name, x, n)


def _state(model, q, v, x, x_name):
    """``(q, v, x)`` checked by :func:`_vector`: (nq,), (nv,) and (nv,), ``x`` named ``x_name`` in errors."""
    return _vector(model, "q", q, model.nq), _vector(model, "v", v, model.nv), _vector(model, x_name, x, model.nv)


def _kernels(model, *args):
    """The registered kernels of ``model`` when every argument is numeric, else None."""
    kernels = _kernels_of(model)
    if kernels is None or ops_for(*args) is not NUMPY:
        return None
    return kernels


def _of_q(name, algorithm, model, q, pi):
    """Kernel ``name`` of ``q`` when it applies (numeric ``q``, no ``pi``), else ``algorithm(model, q, pi=pi)``."""
    k = _kernels(model, q) if pi is None else None
    if k is None:
        return algorithm(model, q, pi=pi)
    return getattr(k, name)(_vector(model, "q", q, model.nq))


def _of_q_v(name, algorithm, model, q, v, pi):
    """Kernel ``name`` of ``(q, v)`` when it applies, else ``algorithm(model, q, v, pi=pi)``."""
    k = _kernels(model, q, v) if pi is None else None
    if k is None:
        return algorithm(model, q, v, pi=pi)
    return getattr(k, name)(_vector(model, "q", q, model.nq), _vector(model, "v", v, model.nv))


def rnea(model, q, v, a, f_ext=None, pi=None):
    """Inverse dynamics ``tau`` (nv,); see :func:`robodyn_ros.dynamics.rnea.rnea`."""
    k = _kernels(model, q, v, a) if f_ext is None and pi is None else None
    if k is None:
        return _rnea(model, q, v, a, f_ext=f_ext, pi=pi)
    return k.rnea(*_state(model, q, v, a, "a"))


def aba(model, q, v, tau, f_ext=None, pi=None):
    """Forward dynamics ``a`` (nv,); see :func:`robodyn_ros.dynamics.aba.aba`."""
    k = _kernels(model, q, v, tau) if f_ext is None and pi is None else None
    if k is None:
        return _aba(model, q, v, tau, f_ext=f_ext, pi=pi)
    q, v, tau = _state(model, q, v, tau, "tau")
    a = k.aba(q, v, tau)
    if not math.isfinite(a.dot(a)):   # a singular articulated inertia: the algorithm names the body
        return _aba(model, q, v, tau)
    return a


def crba(model, q, pi=None):
    """Joint-space inertia ``M`` (nv, nv); see :func:`robodyn_ros.dynamics.crba.crba`."""
    return _of_q("crba", _crba, model, q, pi)


def nonlinear_effects(model, q, v, pi=None):
    """``C(q, v) v + g(q)`` (nv,); see :func:`robodyn_ros.dynamics.dynamic_matrices.nonlinear_effects`."""
    return _of_q_v("nonlinear_effects", _dm.nonlinear_effects, model, q, v, pi)


def gravity_torque(model, q, pi=None):
    """``g(q)`` (nv,); see :func:`robodyn_ros.dynamics.dynamic_matrices.gravity_torque`."""
    return _of_q("gravity_torque", _dm.gravity_torque, model, q, pi)


def coriolis_matrix(model, q, v, pi=None):
    """Christoffel Coriolis matrix ``C`` (nv, nv); see :func:`robodyn_ros.dynamics.dynamic_matrices.coriolis_matrix`."""
    return _of_q_v("coriolis_matrix", _dm.coriolis_matrix, model, q, v, pi)


def regressor(model, q, v, a):
    """Joint-torque regressor ``Y`` (nv, 10 nbodies); see :func:`robodyn_ros.dynamics.regressor.regressor`."""
    k = _kernels(model, q, v, a)
    if k is None:
        return _regressor(model, q, v, a)
    return k.regressor(*_state(model, q, v, a, "a"))


def rnea_derivatives(model, q, v, a):
    """``(dtau_dq, dtau_dv, dtau_da)``, each (nv, nv); see ``robodyn_ros.dynamics.rnea_derivatives``."""
    k = _kernels(model, q, v, a)
    if k is None:
        from ..dynamics.rnea_derivatives import rnea_derivatives as interpreted
        return interpreted(model, q, v, a)
    return k.rnea_derivatives(*_state(model, q, v, a, "a"))


def aba_derivatives(model, q, v, tau):
    """``(da_dq, da_dv, da_dtau)``, each (nv, nv); see ``robodyn_ros.dynamics.aba_derivatives``."""
    k = _kernels(model, q, v, tau)
    if k is None:
        from ..dynamics.aba_derivatives import aba_derivatives as interpreted
        return interpreted(model, q, v, tau)
    q, v, tau = _state(model, q, v, tau, "tau")
    out = k.aba_derivatives(q, v, tau)
    if not all(math.isfinite(float(np.sum(x))) for x in out):   # singular: the algorithm names the body
        from ..dynamics.aba_derivatives import aba_derivatives as interpreted
        return interpreted(model, q, v, tau)
    return out


def rnea_time_derivatives(model, q, v, a, jerk, snap=None, f_ext=None, f_ext_dot=None, f_ext_ddot=None):
    """``tau_dot`` (nv,), or ``(tau_dot, tau_ddot)`` when ``snap`` is given; see
    :func:`robodyn_ros.dynamics.time_derivatives.rnea_time_derivatives`. The kernel computes ``tau_dot`` without
    external wrenches only."""
    plain = snap is None and f_ext is None and f_ext_dot is None and f_ext_ddot is None
    k = _kernels(model, q, v, a, jerk) if plain else None
    if k is None:
        from ..dynamics.time_derivatives import rnea_time_derivatives as interpreted
        return interpreted(model, q, v, a, jerk, snap=snap, f_ext=f_ext, f_ext_dot=f_ext_dot, f_ext_ddot=f_ext_ddot)
    return k.rnea_time_derivatives(_vector(model, "q", q, model.nq), _vector(model, "v", v, model.nv),
                                   _vector(model, "a", a, model.nv), _vector(model, "jerk", jerk, model.nv))
