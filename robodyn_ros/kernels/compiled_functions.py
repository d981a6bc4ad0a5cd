"""CasADi functions of the core's algorithms for the controllers' fast numeric paths, and the small
codegen + gcc helper that compiles a set of CasADi functions into one shared library cached on disk.

The controllers call the dynamics hundreds to thousands of times per second; the NumPy path of the core
costs about a millisecond per ABA, the same algorithm traced once into a CasADi SX function and evaluated
by CasADi's virtual machine about a tenth of that, and compiled C a few microseconds. Every function here
is the core's algorithm (``rnea``, ``aba``, ``crba``, ``slotine_li_regressor``) traced with symbolic
inputs, so there is exactly one implementation of the dynamics.

Cache: the kernels' cache directory (``$ROBODYN_CACHE_DIR`` or ``~/.cache/robodyn_ros``), one library
per key; the key hashes the caller's key (e.g. the model fingerprint and problem options), the generated
C source and the compiler flags, so any change of model or problem gives a new library.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import casadi as ca
import numpy as np

from ..dynamics.aba import aba
from ..dynamics.crba import crba
from ..dynamics.regressor import slotine_li_regressor
from ..dynamics.rnea import rnea
from .build import cache_dir, cpu_signature, default_jobs, find_compiler, key_lock
from .process_tree import descendants

CFLAGS = ("-O1", "-fPIC", "-shared", "-fno-math-errno", "-w")


class CompileError(RuntimeError):
    """gcc failed or no C compiler was found."""


class BuildCancelled(CompileError):
    """The build was cancelled (:func:`cancellable`) before its library was in place."""


_BUILD = threading.local()


@contextmanager
def cancellable(event):
    """Builds of :func:`compile_casadi_library` that this thread starts inside the block stop once
    ``event`` (a ``threading.Event``) is set: the running compiler processes are killed, their temporary
    directory removed, nothing is put into the cache, and the build raises :class:`BuildCancelled`. A node
    that shuts down during its first build ends at once and leaves no compiler running behind it."""
    previous = getattr(_BUILD, "cancel", None)
    _BUILD.cancel = event
    try:
        yield
    finally:
        _BUILD.cancel = previous


def _check_cancel(cancel):
    if cancel is not None and cancel.is_set():
        raise BuildCancelled("build cancelled")


_PACKAGE_FINGERPRINT = []


def package_fingerprint():
    """Hash of the package's Python sources that generate code (model, dynamics, kernels, control): a
    library named without its C source (:func:`compile_casadi_library` with a callable) is rebuilt
    whenever any of them changes."""
    if not _PACKAGE_FINGERPRINT:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        h = hashlib.sha256()
        for sub in ("model", "dynamics", "kernels", "control"):
            for dirpath, _, files in sorted(os.walk(os.path.join(root, sub))):
                for name in sorted(f for f in files if f.endswith(".py")):
                    with open(os.path.join(dirpath, name), "rb") as fh:
                        h.update(name.encode() + b"\0" + fh.read())
        _PACKAGE_FINGERPRINT.append(h.hexdigest())
    return _PACKAGE_FINGERPRINT[0]


def unit_flags(size):
    """Compiler flags of one translation unit of ``size`` bytes of generated C: ``-O2 -march=native`` up
    to :data:`LARGE_UNIT_BYTES`, ``-O1 -march=native`` above (gcc's time on long straight-line code grows
    faster than linearly with the optimisation level). Measured on the MPC's preparation phase (1.3 MB of
    C: stage Jacobians of 20 stages, Riccati factorisation): 485 µs at ``-O1``, 408 µs with
    ``-march=native`` (fused multiply-add), 321 µs at ``-O2 -march=native``, for 18, 18 and 23 s of gcc."""
    level = "-O1" if size > LARGE_UNIT_BYTES else "-O2"
    return (level, "-march=native") + tuple(f for f in CFLAGS if not f.startswith("-O") and f != "-shared")


LARGE_UNIT_BYTES = 2_000_000
# a quick build: every unit unoptimised, for a library that serves while the optimised one is compiled
# (the MPC's 1.7 MB of C for the Panda: 4.3 s of gcc CPU against 20.5 s at -O2 -march=native)
QUICK_FLAGS = ("-O0", "-fPIC", "-fno-math-errno", "-w")


def _library_hash(key, flags, link):
    """The hash that names a library of ``key`` compiled with ``flags`` and linked to ``link``."""
    return hashlib.sha256(key.encode() + b"\0" + " ".join(flags).encode() + b"\0" + str(LARGE_UNIT_BYTES).encode()
                          + b"\0" + "\0".join(link).encode() + b"\0" + cpu_signature().encode())


def _lazy_library_path(h):
    """The cache path of a library named without its C source (``h`` from :func:`_library_hash`)."""
    h.update(b"\0" + ca.__version__.encode() + b"\0" + package_fingerprint().encode())
    return os.path.join(cache_dir(), f"casadi_{h.hexdigest()[:24]}.so")


def cached_library(key, flags=CFLAGS, link=()):
    """The path of the library :func:`compile_casadi_library` builds from a callable for ``key``, ``flags``
    and ``link`` when it is in the cache, else None (nothing is built)."""
    lib = _lazy_library_path(_library_hash(key, flags, link))
    return lib if os.path.isfile(lib) else None


def compile_casadi_library(functions, key, flags=CFLAGS, label=None, link=(), quick=False, nice=0):
    """Generate C for ``functions`` (a list of ``ca.Function``, or a list of such lists: one translation
    unit each), compile the units by parallel compiler processes (flags by size: :func:`unit_flags`) and
    link them into one library; its path. With ``label``, progress goes to stderr while compiling.
    ``link``: libraries (paths) whose functions the generated code calls (``ca.external`` of them).
    ``quick``: every unit with :data:`QUICK_FLAGS` instead (a library of its own, slower code built about
    five times faster). ``nice``: the compiler processes' niceness (19, the lowest CPU priority, leaves the
    cores to a running controller).

    ``key``: a string identifying what was generated (model fingerprint + options); the library lives in
    the cache under a hash of ``key``, the C sources and ``flags``, so a second call (or process) loads it
    without compiling. ``functions`` may also be a callable returning them: the library is then named by
    ``key``, ``flags``, CasADi's version and :func:`package_fingerprint` alone, so that loading it from
    the cache neither builds the functions nor generates their C (the caller's ``key`` must then name
    everything else the code depends on). Raises :class:`CompileError`."""
    if quick:
        flags = QUICK_FLAGS
    h = _library_hash(key, flags, link)
    lazy = callable(functions)
    if lazy:
        lib = _lazy_library_path(h)
        if os.path.isfile(lib):
            return lib
        if label:
            print(f"robodyn: compiling the {label} for this robot and problem (first run, seconds to minutes "
                  f"by the robot's size; cached afterwards in {cache_dir()})", file=sys.stderr, flush=True)
        functions = functions()
    nested = functions and isinstance(functions[0], (list, tuple))
    groups = [list(g) for g in functions] if nested else [list(functions)]
    compiler = find_compiler()
    if compiler is None:
        raise CompileError("no C compiler found (set CC or install gcc)")
    with tempfile.TemporaryDirectory(prefix="casadi-gen-", dir=cache_dir()) as tmp:
        sources = []
        for i, group in enumerate(groups):
            gen = ca.CodeGenerator(f"robodyn_casadi_{i}.c", {"with_header": False})
            for f in group:
                gen.add(f)
            sources.append(gen.generate(tmp + os.sep))
        if not lazy:
            for src in sources:
                with open(src, "rb") as fh:
                    h.update(b"\0" + fh.read())
        digest = h.hexdigest()[:24]
        lib = os.path.join(cache_dir(), f"casadi_{digest}.so")
        with key_lock("casadi_" + digest):
            if not os.path.isfile(lib):
                _build_library(compiler, sources, flags, link, lib, tmp, label, nice)
    return lib


def _build_library(compiler, sources, flags, link, lib, tmp, label, nice=0):
    """Compile ``sources`` by parallel compiler processes, the largest first, and link them (with the
    libraries ``link``) into ``lib``, moved into place atomically; progress on stderr with ``label``.
    ``nice``: the compilers' niceness."""
    sizes = {src: os.path.getsize(src) for src in sources}
    cancel = getattr(_BUILD, "cancel", None)
    _check_cancel(cancel)
    start = time.perf_counter()
    if label:
        print(f"robodyn: compiling {label}: {len(sources)} units, {sum(sizes.values()) / 1e6:.1f} MB of C",
              file=sys.stderr, flush=True)

    def compile_unit(src):
        unit = flags if flags == QUICK_FLAGS or (len(sources) == 1 and flags != CFLAGS) else unit_flags(sizes[src])
        return _compile_unit(compiler, src, tuple(f for f in unit if f != "-shared"), sizes[src], label, cancel,
                             nice)

    with ThreadPoolExecutor(max_workers=default_jobs()) as pool:
        cpu = list(pool.map(compile_unit, sorted(sources, key=lambda s: -sizes[s])))
    _check_cancel(cancel)
    tmp_lib = os.path.join(tmp, "lib.so")
    proc = subprocess.run(compiler + ["-shared", "-o", tmp_lib] + [s[:-2] + ".o" for s in sources] + list(link)
                          + ["-lm"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"linking failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    os.replace(tmp_lib, lib)
    if label:
        print(f"robodyn: {label} built in {time.perf_counter() - start:.1f} s ({sum(cpu):.1f} s CPU in the "
              f"compiler, load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)


def _compile_unit(compiler, src, flags, size, label, cancel=None, nice=0):
    """Compile the C file ``src`` (``size`` bytes) with ``flags`` into ``src[:-2].o`` (at niceness
    ``nice``); the CPU seconds of that compiler process alone. Raises :class:`CompileError`
    with the tail of its stderr, and :class:`BuildCancelled` when ``cancel`` is set before or while it runs
    (the compiler killed)."""
    _check_cancel(cancel)
    start = time.perf_counter()
    niced = ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []      # nice execs the compiler
    proc = subprocess.Popen(niced + compiler + list(flags) + ["-c", src, "-o", src[:-2] + ".o"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done = threading.Event()
    if cancel is not None:
        threading.Thread(target=_kill_when_cancelled, args=(proc, cancel, done), daemon=True).start()
    try:
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        done.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    _check_cancel(cancel)
    if proc.returncode != 0:
        tail = "\n".join(err.strip().splitlines()[-20:])
        raise CompileError(f"C compiler failed (exit {proc.returncode}) on {src}:\n{tail}")
    cpu = usage.ru_utime + usage.ru_stime
    if label:
        print(f"robodyn:   {os.path.basename(src)} ({size / 1e6:.1f} MB, {' '.join(flags[:2])}) "
              f"compiled in {time.perf_counter() - start:.1f} s ({cpu:.1f} s CPU)", file=sys.stderr, flush=True)
    return cpu


def _kill_when_cancelled(proc, cancel, done, poll=0.05):
    """Once ``cancel`` is set, unless ``done`` (the compiler ended) comes first: kill the processes the
    compiler driver ``proc`` started (cc1, as), which it then reaps before it exits with an error, or the
    driver itself when it has none at that moment (killed first, its children would be left to whatever
    reaps orphans)."""
    while not cancel.wait(poll):
        if done.is_set():
            return
    while not done.is_set():
        below = descendants(proc.pid)
        for pid in reversed(below) if below else [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        done.wait(poll)


def compile_casadi_functions(functions, key, flags=CFLAGS):
    """:func:`compile_casadi_library` and each function loaded back with ``ca.external``:
    ``{name: ca.Function}``."""
    lib = compile_casadi_library(functions, key, flags)
    return {f.name(): ca.external(f.name(), lib) for f in functions}


class DirectCall:
    """A function of a library of :func:`compile_casadi_library` called through its C entry point
    ``int name(const double** arg, double** res, long long* iw, double* w, int mem)`` with buffers
    allocated once: no CasADi dispatch, no conversion, no allocation per call (a CasADi call from Python
    costs tens of µs in argument and result conversion alone).

    ``inputs[i]`` / ``outputs[i]``: the nonzeros (column-major, ``function.sparsity_in(i)``) of input and
    output ``i``, (nnz,) float64 arrays that stay valid: write the inputs, ``call()``, read the outputs.
    ``bind(i, array)`` makes input ``i`` read ``array`` (e.g. another DirectCall's output) instead of its own
    buffer."""

    def __init__(self, library, function):
        import ctypes
        self._ct = ctypes
        self.function = function
        name = function.name()
        lib = ctypes.CDLL(library)
        self._entry = getattr(lib, name)
        self._entry.restype = ctypes.c_int
        self._entry.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
        sizes = [ctypes.c_longlong() for _ in range(4)]
        work = getattr(lib, name + "_work")
        work.restype = ctypes.c_int
        if work(*[ctypes.byref(s) for s in sizes]):
            raise CompileError(f"{name}: work size query failed")
        sz_arg, sz_res, sz_iw, sz_w = (max(int(s.value), 1) for s in sizes)
        checkout = getattr(lib, name + "_checkout", None)
        self._mem = int(checkout()) if checkout is not None else 0
        self.inputs = [np.zeros(function.nnz_in(i)) for i in range(function.n_in())]
        self.outputs = [np.zeros(function.nnz_out(i)) for i in range(function.n_out())]
        self._arg = (ctypes.c_void_p * sz_arg)()
        self._res = (ctypes.c_void_p * sz_res)()
        self._iw = np.zeros(sz_iw, dtype=np.int64)
        self._w = np.zeros(sz_w)
        self._keep = {}
        for i, a in enumerate(self.inputs):
            self._arg[i] = a.ctypes.data
        for i, a in enumerate(self.outputs):
            self._res[i] = a.ctypes.data
        self._args = (ctypes.cast(self._arg, ctypes.c_void_p), ctypes.cast(self._res, ctypes.c_void_p),
                      self._iw.ctypes.data, self._w.ctypes.data, self._mem)

    def bind(self, i, array):
        """Input ``i`` reads ``array`` (float64, contiguous, its nnz) from now on."""
        if array.dtype != np.float64 or not array.flags.c_contiguous or array.size != self.function.nnz_in(i):
            raise ValueError(f"{self.function.name()}: input {i} needs {self.function.nnz_in(i)} contiguous doubles")
        self.inputs[i] = array
        self._keep[i] = array
        self._arg[i] = array.ctypes.data

    def call(self):
        """Evaluate with the current inputs into :attr:`outputs`."""
        if self._entry(*self._args):
            raise RuntimeError(f"{self.function.name()} failed")


def compile_solver_dependencies(solver, key, flags=CFLAGS, label=None, link=()):
    """Compile the oracle functions of an ``nlpsol`` into a cached library (:func:`compile_casadi_library`,
    ``link``: libraries of the ``ca.external`` functions they call) and return its path, to be passed to
    ``ca.nlpsol(name, plugin, path, opts)``. ``solver`` may be a callable returning it (built only when
    the library is not in the cache; ``key`` must then name the problem)."""
    def functions(s):
        return [s.oracle()] + [s.get_function(name) for name in s.get_function()]
    if callable(solver) and not isinstance(solver, ca.Function):
        return compile_casadi_library(lambda: functions(solver()), key, flags, label=label, link=link)
    return compile_casadi_library(functions(solver), key, flags, label=label, link=link)


def rk4_step_function(model, name="rd_rk4_step"):
    """CasADi function ``(q, v, tau, pi, dt) -> (q+, v+)``: one classic RK4 step of
    ``q̇ = v, v̇ = aba(q, v, tau - τ_f(v); pi)`` with the model's friction
    ``τ_f = viscous v + coulomb sign(v) + offset``, the torque held constant over the step (a simulator
    of the plant; fixed-base models, ``nq == nv``)."""
    nv, npi = model.nv, 10 * model.nbodies
    q, v, tau = ca.SX.sym("q", nv), ca.SX.sym("v", nv), ca.SX.sym("tau", nv)
    pi, dt = ca.SX.sym("pi", npi), ca.SX.sym("dt")

    def f(q_, v_):
        tau_f = ca.DM(model.viscous) * v_ + ca.DM(model.coulomb) * ca.sign(v_) + ca.DM(model.friction_offset)
        return v_, aba(model, q_, v_, tau - tau_f, pi=pi)

    k1q, k1v = f(q, v)
    k2q, k2v = f(q + dt / 2 * k1q, v + dt / 2 * k1v)
    k3q, k3v = f(q + dt / 2 * k2q, v + dt / 2 * k2v)
    k4q, k4v = f(q + dt * k3q, v + dt * k3v)
    return ca.Function(name, [q, v, tau, pi, dt], [q + dt / 6 * (k1q + 2 * k2q + 2 * k3q + k4q),
                                                   v + dt / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)])


class DynamicsFunctions:
    """The core's dynamics as CasADi functions of ``(q, v, ..., pi)`` for one model (numeric evaluation
    through CasADi's VM, or compiled C with ``compiled=True``).

    ``rnea(q, v, a, pi) -> tau`` (nv,), ``aba(q, v, tau, pi) -> a`` (nv,), ``mass(q, pi) -> M``
    (nv, nv), ``gravity(q, pi) -> g`` (nv,), ``slotine_li(q, v, v_r, a_r) -> Y`` (nv, 10 nb),
    ``regressor(q, v, a) -> Y`` (nv, 10 nb), ``rk4_step(q, v, tau, pi, dt) -> (q, v)`` (a simulator step,
    :func:`rk4_step_function`). ``pi`` (10 nb,) are inertial parameters; armature and
    friction stay the model's (rnea/aba/mass include the armature, as the core does)."""

    NAMES = ("rd_rnea", "rd_aba", "rd_mass", "rd_gravity", "rd_slotine_li", "rd_regressor", "rd_rk4_step")

    def __init__(self, model, compiled=False):
        self.model = model
        if compiled:       # traced only when the library is not in the cache
            def units():           # three translation units compiled in parallel: RK4 step, regressors, rest
                f = self._trace(model)
                return [[f[6]], [f[4], f[5]], f[:4]]
            # the friction is built into the RK4 step and not part of the fingerprint
            key = "dynamics:" + model.fingerprint() + ":" + repr(
                [np.asarray(a, dtype=float).tolist() for a in (model.viscous, model.coulomb, model.friction_offset)])
            lib = compile_casadi_library(units, key, label="dynamics functions")
            fns = [ca.external(name, lib) for name in self.NAMES]
        else:
            fns = self._trace(model)
        self._rnea, self._aba, self._mass, self._gravity, self._sl, self._reg, self._rk4 = fns

    @staticmethod
    def _trace(model):
        nv, npi = model.nv, 10 * model.nbodies
        q, v, a, vr, pi = (ca.SX.sym(n, k) for n, k in
                           (("q", model.nq), ("v", nv), ("a", nv), ("v_r", nv), ("pi", npi)))
        return [
            ca.Function("rd_rnea", [q, v, a, pi], [rnea(model, q, v, a, pi=pi)]),
            ca.Function("rd_aba", [q, v, a, pi], [aba(model, q, v, a, pi=pi)]),
            ca.Function("rd_mass", [q, pi], [crba(model, q, pi=pi)]),
            ca.Function("rd_gravity", [q, pi], [rnea(model, q, ca.SX.zeros(nv), ca.SX.zeros(nv), pi=pi)]),
            ca.Function("rd_slotine_li", [q, v, vr, a], [slotine_li_regressor(model, q, v, vr, a)]),
            ca.Function("rd_regressor", [q, v, a], [slotine_li_regressor(model, q, v, v, a)]),
            rk4_step_function(model),
        ]

    def rnea(self, q, v, a, pi):
        return np.asarray(self._rnea(q, v, a, pi)).reshape(-1)

    def aba(self, q, v, tau, pi):
        return np.asarray(self._aba(q, v, tau, pi)).reshape(-1)

    def mass(self, q, pi):
        return np.asarray(self._mass(q, pi))

    def gravity(self, q, pi):
        return np.asarray(self._gravity(q, pi)).reshape(-1)

    def slotine_li(self, q, v, v_r, a_r):
        return np.asarray(self._sl(q, v, v_r, a_r))

    def regressor(self, q, v, a):
        return np.asarray(self._reg(q, v, a))

    def rk4_step(self, q, v, tau, pi, dt):
        qn, vn = self._rk4(q, v, tau, pi, dt)
        return np.asarray(qn).reshape(-1), np.asarray(vn).reshape(-1)
