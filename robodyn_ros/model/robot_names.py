"""Bundled robot names wherever a URDF is asked for: one resolver for the library and every command.

``resolve_urdf("panda")`` is the path of the bundled Panda URDF; a path that exists, anything with a path
separator or a ``.urdf`` suffix, an XML string and any non-string source are returned unchanged.
"""
from __future__ import annotations

import os

from .errors import ModelError

BUNDLED_ROBOTS = ("panda", "ur5", "iiwa")

_ROBOTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "robots")


def bundled_urdf_path(name):
    """Absolute path (str) of the bundled URDF of robot ``name`` (one of ``BUNDLED_ROBOTS``); ModelError
    naming the available robots otherwise."""
    if name not in BUNDLED_ROBOTS:
        raise ModelError(f"unknown bundled robot {name!r}; available: {', '.join(BUNDLED_ROBOTS)}")
    return os.path.join(_ROBOTS_DIR, f"{name}.urdf")


def resolve_urdf(source):
    """``source`` with a bundled robot name replaced by the path of its URDF (see the module docstring)."""
    if not isinstance(source, str) or source.lstrip().startswith("<") or os.path.exists(source) \
            or os.sep in source or source.endswith(".urdf") or source not in BUNDLED_ROBOTS:
        return source
    return bundled_urdf_path(source)
