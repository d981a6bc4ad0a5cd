"""Compiling a kernel module and the disk cache it lives in.

Cache: ``$ROBODYN_CACHE_DIR`` or ``~/.cache/robodyn_ros``, one shared library per key, where the key
hashes the model's fingerprint, the generator version, the digest of the C runtime files
(:func:`c_runtime.digest`: a library built from other runtime C is never loaded), the compiler flags,
the Python extension ABI and the NumPy C-API version. A build happens in a private temporary directory
and its result is moved into place with an atomic ``os.replace``; a per-key ``flock`` makes a second
process that wants the same model wait for the first and then load its result instead of compiling again.

Compiler: ``$CC`` (split like a shell command) when set, else ``cc`` or ``gcc`` from ``PATH``. Flags:
``-O2 -march=native``: fused multiply-add alone halves the time of the derivative kernels on this
machine (measured: Panda RNEA derivatives 7.1 µs at ``-O2``, 2.9 µs with ``-march=native``, while
``-O3`` gains nothing on straight-line code). Because the library is then specific to the CPU, the
cache key includes the CPU model and feature flags (:func:`cpu_signature`), so a cache directory shared
between different machines holds one build per CPU type instead of crashing on an illegal instruction.
gcc's time on one long straight-line function grows faster than linearly (Talos (44 DoF) took 1 000 s for
its 63 000-instruction Coriolis matrix at ``-O1``), so kernels above ``codegen.CHUNK_THRESHOLD``
instructions are emitted as chunks of bounded length spread over several translation units
(:func:`chunked.chunked_sources`) and compiled at ``-O2`` like the rest; a translation unit of more than
``BIG_KERNEL_INSTRUCTIONS`` instructions (only possible with the chunking off) is compiled at ``-O1``.
Where glibc's vector math library exists (:data:`LIBMVEC`), ``-DRDK_LIBMVEC`` and ``-lmvec`` give
the 4-lane batch kernels its sin and cos. The translation units are compiled by ``jobs`` parallel
processes, each kernel's as soon as it is traced, the derivatives (the longest) first, so that the compiler
works while the other kernels are traced (:class:`ModuleBuild`); the build's report holds the CPU seconds of each and the load average, as
a build on a loaded machine is slow in wall time but not in CPU time (build times: docs/PERFORMANCE.md).
"""
from __future__ import annotations

import contextlib
import ctypes.util
import hashlib
import importlib.machinery
import json
import importlib.util
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import c_runtime, codegen
from .codegen import GENERATOR_VERSION, module_source, spec_sources

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: the atomic rename alone keeps the cache consistent
    fcntl = None


def _libmvec():
    """Whether glibc's vector math library (libmvec, x86-64) can be linked: the 4-lane batch kernels
    then take sin and cos from it (runtime/v4.h)."""
    if platform.machine() not in ("x86_64", "AMD64") or not sys.platform.startswith("linux"):
        return False
    return ctypes.util.find_library("mvec") is not None


LIBMVEC = _libmvec()
CFLAGS = ("-O2", "-march=native", "-fPIC", "-fno-math-errno", "-fvisibility=hidden", "-pthread", "-w") + (
    ("-DRDK_LIBMVEC",) if LIBMVEC else ())
BIG_KERNEL_CFLAGS = ("-O1",) + CFLAGS[1:]
# The 4-lane batch kernels (codegen.VECTOR_BATCH): register-pressure-aware scheduling before register
# allocation shortens the spill traffic of their long straight-line chunks. Measured on Talos's 4-lane
# rnea_derivatives (chunks of 1 000 instructions): 136 000 -> 122 000 executed instructions per 4 samples
# (cachegrind), no longer compile.
VECTOR_CFLAGS = CFLAGS + ("-fschedule-insns", "-fsched-pressure")
BIG_KERNEL_INSTRUCTIONS = 60000


class KernelBuildError(RuntimeError):
    """The C compiler failed; the message holds the command and the tail of its stderr."""


def cache_dir():
    """The kernel cache directory (created on demand)."""
    path = os.environ.get("ROBODYN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "robodyn_ros")
    os.makedirs(path, exist_ok=True)
    return path


def find_compiler():
    """The C compiler command as an argument list, or None when there is none."""
    cc = os.environ.get("CC")
    if cc:
        argv = shlex.split(cc)
        return argv if argv and shutil.which(argv[0]) else None
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return [path]
    return None


def cpu_signature():
    """The CPU model and its feature flags (``/proc/cpuinfo``), or what ``platform`` knows elsewhere."""
    try:
        with open("/proc/cpuinfo") as fh:
            lines = [ln for ln in fh.read().splitlines() if ln.split(":")[0].strip() in ("model name", "flags", "Features")]
        return "\n".join(sorted(set(lines)))
    except OSError:
        return platform.machine() + " " + platform.processor()


SECONDS_FIXED, SECONDS_PER_JOINT = 1.0, 0.4
"""Rough wall seconds to generate and compile a robot's kernels on an idle two-core machine, plus per joint
(from an empty cache: UR5 2.8 s, iiwa 5.0 s, Baxter's 19 joints 6.4 s, Talos's 44 joints 15.9 s); the estimate
grows with the load average per CPU."""


def compile_estimate(nv, share=1.0):
    """Rough wall seconds to generate and compile the kernels of an ``nv``-joint robot on this machine now
    (``share``: the fraction of them compiled)."""
    try:
        load = os.getloadavg()[0] / max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        load = 1.0
    return share * (SECONDS_FIXED + SECONDS_PER_JOINT * max(1, nv)) * max(1.0, load)


def compile_notice(what, nv, stream=None, share=1.0):
    """One line on stderr where a compile starts on a cold cache: what is compiled, that it is the first run
    for this robot, about how long (:func:`compile_estimate`), and that it is cached afterwards (and where)."""
    print(f"robodyn: compiling {what} (first run for this robot, about {compile_estimate(nv, share):.0f} s; cached "
          f"afterwards in {cache_dir()})", file=stream or sys.stderr, flush=True)


def cache_key(fingerprint, parts):
    """Hex digest naming a library of a model's compiled kernels in the cache: ``parts``, the names of the
    parts it holds (:data:`~.parts.PARTS`) joined by ``+``."""
    h = hashlib.sha256()
    for item in (fingerprint, parts, GENERATOR_VERSION, c_runtime.digest(),
                 " ".join(CFLAGS), " ".join(BIG_KERNEL_CFLAGS), " ".join(VECTOR_CFLAGS),
                 str(BIG_KERNEL_INSTRUCTIONS), f"{codegen.CHUNK_THRESHOLD} {codegen.CHUNK_INSTRUCTIONS} {codegen.TU_INSTRUCTIONS}",
                 cpu_signature(), sysconfig.get_config_var("EXT_SUFFIX") or "", sys.platform,
                 str(np.lib.NumpyVersion(np.__version__).major)):
        h.update(item.encode() + b"\0")
    return h.hexdigest()[:24]


def module_name(key):
    return "_robodyn_kernels_" + key


def library_path(key):
    return os.path.join(cache_dir(), module_name(key) + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def load_module(key):
    """Import the cached extension of ``key``, or None when it is not in the cache."""
    path, name = library_path(key), module_name(key)
    if not os.path.isfile(path):  # checked first: the cache directory may have changed since the import
        return None
    if name in sys.modules:
        return sys.modules[name]
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


@contextlib.contextmanager
def key_lock(key):
    """Exclusive lock on one cache key across processes (no-op where flock does not exist)."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    with open(os.path.join(cache_dir(), module_name(key) + ".lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv, cwd):
    """Run one compiler command; returns ``(wall seconds, CPU seconds)`` of it (user + system, from
    ``wait4``, so exact even when several commands run at once)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = proc.stdout.read().decode(errors="replace")
    proc.stdout.close()
    cpu = None
    if hasattr(os, "wait4"):
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
    else:  # pragma: no cover - non-POSIX
        proc.wait()
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-25:])
        raise KernelBuildError(f"C compiler failed (exit {proc.returncode}): {' '.join(argv)}\n{tail}")
    return time.perf_counter() - start, cpu


class ModuleBuild:
    """The build of one kernel module into the cache under ``key``, compiling while the kernels are still
    being traced: :meth:`add` writes a kernel's C (:func:`~.codegen.spec_sources`) and queues its translation
    units (largest first) for ``jobs`` parallel compiler processes at once; :meth:`finish` writes the module
    itself, waits for every unit, links, and moves the library and its report into place. Used as a context
    manager: leaving it without :meth:`finish` (an error while tracing) stops the queued compiles and removes
    the temporary directory, leaving nothing in the cache."""

    def __init__(self, key, compiler, jobs=None):
        self.key, self.compiler = key, compiler
        self.jobs = jobs or default_jobs()
        self.start = time.perf_counter()
        self._tmp = tempfile.TemporaryDirectory(prefix="build-", dir=cache_dir())
        self.tmp = self._tmp.name
        self._pool = ThreadPoolExecutor(max_workers=self.jobs)
        self._units = []                 # (file name, future of (wall s, CPU s)), in the order queued
        self.sources = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._tmp.cleanup()
        return False

    def _queue(self, path, flags, includes=()):
        inc = [f"-I{d}" for d in includes]
        argv = self.compiler + list(flags) + inc + ["-c", path, "-o", path[:-2] + ".o"]
        self._units.append((os.path.basename(path), self._pool.submit(_run, argv, self.tmp)))

    def add(self, spec):
        """Write ``spec``'s C files and queue them, the largest first."""
        for path, size in sorted(spec_sources(spec, self.tmp), key=lambda unit: -unit[1]):
            big = size > BIG_KERNEL_INSTRUCTIONS
            self._queue(path, BIG_KERNEL_CFLAGS if big else VECTOR_CFLAGS if codegen.is_vector_unit(path) else CFLAGS)
            self.sources.append(path)

    def finish(self, kernel_set, attributes, report=None):
        """Compile the module of ``kernel_set`` (every kernel :meth:`add`-ed), link, and move the library
        into the cache. Returns ``{file: gcc wall seconds}`` (one entry per translation unit plus ``"link"``),
        also saved next to the library (:func:`load_report`) with the CPU seconds of every compiler process,
        their sum, the build's wall time and the load average at its end (a build on a loaded machine is
        slow in wall time but not in CPU time). Raises :class:`KernelBuildError` with the compiler's stderr
        tail on failure."""
        module_c = os.path.join(self.tmp, module_name(self.key) + ".c")
        with open(module_c, "w") as fh:
            fh.write(module_source(kernel_set, module_name(self.key), attributes))
        self._queue(module_c, CFLAGS, (sysconfig.get_paths()["include"], np.get_include()))
        timings, cpu_times = {}, {}
        for fname, future in self._units:
            timings[fname], cpu_times[fname] = future.result()
        tmp_lib = os.path.join(self.tmp, "module.so")
        objects = [s[:-2] + ".o" for s in self.sources + [module_c]]
        libs = (["-lmvec"] if LIBMVEC else []) + ["-lm"]
        timings["link"], cpu_times["link"] = _run(self.compiler + ["-shared", "-pthread", "-o", tmp_lib] + objects
                                                  + libs, self.tmp)
        report_tmp = os.path.join(self.tmp, "report.json")
        with open(report_tmp, "w") as fh:
            json.dump(dict(report or {}, compile_times=timings, compile_cpu_times=cpu_times,
                           compile_cpu_seconds=sum(c or 0.0 for c in cpu_times.values()), compile_jobs=self.jobs,
                           compile_wall_seconds=time.perf_counter() - self.start, load_average_after=_loadavg()), fh)
        os.replace(report_tmp, report_path(self.key))
        os.replace(tmp_lib, library_path(self.key))
        return timings


def default_jobs():
    """Parallel compiler processes: the CPUs this process may use, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def _loadavg():
    try:
        return list(os.getloadavg())
    except OSError:  # pragma: no cover
        return None


def report_path(key):
    """JSON next to the library: gcc seconds per translation unit and the build's wall time."""
    return os.path.join(cache_dir(), module_name(key) + ".json")


def load_report(key):
    try:
        with open(report_path(key)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}
