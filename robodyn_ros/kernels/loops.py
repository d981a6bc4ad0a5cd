"""Four kernels as C loops over a model's constant tables, for models whose unrolled expression graph grows
too large: ``rnea_derivatives`` by the IDSVA recursion (Singh, Russell, Wensing 2022, Algorithm 1, eqs.
30-32; docs/REFERENCES.md), ``crba``, ``coriolis_matrix`` and ``regressor`` (their algorithms at the C
functions of ``runtime/loops.c``).

The unrolled kernels (:mod:`robodyn_ros.kernels.symbolic`) emit one straight-line instruction per
operation of the recursion for one particular model: fastest for arms of a few joints, whose constants
fold away, but their size grows with the number of (ancestor, descendant) pairs times the constant
factor of the spatial algebra, and gcc's time with it (a 48-joint chain took minutes, 96 did not finish).
Here the same recursion is a fixed C text, a few hundred lines whatever the model, reading the model from
``static const`` tables (parents, joint twists, placements, inertial parameters, armature, gravity): its
operation count is that of the algorithm, O(n) spatial operations per body plus O(1) per (ancestor,
descendant) pair, O(n·d) in all for depth d, and its size, hence gcc's time on it, does not depend on the
model.

Scope: trees of 1-DoF joints with a constant twist ``S = [v; w]`` in the child frame (revolute, prismatic,
screw), which is every robot built from a URDF without a floating base. The joint placement is the
screw motion ``exp([S] θ)``: ``R = Rot(w, θ)``, ``p = (1 - R)(w × v) + w (w·v) θ`` for ``|w| = 1``
(revolute: ``v = 0``, so ``p = 0``), ``R = 1``, ``p = v θ`` for ``w = 0`` (prismatic); see
:mod:`robodyn_ros.model.joints`.

The IDSVA algorithm is that of :func:`robodyn_ros.dynamics.rnea_derivatives.rnea_derivatives` (its docstring has the
derivation), for 1-DoF joints, with every quantity in ground coordinates (``[lin; ang]`` order):

forward pass, body ``i`` with parent ``λ``:
    ``S_i = X_i S_i^local``; ``v_i = v_λ + S_i q̇_i``; ``a_i = a_λ + S_i q̈_i + v_i × S_i q̇_i`` (``a_0 = [-g; 0]``);
    ``Ψ_i = v_λ × S_i``, ``Ψ̇_i = v_i × S_i + Ψ_i``, ``A_i = a_λ × S_i + v_λ × Ψ_i`` (eq. 31);
    ``I_i`` its ground-frame spatial inertia, ``f_i = I_i a_i + v_i ×* I_i v_i``,
    ``B_i = (v_i ×*) I_i - I_i (v_i ×) + ((I_i v_i) ×̄*)``;
backward pass, composites ``I^C``, ``B^C``, ``F`` summed into the parent after body ``i``:
    ``k ⪯ i``: ``∂τ_i/∂q_k = (B^C_i^T S_i)·Ψ_k + (I^C_i S_i)·A_k``, ``∂τ_i/∂q̇_k = (B^C_i^T S_i)·S_k + (I^C_i S_i)·Ψ̇_k``,
    ``M_ik = (I^C_i S_i)·S_k`` (eq. 30);
    ``k ≺ i``: ``∂τ_k/∂q_i = S_k·(S_i ×* F_i + I^C_i A_i + B^C_i Ψ_i)``, ``∂τ_k/∂q̇_i = S_k·(B^C_i S_i + I^C_i Ψ̇_i)``,
    ``M_ki = M_ik`` (eq. 32).
"""
from __future__ import annotations

import numpy as np

from ..model.joints import PrismaticJoint, RevoluteJoint, ScrewJoint
from . import c_runtime

# kernel name -> the C function of runtime/loops.c that computes it (signature of an evaluator: in, out)
LOOP_FUNCTIONS = {"crba": "rdl_crba", "coriolis_matrix": "rdl_coriolis", "regressor": "rdl_regressor",
                  "rnea_derivatives": "rdl_idsva"}

# When a kernel is loops rather than unrolled: at least LOOP_MIN_NV degrees of freedom, and for crba and the
# regressor at least LOOP_MIN_PAIRS (ancestor, descendant) pairs, the count their unrolled size grows with.
# Measured per call against Pinocchio (benchmarks: robodyn bench kernels): loops beat the unrolled
# rnea_derivatives from 16 joints on (16-joint chain 0.70 of Pinocchio; Talos, 44 DoF in 282 pairs, 0.68
# against 0.83 unrolled) and the unrolled coriolis_matrix is the largest kernel (734 433 instructions on a
# 48-joint chain); unrolled crba and regressor stay far ahead on short trees (Talos: 0.37 and 0.29 against
# 0.96 and 1.00 as loops) and build in seconds there, while on a 48-joint chain (1 176 pairs) the loops are
# 0.58 and 0.39 of Pinocchio and the unrolled regressor alone is 402 054 instructions.
# They decide what is generated: bump codegen.GENERATOR_VERSION (the cache key) when they change.
LOOP_MIN_NV = 16
LOOP_MIN_PAIRS = {"crba": 600, "regressor": 600}


def supports_loops(model):
    """Whether every joint of ``model`` is a 1-DoF joint with a constant twist (revolute, prismatic, screw)."""
    return all(isinstance(j, (RevoluteJoint, PrismaticJoint, ScrewJoint)) for j in model.joints)


def pair_count(model):
    """The (ancestor, descendant) pairs of ``model``'s tree, a body with itself included."""
    return sum(len(model.ancestors(i)) for i in range(model.nbodies))


def uses_loops(model, name):
    """Whether kernel ``name`` of ``model`` is built as loops (:data:`LOOP_MIN_NV`, :data:`LOOP_MIN_PAIRS`,
    :func:`supports_loops`)."""
    return (name in LOOP_FUNCTIONS and model.nv >= LOOP_MIN_NV and pair_count(model) >= LOOP_MIN_PAIRS.get(name, 0)
            and supports_loops(model))


def loop_flops(model, name):
    """Arithmetic operations of one call of kernel ``name``: a count per body and per (ancestor,
    descendant) pair read off ``runtime/loops.c``."""
    pairs = pair_count(model)
    per_body, per_pair = {"crba": (350, 24), "coriolis_matrix": (900, 48), "regressor": (2200, 120),
                          "rnea_derivatives": (1100, 96)}[name]
    return per_body * model.nbodies + per_pair * pairs


def _table(name, ctype, rows):
    """``static const ctype name[n][k] = {...};`` of a 2-D sequence (``repr``: each double read back exactly;
    the model's values are finite, as Model checks)."""
    body = ",\n    ".join("{" + ", ".join(_literal(x) for x in row) + "}" for row in rows)
    k = len(rows[0]) if len(rows) else 1
    return f"static const {ctype} {name}[{max(len(rows), 1)}][{k}] = {{\n    {body}\n}};\n"


def _literal(x):
    return str(int(x)) if isinstance(x, (int, np.integer)) else repr(float(x))


def model_tables(model):
    """The C tables the loop kernel reads: ``rdl_parent``, ``rdl_dof`` (tangent index of each body's joint),
    ``rdl_twist`` (local ``[v; w]``), ``rdl_rotational`` (1 when ``w ≠ 0``), ``rdl_R0`` (row-major) and
    ``rdl_p0`` (the joint frame in the parent body), ``rdl_pi`` (the 10 inertial parameters), ``rdl_armature``
    and ``rdl_a0`` (``[-g; 0]``)."""
    n = model.nbodies
    twist = [np.asarray(j.S, dtype=float).reshape(6) for j in model.joints]
    text = [f"#define RDL_N {n}\n",
            _table("rdl_parent", "int", [[model.parents[i]] for i in range(n)]),
            _table("rdl_dof", "int", [[model.idx_v[i]] for i in range(n)]),
            _table("rdl_rotational", "int", [[int(np.linalg.norm(t[3:6]) > 0.0)] for t in twist]),
            _table("rdl_twist", "double", twist),
            _table("rdl_R0", "double", [np.asarray(R, dtype=float).reshape(9) for R, _ in model.placements]),
            _table("rdl_p0", "double", [np.asarray(p, dtype=float).reshape(3) for _, p in model.placements]),
            _table("rdl_pi", "double", np.asarray(model.inertias, dtype=float)),
            _table("rdl_armature", "double", [[model.armature[model.idx_v[i]]] for i in range(n)]),
            _table("rdl_a0", "double", [list(-np.asarray(model.gravity, dtype=float)) + [0.0, 0.0, 0.0]])]
    return "".join(text)


# The recursion on the tables of model_tables (runtime/loops.c). Spatial vectors are double[6] in
# [lin; ang] order, 3x3 matrices row-major double[9], 6x6 matrices row-major double[36].
LOOPS = "loops.c"


def loop_source(model):
    """C text of the tables of ``model`` (:func:`model_tables`) and the functions of ``runtime/loops.c``
    (``rdl_idsva``, ``rdl_crba``, ``rdl_coriolis``, ``rdl_regressor``). Needs ``<math.h>`` and ``<string.h>``."""
    if not supports_loops(model):
        raise ValueError(f"model '{model.name}' has joints other than revolute, prismatic or screw")
    return model_tables(model) + c_runtime.blocks(LOOPS)
