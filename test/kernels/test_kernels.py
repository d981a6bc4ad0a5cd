"""Compiled kernels: equal to the interpreted algorithms and to Pinocchio, batch equal to per call, shape
errors, the disk cache (hit without a compiler, two processes compiling at once), the interpreted fallback
and compiler failures.

Panda and UR5 are compiled once per session into the normal cache (free on reruns); the cache and
compiler tests use a 2-DoF arm in a private cache directory so that they stay cheap.
"""
import importlib
import json
import logging
import os
import subprocess
import sys
import textwrap

import casadi as ca
import numpy as np
import pytest
from conftest import PinBridge, assert_close, load_pair

import robodyn_ros as rd
from robodyn_ros.kernels import numeric
from robodyn_ros.model.errors import ModelError
from robodyn_ros.kernels import KernelBuildError, compile_kernels, registry

TOL = 1e-12

TWO_LINK = textwrap.dedent("""\
    <robot name="two_link">
      <link name="base"/>
      <link name="l1"><inertial><origin xyz="0.1 0.02 0" rpy="0 0 0"/><mass value="1.5"/>
        <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.025" iyz="0" izz="0.015"/></inertial></link>
      <link name="l2"><inertial><origin xyz="0 0 0.2" rpy="0 0 0"/><mass value="0.7"/>
        <inertia ixx="0.01" ixy="0" ixz="0.002" iyy="0.01" iyz="0" izz="0.004"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><origin xyz="0 0 0.3" rpy="0.1 0 0"/>
        <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
      <joint name="j2" type="prismatic"><parent link="l1"/><child link="l2"/><origin xyz="0.4 0 0" rpy="0 0.2 0"/>
        <axis xyz="1 0 0"/><limit lower="-0.5" upper="0.5" effort="10" velocity="1"/></joint>
    </robot>""")


@pytest.fixture(scope="module", params=["panda", "ur5"])
def compiled(request):
    """(name, our model, kernels, Pinocchio model, Pinocchio data, bridge), compiled once per session."""
    ours, pm = load_pair(request.param)
    kernels = compile_kernels(ours)
    yield request.param, ours, kernels, pm, pm.createData(), PinBridge(ours, pm)
    registry.unregister(ours)


def random_state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_kernels_equal_interpreted_algorithms(compiled, rng):
    _, m, k, *_ = compiled
    assert k.compiled
    for _ in range(3):
        q, v, a = random_state(m, rng)
        assert_close(k.rnea(q, v, a), _interpreted("rnea")(m, q, v, a), rtol=TOL, what="rnea")
        assert_close(k.aba(q, v, a), _interpreted("aba")(m, q, v, a), rtol=TOL, what="aba")
        assert_close(k.crba(q), _interpreted("crba")(m, q), rtol=TOL, what="crba")
        assert_close(k.nonlinear_effects(q, v), _interpreted("nonlinear_effects")(m, q, v), rtol=TOL, what="nle")
        assert_close(k.gravity_torque(q), _interpreted("gravity_torque")(m, q), rtol=TOL, what="g")
        assert_close(k.coriolis_matrix(q, v), _interpreted("coriolis_matrix")(m, q, v), rtol=TOL, what="C")
        assert_close(k.regressor(q, v, a), _interpreted("regressor")(m, q, v, a), rtol=TOL, what="Y")


def _interpreted(name):
    """The core algorithm itself (not the kernel-dispatching public function)."""
    module = {"rnea": "rnea", "aba": "aba", "crba": "crba", "regressor": "regressor"}.get(name, "dynamic_matrices")
    return getattr(importlib.import_module("robodyn_ros.dynamics." + module), name)


def test_kernels_equal_pinocchio(compiled, rng):
    import pinocchio as pin
    _, m, k, pm, pd, B = compiled
    for _ in range(3):
        q, v, a = random_state(m, rng)
        qp, vp, ap = B.q(q), B.v(v), B.v(a)
        assert_close(k.rnea(q, v, a), B.from_v(pin.rnea(pm, pd, qp, vp, ap)), rtol=TOL, what="rnea")
        assert_close(k.aba(q, v, a), B.from_v(pin.aba(pm, pd, qp, vp, ap)), rtol=TOL, what="aba")
        dtau = pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
        for name, ours, theirs in zip(("dtau_dq", "dtau_dv", "dtau_da"), k.rnea_derivatives(q, v, a), dtau):
            assert_close(ours, B.from_mat(theirs), rtol=TOL, what=name)
        pin.computeABADerivatives(pm, pd, qp, vp, ap)
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T
        for name, ours, theirs in zip(("da_dq", "da_dv", "da_dtau"), k.aba_derivatives(q, v, a),
                                      (pd.ddq_dq, pd.ddq_dv, Minv)):
            assert_close(ours, B.from_mat(theirs), rtol=TOL, what=name)
        Yp = pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap)
        assert_close(k.regressor(q, v, a) @ m.inertial_parameters(), B.from_v(Yp @ pm_parameters(pm)),
                     rtol=TOL, what="Y pi")
        assert_close(k.coriolis_matrix(q, v), B.from_mat(pin.computeCoriolisMatrix(pm, pd, qp, vp)), rtol=TOL, what="C")


def pm_parameters(pm):
    return np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])


def test_time_derivative_kernel_matches_directional_derivative(compiled, rng):
    """``τ̇ = ∂τ/∂q v + ∂τ/∂v a + M jerk`` from the compiled derivative kernel."""
    _, m, k, *_ = compiled
    q, v, a = random_state(m, rng)
    jerk = rng.normal(size=m.nv)
    dq, dv, M = k.rnea_derivatives(q, v, a)
    assert_close(k.rnea_time_derivatives(q, v, a, jerk), dq @ v + dv @ a + M @ jerk, rtol=TOL)


# Batch kernels that run four samples per evaluation (codegen.VECTOR_BATCH): their rows equal the
# per-call results to rounding, not bit for bit (the 4-lane code takes sin and cos from glibc's libmvec,
# within 4 ulp, and gcc may contract a different set of a * b + c into fused multiply-adds). Measured
# on Panda and UR5: relative differences up to 2.4e-15.
VECTOR_TOL = 1e-13


def test_batch_equals_per_call(compiled, rng):
    """Batch rows equal per-call results: bit for bit for the one-sample loops (aba, crba,
    aba_derivatives), to VECTOR_TOL for the 4-lane kernels (rnea, regressor, rnea_derivatives)."""
    from robodyn_ros.kernels.codegen import VECTOR_BATCH
    _, m, k, *_ = compiled
    n = 7
    Q = np.array([m.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))

    def check(name, got, want):
        if name in VECTOR_BATCH:
            assert_close(got, want, rtol=VECTOR_TOL, what=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)

    for name, per_call, args in (("rnea", k.rnea, (Q, V, A)), ("aba", k.aba, (Q, V, A)), ("crba", k.crba, (Q,)),
                                 ("regressor", k.regressor, (Q, V, A))):
        out = getattr(k, name + "_batch")(*args)
        assert out.shape[0] == n
        for i in range(n):
            check(name, out[i], per_call(*(x[i] for x in args)))
    for name in ("rnea_derivatives", "aba_derivatives"):
        outs = getattr(k, name + "_batch")(Q, V, A)
        for i in range(n):
            for batch_out, single in zip(outs, getattr(k, name)(Q[i], V[i], A[i])):
                check(name, batch_out[i], single)
    assert k.rnea_batch(Q[:0], V[:0], A[:0]).shape == (0, m.nv)


@pytest.mark.parametrize("name", ["rnea", "regressor", "rnea_derivatives"])
def test_four_lane_batch_rows_do_not_depend_on_n_or_threads(compiled, rng, name):
    """The 4-lane batch path: a row's result is the same bit for bit whatever the batch size (fewer than
    4 rows, not a multiple of 4: the spare lanes of the last group repeat its last row) and the thread
    count (blocks start on multiples of 4 rows), every row is written (outputs prefilled with NaN), and
    each equals the per-call result to VECTOR_TOL."""
    _, m, k, *_ = compiled
    n = 1003
    Q = np.array([m.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
    batch = getattr(k, name + "_batch")

    def run(rows, threads):
        first = batch(Q[:rows], V[:rows], A[:rows], threads=1)
        first = first if isinstance(first, tuple) else (first,)
        out = tuple(np.full_like(x, np.nan) for x in first)
        batch(Q[:rows], V[:rows], A[:rows], out=out if len(out) > 1 else out[0], threads=threads)
        return out

    reference = run(n, 1)
    for rows, threads in ((1, 1), (2, 1), (3, 2), (5, 1), (6, 3), (n, 2), (n, 3), (n, 7)):
        for got, want in zip(run(rows, threads), reference):
            np.testing.assert_array_equal(got, want[:rows], err_msg=f"{name} rows={rows} threads={threads}")
    for i in (0, 1, 2, 3, 4, n - 3, n - 1):
        single = getattr(k, name)(Q[i], V[i], A[i])
        for got, want in zip(reference, single if isinstance(single, tuple) else (single,)):
            assert_close(got[i], want, rtol=VECTOR_TOL, what=f"{name} row {i}")


def test_batch_threads_give_identical_results_and_write_into_out(compiled, rng):
    """Rows split over threads (enough rows that every thread gets a block) equal the one-thread result
    bit for bit; ``out=`` arrays are filled and returned; bad ``threads`` / ``out`` raise."""
    _, m, k, *_ = compiled
    n = 3000
    Q = np.array([m.random_configuration(rng) for _ in range(n)])
    V, A = rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
    for name in ("rnea", "regressor", "rnea_derivatives", "aba_derivatives"):
        batch = getattr(k, name + "_batch")
        one = batch(Q, V, A, threads=1)
        one = one if isinstance(one, tuple) else (one,)
        for threads in (2, 3):
            out = tuple(np.full_like(x, np.nan) for x in one)
            returned = batch(Q, V, A, out=out if len(out) > 1 else out[0], threads=threads)
            returned = returned if isinstance(returned, tuple) else (returned,)
            for r, o, x in zip(returned, out, one):
                assert r is o
                np.testing.assert_array_equal(o, x, err_msg=f"{name} threads={threads}")
    with pytest.raises(ValueError, match="threads must be >= 1"):
        k.rnea_batch(Q, V, A, threads=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'threads'"):
        k.rnea(Q[0], V[0], A[0], threads=2)
    with pytest.raises(TypeError, match="both positionally and as out="):
        k.rnea_batch(Q, V, A, np.empty((n, m.nv)), out=np.empty((n, m.nv)))
    with pytest.raises(ValueError, match="out= holds 1 arrays, expected 3"):
        k.rnea_derivatives_batch(Q, V, A, out=(np.empty((n, m.nv, m.nv)),))
    with pytest.raises(ValueError, match="output 0"):
        k.rnea_batch(Q, V, A, out=np.empty((n - 1, m.nv)))


def test_inputs_are_converted_and_outputs_can_be_given(compiled, rng):
    _, m, k, *_ = compiled
    q, v, a = random_state(m, rng)
    expected = k.rnea(q, v, a)
    np.testing.assert_array_equal(k.rnea(list(q), tuple(v), a), expected)
    assert k.gravity_torque(np.zeros(m.nq, dtype=int)).shape == (m.nv,)
    strided = np.zeros((m.nv, 2))
    strided[:, 0] = a
    np.testing.assert_array_equal(k.rnea(q, v, strided[:, 0]), expected)
    out = np.empty(m.nv)
    assert k.rnea(q, v, a, out) is out
    np.testing.assert_array_equal(out, expected)
    outs = tuple(np.empty((m.nv, m.nv)) for _ in range(3))
    returned = k.rnea_derivatives(q, v, a, *outs)
    assert all(r is o for r, o in zip(returned, outs))


def test_wrong_shapes_raise_value_error_naming_the_argument(compiled):
    _, m, k, *_ = compiled
    q, v = np.zeros(m.nq), np.zeros(m.nv)
    with pytest.raises(ValueError, match=r"rnea\(\): a has shape \(3,\)"):
        k.rnea(q, v, np.zeros(3))
    with pytest.raises(ValueError, match=r"crba\(\): q has shape"):
        k.crba(np.zeros((m.nq, 1)))
    with pytest.raises(ValueError, match=r"rnea_batch\(\): V has shape|rnea_batch\(\): v has shape"):
        k.rnea_batch(np.zeros((4, m.nq)), np.zeros((5, m.nv)), np.zeros((4, m.nv)))
    with pytest.raises(ValueError, match=r"regressor_batch\(\): q"):
        k.regressor_batch(q, v, v)
    with pytest.raises(ValueError, match="output 0"):
        k.rnea(q, v, v, np.empty(m.nv + 1))
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k.rnea(q, v)


def test_numeric_functions_use_registered_kernels(compiled, rng):
    _, m, k, *_ = compiled
    assert registry.get(m) is k
    q, v, a = random_state(m, rng)
    np.testing.assert_array_equal(numeric.rnea(m, q, v, a), k.rnea(q, v, a))
    np.testing.assert_array_equal(numeric.crba(m, q), k.crba(q))
    for ours, theirs in zip(numeric.aba_derivatives(m, q, v, a), k.aba_derivatives(q, v, a)):
        np.testing.assert_array_equal(ours, theirs)
    bad = a.copy()
    bad[2] = np.nan
    with pytest.raises(ModelError, match=r"a\[2\]"):
        numeric.rnea(m, q, v, bad)
    with pytest.raises(ValueError, match="v has shape"):
        numeric.rnea(m, q, v[:-1], a)
    # Symbols and the options the kernels do not take go to the algorithm.
    tau_sym = numeric.rnea(m, ca.SX.sym("q", m.nq), v, a)
    assert isinstance(tau_sym, ca.SX)
    f_ext = np.zeros((m.nbodies, 6))
    f_ext[-1] = rng.normal(size=6)
    assert_close(numeric.rnea(m, q, v, a, f_ext=f_ext), _interpreted("rnea")(m, q, v, a, f_ext=f_ext))


# ------------------------------------------------------------------ cache, fallback and failure (2-DoF arm)

@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _compile_in_subprocess(urdf_path, env):
    code = ("import json, sys, numpy as np; from robodyn_ros import Model; "
            "from robodyn_ros.kernels import compile_kernels; m = Model.from_urdf(sys.argv[1]); "
            "k = compile_kernels(m); q = np.array([0.3, 0.1]); "
            "print(json.dumps([k.compiled, k.from_cache, k.rnea(q, q, q).tolist()]))")
    return subprocess.Popen([sys.executable, "-c", code, urdf_path], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_compiling_at_once_build_once(private_cache, tmp_path):
    urdf = tmp_path / "two_link.urdf"
    urdf.write_text(TWO_LINK)
    env = dict(os.environ, ROBODYN_CACHE_DIR=str(private_cache))
    procs = [_compile_in_subprocess(str(urdf), env) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r[0] for r in results)
    assert sorted(r[1] for r in results) == [False, True]  # one built, the other waited and loaded
    assert results[0][2] == results[1][2]
    m = rd.Model.from_urdf(str(urdf))
    q = np.array([0.3, 0.1])
    assert_close(results[0][2], _interpreted("rnea")(m, q, q, q), rtol=TOL)
    assert [p.name for p in private_cache.iterdir() if p.name.startswith("build-")] == []
    # Second compile in this process: from the cache, with no compiler available at all.
    os.environ["CC"] = "/nonexistent/cc"
    try:
        k = compile_kernels(m, register=False)
    finally:
        del os.environ["CC"]
    assert k.compiled and k.from_cache and k.compile_times == {}
    assert k.build_report["compile_times"]
    report = k.build_report
    assert set(report["compile_cpu_times"]) == set(report["compile_times"])
    assert report["compile_cpu_seconds"] > 0 and report["symbolic_cpu_seconds"] > 0
    assert len(report["load_average_before"]) == 3


def test_chunked_code_equals_casadi_code(private_cache, monkeypatch, rng):
    """Every kernel of UR5 emitted as chunks of 97 instructions in units of 600 (many loads and stores
    across chunk boundaries, many translation units compiled in parallel) gives CasADi's code's results."""
    from robodyn_ros.kernels import codegen
    ours, _ = load_pair("ur5")
    monkeypatch.delenv("ROBODYN_CACHE_DIR")
    reference = compile_kernels(ours, register=False)  # the normal cache, as the fixture builds it
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(private_cache))
    monkeypatch.setattr(codegen, "CHUNK_THRESHOLD", 0)
    monkeypatch.setattr(codegen, "CHUNK_INSTRUCTIONS", 97)
    monkeypatch.setattr(codegen, "TU_INSTRUCTIONS", 600)
    chunked = compile_kernels(ours, register=False, jobs=2)
    assert chunked.key != reference.key and not chunked.from_cache
    units = [f for f in chunked.compile_times if "_u" in f]
    assert any(f.startswith("rdk_rnea_derivatives_u") for f in units) and len(units) > 20
    for _ in range(2):
        q, v, a = random_state(ours, rng)
        calls = {"rnea": (q, v, a), "aba": (q, v, a), "crba": (q,), "nonlinear_effects": (q, v),
                 "gravity_torque": (q,), "coriolis_matrix": (q, v), "regressor": (q, v, a),
                 "rnea_derivatives": (q, v, a), "aba_derivatives": (q, v, a), "rnea_time_derivatives": (q, v, a, v)}
        for name, args in calls.items():
            got, want = getattr(chunked, name)(*args), getattr(reference, name)(*args)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert_close(g, w, rtol=TOL, what=name)
        assert_close(chunked.regressor(q, v, a), _interpreted("regressor")(ours, q, v, a), rtol=1e-10)
    Q = np.array([random_state(ours, rng)[0] for _ in range(5)])
    for g, w in zip(chunked.rnea_derivatives_batch(Q, Q, Q, threads=2), reference.rnea_derivatives_batch(Q, Q, Q)):
        assert_close(g, w, rtol=TOL, what="rnea_derivatives_batch")


def test_fallback_without_compiler_is_interpreted_and_warns(private_cache, monkeypatch, caplog, rng):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    m = rd.Model.from_urdf(TWO_LINK)
    with caplog.at_level(logging.WARNING, logger="robodyn_ros.kernels"):
        k = compile_kernels(m)
    try:
        assert not k.compiled
        assert any("no C compiler" in r.getMessage() for r in caplog.records)
        q, v, a = random_state(m, rng)
        assert_close(k.rnea(q, v, a), _interpreted("rnea")(m, q, v, a), rtol=TOL)
        assert_close(k.crba(q), _interpreted("crba")(m, q), rtol=TOL)
        assert_close(numeric.aba(m, q, v, a), _interpreted("aba")(m, q, v, a), rtol=TOL)
        Q = np.array([q, q])
        assert_close(k.regressor_batch(Q, Q, Q)[1], _interpreted("regressor")(m, q, q, q), rtol=TOL)
        dq, dv, M = k.rnea_derivatives(q, v, a)
        assert_close(M, _interpreted("crba")(m, q), rtol=TOL)
        with pytest.raises(ValueError, match=r"rnea\(\): v has shape"):
            k.rnea(q, v[:1], a)
    finally:
        registry.unregister(m)


def test_compiler_failure_raises_with_stderr_tail(private_cache, tmp_path, monkeypatch):
    fake = tmp_path / "broken-cc"
    fake.write_text("#!/bin/sh\necho 'fatal: this compiler is broken on purpose' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    with pytest.raises(KernelBuildError, match="broken on purpose"):
        compile_kernels(rd.Model.from_urdf(TWO_LINK), register=False)
    # the build stopped: no temporary directory and no library left in the cache
    assert not list(private_cache.glob("build-*")) and not list(private_cache.rglob("*.so")), \
        sorted(p.name for p in private_cache.rglob("*"))


def test_a_cold_cache_compile_says_so_in_one_line(private_cache, tmp_path, capfd):
    """The first build for a robot prints one line saying what is compiled, that it is the first run for this
    robot, about how long and where it is cached (it compiled silently for minutes); from the cache, nothing."""
    urdf = tmp_path / "two_link.urdf"
    urdf.write_text(TWO_LINK)
    m = rd.Model.from_urdf(str(urdf))
    capfd.readouterr()
    assert not compile_kernels(m, register=False).from_cache
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("robodyn:")]
    assert len(lines) == 1 and f"compiling the dynamics kernels of {m.name} (first run for this robot, about" \
        in lines[0] and f"cached afterwards in {private_cache}" in lines[0], lines
    assert compile_kernels(m, register=False).from_cache
    assert "robodyn:" not in capfd.readouterr().err
