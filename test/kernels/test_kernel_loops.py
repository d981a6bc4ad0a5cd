"""The loop form of the kernels (robodyn_ros/kernels/loops.py): equal to Pinocchio on a real branched robot
and on a generated 36-joint arm, equal to the NumPy algorithms and to finite differences on random trees of
revolute, prismatic and screw joints with unaligned axes, also through the interpreted fallback; and the
choice between loops and unrolled code per kernel.
"""
import numpy as np
import pytest
from conftest import PinBridge, assert_close, load_pair

import robodyn_ros as rd
from robodyn_ros.benchmarks.kernels import chain_urdf
from robodyn_ros.dynamics.crba import crba
from robodyn_ros.dynamics.dynamic_matrices import coriolis_matrix
from robodyn_ros.dynamics.regressor import regressor
from robodyn_ros.dynamics.rnea import rnea
from robodyn_ros.dynamics.rnea_derivatives import rnea_derivatives
from robodyn_ros.kernels import compile_kernels, loops, registry
from robodyn_ros.model.joints import ScrewJoint
from robodyn_ros.model.model_builder import random_tree_model

pin = pytest.importorskip("pinocchio")
TOL = 1e-11


def _against_pinocchio(ours, pm, kernels, rng, trials=3):
    pd, B = pm.createData(), PinBridge(ours, pm)
    for _ in range(trials):
        q, v, a = ours.random_configuration(rng), rng.normal(size=ours.nv), rng.normal(size=ours.nv)
        qp, vp, ap = B.q(q), B.v(v), B.v(a)
        for name, got, want in zip(("dtau_dq", "dtau_dv", "M"), kernels.rnea_derivatives(q, v, a),
                                   pin.computeRNEADerivatives(pm, pd, qp, vp, ap)):
            want = B.from_mat(np.triu(want) + np.triu(want, 1).T if name == "M" else want)
            assert_close(got, want, rtol=TOL, what=name)
        M = pin.crba(pm, pd, qp)
        assert_close(kernels.crba(q), B.from_mat(np.triu(M) + np.triu(M, 1).T), rtol=TOL, what="crba")
        assert_close(kernels.coriolis_matrix(q, v), B.from_mat(pin.computeCoriolisMatrix(pm, pd, qp, vp)),
                     rtol=TOL, what="coriolis_matrix")
        tau_pin = B.from_v(pin.rnea(pm, pd, qp, vp, ap)) - ours.armature * a
        assert_close(kernels.regressor(q, v, a) @ ours.inertial_parameters(), tau_pin, rtol=TOL, what="Y pi")
        da = pin.computeABADerivatives(pm, pd, qp, vp, B.v(kernels.rnea(q, v, a)))
        assert_close(kernels.aba_derivatives(q, v, kernels.rnea(q, v, a))[0], B.from_mat(pd.ddq_dq), rtol=1e-9,
                     what="da_dq")


def test_branched_robot_equals_pinocchio(rng):
    ours, pm = load_pair("talos")
    assert ours.nv >= loops.LOOP_MIN_NV and loops.supports_loops(ours)
    k = compile_kernels(ours)
    try:
        assert k.sources["rnea_derivatives"] == "loops" and k.sources["coriolis_matrix"] == "loops"
        _against_pinocchio(ours, pm, k, rng)
    finally:
        registry.unregister(ours)


def test_generated_arm_equals_pinocchio(tmp_path, rng):
    path = tmp_path / "chain36.urdf"
    path.write_text(chain_urdf(36))
    ours, pm = rd.Model.from_urdf(str(path)), pin.buildModelFromUrdf(str(path))
    assert loops.pair_count(ours) == 36 * 37 // 2
    k = compile_kernels(ours, register=False)
    assert all(k.sources[name] == "loops" for name in loops.LOOP_FUNCTIONS), k.sources
    _against_pinocchio(ours, pm, k, rng)
    Q, V, A = (rng.normal(size=(5, ours.nv)) for _ in range(3))
    for row, (dq, dv, M) in enumerate(zip(*k.rnea_derivatives_batch(Q, V, A, threads=2))):
        for got, want in zip((dq, dv, M), k.rnea_derivatives(Q[row], V[row], A[row])):
            assert np.array_equal(got, want)


def _mixed_tree(rng):
    """18 bodies on random parents: revolute and prismatic joints about random axes, and two screw joints
    (a revolute joint whose axis misses the frame origin, as after a twist correction)."""
    kinds = ["revolute", "prismatic", "revolute"] * 5 + ["revolute"] * 3
    kinds[4] = ScrewJoint([0.1, -0.2, 0.0, 0.0, 0.0, 1.0])
    kinds[9] = ScrewJoint(np.r_[np.cross([0.0, 0.6, 0.8], [0.3, 0.1, -0.2]), 0.0, 0.6, 0.8])
    parents = [None] + [int(rng.integers(0, i)) for i in range(1, len(kinds))]
    return random_tree_model(rng, kinds, parents=parents, name="mixed_tree")


@pytest.fixture
def all_loops(tmp_path, monkeypatch):
    """Every kernel of LOOP_FUNCTIONS as loops on an 18-body tree, built into a private cache (the
    thresholds are not part of the cache key)."""
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loops, "LOOP_MIN_PAIRS", {})


@pytest.mark.parametrize("compiler", ["gcc", "none"])
def test_mixed_tree_equals_numpy_and_finite_differences(all_loops, monkeypatch, rng, compiler):
    if compiler == "none":
        monkeypatch.setenv("CC", "/nonexistent/cc")
    m = _mixed_tree(np.random.default_rng(3))
    assert any(isinstance(j, ScrewJoint) and j.kind == "screw" for j in m.joints)
    k = compile_kernels(m, register=False)
    assert k.compiled == (compiler == "gcc")
    assert all(k.sources[name] == "loops" for name in loops.LOOP_FUNCTIONS), k.sources
    h = 1e-6
    for _ in range(3):
        q, v, a = rng.normal(size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv)
        for got, want in zip(k.rnea_derivatives(q, v, a), rnea_derivatives(m, q, v, a)):
            assert_close(got, want, rtol=TOL, what="rnea_derivatives")
        assert_close(k.crba(q), crba(m, q), rtol=TOL, what="crba")
        assert_close(k.coriolis_matrix(q, v), coriolis_matrix(m, q, v), rtol=TOL, what="coriolis_matrix")
        assert_close(k.regressor(q, v, a), regressor(m, q, v, a), rtol=TOL, what="regressor")
        dq, dv, _ = k.rnea_derivatives(q, v, a)
        E = np.eye(m.nv)
        fd_q = np.column_stack([(rnea(m, q + h * e, v, a) - rnea(m, q - h * e, v, a)) / (2 * h) for e in E])
        fd_v = np.column_stack([(rnea(m, q, v + h * e, a) - rnea(m, q, v - h * e, a)) / (2 * h) for e in E])
        assert np.max(np.abs(dq - fd_q)) <= 1e-6 * max(1.0, np.max(np.abs(fd_q)))
        assert np.max(np.abs(dv - fd_v)) <= 1e-6 * max(1.0, np.max(np.abs(fd_v)))


def test_which_kernels_are_loops():
    chain = lambda n: random_tree_model(np.random.default_rng(0), ["revolute"] * n)  # noqa: E731
    small, short_tree, deep = chain(loops.LOOP_MIN_NV - 1), _mixed_tree(np.random.default_rng(3)), chain(40)
    assert not any(loops.uses_loops(small, name) for name in loops.LOOP_FUNCTIONS)
    assert loops.pair_count(short_tree) < 600 and short_tree.nv >= loops.LOOP_MIN_NV
    assert [n for n in loops.LOOP_FUNCTIONS if loops.uses_loops(short_tree, n)] == ["coriolis_matrix", "rnea_derivatives"]
    assert all(loops.uses_loops(deep, name) for name in loops.LOOP_FUNCTIONS)
    spherical = random_tree_model(np.random.default_rng(0), ["spherical"] + ["revolute"] * 20)
    assert not loops.supports_loops(spherical) and not loops.uses_loops(spherical, "rnea_derivatives")
    with pytest.raises(ValueError, match="revolute, prismatic or screw"):
        loops.loop_source(spherical)
