"""The CasADi SX functions that become compiled kernels, built from the core's algorithm code.

Every kernel is a ``casadi.Function`` of dense column inputs (``q`` (nq,), ``v``, ``a``, ``tau`` ... (nv,))
whose outputs are laid out for NumPy: a matrix output ``X`` (r, c) is emitted as ``X^T`` so that CasADi's
column-major storage of ``X^T`` is the row-major (C-order) storage of ``X``. Structural zeros (the
regressor's blocks of non-ancestor joints, the derivatives' entries between separate branches) are left
out of the generated code and filled in by the binding.

Derivatives with respect to ``q`` are taken in the tangent space (Pinocchio's convention): ``q`` is moved
by ``q ⊕ δ`` to first order (:func:`tangent_perturbation`) and the Jacobian is taken in ``δ`` at ``δ = 0``;
for revolute and prismatic joints this is the ordinary partial derivative.

Derivative source of ``rnea_derivatives``: the candidate with the fewest arithmetic operations
(:func:`flop_count`) among forward-mode AD of :func:`robodyn_ros.dynamics.rnea.rnea` (CasADi ``jacobian``),
reverse-mode AD (one adjoint sweep per row) and the analytical IDSVA recursion of
``robodyn_ros.dynamics.rnea_derivatives`` (Singh et al. 2022) when it exists and accepts CasADi symbols; the
choice and every candidate's count are recorded in ``KernelSet.sources`` / ``instruction_counts``.
Measured (flops): UR5 forward 4 548, reverse 3 739, IDSVA 5 183 (reverse AD kept); Panda 17 536,
14 707, 9 385 and Talos (44 DoF) 119 181, 93 659, 59 998 (IDSVA kept).
On larger trees of 1-DoF joints (``loops.uses_loops``: ``rnea_derivatives``, with no candidate built, and
``coriolis_matrix`` from 16 DoF on; ``crba`` and ``regressor`` on deep trees) these kernels are C loops over
the model's tables (:mod:`robodyn_ros.kernels.loops`), whose size does not grow with the model; unrolled,
they grow with the (ancestor, descendant) pairs (48-joint chain: 734 433 instructions for
``coriolis_matrix``, 402 054 for ``regressor``, minutes of gcc).
``aba_derivatives`` is a C composite (:func:`_aba_derivatives_composite`).
"""
from __future__ import annotations

import dataclasses
import importlib

import casadi as ca

from ..dynamics.aba import aba
from ..model.backend import CASADI
from ..dynamics.crba import crba
from ..dynamics.dynamic_matrices import coriolis_matrix, gravity_torque, nonlinear_effects
from ..model.joints import FreeFlyerJoint, SphericalJoint
from ..dynamics.regressor import regressor
from ..dynamics.rnea import rnea
from . import loops
from .parts import PARTS

# Operation codes that are bookkeeping, not arithmetic, in a CasADi SX algorithm.
_NON_ARITHMETIC = {ca.OP_INPUT, ca.OP_OUTPUT, ca.OP_CONST, ca.OP_ASSIGN, ca.OP_PARAMETER}


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """One compiled function: its Python name, the names and lengths of its vector inputs, the shapes of
    its outputs (C-order) and the CasADi Function computing them (outputs transposed as described above)."""

    name: str
    inputs: tuple          # ((name, length), ...)
    outputs: tuple         # (shape, ...), shape a tuple of ints
    function: ca.Function
    batch: bool            # whether a ``<name>_batch`` form over (N, n) arrays is generated
    scatter: tuple = ()    # per output: None when dense, else the C-order index of each nonzero CasADi writes
    composite: str = None  # C by codegen, ``function`` None: "aba_derivatives" (of other kernels), "loops" (kernels.loops)
    bound: bool = True     # whether the module binds it to Python (False: only called by a composite)


@dataclasses.dataclass
class KernelSet:
    specs: list
    sources: dict          # kernel -> how it is built: "ad", "ad_reverse", "idsva", "loops" (unrolled kernels not listed)
    instruction_counts: dict   # "<kernel>:<source>" -> (n_instructions, flops) for every candidate built
    dof_parents: tuple = ()    # λ(k) per degree of freedom, for the L^T D L solves in C
    c_source: str = ""         # C the composites call (the model tables and loops of kernels.loops), or ""


def flop_count(function):
    """Arithmetic operations of an SX Function's algorithm (inputs, outputs, constants, copies excluded)."""
    return sum(1 for k in range(function.n_instructions()) if function.instruction_id(k) not in _NON_ARITHMETIC)


def tangent_perturbation(model, q, dq):
    """``q ⊕ δ`` to first order in ``δ`` (nv,): ``q + δ`` for 1-DoF joints, ``quat ⊗ (δ/2, 1)`` for a
    spherical joint and ``(p + R δ_lin, quat ⊗ (δ_ang/2, 1))`` for a free flyer (body-frame velocity, as
    in Pinocchio's integrate). Exact in value and first derivative at ``δ = 0``, which is all the
    tangent-space Jacobians need. q (nq, 1) SX, dq (nv, 1) SX; returns (nq, 1) SX."""
    parts = []
    for i, joint in enumerate(model.joints):
        iq, iv = model.idx_q[i], model.idx_v[i]
        if isinstance(joint, FreeFlyerJoint):
            R, _ = joint.placement(CASADI, q[iq:iq + 7])
            parts += [q[iq:iq + 3] + ca.mtimes(R, dq[iv:iv + 3]), _quat_times_small(q[iq + 3:iq + 7], dq[iv + 3:iv + 6])]
        elif isinstance(joint, SphericalJoint):
            parts.append(_quat_times_small(q[iq:iq + 4], dq[iv:iv + 3]))
        else:
            parts.append(q[iq:iq + joint.nq] + dq[iv:iv + joint.nv])
    return ca.vertcat(*parts)


def _quat_times_small(quat, w):
    """``quat ⊗ (w/2, 1)`` for quaternions stored ``(x, y, z, w)``."""
    xyz, s, h = quat[0:3], quat[3], w / 2
    return ca.vertcat(s * h + xyz + ca.cross(xyz, h), s - ca.dot(xyz, h))


def _c_order(X):
    """``X^T`` without its structural zeros: CasADi writes the nonzeros of ``X^T`` in column-major order,
    which is ``X``'s C order; the binding scatters them into a zeroed array (:func:`scatter_indices`)."""
    return ca.sparsify(ca.SX(X).T)


def scatter_indices(function, k):
    """None when output ``k`` is dense, else the C-order position in ``X`` of each stored nonzero."""
    sp = function.sparsity_out(k)
    if sp.is_dense():
        return None
    rows, cols = sp.get_triplet()
    return tuple(c * sp.size1() + r for r, c in zip(rows, cols))


def _function(name, inputs, outputs):
    """An SX Function with common subexpressions eliminated (``casadi.cse``)."""
    return ca.Function(name, [x for _, x in inputs], ca.cse([_c_order(y) for y in outputs]))


def _spec(model, name, inputs, outputs, batch):
    F = _function("rdk_" + name, inputs, outputs)
    return KernelSpec(name, tuple((n, x.numel()) for n, x in inputs),
                      tuple(tuple(y.shape) if y.shape[1] > 1 else (y.shape[0],) for y in outputs), F, batch,
                      tuple(scatter_indices(F, k) for k in range(len(outputs))))


def _analytical(module_name, function_name):
    """The analytical derivative function of another module, or None when it does not exist (yet)."""
    try:
        return getattr(importlib.import_module("robodyn_ros.dynamics." + module_name), function_name)
    except (ImportError, AttributeError):
        return None


def _ad_rnea_derivatives(model, q, v, a, reverse=False):
    """``(∂τ/∂q, ∂τ/∂v, M)`` by automatic differentiation of RNEA: forward mode (CasADi's ``jacobian``)
    or, with ``reverse``, one reverse sweep per row of the Jacobian."""
    dq = ca.SX.sym("dq", model.nv)
    tau = rnea(model, tangent_perturbation(model, q, dq), v, a)
    if reverse:
        x, I = ca.vertcat(dq, v), ca.DM.eye(model.nv)
        J = ca.horzcat(*[ca.jtimes(tau, x, I[:, i], True) for i in range(model.nv)]).T
        dtau_dq, dtau_dv = J[:, :model.nv], J[:, model.nv:]
    else:
        dtau_dq, dtau_dv = ca.jacobian(tau, dq), ca.jacobian(tau, v)
    zero = ca.DM.zeros(model.nv)
    return ca.substitute(dtau_dq, dq, zero), ca.substitute(dtau_dv, dq, zero), crba(model, q)


def _ad_reverse_rnea_derivatives(model, q, v, a):
    return _ad_rnea_derivatives(model, q, v, a, reverse=True)


def _aba_derivatives_composite(model, inputs):
    """``aba_derivatives`` as C code calling the ABA and RNEA-derivative kernels and solving with the
    sparse ``L^T D L`` factors of ``M`` (its C: the template runtime/aba_derivatives.c.in). Measured
    alternatives, as one SX function: forward-mode AD of ABA 38 049 flops on Panda and 290 934 on Talos (44 DoF); ``M^-1`` (SX
    L^T D L) times the reverse-mode RNEA derivatives 19 180 and 173 268, whose C took gcc minutes on Talos;
    the analytical module 8 172 against 5 109 on UR5."""
    n = model.nv
    return KernelSpec("aba_derivatives", tuple((name, x.numel()) for name, x in inputs), ((n, n),) * 3, None, True,
                      (None, None, None), composite="aba_derivatives")


def _loop_spec(model, name, inputs, batch):
    """Kernel ``name`` as the C loops of :mod:`robodyn_ros.kernels.loops` (no CasADi function); its
    outputs' shapes are those of the unrolled kernel."""
    n = model.nv
    shapes = {"regressor": ((n, 10 * model.nbodies),), "rnea_derivatives": ((n, n),) * 3}.get(name, ((n, n),))
    return KernelSpec(name, tuple((k, x.numel()) for k, x in inputs), shapes, None, batch,
                      (None,) * len(shapes), composite="loops")


def ltdl_flops(model):
    """Operations of the numeric ``L^T D L`` factorisation plus ``3 nv`` solves (C composite)."""
    lam, n = dof_parents(model), model.nv
    depth = [0] * n
    for k in range(n):
        depth[k] = 0 if lam[k] < 0 else depth[lam[k]] + 1
    factor = sum(1 + 2 * d + sum(2 * depth[j] + 2 for j in _chain(lam, lam[k])) for k, d in enumerate(depth))
    solve = sum(4 * d + 1 for d in depth)
    return factor + 3 * n * solve + 2 * n * n


def _chain(lam, i):
    while i >= 0:
        yield i
        i = lam[i]


def dof_parents(model):
    """``λ(k)`` for every degree of freedom: the previous dof of the same joint, else the last dof of the
    parent body's joint, else -1 (Featherstone RBDA Sec. 6.5, the expanded parent array)."""
    lam = []
    for i, joint in enumerate(model.joints):
        for k in range(joint.nv):
            p = model.parents[i]
            lam.append(model.idx_v[i] + k - 1 if k > 0 else (model.idx_v[p] + model.joints[p].nv - 1 if p >= 0 else -1))
    return lam


def _pick(model, name, inputs, candidates, counts):
    """Build every candidate ``{source: builder}`` and keep the one with the fewest arithmetic ops."""
    best = None
    for source, build in candidates.items():
        try:
            outputs = build(model, *[x for _, x in inputs])
        except Exception:  # an analytical module that does not (yet) accept CasADi symbols
            continue
        spec = _spec(model, name, inputs, list(outputs), True)
        flops = flop_count(spec.function)
        counts[f"{name}:{source}"] = (spec.function.n_instructions(), flops)
        if best is None or flops < best[2]:
            best = (source, spec, flops)
    return best[0], best[1]


def build_kernel_set(model, ready=None, parts=None):
    """The kernels of ``model`` as :class:`KernelSpec` (see the module docstring for the layouts): those of
    ``parts`` (names of :data:`~robodyn_ros.kernels.parts.PARTS`; the ``derivatives`` part alone also holds
    the ABA its composite calls, not bound to Python), or all of them. ``ready(spec)``: called with each
    kernel as soon as it is built, the longest to compile first, so that a build can compile it while the
    others are traced."""
    names = sum((PARTS[part] for part in (parts or PARTS)), ())
    q, v, a = ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv), ca.SX.sym("a", model.nv)
    tau, jerk = ca.SX.sym("tau", model.nv), ca.SX.sym("jerk", model.nv)
    qva, qvt = (("q", q), ("v", v), ("a", a)), (("q", q), ("v", v), ("tau", tau))
    sources, counts, specs = {}, {}, []

    def built(spec):
        if ready is not None:
            ready(spec)
        specs.append(spec)
        return spec

    def kernel(name, inputs, build, batch):
        if name not in names:
            return None
        if loops.uses_loops(model, name):
            sources[name] = "loops"
            counts[f"{name}:loops"] = (None, loops.loop_flops(model, name))
            return built(_loop_spec(model, name, inputs, batch))
        return built(_spec(model, name, inputs, [build()], batch))

    if "rnea_derivatives" in names:
        if loops.uses_loops(model, "rnea_derivatives"):
            kernel("rnea_derivatives", qva, None, True)
        else:
            rnea_candidates = {"ad": _ad_rnea_derivatives, "ad_reverse": _ad_reverse_rnea_derivatives}
            idsva = _analytical("rnea_derivatives", "rnea_derivatives")
            if idsva is not None:
                rnea_candidates["idsva"] = idsva
            sources["rnea_derivatives"], derivatives = _pick(model, "rnea_derivatives", qva, rnea_candidates, counts)
            built(derivatives)
    kernel("coriolis_matrix", (("q", q), ("v", v)), lambda: coriolis_matrix(model, q, v), False)
    kernel("regressor", qva, lambda: regressor(model, q, v, a), True)
    kernel("rnea", qva, lambda: rnea(model, q, v, a), True)
    if "aba" in names or "aba_derivatives" in names:
        aba_spec = built(dataclasses.replace(_spec(model, "aba", qvt, [aba(model, q, v, tau)], True),
                                             bound="aba" in names))
    kernel("crba", (("q", q),), lambda: crba(model, q), True)
    kernel("nonlinear_effects", (("q", q), ("v", v)), lambda: nonlinear_effects(model, q, v), False)
    kernel("gravity_torque", (("q", q),), lambda: gravity_torque(model, q), False)
    if "aba_derivatives" in names:                     # after what it calls (codegen.module_source)
        built(_aba_derivatives_composite(model, qvt))
        sources["aba_derivatives"] = f"aba + {sources['rnea_derivatives']} rnea_derivatives + LTDL solves (C)"
        rnea_flops = counts[f"rnea_derivatives:{sources['rnea_derivatives']}"][1]
        counts["aba_derivatives:composite"] = (None, flop_count(aba_spec.function) + rnea_flops + ltdl_flops(model))
    kernel("rnea_time_derivatives", qva + (("jerk", jerk),), lambda: _rnea_time_derivative(model, q, v, a, jerk),
           False)
    return KernelSet(specs, sources, counts, tuple(dof_parents(model)),
                     loops.loop_source(model) if any(x.composite == "loops" for x in specs) else "")


def _rnea_time_derivative(model, q, v, a, jerk):
    """``τ̇ = ∂τ/∂q ⊙ v + ∂τ/∂v a + M jerk``: one forward-mode directional derivative of RNEA along
    ``(v, a, jerk)`` with ``q`` moved in the tangent space."""
    dq = ca.SX.sym("dq", model.nv)
    tau = rnea(model, tangent_perturbation(model, q, dq), v, a)
    tau_dot = ca.jtimes(tau, ca.vertcat(dq, v, a), ca.vertcat(v, a, jerk))
    return ca.substitute(tau_dot, dq, ca.DM.zeros(model.nv))
