"""The OCP's NLP solved to convergence by fatrop or ipopt: with the Gauss-Newton shooting map of
:mod:`.gauss_newton` the solvers differentiate the dynamics only through the supplied stage Jacobians and
adjoints, and the Hessian of the Lagrangian is the constant Gauss-Newton one. ipopt is interrupted at the
time limit (``max_wall_time``); fatrop cannot be, its result is discarded when late.
"""
from __future__ import annotations

from typing import NamedTuple

import casadi as ca
import numpy as np

from ...kernels.compiled_functions import compile_solver_dependencies
from .config import problem_key


def nlp_solver(ocp, config, nlp=None):
    """The ``nlpsol`` of ``config.solver`` ('fatrop' | 'ipopt') for the NLP dict ``nlp`` (default
    ``ocp.nlp``); with ``config.compiled`` its oracle is generated as C, compiled against the OCP's library
    and cached."""
    ng = ocp.nx * (ocp.N + 1)
    # a failed evaluation is a fallback with the solver's status (MPCSolution), not a line on stderr
    opts = {"print_time": False, "error_on_fail": False, "show_eval_warnings": False, "calc_lam_p": False,
            "equality": [True] * ng}
    if config.solver == "fatrop":
        opts.update({"structure_detection": "auto",
                     "fatrop": {"print_level": 0, "max_iter": config.max_iter, "tol": config.tol,
                                "mu_init": config.mu_init}})
    else:
        opts.update({"ipopt": {"print_level": 0, "max_iter": config.max_iter, "tol": config.tol, "sb": "yes",
                               "max_wall_time": config.time_limit, "hessian_constant": "yes"}})
    name, nlp = "mpc_" + config.solver, ocp.nlp if nlp is None else nlp
    if config.compiled:
        key = "|".join(["mpc-nlp", config.solver, ocp.model.fingerprint(), problem_key(config)])
        path = compile_solver_dependencies(lambda: ca.nlpsol(name, config.solver, nlp, opts), key,
                                           label=f"{config.solver} NLP functions", link=(ocp.library,))
        return ca.nlpsol(name, config.solver, path, opts)
    return ca.nlpsol(name, config.solver, nlp, opts)


class NLPResult(NamedTuple):
    """``w`` (nw,) the solution (None when the solver did not succeed), its ``status`` string,
    ``iterations`` and CasADi's ``stats`` of the solve."""

    w: object
    status: str
    iterations: int
    stats: dict


def nlp_solve(solver, w0, p, lbw, ubw):
    """Solve from the initial guess ``w0`` (nw,) with parameters ``p`` and bounds ``[lbw, ubw]``, the
    shooting constraints as equalities; an :class:`NLPResult`."""
    ng = solver.size1_out("g")
    res = solver(x0=w0, p=p, lbx=lbw, ubx=ubw, lbg=np.zeros(ng), ubg=np.zeros(ng))
    stats = solver.stats()
    status, iterations = str(stats.get("return_status", "")), int(stats.get("iter_count", 0))
    if not stats.get("success", False):
        return NLPResult(None, str(stats.get("return_status", "failed")), iterations, stats)
    return NLPResult(np.asarray(res["x"]).reshape(-1), status, iterations, stats)
