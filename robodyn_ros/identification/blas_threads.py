"""Run OpenBLAS single-threaded.

On a small, shared machine OpenBLAS' worker threads spin while waiting and make small factorizations
(a 784x98 QR) take a second instead of milliseconds (measured here: 1.4 s with 2 threads, 2 ms with 1).
Identification does many small factorizations, so the command and the tests call
:func:`limit_blas_threads` first. It acts on the OpenBLAS copies already loaded by NumPy and SciPy
(setting OPENBLAS_NUM_THREADS only works before they are imported).
"""
from __future__ import annotations

import ctypes

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
            "openblas_set_num_threads")


def limit_blas_threads(threads=1):
    """Set the thread count of every loaded OpenBLAS library; returns how many libraries were set."""
    import numpy  # noqa: F401  (load the libraries)
    import scipy.linalg  # noqa: F401
    paths = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "openblas" in line.lower() and ".so" in line:
                    paths.add(line.split()[-1])
    except OSError:
        return 0
    done = 0
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(ctypes.c_int(threads))
                done += 1
                break
    return done
