"""The shooting map of all stages with the derivatives a Gauss-Newton method needs, supplied to CasADi so
that fatrop and ipopt never differentiate RK4 + ABA themselves.

``F_N(X (nx, N), U (nu, N), θ) -> X+ (nx, N)`` is the RK4 step of every stage. Its derivatives:

- Jacobian (custom): block diagonal ``∂X+/∂X = diag(A_k)``, ``∂X+/∂U = diag(B_k)`` from the mapped
  ``step_linearized``, whose own derivatives are zero;
- reverse mode (``adj1_<name>`` in the function cache): ``(diag(A_k)ᵀ Λ, diag(B_k)ᵀ Λ)`` for the
  multipliers ``Λ`` (nx, N) from the mapped ``step_adjoint`` (one reverse sweep, no Jacobian), whose
  Jacobian is zero with respect to ``X, U, θ`` (the Gauss-Newton approximation: the term ``Σ λ_kᵀ ∇²F`` of
  the Hessian of the Lagrangian is dropped) and ``diag(A_k)ᵀ, diag(B_k)ᵀ`` with respect to ``Λ``.

The Hessian of the Lagrangian, the Jacobian of its gradient ``∇f + Jᵀλ``, thus contains no derivative of
the dynamics: ``2 λ_f diag(Q, R, ..., Q_N)``, the Gauss-Newton Hessian of the least-squares cost
(Cărmizaru 2022, eq. 5.2), evaluated without any stage Jacobian; the gradient of the Lagrangian costs one
reverse sweep per stage. Derivatives with respect to θ are zero: θ is a parameter, never differentiated by
the solvers. Function and argument names follow CasADi's naming of derivative functions (inputs, then the
nominal outputs as ``out_<name>``, then the seeds), which is how CasADi finds them.
"""
from __future__ import annotations

import casadi as ca

NAME, INPUTS = "mpc_shooting", ("X", "U", "theta")
# directional derivatives (forward/reverse AD) off: CasADi uses the functions given here instead of
# differentiating RK4 + ABA symbolically
ONLY_CUSTOM = {"never_inline": True, "enable_forward": False, "enable_reverse": False, "enable_fd": False}


def zero_derivative(name, in_names, in_sizes, out_names, out_sizes):
    """A function with the inputs of CasADi's derivative of a function with ``in_names`` (shapes
    ``in_sizes``) and outputs ``out_names`` (``out_sizes``): the inputs, then the nominal outputs as
    ``out_<name>`` (structurally empty: never needed, so never evaluated), returning structurally zero
    blocks ``jac_<out>_<in>``: second derivatives that are identically zero (Gauss-Newton)."""
    ins = [ca.MX.sym(n, *k) for n, k in zip(in_names, in_sizes)] \
        + [ca.MX.sym("out_" + n, ca.Sparsity(*k)) for n, k in zip(out_names, out_sizes)]
    outs = [ca.MX(ko[0] * ko[1], ki[0] * ki[1]) for ko in out_sizes for ki in in_sizes]
    return ca.Function(name, ins, outs, in_names + ["out_" + n for n in out_names],
                       [f"jac_{o}_{i}" for o in out_names for i in in_names])


class _Shape:
    """Sizes of the shooting map's arguments."""

    def __init__(self, nx, nu, ntheta, N):
        self.nx, self.nu, self.ntheta, self.N = nx, nu, ntheta, N
        self.sizes = [(nx, N), (nu, N), (ntheta, 1)]
        self.numel = [nx * N, nu * N, ntheta]

    def symbols(self, extra=()):
        return [ca.MX.sym(n, *k) for n, k in zip(INPUTS, self.sizes)] + list(extra)

    def nominal_output(self):
        return ca.MX.sym("out_Xn", ca.Sparsity(self.nx, self.N))

    def thetas(self, th):
        return ca.repmat(th, 1, self.N)

    def block_diagonal(self, M, width, transpose=False):
        blocks = [M[:, k * width:(k + 1) * width] for k in range(self.N)]
        return ca.diagcat(*[blk.T if transpose else blk for blk in blocks])


def _jacobian(shape, stage_jacobians):
    """The custom Jacobian ``(diag(A_k), diag(B_k), 0)``, its own Jacobian zero."""
    names = list(INPUTS)
    jin = shape.symbols([shape.nominal_output()])
    _, A, B = stage_jacobians(jin[0], jin[1], shape.thetas(jin[2]))
    jout_names = [f"jac_Xn_{n}" for n in names]
    jac_jac = zero_derivative(f"jac_jac_{NAME}", names + ["out_Xn"], shape.sizes + [(shape.nx, shape.N)],
                              jout_names, [(shape.nx * shape.N, k) for k in shape.numel])
    outputs = [shape.block_diagonal(A, shape.nx), shape.block_diagonal(B, shape.nu),
               ca.MX(shape.nx * shape.N, shape.ntheta)]
    return ca.Function(f"jac_{NAME}", jin, outputs, names + ["out_Xn"], jout_names,
                       {"custom_jacobian": jac_jac, "jac_penalty": 0, **ONLY_CUSTOM})


def _adjoint(shape, step_linearized, step_adjoint):
    """The reverse mode ``(Aᵀ Λ, Bᵀ Λ, 0)`` by ``step_adjoint``, its Jacobian ``diag(A_k)ᵀ, diag(B_k)ᵀ``
    with respect to the seed ``Λ`` and zero otherwise."""
    nx, N = shape.nx, shape.N
    ain_names, aout_names = list(INPUTS) + ["out_Xn", "adj_Xn"], ["adj_X", "adj_U", "adj_theta"]
    ain = shape.symbols([shape.nominal_output(), ca.MX.sym("adj_Xn", nx, N)])
    adj_X, adj_U = step_adjoint.map(N)(ain[0], ain[1], shape.thetas(ain[2]), ain[4])
    # its Jacobian: zero but for the (linear) dependence on Λ, evaluated only if Λ is differentiated
    jain = shape.symbols([shape.nominal_output(), ca.MX.sym("adj_Xn", nx, N)]
                         + [ca.MX.sym("out_" + n, ca.Sparsity(*k)) for n, k in zip(aout_names, shape.sizes)])
    _, A, B = step_linearized.map(N)(jain[0], jain[1], shape.thetas(jain[2]))
    by_seed = {"adj_X": shape.block_diagonal(A, nx, True), "adj_U": shape.block_diagonal(B, shape.nu, True),
               "adj_theta": ca.MX(shape.ntheta, nx * N)}
    ja_names, ja_out = [], []
    for o, ko in zip(aout_names, shape.numel):
        for i, ki in zip(ain_names, shape.numel + [nx * N, nx * N]):
            ja_names.append(f"jac_{o}_{i}")
            ja_out.append(by_seed[o] if i == "adj_Xn" else ca.MX(ko, ki))
    jac_adj = ca.Function(f"jac_adj1_{NAME}", jain, ja_out, ain_names + ["out_" + n for n in aout_names],
                          ja_names, {"jac_penalty": 0, **ONLY_CUSTOM})
    return ca.Function(f"adj1_{NAME}", ain, [adj_X, adj_U, ca.MX(shape.ntheta, 1)], ain_names, aout_names,
                       {"custom_jacobian": jac_adj, "jac_penalty": 0, **ONLY_CUSTOM})


def gauss_newton_shooting(stage, stage_jacobians, nx, nu, ntheta, N):
    """``F_N(X, U, θ) -> X+`` with the derivatives of the module docstring, from the
    :class:`~.stage.StageFunctions` ``stage`` and ``stage_jacobians`` (``step_linearized`` mapped over the
    N stages)."""
    shape = _Shape(nx, nu, ntheta, N)
    X, U, th = shape.symbols()
    return ca.Function(NAME, [X, U, th], [stage.step.map(N)(X, U, shape.thetas(th))], list(INPUTS), ["Xn"],
                       {"custom_jacobian": _jacobian(shape, stage_jacobians),
                        "cache": {f"adj1_{NAME}": _adjoint(shape, stage.step_linearized, stage.step_adjoint)},
                        "never_inline": True, "enable_forward": False, "enable_fd": False})
