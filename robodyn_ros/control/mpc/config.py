"""Options of the MPC and the layout of its parameter vector ``θ = [π, f_v, f_c, f_o]``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


@dataclass
class MPCConfig:
    """Problem and solver options.

    ``horizon`` N, ``dt`` (s) interval, ``substeps`` RK4 steps per interval; weights: ``q_weight``,
    ``v_weight``, ``r_weight`` (scalars or (nv,)), ``terminal_factor`` (Q_N = factor Q);
    ``position_margin`` (rad) inside the joint limits, ``velocity_fraction`` of the velocity limits;
    ``coulomb_smoothing`` ε (rad/s); ``solver``: 'fatrop' | 'ipopt' | 'rti'; ``qp_solver`` for RTI:
    'riccati' (the QP without bounds by the Riccati recursion, the bounded QP by hpipm only when that
    solution leaves a bound) | 'hpipm' | 'qrqp' | 'osqp' (the bounded QP every time); ``time_limit`` (s)
    per solve; ``max_iter`` and ``tol`` for fatrop/ipopt;
    ``sqp_iterations``: Gauss-Newton steps per 'rti' solve (1: real-time iteration; more: a full SQP);
    ``compiled``: generate and compile C for the problem functions;
    ``stage_threads``: threads evaluating the stage Jacobians of the horizon (RTI preparation, fatrop and
    ipopt constraint Jacobians); 1 evaluates them in the calling thread; ``mu_init``: fatrop's initial
    barrier parameter (small: the solves are warm-started by the shifted previous solution)."""

    horizon: int = 20
    dt: float = 0.01
    substeps: int = 1
    q_weight: object = 1000.0
    v_weight: object = 1.0
    r_weight: object = 1e-3
    terminal_factor: float = 10.0
    position_margin: float = 0.0
    velocity_fraction: float = 1.0
    coulomb_smoothing: float = 0.01
    solver: str = "fatrop"
    qp_solver: str = "riccati"
    time_limit: float = 0.05
    max_iter: int = 100
    tol: float = 1e-6
    sqp_iterations: int = 1
    compiled: bool = False
    stage_threads: int = 1
    mu_init: float = 1e-5


SOLVERS = ("fatrop", "ipopt", "rti")
QP_SOLVERS = ("riccati", "hpipm", "qrqp", "osqp")


def check_config(config):
    """Raise ``ValueError`` naming the option when ``solver`` or ``qp_solver`` is not one of the known."""
    if config.qp_solver not in QP_SOLVERS:
        raise ValueError(f"qp_solver must be 'riccati', 'hpipm', 'qrqp' or 'osqp', got {config.qp_solver!r}")
    if config.solver not in SOLVERS:
        raise ValueError(f"solver must be 'fatrop', 'ipopt' or 'rti', got {config.solver!r}")


# the options that change the problem functions (bounds, solver and time limit enter at run time)
_PROBLEM_FIELDS = ("horizon", "dt", "substeps", "q_weight", "v_weight", "r_weight", "terminal_factor",
                   "coulomb_smoothing", "compiled", "stage_threads")


def problem_key(config):
    """The options of :class:`MPCConfig` that change the problem functions, as a string."""
    return repr([(f, getattr(config, f)) for f in _PROBLEM_FIELDS])


class ModelParameters(NamedTuple):
    """The parts of ``θ``: ``pi`` (10 nb,) inertial, ``viscous``, ``coulomb``, ``offset`` (nv,) friction."""

    pi: object
    viscous: object
    coulomb: object
    offset: object


def split_parameters(theta, nbodies, nv):
    """:class:`ModelParameters` of ``θ`` (10 nb + 3 nv,), NumPy or CasADi (slices, no copies)."""
    nb10 = 10 * nbodies
    return ModelParameters(theta[:nb10], theta[nb10:nb10 + nv], theta[nb10 + nv:nb10 + 2 * nv], theta[nb10 + 2 * nv:])


def coulomb_apart(theta, nbodies, nv):
    """``(θ without its Coulomb part, the Coulomb coefficients (nv,))``, copies of ``θ`` (10 nb + 3 nv,): for an NLP
    whose Coulomb friction is compensated outside it, at the joint-state rate."""
    theta = np.array(theta, dtype=float)
    coulomb = theta[10 * nbodies + nv:10 * nbodies + 2 * nv].copy()
    theta[10 * nbodies + nv:10 * nbodies + 2 * nv] = 0.0
    return theta, coulomb


def parameter_vector(model):
    """``θ = [π, f_v, f_c, f_o]`` (10 nb + 3 nv,) of a model (its inertial and friction parameters)."""
    return np.concatenate([model.inertial_parameters(), model.viscous, model.coulomb, model.friction_offset])


def replace_inertial_parameters(theta, pi, nbodies):
    """A copy of ``θ`` whose inertial part is ``π`` (10 nb,)."""
    theta = np.array(theta, dtype=float)
    theta[:10 * nbodies] = pi
    return theta


class CostWeights(NamedTuple):
    """Diagonals of the stage weights ``Q`` (nx,), ``R`` (nu,) and the terminal weight ``Q_N`` (nx,)."""

    Q: np.ndarray
    R: np.ndarray
    Q_N: np.ndarray


def cost_weights(config, n):
    """:class:`CostWeights` of ``config`` for ``n`` degrees of freedom (``Q_N = terminal_factor Q``)."""
    def per_dof(value):
        return np.broadcast_to(np.asarray(value, dtype=float), (n,)).copy()
    Q = np.concatenate([per_dof(config.q_weight), per_dof(config.v_weight)])
    return CostWeights(Q, per_dof(config.r_weight), config.terminal_factor * Q)
