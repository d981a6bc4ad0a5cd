"""A :class:`~.controller.ModelPredictiveController` built in a background thread, serving its safe
fallback until it is ready."""
from __future__ import annotations

import threading

import numpy as np

from ...dynamics.rnea import rnea
from ...kernels.compiled_functions import BuildCancelled, cancellable
from ..command_guard import effort_bounds
from .config import MPCConfig, parameter_vector, replace_inertial_parameters, split_parameters
from .compile_cache import optimised_ocp_ready
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

    Compiled functions that are not in the cache are built twice: first unoptimised (``quick``, about five
    times less compiler time), which the controller serves as soon as it is built, then optimised beside
    it with the compilers at niceness ``nice`` (19, the lowest CPU priority: the cores stay the running
    nodes'); the optimised controller takes over (:meth:`~.controller.ModelPredictiveController.take_over`:
    parameters and warm start) at the next ``prepare`` or ``solve``. :attr:`build` says which serves:
    ``building``, ``quick``, ``optimised`` or ``failed`` (nothing built: the error in :attr:`error`; an
    optimised build that fails names its error there too and leaves the quick one serving).

    ``solve``, ``prepare``, ``set_parameters``, ``set_inertial_parameters``, ``theta``, ``tau_max``,
    ``config`` and ``gravity(q)`` as the controller's."""

    def __init__(self, model, config=None, nice=19, **options):
        self.model = model
        self.nice = int(nice)
        self.config = config or MPCConfig(**options)
        self.tau_max = effort_bounds(model)
        self.theta = parameter_vector(model)
        self.controller = None
        self.error = None
        self.build = "building"
        self._pending = None                # the optimised controller, until it takes over
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._build, name="mpc-build", daemon=True)
        self._thread.start()

    def _build(self):
        quick = self.config.compiled and not optimised_ocp_ready(self.model, self.config)
        try:
            with cancellable(self._cancel):
                if quick:
                    self._install(ModelPredictiveController(self.model, self.config, quick=True), "quick")
                controller = ModelPredictiveController(self.model, self.config, nice=self.nice if quick else 0)
        except Exception as err:                                  # noqa: BLE001 - reported, fallback kept
            if not isinstance(err, BuildCancelled) or self.controller is None:
                self.error = f"{type(err).__name__}: {err}"
            if self.controller is None:
                self.build = "failed"
            return
        self._install(controller, "optimised")

    def _install(self, controller, build):
        with self._lock:
            if self.controller is None:
                controller.set_parameters(self.theta)
                self.controller, self.build = controller, build
            else:
                self._pending = controller

    def _take_pending(self):
        """The optimised controller takes over from the quick one (in the thread that solves)."""
        if self._pending is not None:
            with self._lock:
                self._pending.take_over(self.controller)
                self.controller, self._pending, self.build = self._pending, None, "optimised"

    @property
    def ready(self):
        return self.controller is not None

    @property
    def finished(self):
        """The build has ended (both builds, when the first was quick)."""
        return not self._thread.is_alive()

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
        self._take_pending()
        return self.controller.prepare(reference, t, x_guess) if self.controller is not None else 0.0

    def solve(self, q, v, reference, t=0.0):
        self._take_pending()
        if self.controller is not None:
            return self.controller.solve(q, v, reference, t)
        q = np.nan_to_num(np.asarray(q, dtype=float))
        status = f"build failed: {self.error}" if self.error else "building"
        return gravity_solution(self.gravity(q), np.concatenate([q, np.zeros_like(q)]), self.config.horizon,
                                self.config.dt, self.tau_max, status)
