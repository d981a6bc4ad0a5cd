"""Which kernels are compiled together: a model's kernels come in two parts, each compiled when first
needed and cached as a library of its own (or both in one library when they are built together, as
``compile_kernels(model)`` does), so that a 1-kHz controller, estimator or simulator (which calls the
regressor, the RNEA, the ABA and the CRBA) does not wait for the derivatives it never calls.

``dynamics``: ``rnea``, ``aba``, ``crba``, ``nonlinear_effects``, ``gravity_torque``, ``regressor``.
``derivatives``: ``rnea_derivatives``, ``aba_derivatives``, ``rnea_time_derivatives`` and
``coriolis_matrix`` (Garofalo et al. eq. 6b, whose Christoffel symbols are partial derivatives of ``M``;
no control loop calls it, and its code is among the longest to compile); this library also compiles the
ABA, which the ``aba_derivatives`` composite calls. Compile times of each part: docs/PERFORMANCE.md.
"""
from __future__ import annotations

PARTS = {
    "dynamics": ("rnea", "aba", "crba", "nonlinear_effects", "gravity_torque", "regressor"),
    "derivatives": ("rnea_derivatives", "aba_derivatives", "rnea_time_derivatives", "coriolis_matrix"),
}


def part_of(function):
    """The part that holds kernel ``function`` (a per-call or ``_batch`` name), or None."""
    name = function[:-len("_batch")] if function.endswith("_batch") else function
    for part, names in PARTS.items():
        if name in names:
            return part
    return None
