"""The OCP's functions built once per model and problem: compiled to C and cached on disk by the model
fingerprint and the problem options (:func:`~robodyn_ros.kernels.compiled_functions.compile_casadi_library`,
three translation units compiled in parallel: the RTI's linearisation, its Riccati factorisation, the rest), and kept in the
process by the same key (:func:`ocp_functions`)."""
from __future__ import annotations

import casadi as ca

from ...kernels.compiled_functions import cached_library, compile_casadi_library
from .config import problem_key
from .ocp import OCPFunctions
from .stage import StageFunctions, inverse_dynamics_function, prediction_model

# C names of the compiled functions: the stage functions, on which the problem level is built, and the
# problem-level ones that replace its traced functions once built
_STAGE = {"dynamics": "mpc_dynamics", "step": "mpc_step", "step_linearized": "mpc_step_lin",
          "step_adjoint": "mpc_step_adj", "gravity": "mpc_gravity"}
_PROBLEM = {"inverse_dynamics": "mpc_inverse_dynamics", "rti_prepare": "mpc_rti_prepare",
            "riccati_factor": "mpc_riccati_factor", "riccati_feedback": "mpc_riccati_feedback"}
# the two halves of the preparation phase apart (0.8 and 0.5 MB of C for the Panda at N = 20: gcc's time on
# one unit grows faster than its size), the rest (0.4 MB) on whichever core is free first
_UNITS = (("rti_prepare", "step_linearized"), ("riccati_factor",),
          ("riccati_feedback", "step", "step_adjoint", "dynamics", "inverse_dynamics", "gravity"))


def _library_key(model, config):
    return "|".join(["mpc", model.fingerprint(), problem_key(config)])


_TRACED = {}      # library key -> the traced units of a quick build, kept for the optimised build that follows


def compiled_ocp(model, config, quick=False, nice=0):
    """:class:`~.ocp.OCPFunctions` whose functions are compiled C. From the cache nothing is traced: the
    stage functions are loaded from the library and the problem level is built on them, so that the NLP
    of fatrop/ipopt calls them in this library instead of holding its own copy. ``inverse_dynamics`` is
    traced for the problem level, which differentiates through it, and loaded afterwards. ``quick`` and
    ``nice``: :func:`~robodyn_ros.kernels.compiled_functions.compile_casadi_library`'s; the functions a quick
    build traced are compiled again by the optimised build, not traced again."""
    key = _library_key(model, config)

    def traced():
        if key not in _TRACED:
            ocp = OCPFunctions(model, config)
            _TRACED[key] = [[getattr(ocp, n) for n in unit] for unit in _UNITS]
        return _TRACED[key]
    try:
        library = compile_casadi_library(traced, key, label="MPC functions" + (
            " (quick build, unoptimised)" if quick else ""), quick=quick, nice=nice)
    except BaseException:
        _TRACED.pop(key, None)
        raise
    if not quick:
        _TRACED.pop(key, None)
    stage = StageFunctions(inverse_dynamics=inverse_dynamics_function(model, config.coulomb_smoothing),
                           **{attribute: ca.external(name, library) for attribute, name in _STAGE.items()})
    ocp = OCPFunctions(model, config, stage, library)
    for attribute, name in _PROBLEM.items():
        setattr(ocp, attribute, ca.external(name, library))
    return ocp


_OCP_CACHE = {}


def ocp_functions(model, config, quick=False, nice=0):
    """The :class:`~.ocp.OCPFunctions` of ``model`` and ``config`` (compiled when ``config.compiled``),
    shared between controllers of the same model and problem in this process (building them traces the
    dynamics and takes seconds; the functions are immutable and parameters enter through ``p``). The
    prediction model is ``model`` with the stiff joints' damping implicit (:func:`~.stage.prediction_model`).
    ``quick``: compiled unoptimised (a library of its own); ``nice``: the compilers' niceness
    (:func:`compiled_ocp`)."""
    model = prediction_model(model, config)
    quick = bool(quick and config.compiled)
    key = (model.fingerprint(), problem_key(config), quick)
    if key not in _OCP_CACHE:
        _OCP_CACHE[key] = compiled_ocp(model, config, quick, nice) if config.compiled else \
            OCPFunctions(model, config)
    return _OCP_CACHE[key]


def optimised_ocp_ready(model, config):
    """Whether the optimised (not quick) OCP functions of ``model`` and ``config`` load without compiling:
    already in this process, not compiled (``config.compiled`` false), or in the disk cache."""
    model = prediction_model(model, config)
    if not config.compiled or (model.fingerprint(), problem_key(config), False) in _OCP_CACHE:
        return True
    return cached_library(_library_key(model, config)) is not None
