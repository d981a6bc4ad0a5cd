"""The equality-constrained QP of a Gauss-Newton step of the OCP, solved by the backward Riccati recursion
and a forward rollout (Rawlings, Mayne and Diehl 2017, sec. 1.3.3, with the affine terms of the linearised
dynamics and of the cost gradient):

    min_Δw  ½ Δwᵀ H Δw + ∇fᵀ Δw
    s.t.  Δx_0 = x̂ - x̄_0,  Δx_{k+1} = A_k Δx_k + B_k Δu_k + b_k,

``H = 2 diag(Q, R, ..., Q_N)``, ``w = (x_0, u_0, x_1, ..., x_N)``:

    P_N = 2 Q_N,  p_N = ∇_{x_N} f;   for k = N-1 .. 0:  G = 2R + BᵀPB,  h = BᵀPA,
    g = ∇_{u_k} f + Bᵀ(P b_k + p),  K_k = -G⁻¹h,  k_k = -G⁻¹g,
    P ← 2Q + AᵀPA + hᵀK_k,  p ← ∇_{x_k} f + Aᵀ(P b_k + p) + hᵀk_k,

then ``Δu_k = K_k Δx_k + k_k`` forward from ``Δx_0``. ``K_k`` are also the time-varying LQR gains of the
linearisation (the weights scaled by 2 on both sides of ``G⁻¹h``). The factorisation needs neither the
measured state nor the bounds: it is the RTI's preparation phase; the rollout is its feedback phase
(Diehl, Bock and Schlöder 2005, sec. 4).
"""
from __future__ import annotations

import casadi as ca
import numpy as np


def cholesky_solve(G, R):
    """``G⁻¹ R`` for a symmetric positive definite SX ``G`` (n, n) by the Cholesky factor ``G = L Lᵀ``
    and two triangular substitutions, unrolled (n³/6 + n² m operations, against several times that for
    CasADi's symbolic QR of ``ca.solve``)."""
    n, m = G.shape[0], R.shape[1]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        d = G[j, j] - sum((L[j][k] ** 2 for k in range(j)), ca.SX(0))
        L[j][j] = ca.sqrt(d)
        for i in range(j + 1, n):
            L[i][j] = (G[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), ca.SX(0))) / L[j][j]
    Y = [None] * n
    for i in range(n):                                                # L Y = R
        Y[i] = (R[i, :] - sum((L[i][k] * Y[k] for k in range(i)), ca.SX.zeros(1, m))) / L[i][i]
    X = [None] * n
    for i in reversed(range(n)):                                      # Lᵀ X = Y
        X[i] = (Y[i] - sum((L[k][i] * X[k] for k in range(i + 1, n)), ca.SX.zeros(1, m))) / L[i][i]
    return ca.vertcat(*X)


def _factor_stage(nx, nu, weights):
    """One backward step ``(P, p, A, B, b, ∇_x f, ∇_u f) -> (P, p, K_k, k_k)`` of the recursion."""
    P, pv = ca.SX.sym("P", nx, nx), ca.SX.sym("p", nx)
    Ak, Bk, bk = ca.SX.sym("A", nx, nx), ca.SX.sym("B", nx, nu), ca.SX.sym("b", nx)
    qk, rk = ca.SX.sym("q", nx), ca.SX.sym("r", nu)
    Pb = ca.mtimes(P, bk) + pv
    BtP = ca.mtimes(Bk.T, P)
    G = ca.DM(np.diag(2 * weights.R)) + ca.mtimes(BtP, Bk)
    h = ca.mtimes(BtP, Ak)
    Kk_k = -cholesky_solve(G, ca.horzcat(h, rk + ca.mtimes(Bk.T, Pb)))
    Kk, kk = Kk_k[:, :nx], Kk_k[:, nx]
    Pn = ca.DM(np.diag(2 * weights.Q)) + ca.mtimes(Ak.T, ca.mtimes(P, Ak)) + ca.mtimes(h.T, Kk)
    pn = qk + ca.mtimes(Ak.T, Pb) + ca.mtimes(h.T, kk)
    return ca.Function("mpc_riccati_factor_stage", [P, pv, Ak, Bk, bk, qk, rk], ca.cse([0.5 * (Pn + Pn.T), pn, Kk, kk]))


def riccati_factor_function(nx, nu, N, weights):
    """``riccati_factor(A (nx, nx N), B (nx, nu N), b (nx N,), ∇f (nw,)) -> (K (nu, nx N), k (nu, N))``: the
    backward recursion over the horizon for the :class:`~.config.CostWeights` ``weights``."""
    stage = _factor_stage(nx, nu, weights)
    nw = (N + 1) * nx + N * nu
    A, B = ca.MX.sym("A", nx, nx * N), ca.MX.sym("B", nx, nu * N)
    b, grad = ca.MX.sym("b", nx * N), ca.MX.sym("grad", nw)
    gq = ca.reshape(grad[:N * (nx + nu)], nx + nu, N)
    P, p = ca.MX(ca.DM(np.diag(2 * weights.Q_N))), grad[N * (nx + nu):]
    Ks, ks = [None] * N, [None] * N
    for k in reversed(range(N)):
        P, p, Ks[k], ks[k] = stage(P, p, A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu],
                                   b[k * nx:(k + 1) * nx], gq[:nx, k], gq[nx:, k])
    return ca.Function("mpc_riccati_factor", [A, B, b, grad], [ca.horzcat(*Ks), ca.horzcat(*ks)],
                       ["A", "B", "b", "grad"], ["K", "k"])


def riccati_feedback_function(nx, nu, N):
    """``riccati_feedback(x̂, w̄, A, B, b, K, k, w_lo, w_hi) -> (w, violation)``: the forward rollout from
    ``Δx_0 = x̂ - x̄_0``, ``w = w̄ + Δw`` with ``x_0 = x̂`` exactly, and ``violation``, the largest amount by
    which ``w`` leaves ``[w_lo, w_hi]`` outside ``x_0`` (<= 0: the bounds are inactive and ``w`` is also the
    solution of the bounded QP)."""
    nw = (N + 1) * nx + N * nu
    dx, Kk, kk = ca.SX.sym("dx", nx), ca.SX.sym("K", nu, nx), ca.SX.sym("k", nu)
    Ak, Bk, bk = ca.SX.sym("A", nx, nx), ca.SX.sym("B", nx, nu), ca.SX.sym("b", nx)
    du = ca.mtimes(Kk, dx) + kk
    roll = ca.Function("mpc_riccati_rollout_stage", [dx, Kk, kk, Ak, Bk, bk],
                       [du, ca.mtimes(Ak, dx) + ca.mtimes(Bk, du) + bk])
    x0, w = ca.MX.sym("x0", nx), ca.MX.sym("w", nw)
    A, B, b = ca.MX.sym("A", nx, nx * N), ca.MX.sym("B", nx, nu * N), ca.MX.sym("b", nx * N)
    K, kf = ca.MX.sym("K", nu, nx * N), ca.MX.sym("k", nu, N)
    lo, hi = ca.MX.sym("w_lo", nw), ca.MX.sym("w_hi", nw)
    d = x0 - w[:nx]
    parts = [d]
    for k in range(N):
        du, d = roll(d, K[:, k * nx:(k + 1) * nx], kf[:, k], A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu],
                     b[k * nx:(k + 1) * nx])
        parts += [du, d]
    w_new = w + ca.vertcat(*parts)
    w_new = ca.vertcat(x0, w_new[nx:])                           # exactly the measurement
    violation = ca.mmax(ca.fmax(lo - w_new, w_new - hi)[nx:])
    return ca.Function("mpc_riccati_feedback", [x0, w, A, B, b, K, kf, lo, hi], [w_new, violation],
                       ["x0", "w_bar", "A", "B", "b", "K", "k", "w_lo", "w_hi"], ["w", "violation"])
