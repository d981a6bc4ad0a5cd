"""MPC tests on the Panda (fingers locked), closed loop on OUR forward dynamics (ABA + friction, RK4 at
1 kHz, ``τ = τ_ff + K (x - x_pred)`` between solves). The problem functions run in CasADi's virtual
machine here (gcc runs in the tests of the first build only: cancelled while it compiles, quick then
optimised, the compilers' flags and niceness); the compiled path is the benchmark's (robodyn bench mpc).
"""
import os
import sys
import time

import numpy as np
import pytest
from conftest import assert_close, erd_path

import casadi as ca
import robodyn_ros as rd
from robodyn_ros.control import (ConstantReference, DynamicsFunctions, QuinticTrajectory, ReferenceClippedWarning,
                                 compile_casadi_functions)
from robodyn_ros.control.mpc import MPCConfig, ModelPredictiveController, parameter_vector
from robodyn_ros.control.mpc.gauss_newton import zero_derivative
from robodyn_ros.control.mpc.nlp import nlp_solver

HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
FINGERS = {"panda_finger_joint1": 0.0, "panda_finger_joint2": 0.0}
SIM_DT = 1e-3


@pytest.fixture(scope="module")
def panda():
    return rd.Model.from_urdf(erd_path("panda_description/urdf/panda.urdf"), locked_joints=FINGERS)


@pytest.fixture(scope="module")
def plant(panda):
    return DynamicsFunctions(panda, compiled=True)                       # shared cache with test_controllers


def payload_parameters(mass=2.0, com=(0.0, 0.0, 0.2), inertia_com=2e-3):
    c = np.asarray(com)
    I0 = inertia_com * np.eye(3) + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), I0[0, 0], I0[0, 1], I0[1, 1], I0[0, 2], I0[1, 2], I0[2, 2]])


def run_closed_loop(mpc, plant, pi_true, reference, duration, record=False, q0=None):
    """Simulate from rest at ``q0`` (the reference's start by default); returns dict of arrays: t, q, v,
    tau (applied), q_ref, statuses, and the true accelerations ``a`` when ``record``."""
    q, v = (reference.evaluate(0.0)[0] if q0 is None else q0).copy(), np.zeros(7)
    steps = int(round(mpc.config.dt / SIM_DT))
    out = {k: [] for k in ("t", "q", "v", "tau", "q_ref", "a", "status")}
    for k in range(int(round(duration / mpc.config.dt))):
        t0 = k * mpc.config.dt
        sol = mpc.solve(q, v, reference, t0)
        out["status"].append(sol.status)
        for j in range(steps):
            tau = sol.torque(np.concatenate([q, v]), j * SIM_DT)
            assert np.all(np.isfinite(tau))
            out["t"].append(t0 + j * SIM_DT), out["q"].append(q), out["v"].append(v), out["tau"].append(tau)
            out["q_ref"].append(reference.evaluate(t0 + j * SIM_DT)[0])
            if record and j == 0:                                        # an ideal accelerometer (Alg. 4 l. 24)
                out["a"].append(plant.aba(q, v, tau - rd.friction_torque(plant.model, v), pi_true))
            q, v = plant.rk4_step(q, v, tau, pi_true, SIM_DT)
    return {k: np.array(val) for k, val in out.items()}


def test_rti_reaches_target_without_violating_limits(panda, plant):
    # a far target, joint 6's below its lower limit (clipped with a warning to the limit plus the
    # margin), and velocities limited to 40 % of the URDF's: position and velocity bounds are active
    target = HOME + np.array([0.8, 0.5, -0.6, 0.9, 0.7, -1.9, 1.0])
    reachable = np.maximum(target, panda.lower + 0.02)
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=8, dt=0.025, solver="rti", velocity_fraction=0.4,
                                                     position_margin=0.02, time_limit=5.0))
    with pytest.warns(ReferenceClippedWarning, match="panda_joint6"):
        log = run_closed_loop(mpc, plant, panda.inertial_parameters(), ConstantReference(target), 2.0, q0=HOME)
    assert all(s == "rti" for s in log["status"])
    assert np.abs(log["q"][-1] - reachable).max() < 1e-3
    assert np.all(log["q"] >= panda.lower) and np.all(log["q"] <= panda.upper)
    vmax = 0.4 * panda.velocity_limit
    assert np.abs(log["v"]).max(axis=0).max() > 0.9 * vmax.min()        # the bound was reached ...
    assert np.all(np.abs(log["v"]) <= 1.03 * vmax)                      # ... and held (3 %: between nodes)
    assert np.all(np.abs(log["tau"]) <= panda.effort_limit + 1e-9)


def test_tracks_better_after_payload_change_with_estimated_parameters(panda, plant):
    pi_nom = panda.inertial_parameters()
    pi_true = pi_nom.copy()
    pi_true[-10:] += payload_parameters()                                # payload attached: the model is wrong
    reference = QuinticTrajectory(HOME, HOME + np.array([0.5, 0.4, -0.4, 0.5, 0.4, -0.4, 0.6]), 1.2, t_start=0.1)
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=8, dt=0.025, solver="rti", time_limit=5.0))
    before = run_closed_loop(mpc, plant, pi_true, reference, 1.6, record=True)
    # least-squares estimate of the payload from the recorded data: Y_last Δπ = τ - τ_f - rnea(q, v, a; π_nom)
    fns = plant
    rows, rhs = [], []
    steps = int(round(mpc.config.dt / SIM_DT))
    for i, a in enumerate(before["a"]):                                  # the first sample of each period
        q, v, tau = before["q"][i * steps], before["v"][i * steps], before["tau"][i * steps]
        rows.append(fns.regressor(q, v, a)[:, -10:])
        rhs.append(tau - rd.friction_torque(panda, v) - fns.rnea(q, v, a, pi_nom))
    delta, *_ = np.linalg.lstsq(np.vstack(rows), np.concatenate(rhs), rcond=None)
    assert abs(delta[0] - 2.0) < 0.1                                      # the 2 kg are found
    solver_before = mpc._qp_solvers["hpipm"]
    theta = parameter_vector(panda)
    theta[60:70] += delta
    mpc.set_parameters(theta)
    mpc._w, mpc._solution = None, None                                   # same start as the first run
    after = run_closed_loop(mpc, plant, pi_true, reference, 1.6)
    assert mpc._qp_solvers["hpipm"] is solver_before                     # nothing rebuilt
    rms = lambda log: float(np.sqrt(np.mean(np.sum((log["q"] - log["q_ref"]) ** 2, axis=1))))
    assert rms(after) < 0.5 * rms(before), f"RMS {rms(after):.2e} estimated vs {rms(before):.2e} nominal"


def test_failed_solves_fall_back_and_never_return_nan(panda):
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", time_limit=5.0))
    ref = ConstantReference(HOME)
    v_wild = 6.0 * panda.velocity_limit                                    # cannot be brought inside the bounds
    sol = mpc.solve(HOME, v_wild, ref)
    assert sol.status == "fallback_gravity" and np.all(np.isfinite(sol.tau_ff)) and np.all(np.isfinite(sol.K))
    assert_close(sol.tau_ff[0], rd.gravity_torque(panda, HOME) + panda.friction_offset, rtol=1e-9)
    good = mpc.solve(HOME, np.zeros(7), ref)
    assert good.status == "rti"
    sol = mpc.solve(HOME, v_wild, ref)                                    # now the previous plan is shifted
    assert sol.status == "fallback_shifted"
    assert_close(sol.tau_ff[0], good.tau_ff[1], rtol=1e-12)
    nan_q = HOME.copy()
    nan_q[2] = np.nan
    sol = mpc.solve(nan_q, np.zeros(7), ref)
    assert sol.status.startswith("fallback") and sol.solver_status == "nonfinite_state"
    assert np.all(np.isfinite(sol.torque(np.concatenate([nan_q, np.zeros(7)]), 0.005)))
    # a time limit nobody can meet: the solve is discarded, the status says so
    strict = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", time_limit=1e-7))
    sol = strict.solve(HOME, np.zeros(7), ref)
    assert sol.status == "fallback_gravity" and "time limit" in sol.solver_status
    # ipopt stopped after one iteration: not converged, falls back
    ipopt = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="ipopt", max_iter=1, time_limit=30))
    sol = ipopt.solve(HOME, np.zeros(7), ConstantReference(HOME + 0.3))
    assert sol.status == "fallback_gravity" and np.all(np.isfinite(sol.tau_ff))


def test_solvers_agree_and_feedback_gain_stabilises(panda):
    ref = QuinticTrajectory(HOME, HOME + 0.3, 0.5)
    x0 = (HOME + 0.02, np.full(7, 0.05))
    solutions = {}
    for solver in ("fatrop", "ipopt"):
        mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver=solver, time_limit=60, tol=1e-8))
        solutions[solver] = mpc.solve(*x0, ref)
        assert solutions[solver].status == "solved", solutions[solver].solver_status
    sqp = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", sqp_iterations=8, time_limit=60))
    solutions["sqp"] = sqp.solve(*x0, ref)                                # Gauss-Newton SQP iterated to convergence
    assert_close(solutions["fatrop"].tau_ff, solutions["ipopt"].tau_ff, rtol=1e-5)
    assert_close(solutions["sqp"].tau_ff, solutions["ipopt"].tau_ff, rtol=1e-5)
    # K_0 from the Riccati recursion stabilises the linearised step: spectral radius of A + B K below 1
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", time_limit=60))
    s = mpc.solve(*x0, ref)
    assert s.status == "rti"
    _, A, B = (np.asarray(M) for M in mpc.ocp.step_linearized(s.x_pred[0], s.tau_ff[0], mpc.theta))
    assert np.abs(np.linalg.eigvals(A + B @ s.K[0])).max() < 1.0


def test_step_linearisation_equals_finite_differences(panda):
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti"))
    ocp, theta = mpc.ocp, parameter_vector(panda.with_friction(viscous=0.1, coulomb=0.3))
    rng = np.random.default_rng(5)
    x, u = np.concatenate([HOME + rng.uniform(-0.3, 0.3, 7), rng.uniform(-1, 1, 7)]), rng.uniform(-5, 5, 7)
    xn, A, B = (np.asarray(M) for M in ocp.step_linearized(x, u, theta))
    assert_close(xn.reshape(-1), np.asarray(ocp.step(x, u, theta)).reshape(-1), rtol=1e-12)
    h = 1e-6
    z = np.concatenate([x, u])
    f = lambda z: np.asarray(ocp.step(z[:14], z[14:], theta)).reshape(-1)
    J = np.column_stack([(f(z + h * e) - f(z - h * e)) / (2 * h) for e in np.eye(21)])
    assert_close(np.hstack([A, B]), J, rtol=1e-6)


def test_new_parameters_change_the_next_solve_without_rebuilding(panda):
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", time_limit=60))
    ref = ConstantReference(HOME)
    first = mpc.solve(HOME, np.zeros(7), ref)
    funcs = (mpc.ocp.rti_prepare, mpc._qp_solvers["hpipm"])
    pi = panda.inertial_parameters()
    pi[-10:] += payload_parameters()
    mpc.set_inertial_parameters(pi)
    mpc._w, mpc._solution = None, None
    second = mpc.solve(HOME, np.zeros(7), ref)
    assert (mpc.ocp.rti_prepare, mpc._qp_solvers["hpipm"]) == funcs
    g_payload = rd.gravity_torque(panda.with_inertial_parameters(pi), HOME) - rd.gravity_torque(panda, HOME)
    assert_close(second.tau_ff[0] - first.tau_ff[0], g_payload, atol=0.05 * np.abs(g_payload).max())


def test_compiled_functions_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path))
    x = ca.SX.sym("x", 3)
    f = ca.Function("rd_test_square", [x], [ca.sumsqr(x) * ca.sin(x)])
    out = compile_casadi_functions([f], "test")
    assert_close(np.asarray(out["rd_test_square"]([1, 2, 3])).reshape(-1), np.asarray(f([1, 2, 3])).reshape(-1),
                 rtol=1e-14)
    libs = sorted(p.name for p in tmp_path.glob("casadi_*.so"))
    mtime = (tmp_path / libs[0]).stat().st_mtime_ns
    compile_casadi_functions([f], "test")
    assert sorted(p.name for p in tmp_path.glob("casadi_*.so")) == libs
    assert (tmp_path / libs[0]).stat().st_mtime_ns == mtime


def test_rti_qp_solvers_agree(panda):
    ref = QuinticTrajectory(HOME, HOME + 0.3, 0.5)
    x0 = (HOME + 0.02, np.full(7, 0.05))
    tau = {}
    for qp in ("hpipm", "qrqp", "osqp"):
        mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti", qp_solver=qp, time_limit=60))
        sol = mpc.solve(*x0, ref)
        assert sol.status == "rti", sol.solver_status
        tau[qp] = sol.tau_ff
    assert_close(tau["qrqp"], tau["hpipm"], rtol=1e-8)
    assert_close(tau["osqp"], tau["hpipm"], rtol=1e-4)


def test_step_adjoint_is_the_transposed_step_jacobian(panda):
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="rti"))
    ocp, theta = mpc.ocp, parameter_vector(panda.with_friction(viscous=0.1, coulomb=0.3))
    rng = np.random.default_rng(7)
    x, u, lam = np.concatenate([HOME + rng.uniform(-0.3, 0.3, 7), rng.uniform(-1, 1, 7)]), rng.uniform(-5, 5, 7), \
        rng.normal(size=14)
    _, A, B = (np.asarray(M) for M in ocp.step_linearized(x, u, theta))
    adj_x, adj_u = (np.asarray(M).reshape(-1) for M in ocp.step_adjoint(x, u, theta, lam))
    assert_close(adj_x, A.T @ lam, rtol=1e-10, atol=1e-12)
    assert_close(adj_u, B.T @ lam, rtol=1e-10, atol=1e-12)


def _automatic_gauss_newton_shooting(ocp):
    """The oracle: the shooting map stage by stage, its Jacobian CasADi's automatic one of ``ocp.step``,
    its second derivatives zero (Gauss-Newton), so that the Lagrangian gradient goes through that Jacobian."""
    nx, nu, nth, N = ocp.nx, ocp.nu, ocp.ntheta, ocp.N
    x, u, th = ca.SX.sym("x", nx), ca.SX.sym("u", nu), ca.SX.sym("theta", nth)
    xn = ocp.step(x, u, th)
    automatic = ca.Function("rd_oracle_step_ad", [x, u, th], [ca.jacobian(xn, x), ca.jacobian(xn, u)])
    names, sizes = ["x", "u", "theta"], [nx, nu, nth]
    options = {"jac_penalty": 0, "never_inline": True, "enable_forward": False, "enable_reverse": False,
               "enable_fd": False}
    jin = [ca.MX.sym(n, k) for n, k in zip(names, sizes)] + [ca.MX.sym("out_xn", ca.Sparsity(nx, 1))]
    jout_names = [f"jac_xn_{n}" for n in names]
    zero = zero_derivative("jac_jac_rd_oracle_step", names + ["out_xn"], [(k, 1) for k in sizes] + [(nx, 1)],
                           jout_names, [(nx, k) for k in sizes])
    jac = ca.Function("jac_rd_oracle_step", jin, [*automatic(*jin[:3]), ca.MX(nx, nth)], names + ["out_xn"],
                      jout_names, {"custom_jacobian": zero, **options})
    mx = [ca.MX.sym(n, k) for n, k in zip(names, sizes)]
    step = ca.Function("rd_oracle_step", mx, [ocp.step(*mx)], names, ["xn"], {"custom_jacobian": jac, **options})
    return lambda X, U, theta: step.map(N)(X, U, ca.repmat(theta, 1, N))


def _nlp_controllers(panda, solver, **options):
    """The same problem with the controller's NLP derivatives ('adjoint': custom Jacobian and adjoint) and
    with the oracle's ('automatic': CasADi's automatic stage Jacobian, :func:`_automatic_gauss_newton_shooting`)."""
    ctl = {d: ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver=solver, time_limit=60, tol=1e-8,
                                                         **options))
           for d in ("adjoint", "automatic")}
    oracle = ctl["automatic"]
    oracle._nlp = nlp_solver(oracle.ocp, oracle.config, oracle.ocp.transcription(
        _automatic_gauss_newton_shooting(oracle.ocp)))
    return ctl


@pytest.mark.parametrize("solver", ["fatrop", "ipopt"])
def test_adjoint_nlp_derivatives_give_the_solution_of_automatic_jacobians(panda, solver):
    # viscous friction on, a reference the plan cannot follow exactly: several iterations. The two derivatives
    # are equal in exact arithmetic, not in rounding, so the iterates may part: the same solution is what
    # holds. At tol=1e-8 either lies within 5e-8 N m of the optimum (measured against tol=1e-11 and 1e-12),
    # so 1e-6 holds on any machine, while a Jacobian 1 % off moves the solution by 1e-2 N m. The iteration
    # counts are a bound, not an equality: rounding alone moved fatrop's from 11 to 9 on one machine, and
    # tolerances from 1e-8 to 1e-11 move them by up to 3 here.
    model = panda.with_friction(viscous=0.2)
    ref = QuinticTrajectory(HOME, HOME + np.array([0.3, 0.2, -0.2, 0.3, 0.2, -0.2, 0.4]), 0.4)
    sols = {}
    for d, mpc in _nlp_controllers(model, solver).items():
        sols[d] = [mpc.solve(HOME + 0.02 * k, np.full(7, 0.05), ref, 0.02 * k) for k in range(3)]  # warm starts too
    for new, old in zip(sols["adjoint"], sols["automatic"]):
        assert new.status == old.status == "solved", (new.solver_status, old.solver_status)
        assert abs(new.iterations - old.iterations) <= 4, (new.iterations, old.iterations)
        assert_close(new.tau_ff, old.tau_ff, atol=1e-6)
        assert_close(new.x_pred, old.x_pred, atol=1e-6)


def test_hessian_function_evaluates_no_stage_jacobian(panda):
    ctl = _nlp_controllers(panda, "fatrop")
    ocp = ctl["adjoint"].ocp
    hess = {d: mpc._nlp.get_function("nlp_hess_l") for d, mpc in ctl.items()}
    called = {d: {f.name() for f in h.find_functions()} for d, h in hess.items()}
    assert "jac_rd_oracle_step" in called["automatic"]                   # the oracle's evaluates its Jacobian ...
    assert "mpc_step_lin" not in called["adjoint"] and "mpc_step_adj" in called["adjoint"]   # ... no more
    assert ocp.step_adjoint.n_instructions() < 0.7 * ocp.step_linearized.n_instructions()
    # fatrop's nlp_hess_l returns (∇_w L, ∇²_w L) of L = λ_f f + λ_gᵀ g: the gradient equals the oracle's
    # one, the Hessian is the constant Gauss-Newton 2 λ_f diag(Q, R, ..., Q_N) at any (w, λ_g)
    rng = np.random.default_rng(3)
    p, _ = ctl["adjoint"].reference_parameters(HOME, np.zeros(7), QuinticTrajectory(HOME, HOME + 0.3, 0.5), 0.0)
    Qd, Rd, QNd = ocp.weights
    H_gn = np.diag(np.concatenate([np.concatenate([2 * Qd, 2 * Rd])] * ocp.N + [2 * QNd]))
    for _ in range(2):
        X = np.tile(np.concatenate([HOME, np.zeros(7)]), (ocp.N + 1, 1)) + rng.uniform(-0.2, 0.2, (ocp.N + 1, 14))
        w, lam_f, lam_g = ocp.pack_w(X, rng.uniform(-5, 5, (ocp.N, 7))), 0.7, rng.normal(size=14 * (ocp.N + 1))
        (g_new, H_new), (g_old, _) = ([np.asarray(M) for M in hess[d](w, p, lam_f, lam_g)]
                                      for d in ("adjoint", "automatic"))
        assert_close(g_new, g_old, rtol=1e-10, atol=1e-10)
        assert_close(H_new, lam_f * H_gn, rtol=1e-14, atol=0.0)
    # ipopt's Hessian function (no gradient output) calls nothing at all
    ipopt = ModelPredictiveController(panda, MPCConfig(horizon=3, dt=0.02, solver="ipopt"))
    assert ipopt._nlp.get_function("nlp_hess_l").find_functions() == []


def _random_ocp_qp(ocp, rng):
    """A random instance of the RTI QP: stage matrices, affine gaps, cost gradient, linearisation point."""
    nx, nu, N = ocp.nx, ocp.nu, ocp.N
    A = rng.normal(scale=0.4, size=(nx, nx * N)) + np.tile(np.eye(nx), N)
    B = rng.normal(size=(nx, nu * N))
    b, grad, w_bar = rng.normal(size=nx * N), rng.normal(size=ocp.nw), rng.normal(size=ocp.nw)
    return A, B, b, grad, w_bar


def lqr_gains(A, B, Qd, Rd, QNd):
    """Time-varying LQR gains (nu, nx N) of the stage matrices A (nx, nx N), B (nx, nu N), by NumPy."""
    nx, nu = A.shape[0], Rd.size
    N = A.shape[1] // nx
    P, K = np.diag(QNd), [None] * N
    for k in reversed(range(N)):
        Ak, Bk = A[:, k * nx:(k + 1) * nx], B[:, k * nu:(k + 1) * nu]
        K[k] = -np.linalg.solve(np.diag(Rd) + Bk.T @ P @ Bk, Bk.T @ P @ Ak)
        P = np.diag(Qd) + Ak.T @ P @ (Ak + Bk @ K[k])
        P = 0.5 * (P + P.T)
    return np.hstack(K)


def test_riccati_qp_equals_dense_qp_solves(panda):
    # the structured solution (factorisation + rollout) against the dense KKT system solved by NumPy and
    # against CasADi's qrqp on the sparse QP, on random stage matrices, gaps, gradients and initial states
    mpc = ModelPredictiveController(panda, MPCConfig(horizon=4, dt=0.02, solver="rti", q_weight=[1e3, 2e2] * 3 + [50],
                                                     v_weight=0.5, r_weight=1e-2))
    ocp = mpc.ocp
    nx, nu, N, nw = ocp.nx, ocp.nu, ocp.N, ocp.nw
    Qd, Rd, QNd = ocp.weights
    H = np.diag(np.concatenate([np.concatenate([2 * Qd, 2 * Rd])] * N + [2 * QNd]))
    rng = np.random.default_rng(11)
    for _ in range(3):
        A, B, b, grad, w_bar = _random_ocp_qp(ocp, rng)
        x0 = w_bar[:nx] + rng.normal(size=nx)
        K, k = ocp.riccati_factor(A, B, b, grad)
        inf = np.full(nw, np.inf)
        w, violation = ocp.riccati_feedback(x0, w_bar, A, B, b, K, k, -inf, inf)
        dw = np.asarray(w).reshape(-1) - w_bar
        # dense: rows Δx_0 = x̂ - x̄_0 and A_k Δx_k + B_k Δu_k - Δx_{k+1} = -b_k
        C = np.zeros((nx * (N + 1), nw))
        d = np.zeros(nx * (N + 1))
        C[:nx, :nx], d[:nx] = np.eye(nx), x0 - w_bar[:nx]
        for s in range(N):
            r, c = nx * (s + 1), s * (nx + nu)
            C[r:r + nx, c:c + nx] = A[:, s * nx:(s + 1) * nx]
            C[r:r + nx, c + nx:c + nx + nu] = B[:, s * nu:(s + 1) * nu]
            C[r:r + nx, c + nx + nu:c + 2 * nx + nu] = -np.eye(nx)
            d[r:r + nx] = -b[s * nx:(s + 1) * nx]
        kkt = np.block([[H, C.T], [C, np.zeros((C.shape[0], C.shape[0]))]])
        dense = np.linalg.solve(kkt, np.concatenate([-grad, d]))[:nw]
        assert_close(dw, dense, rtol=1e-8)
        qp = ca.conic("qp", "qrqp", {"h": ca.DM(H).sparsity(), "a": ca.DM(C).sparsity()},
                      {"print_iter": False, "print_header": False})
        sol = np.asarray(qp(h=H, g=grad, a=C, lba=d, uba=d)["x"]).reshape(-1)
        assert_close(dw, sol, rtol=1e-7)
        assert float(violation) == -np.inf                              # no bounds: nothing violated
        # the gains are those of the LQR recursion K = -(R + BᵀPB)⁻¹ BᵀPA, P = Q + Aᵀ P (A + B K) on the same
        # stage matrices
        assert_close(np.asarray(K), lqr_gains(A, B, Qd, Rd, QNd), rtol=1e-8)


def test_prepared_feedback_equals_solving_at_once_and_bounds_go_to_hpipm(panda):
    ref = QuinticTrajectory(HOME, HOME + 0.3, 0.5)
    cfg = dict(horizon=5, dt=0.02, solver="rti", time_limit=60)
    at_once, split = (ModelPredictiveController(panda, MPCConfig(**cfg)) for _ in range(2))
    x = [(HOME + 0.02, np.full(7, 0.05)), (HOME + 0.03, np.full(7, 0.1))]
    at_once.solve(*x[0], ref, 0.0)
    split.solve(*x[0], ref, 0.0)
    split.prepare(ref, 0.02)                                            # before the measurement
    a, s = at_once.solve(*x[1], ref, 0.02), split.solve(*x[1], ref, 0.02)
    assert a.solver_status == s.solver_status == "riccati"
    assert_close(s.tau_ff, a.tau_ff, rtol=1e-12, atol=1e-12)
    assert_close(s.K, a.K, rtol=1e-12, atol=1e-12)
    assert s.feedback_time < s.solve_time
    # a reference the velocity bound does not let the plan follow: the rollout leaves the bounds, the
    # bounded QP (hpipm) solves it as hpipm alone does; the bounds hold and are active
    fast = ConstantReference(HOME + 0.3)
    sols = {}
    for qp in ("riccati", "hpipm"):
        mpc = ModelPredictiveController(panda, MPCConfig(**cfg, qp_solver=qp, velocity_fraction=0.2))
        sols[qp] = mpc.solve(HOME, np.zeros(7), fast, 0.0)
    assert sols["riccati"].solver_status != "riccati" and sols["riccati"].status == "rti"
    assert_close(sols["riccati"].tau_ff, sols["hpipm"].tau_ff, rtol=1e-12)
    vmax = 0.2 * panda.velocity_limit
    assert np.all(np.abs(sols["riccati"].x_pred[1:, 7:]) <= vmax + 1e-8)
    assert np.any(np.abs(sols["riccati"].x_pred[1:, 7:]) > vmax - 1e-6)  # a bound is active


def test_direct_call_of_a_compiled_function(tmp_path, monkeypatch):
    from robodyn_ros.kernels.compiled_functions import DirectCall, compile_casadi_library
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path))
    x, M = ca.SX.sym("x", 3), ca.SX.sym("M", 2, 3)
    f = ca.Function("rd_test_affine", [M, x], [ca.mtimes(M, ca.sin(x)), ca.sumsqr(x)])
    g = ca.Function("rd_test_twice", [x], [2 * x])
    lib = compile_casadi_library([[f], [g]], "test-direct")              # two translation units
    fd, gd = DirectCall(lib, f), DirectCall(lib, g)
    rng = np.random.default_rng(2)
    for _ in range(2):                                                   # buffers reused
        Mv, xv = rng.normal(size=(2, 3)), rng.normal(size=3)
        fd.inputs[0][:], fd.inputs[1][:] = Mv.ravel(order="F"), xv
        fd.call()
        y, s = f(Mv, xv)
        assert_close(fd.outputs[0], np.asarray(y).reshape(-1), rtol=1e-14)
        assert_close(fd.outputs[1][0], float(s), rtol=1e-14)
    gd.bind(0, fd.inputs[1])                                             # reads f's input in place
    gd.call()
    assert_close(gd.outputs[0], 2 * fd.inputs[1], rtol=0)
    with pytest.raises(ValueError, match="input 0"):
        gd.bind(0, np.zeros(4))


def test_background_controller_serves_gravity_while_it_builds(panda):
    from robodyn_ros.control.mpc import BackgroundController
    pi = panda.inertial_parameters()
    pi[-10:] += payload_parameters()
    ctl = BackgroundController(panda, MPCConfig(horizon=6, dt=0.02, solver="rti", time_limit=60))   # not built yet
    ctl.set_inertial_parameters(pi)                                      # before (or while) it is built
    early = ctl.solve(HOME, np.zeros(7), ConstantReference(HOME))
    if not ctl.ready:                                                    # the fallback: gravity of the new model
        assert early.status == "fallback_gravity" and early.solver_status == "building"
        assert_close(early.tau_ff[0], rd.gravity_torque(panda.with_inertial_parameters(pi), HOME)
                     + panda.friction_offset, rtol=1e-9)
    assert ctl.wait(120)
    sol = ctl.solve(HOME, np.zeros(7), ConstantReference(HOME))
    assert sol.status == "rti"
    assert_close(ctl.controller.theta[:pi.size], pi, rtol=0)            # the parameters reached it
    assert_close(ctl.gravity(HOME), rd.gravity_torque(panda.with_inertial_parameters(pi), HOME)
                 + panda.friction_offset, rtol=1e-9)
    bad = BackgroundController(panda, MPCConfig(horizon=4, dt=0.02, solver="rti", qp_solver="nonsense"))
    assert not bad.wait(60)
    sol = bad.solve(HOME, np.zeros(7), ConstantReference(HOME))
    assert sol.status == "fallback_gravity" and "qp_solver" in sol.solver_status and np.all(np.isfinite(sol.tau_ff))


def _compilers_below_this_process():
    """Pids of the C compiler processes (gcc, cc1, as, ...) below this process."""
    from robodyn_ros.kernels.process_tree import command_name, descendants
    return [pid for pid in descendants(os.getpid())
            if command_name(pid) in ("cc", "gcc", "cc1", "as", "collect2", "ld", "clang")]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs /proc")
def test_closing_a_background_controller_mid_build_kills_the_compiler_and_caches_nothing(panda, tmp_path,
                                                                                          monkeypatch):
    """A node shut down during its first MPC build (close) ends it at once: no compiler left running, no
    temporary sources or library in the cache, the gravity fallback still served."""
    from robodyn_ros.control.mpc import BackgroundController
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path))
    ctl = BackgroundController(panda, MPCConfig(horizon=7, dt=0.015, solver="rti", compiled=True))
    deadline = time.monotonic() + 120.0
    while not _compilers_below_this_process():
        assert not ctl.ready and ctl.error is None and time.monotonic() < deadline, "no compiler started"
        time.sleep(0.02)
    start = time.monotonic()
    ctl.close()
    closed = time.monotonic() - start
    assert not ctl._thread.is_alive() and closed < 10.0, closed
    assert _compilers_below_this_process() == []
    assert not ctl.ready and "cancelled" in ctl.error, ctl.error
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == []
    sol = ctl.solve(HOME, np.zeros(7), ConstantReference(HOME))
    assert sol.status == "fallback_gravity" and np.all(np.isfinite(sol.tau_ff))


def test_a_first_build_serves_a_quick_controller_until_the_optimised_one_takes_over(panda, tmp_path, monkeypatch):
    """From an empty cache: the unoptimised build serves first, the optimised one (built beside it) takes over
    at a solve with the quick one's parameters and warm start: its next solve is the quick one's (same
    problem, same linearisation point; only the compilers' rounding differs), which a cold start is not."""
    from robodyn_ros.control.mpc import BackgroundController, compile_cache
    from robodyn_ros.control.mpc.compile_cache import optimised_ocp_ready
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path))
    config = MPCConfig(horizon=3, dt=0.0173, solver="rti", compiled=True, time_limit=60)   # a problem of its own
    traces = []

    def counted(model, problem, *loaded):          # OCPFunctions: traced (two arguments) or built on a library
        # this problem's only: builds other tests left running in this process (niced) may trace theirs now
        traces.extend([] if loaded or problem.dt != config.dt else [1])
        return OCPFunctions(model, problem, *loaded)
    OCPFunctions = compile_cache.OCPFunctions
    monkeypatch.setattr(compile_cache, "OCPFunctions", counted)
    assert not optimised_ocp_ready(panda, config)
    pi = panda.inertial_parameters()
    pi[-10:] += payload_parameters()
    ctl = BackgroundController(panda, config, nice=0)     # not niced: this test's time, not the machine's load
    ctl.set_inertial_parameters(pi)
    deadline = time.monotonic() + 300.0
    while not ctl.ready:
        assert ctl.error is None and time.monotonic() < deadline, ctl.error
        time.sleep(0.02)
    assert ctl.build == "quick"
    quick = ctl.controller
    ref = QuinticTrajectory(HOME, HOME + 0.3, 0.5)
    q, v = HOME + 0.01, np.full(7, 0.02)
    for k in range(3):
        assert ctl.solve(q, v, ref, k * config.dt).status == "rti"
    assert ctl.wait(600) and ctl.finished and ctl.error is None
    assert ctl.build == "quick" and ctl.controller is quick          # built, taking over at the next solve
    t = 3 * config.dt
    taken = ctl.solve(q, v, ref, t)
    assert ctl.build == "optimised" and ctl.controller is not quick and taken.status == "rti"
    assert_close(ctl.controller.theta[:pi.size], pi, rtol=0)             # the parameters came along
    same = quick.solve(q, v, ref, t)                                     # the quick one from the same state
    assert_close(taken.tau_ff, same.tau_ff, rtol=1e-6, atol=1e-6)
    assert_close(taken.K, same.K, rtol=1e-6, atol=1e-6)
    cold = ModelPredictiveController(panda, config)
    cold.set_parameters(ctl.controller.theta)
    assert np.abs(cold.solve(q, v, ref, t).tau_ff - taken.tau_ff).max() > 1e-3     # the warm start matters
    assert optimised_ocp_ready(panda, config)
    libraries = (quick.ocp.library, ctl.controller.ocp.library)          # the quick and the optimised, cached
    assert libraries[0] != libraries[1] and all(os.path.dirname(p) == str(tmp_path) for p in libraries), libraries
    assert len(traces) == 1 and compile_cache._TRACED == {}              # traced once for both, then let go


def test_a_quick_build_compiles_unoptimised_and_a_niced_build_runs_its_compilers_niced(tmp_path, monkeypatch):
    """compile_casadi_library's ``quick`` (every unit at -O0, a library of its own) and ``nice`` (the compiler
    processes' niceness), seen by a compiler wrapper that records its arguments and its niceness."""
    from robodyn_ros.kernels.compiled_functions import QUICK_FLAGS, cached_library, compile_casadi_library
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path / "cache"))
    record = tmp_path / "calls.txt"
    wrapper = tmp_path / "cc.py"
    wrapper.write_text("import os, subprocess, sys\n"
                       f"open({str(record)!r}, 'a').write(f'{{os.nice(0)}} {{\" \".join(sys.argv[1:])}}\\n')\n"
                       "sys.exit(subprocess.call(['gcc'] + sys.argv[1:]))\n")
    monkeypatch.setenv("CC", f"{sys.executable} {wrapper}")
    x = ca.SX.sym("x", 3)

    def functions():
        return [[ca.Function("f_quick_test", [x], [ca.sin(x) * x])], [ca.Function("g_quick_test", [x], [x * x])]]
    quick = compile_casadi_library(functions, "quick-test", quick=True)
    optimised = compile_casadi_library(functions, "quick-test", nice=7)
    assert quick != optimised and cached_library("quick-test") == optimised
    assert cached_library("quick-test", flags=QUICK_FLAGS) == quick
    compiles = [line.split() for line in record.read_text().splitlines() if " -c " in line]
    assert len(compiles) == 4, compiles                                  # two units per library
    base = os.nice(0)
    for niceness, *args in compiles[:2]:                                 # quick: -O0, not niced
        assert int(niceness) == base and "-O0" in args and "-O2" not in args and "-march=native" not in args
    for niceness, *args in compiles[2:]:                                 # optimised: -O2 -march=native, niced
        assert int(niceness) == min(base + 7, 19) and "-O2" in args and "-march=native" in args
    for lib, name in ((quick, "f_quick_test"), (optimised, "f_quick_test")):
        assert_close(np.asarray(ca.external(name, lib)([0.1, 0.2, 0.3])).ravel(), np.sin([0.1, 0.2, 0.3]) *
                     np.array([0.1, 0.2, 0.3]), rtol=1e-12)


def test_stage_jacobians_on_threads_give_the_same_solution(panda):
    ref = QuinticTrajectory(HOME, HOME + 0.3, 0.5)
    sols = [ModelPredictiveController(panda, MPCConfig(horizon=4, dt=0.02, solver="rti", time_limit=60,
                                                       stage_threads=n)).solve(HOME + 0.02, np.full(7, 0.05), ref)
            for n in (1, 2)]
    assert sols[0].status == sols[1].status == "rti"
    assert_close(sols[1].tau_ff, sols[0].tau_ff, rtol=1e-14)
    assert_close(sols[1].K, sols[0].K, rtol=1e-14)


def test_rti_at_100_hz_tracks_the_demo_reference_at_least_as_well_as_computed_torque(panda, plant):
    # the nodes' setting: the generator reference (Fourier, 0.3 rad, 4 s, 2 harmonics) around home, RTI
    # every 10 ms, τ_ff,k + K_k (x - x_plan) at 1 kHz in between; computed torque (kp 400, kd 40) at 1 kHz
    # on the same plant (RK4 at 1 kHz), the same start
    from robodyn_ros.control import ComputedTorqueController, fourier_reference
    model = panda
    ref = fourier_reference(HOME, 0.3, 4.0, 2)
    pi = model.inertial_parameters()

    def run(control, seconds=1.5):
        q, v = ref.evaluate(0.0)[0].copy(), ref.evaluate(0.0)[1].copy()
        errors = []
        for i in range(int(round(seconds / SIM_DT))):
            t = i * SIM_DT
            tau = control(t, q, v)
            errors.append(np.abs(q - ref.evaluate(t)[0]).max())
            q, v = plant.rk4_step(q, v, tau, pi, SIM_DT)
        return np.array(errors)

    ct = ComputedTorqueController(model, kp=400.0, kd=40.0)
    ct_err = run(lambda t, q, v: np.asarray(ct.compute(q, v, *ref.evaluate(t))[0]))
    mpc = ModelPredictiveController(model, MPCConfig(horizon=20, dt=0.01, solver="rti", time_limit=60))
    held = {}

    def mpc_control(t, q, v):
        if int(round(t / SIM_DT)) % 10 == 0:
            held["t"], held["sol"] = t, mpc.solve(q, v, ref, t)
            assert held["sol"].status == "rti", held["sol"].solver_status
        return held["sol"].torque(np.concatenate([q, v]), t - held["t"])
    mpc_err = run(mpc_control)
    print(f"max |q - q_ref| after 0.5 s: MPC {mpc_err[500:].max():.2e} rad, "
          f"computed torque {ct_err[500:].max():.2e} rad")
    assert mpc_err[500:].max() <= ct_err[500:].max()
    assert ct_err[500:].max() < 1e-3                                     # both track: a meaningful comparison


def test_cached_plant_functions_are_named_by_the_friction_they_contain(panda, tmp_path, monkeypatch):
    # the libraries are found in the cache by key without generating their C: a model differing only in
    # its friction (not part of the fingerprint) must not load the other's RK4 step
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path))
    rough = panda.with_friction(viscous=0.5, coulomb=1.0)
    q, v, tau = HOME, np.full(7, 0.3), np.zeros(7)
    steps = [DynamicsFunctions(m, compiled=True).rk4_step(q, v, tau, m.inertial_parameters(), 1e-5)[1]
             for m in (panda, rough)]
    exact = [np.asarray(rd.aba(m, q, v, tau - rd.friction_torque(m, v))) for m in (panda, rough)]
    assert np.abs(steps[0] - steps[1]).max() > 1e-4                     # the friction changes the step
    for step, a in zip(steps, exact):                                     # and each is its model's
        assert_close((step - v) / 1e-5, a, rtol=1e-3)


def test_horizon_samples_of_a_fourier_reference_in_one_call_equal_one_call_per_time(panda):
    """The MPC samples its reference at t + k dt over the horizon: a Fourier reference (the nodes' generator)
    at all times in one vectorised call, any other reference per time; both agree with evaluate(t)."""
    from robodyn_ros.control.reference import fourier_reference, sample_reference

    class PerTime:                                     # the same trajectory seen as an arbitrary reference
        def __init__(self, reference):
            self.reference = reference

        def evaluate(self, t):
            return self.reference.evaluate(float(t))

    fourier = fourier_reference(HOME, 0.3, 4.0, 2)
    times = 1.234 + 0.01 * np.arange(21)
    for reference in (fourier, QuinticTrajectory(HOME, HOME + 0.3, 0.1, t_start=1.3)):
        sampled = sample_reference(reference, times)
        for r in range(3):
            expected = np.array([reference.evaluate(float(t))[r] for t in times])
            assert sampled[r].shape == (21, 7)
            assert_close(sampled[r], expected, rtol=1e-13)
    ctl = ModelPredictiveController(panda, MPCConfig(horizon=20, dt=0.01, solver="rti"))
    p, Xr = ctl.reference_parameters(HOME, np.zeros(7), fourier, 1.234)
    p_per_time, Xr_per_time = ctl.reference_parameters(HOME, np.zeros(7), PerTime(fourier), 1.234)
    assert_close(p, p_per_time, rtol=1e-13)
    assert_close(Xr, Xr_per_time, rtol=1e-13)
