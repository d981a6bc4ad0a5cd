"""Compiled kernels: the dynamics of one model generated as C, compiled, cached on disk and called through
a thin CPython binding.

>>> kernels = compile_kernels(model)
>>> tau = kernels.rnea(q, v, a)                         # (nv,)
>>> dtau_dq, dtau_dv, M = kernels.rnea_derivatives(q, v, a)
>>> TAU = kernels.rnea_batch(Q, V, A)                   # (N, nv) in, (N, nv) out, looped in C

Per-call functions (inputs (nq,) or (nv,) float64; any array-like is accepted, float64 C-contiguous
arrays without a copy): ``rnea(q, v, a)`` (nv,), ``aba(q, v, tau)`` (nv,), ``crba(q)`` (nv, nv),
``nonlinear_effects(q, v)`` (nv,), ``gravity_torque(q)`` (nv,), ``coriolis_matrix(q, v)`` (nv, nv),
``regressor(q, v, a)`` (nv, 10 nbodies), ``rnea_derivatives(q, v, a)`` -> ``(dtau_dq, dtau_dv, dtau_da)``,
``aba_derivatives(q, v, tau)`` -> ``(da_dq, da_dv, da_dtau)`` (each (nv, nv), ``q`` derivatives in the
tangent space), ``rnea_time_derivatives(q, v, a, jerk)`` -> ``tau_dot`` (nv,).
Batch forms ``rnea_batch``, ``aba_batch``, ``crba_batch``, ``regressor_batch``,
``rnea_derivatives_batch``, ``aba_derivatives_batch`` take (N, n) arrays and return (N, ...) arrays.
Every function also accepts its output array(s) as extra positional arguments or as ``out=`` (one array,
or a tuple of arrays) and writes into them. Batch forms split their rows over POSIX threads:
``threads=`` per call, else ``$ROBODYN_THREADS``, else the CPUs this process may use (at most 64); small
batches use fewer threads, and the results are bit-identical whatever the count. ``rnea_batch``,
``regressor_batch`` and ``rnea_derivatives_batch`` compute four samples at a time with AVX2 vector code
(:mod:`.codegen`); their rows equal the per-call results to rounding (relative 1e-15), not bit for bit.
Wrong shapes raise ``ValueError`` naming the argument; values are not checked (NaN in, NaN out): that is
the job of the public functions in :mod:`robodyn_ros.kernels.numeric`.

Derivative source: ``rnea_derivatives`` is generated from whichever of forward-mode AD, reverse-mode AD
(of the core's RNEA) and the analytical IDSVA recursion (``robodyn_ros.dynamics.rnea_derivatives``) has the fewest
operations for the model (flops measured: UR5 reverse AD 3 739 < forward 4 548 < IDSVA 5 183;
Panda IDSVA 9 385 < reverse 14 707 < forward 17 536; Talos 44 DoF IDSVA 59 998 < reverse 93 659 <
forward 119 181). ``aba_derivatives`` is C code composed of the ABA and RNEA-derivative kernels
and the branch-sparse ``L^T D L`` factorisation of ``M`` (Carpentier and Mansard 2018):
``da/dq = -M^-1 dtau/dq`` at ``a = ABA(q, v, tau)``, which was half the operations of any single
generated function and spares gcc a second huge translation unit. ``Kernels.sources`` says what was
used and ``Kernels.instruction_counts`` gives ``(instructions, flops)`` of every candidate built.

Build cost: the first call for a model generates and compiles its C (seconds to minutes, by the
model's size and the machine's load); later calls load the cached library in a few ms. Measured build
times: docs/PERFORMANCE.md.
"""
from __future__ import annotations

import json
import logging
import os
import time

from . import registry
from .build import KernelBuildError, ModuleBuild, cache_key, find_compiler, load_module, load_report
from .codegen import GENERATOR_VERSION

log = logging.getLogger("robodyn_ros.kernels")

PER_CALL = ("rnea", "aba", "crba", "nonlinear_effects", "gravity_torque", "coriolis_matrix", "regressor",
            "rnea_derivatives", "aba_derivatives", "rnea_time_derivatives")
BATCH = ("rnea_batch", "aba_batch", "crba_batch", "regressor_batch", "rnea_derivatives_batch",
         "aba_derivatives_batch")

__all__ = ["compile_kernels", "Kernels", "KernelBuildError", "registry", "GENERATOR_VERSION"]


class Kernels:
    """The compiled functions of one model (see the module docstring for their signatures).

    Attributes: ``model``; ``compiled`` (False on the interpreted fallback); ``from_cache`` (loaded
    without compiling); ``sources`` (kernel -> how it is built: ``"ad"``, ``"ad_reverse"``, ``"idsva"``,
    ``"loops"`` (:mod:`robodyn_ros.kernels.loops`) or the composite's parts; kernels not listed are unrolled); ``instruction_counts``; ``seconds`` (wall time of :func:`compile_kernels`); ``compile_times``
    (gcc seconds per translation unit, empty when loaded from the cache); ``build_report`` (of the build
    that made the cached library, whenever and under whatever load that was: ``symbolic_seconds`` and
    ``symbolic_cpu_seconds``, ``compile_times`` and ``compile_cpu_times`` per translation unit,
    ``compile_cpu_seconds``, ``compile_wall_seconds``, ``compile_jobs`` and the load averages before and
    after); ``key`` (cache key)."""

    def __init__(self, model, backend, *, compiled, from_cache, sources, instruction_counts, seconds,
                 compile_times, key):
        self.model = model
        for name in PER_CALL + BATCH:
            setattr(self, name, getattr(backend, name))
        self.compiled, self.from_cache, self.key = compiled, from_cache, key
        self.sources, self.instruction_counts = sources, instruction_counts
        self.seconds, self.compile_times = seconds, compile_times
        self.build_report = {}

    def __repr__(self):
        how = "compiled" if self.compiled else "interpreted"
        return f"<Kernels {how} for '{self.model.name}' (nv={self.model.nv}, cache key {self.key})>"


def compile_kernels(model, *, register=True, jobs=None):
    """Kernels for ``model``: loaded from the disk cache, else generated, compiled and cached.

    With no C compiler (``$CC`` names a missing program, or none of cc/gcc/clang is on PATH) the kernels
    are evaluated by CasADi instead, with a warning on the ``robodyn_ros.kernels`` logger. A failing
    compiler raises :class:`KernelBuildError`. With ``register`` (default) the numeric top-level functions
    use these kernels for ``model`` from now on (:mod:`robodyn_ros.kernels.registry`). ``jobs``: parallel
    compiler processes (default: the CPUs this process may use, at most 4)."""
    start = time.perf_counter()
    key = cache_key(model.fingerprint())
    module, from_cache, compile_times = load_module(key), True, {}
    if module is None:
        compiler = find_compiler()
        if compiler is None:
            return _interpreted(model, key, start, register)
        from .build import key_lock
        with key_lock(key):
            module = load_module(key)  # another process may have built it while we waited
            if module is None:
                from .build import compile_notice
                from .symbolic import build_kernel_set
                compile_notice(f"the dynamics kernels of {model.name}", model.nv)
                load_before = _loadavg()
                with ModuleBuild(key, compiler, jobs) as build:     # each kernel compiled once traced
                    symbolic_start, symbolic_cpu = time.perf_counter(), time.thread_time()
                    kernel_set = build_kernel_set(model, ready=build.add)
                    report = {"symbolic_seconds": time.perf_counter() - symbolic_start,
                              "symbolic_cpu_seconds": time.thread_time() - symbolic_cpu, "model": model.name,
                              "load_average_before": load_before}
                    attributes = {"nq": model.nq, "nv": model.nv, "generator_version": GENERATOR_VERSION,
                                  "sources": json.dumps(kernel_set.sources),
                                  "instruction_counts": json.dumps(_counts(kernel_set))}
                    compile_times = build.finish(kernel_set, attributes, report)
                module, from_cache = load_module(key), False
    if (module.nq, module.nv) != (model.nq, model.nv):  # pragma: no cover - a cache-key collision
        raise KernelBuildError(f"cached kernels {key} do not match model '{model.name}'")
    kernels = Kernels(model, module, compiled=True, from_cache=from_cache, sources=json.loads(module.sources),
                      instruction_counts=json.loads(module.instruction_counts),
                      seconds=time.perf_counter() - start, compile_times=compile_times, key=key)
    kernels.build_report = load_report(key)
    log.debug("kernels for '%s' %s in %.2f s", model.name, "loaded" if from_cache else "compiled", kernels.seconds)
    if register:
        registry.register(model, kernels)
    return kernels


def _loadavg():
    try:
        return list(os.getloadavg())
    except (OSError, AttributeError):  # pragma: no cover - not available on this platform
        return None


def _counts(kernel_set):
    from .symbolic import flop_count
    counts = {s.name: [s.function.n_instructions(), flop_count(s.function)] for s in kernel_set.specs
              if s.function is not None}
    counts.update({k: list(v) for k, v in kernel_set.instruction_counts.items()})
    return counts


def _interpreted(model, key, start, register):
    from .interpreted import InterpretedKernels
    from .symbolic import build_kernel_set
    log.warning("no C compiler found (set CC or install gcc): robodyn_ros kernels for '%s' fall back to "
                "interpreted CasADi evaluation, which is orders of magnitude slower", model.name)
    kernel_set = build_kernel_set(model)
    kernels = Kernels(model, InterpretedKernels(kernel_set, model), compiled=False, from_cache=False,
                      sources=kernel_set.sources, instruction_counts=_counts(kernel_set),
                      seconds=time.perf_counter() - start, compile_times={}, key=key)
    if register:
        registry.register(model, kernels)
    return kernels
