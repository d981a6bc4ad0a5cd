"""Which models have compiled kernels: ``compile_kernels(model)`` registers its result here and the
numeric top-level functions (:mod:`robodyn_ros.kernels.numeric`) look it up. Keyed by the model object (models
are immutable and compared by identity), held weakly so a dropped model drops its entry."""
from __future__ import annotations

import weakref

_KERNELS = weakref.WeakKeyDictionary()


def register(model, kernels):
    """Make ``kernels`` the compiled path of ``model``."""
    _KERNELS[model] = kernels


def unregister(model):
    """Return ``model`` to the interpreted NumPy path."""
    _KERNELS.pop(model, None)


def get(model):
    """The kernels registered for ``model``, or None."""
    return _KERNELS.get(model)
