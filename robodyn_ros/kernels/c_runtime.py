"""The fixed C of the kernels, kept as package data in ``runtime/`` and read by the generators.

``binding.h``, ``rows.c`` and ``arguments.c`` open every extension module (:func:`codegen.module_source`):
the includes and the batch block type, the row loops and their POSIX threads, the argument and output
checks of the Python binding. ``ltdl.c`` is the branch-sparse ``L^T D L`` factorisation of the mass matrix
and its solves (Featherstone, RBDA, Tables 6.3 and 6.4), ``aba_derivatives.c.in`` the body of the
``aba_derivatives`` composite (``${n}``: the model's nv), ``loops.c`` the recursions of :mod:`.loops`
over a model's tables, and ``v4.h`` the element-wise functions of the 4-lane chunked code
(:mod:`.chunked`). The generated C is these texts as they are plus what the generators write for one
model, so :func:`digest` is part of the disk-cache key (``build.cache_key``): a library compiled from
other runtime files is never loaded.
"""
from __future__ import annotations

import hashlib
from importlib import resources
from string import Template

_FOLDER = "runtime"


def read(name):
    """The text of runtime file ``name``."""
    return resources.files(__package__).joinpath(_FOLDER).joinpath(name).read_text()


def blocks(*names):
    """The runtime files ``names``, each after a blank line, as they stand in a generated module."""
    return "".join("\n" + read(name) for name in names)


def template(name, **values):
    """Runtime file ``name`` with its ``${key}`` placeholders replaced by ``values``."""
    return Template(read(name)).substitute(values)


def digest():
    """SHA-256 of every runtime file, names and contents."""
    h = hashlib.sha256()
    folder = resources.files(__package__).joinpath(_FOLDER)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_file():
            h.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    return h.hexdigest()
