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
model's size and the machine's load); later calls load the cached library in a few ms. The kernels come
in two parts (:mod:`.parts`): ``compile_kernels(model, parts=("dynamics",))``, what the nodes' controllers,
estimators and simulators call, builds the RNEA, ABA, CRBA and regressor alone (the Panda: about 2 s
instead of 5), and the derivatives are built when one is first read. Measured build times:
docs/PERFORMANCE.md.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time

from . import parts, registry
from .build import KernelBuildError, ModuleBuild, cache_key, find_compiler, key_lock, load_module, load_report
from .codegen import GENERATOR_VERSION

log = logging.getLogger("robodyn_ros.kernels")

__all__ = ["compile_kernels", "Kernels", "KernelBuildError", "registry", "GENERATOR_VERSION"]


class Kernels:
    """The compiled functions of one model (see the module docstring for their signatures).

    The functions come in two parts (:mod:`.parts`): ``dynamics`` (``rnea``, ``aba``, ``crba``,
    ``nonlinear_effects``, ``gravity_torque``, ``regressor``) and ``derivatives`` (``rnea_derivatives``,
    ``aba_derivatives``, ``rnea_time_derivatives``, ``coriolis_matrix``), each in a library of its own or
    both in one (when they were built together). A part not loaded yet is loaded (compiled first if it is
    not in the cache) when one of its functions is first read, or by :meth:`require`.

    Attributes: ``model``; ``compiled`` (False on the interpreted fallback); ``parts`` (the parts loaded);
    ``from_cache`` (every loaded library loaded without compiling); ``sources`` (kernel -> how it is built:
    ``"ad"``, ``"ad_reverse"``, ``"idsva"``, ``"loops"`` (:mod:`robodyn_ros.kernels.loops`) or the
    composite's parts; kernels not listed are unrolled) and ``instruction_counts`` (reading either loads
    every part); ``seconds`` (wall time spent loading or building the loaded libraries); ``compile_times``
    (gcc seconds per translation unit of the libraries compiled by this process, empty when loaded from
    the cache); ``build_report`` (of the builds that made the loaded libraries, whenever and under whatever
    load that was: ``symbolic_seconds`` and ``symbolic_cpu_seconds``, ``compile_times`` and
    ``compile_cpu_times`` per translation unit, ``compile_cpu_seconds``, ``compile_wall_seconds``,
    ``compile_jobs`` and the load averages before and after); ``key`` (cache key of the library of all
    parts; the libraries loaded have their own: ``library_keys``)."""

    def __init__(self, model, *, compiled=True, key=None, jobs=None):
        self.model, self.compiled, self.key = model, compiled, key
        self._jobs = jobs
        self._libraries = []             # _Library, in the order loaded
        self._lock = threading.RLock()

    def __getattr__(self, name):
        """A function of a part not loaded yet: load the part (only reached when ``name`` is not set)."""
        part = None if name.startswith("_") else parts.part_of(name)
        if part is None or not self.compiled:
            raise AttributeError(f"'Kernels' object has no attribute '{name}'")
        self.require(part)
        return self.__dict__[name]

    def require(self, *names):
        """Load the parts ``names`` (default: all of :data:`.parts.PARTS`), compiling those not in the
        cache (as one library); returns ``self``."""
        with self._lock:
            missing = [name for name in parts.PARTS if name in (names or parts.PARTS) and name not in self.parts]
            if missing and self.compiled:
                for library in _load_libraries(self.model, missing, self._jobs):
                    self._add(library)
        return self

    def _add(self, library):
        self._libraries.append(library)
        for part in library.parts:
            for name in parts.PARTS[part]:
                setattr(self, name, getattr(library.module, name))
                if hasattr(library.module, name + "_batch"):
                    setattr(self, name + "_batch", getattr(library.module, name + "_batch"))

    @property
    def parts(self):
        return tuple(name for name in parts.PARTS if any(name in library.parts for library in self._libraries))

    @property
    def library_keys(self):
        return tuple(library.key for library in self._libraries)

    @property
    def from_cache(self):
        return all(library.from_cache for library in self._libraries)

    @property
    def seconds(self):
        return sum(library.seconds for library in self._libraries)

    @property
    def compile_times(self):
        return {name: t for library in self._libraries for name, t in library.compile_times.items()}

    @property
    def build_report(self):
        return merged_reports([library.report for library in self._libraries])

    @property
    def sources(self):
        self.require()
        return {k: v for library in self._libraries for k, v in library.sources.items()}

    @property
    def instruction_counts(self):
        self.require()
        return {k: v for library in self._libraries for k, v in library.instruction_counts.items()}

    def __repr__(self):
        how = "compiled" if self.compiled else "interpreted"
        return f"<Kernels {how} for '{self.model.name}' (nv={self.model.nv}, cache key {self.key})>"


@dataclasses.dataclass
class _Library:
    """One loaded library: the parts of :mod:`.parts` it holds and how it was had."""

    parts: tuple
    key: str
    module: object
    from_cache: bool
    seconds: float
    compile_times: dict
    report: dict
    sources: dict
    instruction_counts: dict


def compile_kernels(model, *, register=True, jobs=None, parts=None):
    """Kernels for ``model``: loaded from the disk cache, else generated, compiled and cached.

    ``parts``: the parts of :data:`.parts.PARTS` to load now (default: all); the others are loaded when
    one of their functions is first read. With no C compiler (``$CC`` names a missing program, or none of
    cc/gcc/clang is on PATH) the kernels are evaluated by CasADi instead, with a warning on the
    ``robodyn_ros.kernels`` logger. A failing compiler raises :class:`KernelBuildError`. With ``register``
    (default) the numeric top-level functions use these kernels for ``model`` from now on
    (:mod:`robodyn_ros.kernels.registry`). ``jobs``: parallel compiler processes (default: the CPUs this
    process may use, at most 4)."""
    from .parts import PARTS
    names = tuple(PARTS) if parts is None else tuple(parts)
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ValueError(f"compile_kernels: unknown part(s) {unknown}; the parts are {list(PARTS)}")
    kernels = Kernels(model, key=library_key(model, PARTS), jobs=jobs)
    if any(_cached(model, name) is None for name in names) and find_compiler() is None:
        return _interpreted(model, kernels.key, register)
    kernels.require(*names)
    log.debug("kernels for '%s' (%s) %s in %.2f s", model.name, ", ".join(names),
              "loaded" if kernels.from_cache else "compiled", kernels.seconds)
    if register:
        registry.register(model, kernels)
    return kernels


def library_key(model, names):
    """Cache key of the library holding the parts ``names`` of ``model``'s kernels."""
    return cache_key(model.fingerprint(), "+".join(names))


def _cached(model, part):
    """``(key, module)`` of a cached library holding ``part`` (its own, else the one of all parts), or None."""
    for names in ((part,), tuple(parts.PARTS)):
        key = library_key(model, names)
        module = load_module(key)
        if module is not None:
            return key, module
    return None


def _load_libraries(model, names, jobs):
    """The :class:`_Library` objects holding the parts ``names``: from the cache, else the missing parts
    built as one library (under a lock on its key, so that a second process waits and then loads)."""
    start = time.perf_counter()
    found = {name: _cached(model, name) for name in names}
    built, compile_times = None, {}
    missing = tuple(name for name in names if found[name] is None)
    if missing:
        compiler = find_compiler()
        if compiler is None:     # the compiler went away since the other parts were compiled
            _warn_interpreted(model)
            cached = tuple(name for name in names if found[name] is not None)
            return (_load_libraries(model, cached, jobs) if cached else []) + [_interpreted_library(model, missing)]
        key = library_key(model, missing)
        with key_lock(key):
            module = load_module(key)        # another process may have built it while we waited
            if module is None:
                compile_times = _build(model, missing, key, compiler, jobs)
                module = load_module(key)
        built = (key, module)
    libraries = {}
    for name in names:
        key, module = found[name] or built
        libraries.setdefault(key, (module, []))[1].append(name)
    seconds = (time.perf_counter() - start) / len(libraries)
    loaded = []
    for key, (module, held) in libraries.items():
        if (module.nq, module.nv) != (model.nq, model.nv):  # pragma: no cover - a cache-key collision
            raise KernelBuildError(f"cached kernels {key} do not match model '{model.name}'")
        times = compile_times if built is not None and key == built[0] else {}
        loaded.append(_Library(tuple(held), key, module, not times, seconds, times, load_report(key),
                               json.loads(module.sources), json.loads(module.instruction_counts)))
    return loaded


def _build(model, names, key, compiler, jobs):
    """Trace and compile the library of the parts ``names`` under ``key``, each kernel compiled as soon as
    it is traced; returns ``{file: gcc wall seconds}``."""
    from .build import compile_notice
    from .symbolic import build_kernel_set
    what = "derivative" if names == ("derivatives",) else "dynamics"
    compile_notice(f"the {what} kernels of {model.name}", model.nv,
                   share=PART_SHARE[names[0]] if len(names) == 1 else 1.0)
    load_before = _loadavg()
    with ModuleBuild(key, compiler, jobs) as build:
        symbolic_start, symbolic_cpu = time.perf_counter(), time.thread_time()
        kernel_set = build_kernel_set(model, ready=build.add, parts=names)
        report = {"symbolic_seconds": time.perf_counter() - symbolic_start,
                  "symbolic_cpu_seconds": time.thread_time() - symbolic_cpu, "model": model.name,
                  "parts": list(names), "load_average_before": load_before}
        attributes = {"nq": model.nq, "nv": model.nv, "generator_version": GENERATOR_VERSION,
                      "sources": json.dumps(kernel_set.sources), "instruction_counts": json.dumps(_counts(kernel_set))}
        return build.finish(kernel_set, attributes, report)


# Rough share of a part built alone in the time of all kernels built together (the Panda and the UR5 from an
# empty cache, docs/PERFORMANCE.md), for the first-build notice's estimate.
PART_SHARE = {"dynamics": 0.4, "derivatives": 0.75}


def merged_reports(reports):
    """One build report of several libraries' (:func:`.build.load_report`): per-file timings joined (a file
    compiled for both, the ABA, with its seconds added), CPU, tracing and wall seconds added."""
    merged = {}
    for report in reports:
        for key, value in report.items():
            if isinstance(value, dict):
                into = merged.setdefault(key, {})
                for name, seconds in value.items():
                    into[name] = into[name] + seconds if name in into and seconds is not None else seconds
            elif key in ("symbolic_seconds", "symbolic_cpu_seconds", "compile_cpu_seconds", "compile_wall_seconds"):
                merged[key] = merged.get(key, 0.0) + value
            elif key == "parts":
                merged[key] = merged.get(key, []) + value
            elif key == "load_average_after":
                merged[key] = value
            else:
                merged.setdefault(key, value)
    return merged


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


def _warn_interpreted(model):
    log.warning("no C compiler found (set CC or install gcc): robodyn_ros kernels for '%s' fall back to "
                "interpreted CasADi evaluation, which is orders of magnitude slower", model.name)


def _interpreted_library(model, names):
    """The parts ``names`` evaluated by CasADi's virtual machine, as a :class:`_Library`."""
    from .interpreted import InterpretedKernels
    from .symbolic import build_kernel_set
    start = time.perf_counter()
    kernel_set = build_kernel_set(model, parts=names)
    return _Library(tuple(names), None, InterpretedKernels(kernel_set, model), False, time.perf_counter() - start,
                    {}, {}, kernel_set.sources, _counts(kernel_set))


def _interpreted(model, key, register):
    _warn_interpreted(model)
    kernels = Kernels(model, compiled=False, key=key)
    kernels._add(_interpreted_library(model, tuple(parts.PARTS)))
    if register:
        registry.register(model, kernels)
    return kernels
