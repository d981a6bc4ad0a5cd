"""Give the C heap's free pages back to the operating system (glibc ``malloc_trim``).

A node whose middleware threads allocate and free message buffers at kilohertz rates leaves free but
resident pages in glibc's per-thread arenas: its resident set creeps up for minutes before it levels off,
which looks like a leak to anyone watching RSS on a robot PC. ``malloc_trim(0)`` releases whole free pages
of every arena (glibc >= 2.8); nodes call :func:`trim_heap` at a low rate (:class:`HeapTrimmer`). Elsewhere
(musl, macOS) it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import time

_libc = None


def _malloc_trim():
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = libc.malloc_trim if hasattr(libc, "malloc_trim") else False
        except OSError:
            _libc = False
    return _libc


def trim_heap():
    """``malloc_trim(0)``: True if the C library released memory, False if not (or without glibc)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim else False


class HeapTrimmer:
    """Calls :func:`trim_heap` at most once per ``period`` wall seconds from :meth:`maybe_trim` (cheap
    otherwise: one clock read). ``trims`` counts the calls."""

    def __init__(self, period=10.0):
        self.period = float(period)
        self._next = time.monotonic() + self.period
        self.trims = 0

    def maybe_trim(self):
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.period
        trim_heap()
        self.trims += 1
