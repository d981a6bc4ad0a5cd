"""The wrench regressor of a wrist force/torque sensor as one compiled function of the joint state.

A sensor at URDF link ``link`` transmits to the load beyond it the wrench (Kubus, Kröger & Wahl 2008)

    w = Y_b(v_s, a_s) pi_load        (6,) = (6, 10) (10,), [fx fy fz tx ty tz] in the sensor frame,

with ``v_s``, ``a_s`` the sensor frame's twist and acceleration (gravity included as ``a_0 = -g``) from
the RNEA forward pass (:func:`robodyn_ros.dynamics.rnea.body_motions`) and ``Y_b`` the body wrench regressor
(:func:`robodyn_ros.dynamics.regressor.body_wrench_regressor`). The NumPy path costs milliseconds per sample; the
simulator (1 kHz) and the estimator need it per sample, so :class:`SensorWrenchRegressor` traces the same
functions once in CasADi SX and compiles them (cached on disk by model and link).
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from ..model import spatial
from ..model.backend import CASADI, NUMPY
from ..dynamics.kinematics import parent_placements
from ..dynamics.regressor import body_wrench_regressor
from ..dynamics.rnea import body_motions


def sensor_wrench_regressor_function(model, link):
    """CasADi function ``x = [q; v; a] (3 nv,) -> Y_b (6, 10)`` for the frame of URDF link ``link``
    (module doc); one stacked input because every argument costs a NumPy -> DM conversion per call."""
    frame = model.frames[link]
    body = model.body_index(link)
    x = ca.SX.sym("x", 3 * model.nv)
    q, v, a = x[:model.nv], x[model.nv:2 * model.nv], x[2 * model.nv:]
    vel, acc = body_motions(CASADI, model, parent_placements(CASADI, model, q), v, a)
    R, p = CASADI.const(frame.R), CASADI.const(frame.p)
    v_s = spatial.inv_act_motion(CASADI, R, p, vel[body])
    a_s = spatial.inv_act_motion(CASADI, R, p, acc[body])
    return ca.Function("rd_sensor_wrench_regressor", [x], [body_wrench_regressor(CASADI, v_s, a_s)])


class SensorWrenchRegressor:
    """``Y_b(q, v, a)`` (6, 10) of the sensor at ``link`` (module docstring); ``compiled``: generate C
    (cached) and call it through its C entry point (:class:`~robodyn_ros.kernels.compiled_functions.DirectCall`:
    3 µs a call where CasADi's call of the same compiled function takes 28-31), else evaluate with CasADi's
    virtual machine."""

    def __init__(self, model, link, compiled=True):
        if model.body_index(link) < 0:
            from ..model.errors import ModelError
            raise ModelError(f"link '{link}' is part of the fixed base: a sensor there sees no payload motion")
        self.model, self.link = model, link
        self._fn = sensor_wrench_regressor_function(model, link)
        self._direct = None
        if compiled:
            from ..kernels.compiled_functions import DirectCall, compile_casadi_library
            library = compile_casadi_library([self._fn], f"sensor_wrench:{link}:" + model.fingerprint())
            self._direct = DirectCall(library, self._fn)
            rows, cols = self._fn.sparsity_out(0).get_triplet()     # the nonzeros' places, column-major
            self._places = (np.array(rows, dtype=int), np.array(cols, dtype=int))

    def __call__(self, q, v, a):
        if self._direct is None:
            return self._fn(np.concatenate([q, v, a])).full()
        x, n = self._direct.inputs[0], self.model.nv
        x[:n], x[n:2 * n], x[2 * n:] = q, v, a
        self._direct.call()
        Y = np.zeros((6, 10))
        Y[self._places] = self._direct.outputs[0]
        return Y


def inertia_in_frame(model, pi, from_link, to_link):
    """Inertial parameters (10,) of a rigid load given about ``from_link``'s frame, re-expressed about
    ``to_link``'s frame (both links of the same body); Pinocchio's order."""
    if from_link == to_link:
        return np.asarray(pi, dtype=float).copy()
    src, dst = model.frames[from_link], model.frames[to_link]
    tri = spatial.inertia_act(NUMPY, src.R, src.p, spatial.inertia_from_params(NUMPY, np.asarray(pi, dtype=float)))
    R, p = spatial.inverse(NUMPY, dst.R, dst.p)
    return np.asarray(spatial.params_from_inertia(NUMPY, *spatial.inertia_act(NUMPY, R, p, tri)), dtype=float)


def link_inertia_in_body(model, pi, link):
    """Parameters (10,) of a load given about ``link``'s frame, about its body's frame (to be added to
    that body's block of the model's parameter vector, as :meth:`Simulator.attach_payload` does)."""
    frame = model.frames[link]
    tri = spatial.inertia_act(NUMPY, frame.R, frame.p, spatial.inertia_from_params(NUMPY, np.asarray(pi, dtype=float)))
    return np.asarray(spatial.params_from_inertia(NUMPY, *tri), dtype=float)
