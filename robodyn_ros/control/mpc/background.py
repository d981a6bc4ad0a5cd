"""A :class:`~.controller.ModelPredictiveController` built in a background thread, serving its safe
fallback until it is ready."""
from __future__ import annotations

import threading

import numpy as np

from ...dynamics.rnea import rnea
from ...kernels.compiled_functions import cancellable
from ..command_guard import effort_bounds
from .config import MPCConfig, parameter_vector, replace_inertial_parameters, split_parameters
from .controller import ModelPredictiveController
from .solution import gravity_solution


class BackgroundController:
    """A :class:`~.controller.ModelPredictiveController` built in a background thread (tracing, code
    generation and compilation take seconds from an empty cache), serving its safe fallback meanwhile:
    until :attr:`ready`, ``solve`` returns gravity compensation at the measured configuration with the
    current parameters (status ``fallback_gravity``, solver status ``building``; never non-finite).
    Parameters set before it is ready are applied when it is. A build that fails keeps the fallback and
    names the error in the solver status (:attr:`error`). :meth:`close` cancels a build still running
    (its compiler processes killed, nothing cached).

    ``solve``, ``prepare``, ``set_parameters``, ``set_inertial_parameters``, ``theta``, ``tau_max``,
    ``config`` and ``gravity(q)`` as the controller's."""

    def __init__(self, model, config=None, **options):
        self.model = model
        self.config = config or MPCConfig(**options)
        self.tau_max = effort_bounds(model)
        self.theta = parameter_vector(model)
        self.controller = None
        self.error = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._build, name="mpc-build", daemon=True)
        self._thread.start()

    def _build(self):
        try:
            with cancellable(self._cancel):
                controller = ModelPredictiveController(self.model, self.config)
        except Exception as err:                                  # noqa: BLE001 - reported, fallback kept
            self.error = f"{type(err).__name__}: {err}"
            return
        with self._lock:
            controller.set_parameters(self.theta)
            self.controller = controller

    @property
    def ready(self):
        return self.controller is not None

    def close(self, timeout=10.0):
        """Cancel the build if it is still running and wait for its thread (at most ``timeout`` s; the
        tracing before the compiler starts is not interrupted). A built controller stays usable."""
        self._cancel.set()
        self._thread.join(timeout)

    def wait(self, timeout=None):
        """Block until the build has finished (or ``timeout`` s); returns :attr:`ready`."""
        self._thread.join(timeout)
        return self.ready

    def set_parameters(self, theta):
        with self._lock:
            if self.controller is not None:
                self.controller.set_parameters(theta)
                self.theta = self.controller.theta
            else:
                theta = np.asarray(theta, dtype=float)
                if theta.shape != self.theta.shape or not np.all(np.isfinite(theta)):
                    raise ValueError(f"theta must be a finite ({self.theta.size},) vector")
                self.theta = theta.copy()

    def set_inertial_parameters(self, pi):
        self.set_parameters(replace_inertial_parameters(self.theta, pi, self.model.nbodies))

    def gravity(self, q, theta=None):
        """``g(q; π) + f_o`` (nv,) of the current parameters (the fallback torque), or of ``theta``."""
        if self.controller is not None:
            x = np.concatenate([q, np.zeros_like(q)])
            theta = self.controller.theta if theta is None else theta
            return np.asarray(self.controller.ocp.gravity(x, theta), dtype=float).reshape(-1)
        p = split_parameters(self.theta if theta is None else theta, self.model.nbodies, self.model.nv)
        zero = np.zeros(self.model.nv)
        return np.asarray(rnea(self.model, np.asarray(q, dtype=float), zero, zero, pi=p.pi),
                          dtype=float).reshape(-1) + p.offset

    def prepare(self, reference, t, x_guess=None):
        return self.controller.prepare(reference, t, x_guess) if self.controller is not None else 0.0

    def solve(self, q, v, reference, t=0.0):
        if self.controller is not None:
            return self.controller.solve(q, v, reference, t)
        q = np.nan_to_num(np.asarray(q, dtype=float))
        status = f"build failed: {self.error}" if self.error else "building"
        return gravity_solution(self.gravity(q), np.concatenate([q, np.zeros_like(q)]), self.config.horizon,
                                self.config.dt, self.tau_max, status)
