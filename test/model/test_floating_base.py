"""Floating base (free-flyer root, nq = nv + 1) and multi-DoF (spherical) joints: every core algorithm
against Pinocchio on free-flyer humanoid/quadruped models from example-robot-data and on seeded random
trees built with the model builder, plus configuration-space operations and the builder's checks."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import PinBridge, assert_close
from multi_dof_pairs import FLOATING, floating_pair, symmetric, tree_pair
from robodyn_ros.model.errors import ModelError
from robodyn_ros.model.model_builder import ModelBuilder

pin = pytest.importorskip("pinocchio")


@pytest.fixture(params=["talos", "solo12", "a1", "spherical_tree", "free_flyer_tree"])
def multi_dof_pair(request):
    ours, pm = floating_pair(request.param) if request.param in FLOATING else tree_pair(request.param)
    return request.param, ours, pm, pm.createData(), PinBridge(ours, pm)


def random_state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_dimensions_and_root_joint():
    ours, pm = floating_pair("talos")
    assert (ours.nq, ours.nv) == (pm.nq, pm.nv) and ours.nq == ours.nv + 1
    assert ours.joint_names[0] == "root_joint" and ours.joints[0].kind == "free_flyer"
    assert ours.floating_base and ours.parents[0] == -1
    # the bridge maps our root joint onto Pinocchio's root_joint (id 1) at the start of q and v
    br = PinBridge(ours, pm)
    assert br.qmap[0][2:] == (0, 7) and list(br.pv[:6]) == list(range(6))


def test_core_algorithms_equal_pinocchio(multi_dof_pair, rng):
    name, ours, pm, pd, br = multi_dof_pair
    for _ in range(2):
        q, v, a = random_state(ours, rng)
        qp, vp, ap = br.q(q), br.v(v), br.v(a)
        tau = rd.rnea(ours, q, v, a)
        assert_close(tau, br.from_v(pin.rnea(pm, pd, qp, vp, ap)), what=f"{name} rnea")
        assert_close(rd.crba(ours, q), br.from_mat(symmetric(pin.crba(pm, pd, qp))), what=f"{name} crba")
        assert_close(rd.aba(ours, q, v, tau), a, rtol=1e-7, what=f"{name} aba(rnea)")
        assert_close(rd.aba(ours, q, v, a), br.from_v(pin.aba(pm, pd, qp, vp, ap)), rtol=1e-7, what=f"{name} aba")
        assert_close(rd.nonlinear_effects(ours, q, v), br.from_v(pin.nonLinearEffects(pm, pd, qp, vp)), what=f"{name} nle")
        assert_close(rd.gravity_torque(ours, q), br.from_v(pin.computeGeneralizedGravity(pm, pd, qp)), what=f"{name} g")
        assert_close(rd.coriolis_matrix(ours, q, v), br.from_mat(pin.computeCoriolisMatrix(pm, pd, qp, vp)), what=f"{name} C")


def test_regressor_equals_pinocchio(multi_dof_pair, rng):
    name, ours, pm, pd, br = multi_dof_pair
    q, v, a = random_state(ours, rng)
    Y = rd.regressor(ours, q, v, a)
    Yp = pin.computeJointTorqueRegressor(pm, pd, br.q(q), br.v(v), br.v(a))
    cols = [10 * (pm.getJointId(n) - 1) + c for n in ours.joint_names for c in range(10)]
    assert_close(Y, br.from_mat(Yp[:, cols], cols=False), what=f"{name} regressor")
    assert_close(Y @ ours.inertial_parameters(), rd.rnea(ours, q, v, a) - ours.armature * a, what=f"{name} Y pi")
    # the Slotine-Li regressor with v_r = v, a_r = a is the classic one
    assert_close(rd.slotine_li_regressor(ours, q, v, v, a), Y, rtol=1e-12, what=f"{name} Slotine-Li")
    v_r, a_r = rng.normal(size=ours.nv), rng.normal(size=ours.nv)
    expected = rd.crba(ours, q) @ a_r + rd.coriolis_matrix(ours, q, v) @ v_r + rd.gravity_torque(ours, q) \
        - ours.armature * a_r
    assert_close(rd.slotine_li_regressor(ours, q, v, v_r, a_r) @ ours.inertial_parameters(), expected,
                 what=f"{name} Slotine-Li M a_r + C v_r + g")


def test_jacobians_equal_pinocchio(multi_dof_pair, rng):
    name, ours, pm, pd, br = multi_dof_pair
    q = ours.random_configuration(rng)
    pin.computeJointJacobians(pm, pd, br.q(q))
    pin.updateFramePlacements(pm, pd)
    for link in (ours.body_names[0], ours.body_names[len(ours.body_names) // 2], ours.body_names[-1]):
        fid = pm.getFrameId(link) if pm.existFrame(link) else None
        for ref, pref in (("local", pin.LOCAL), ("world", pin.WORLD), ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED)):
            if fid is not None:
                Jp = pin.getFrameJacobian(pm, pd, fid, pref)
            else:  # builder models: the body frame is the joint frame
                Jp = pin.getJointJacobian(pm, pd, pm.getJointId(ours.joint_names[ours.body_names.index(link)]), pref)
            assert_close(rd.frame_jacobian(ours, q, link, ref), br.from_mat(Jp, rows=False), what=f"{name} {link} {ref}")


def test_configuration_space_equals_pinocchio(multi_dof_pair, rng):
    name, ours, pm, pd, br = multi_dof_pair
    q, v, _ = random_state(ours, rng)
    assert_close(br.q(ours.integrate(q, v)), pin.integrate(pm, br.q(q), br.v(v)), what=f"{name} integrate")
    q1 = ours.random_configuration(rng)
    assert_close(ours.difference(q, q1), br.from_v(pin.difference(pm, br.q(q), br.q(q1))), what=f"{name} difference")
    assert_close(ours.difference(q, ours.integrate(q, 0.3 * v)), 0.3 * v, what=f"{name} difference(integrate)")


def test_free_flyer_velocity_is_body_twist(rng):
    """The free-flyer v is the root body's twist in its own frame: the root frame Jacobian is the identity."""
    ours, _ = floating_pair("solo12")
    q = ours.random_configuration(rng)
    assert_close(rd.frame_jacobian(ours, q, ours.body_names[0], "local")[:, :6], np.eye(6), rtol=1e-14)


def test_casadi_floating_base_equals_numpy(rng):
    ca = pytest.importorskip("casadi")
    ours, _ = tree_pair("free_flyer_tree")
    q, v, a = random_state(ours, rng)
    qs, vs, as_ = ca.SX.sym("q", ours.nq), ca.SX.sym("v", ours.nv), ca.SX.sym("a", ours.nv)
    f = ca.Function("f", [qs, vs, as_], [rd.rnea(ours, qs, vs, as_), rd.crba(ours, qs), rd.aba(ours, qs, vs, as_)])
    tau, M, acc = (np.array(x) for x in f(q, v, a))
    assert_close(tau.ravel(), rd.rnea(ours, q, v, a), rtol=1e-12)
    assert_close(M, rd.crba(ours, q), rtol=1e-12)
    assert_close(acc.ravel(), rd.aba(ours, q, v, a), rtol=1e-10)


def test_spherical_joint_energy_rate(rng):
    """Independent of Pinocchio: the power balance d/dt(½ vᵀ M v) = vᵀ (tau - g) with tau from rnea along a
    motion integrated on the manifold (central difference of the kinetic energy)."""
    ours, _ = tree_pair("spherical_chain")
    q, v, a = random_state(ours, rng)
    h = 1e-5

    def kinetic(t):
        qt = ours.integrate(q, t * v + 0.5 * t * t * a)
        vt = v + t * a
        # the tangent at q ⊕ (t v + ½ t² a) differs from v + t a at O(t²) only through the exp map; the
        # kinetic energy difference quotient below is O(h²) accurate
        return 0.5 * vt @ rd.crba(ours, qt) @ vt

    tau = rd.rnea(ours, q, v, a)
    assert_close((kinetic(h) - kinetic(-h)) / (2 * h), v @ (tau - rd.gravity_torque(ours, q)), rtol=1e-6)


def test_builder_errors():
    b = ModelBuilder("bad")
    b.add_body("a", "spherical")
    with pytest.raises(ModelError, match="unknown parent 'x'"):
        b.add_body("b", "revolute", parent="x")
    with pytest.raises(ModelError, match="already exists"):
        b.add_body("a", "revolute")
    with pytest.raises(ModelError, match="unknown joint kind 'hinge'"):
        b.add_body("c", "hinge", parent="a")
    with pytest.raises(ModelError, match="axis"):
        b.add_body("c", "revolute", parent="a", axis=[0, 0, 0])
    with pytest.raises(ModelError, match="inertia"):
        b.add_body("c", "revolute", parent="a", inertia=[1.0, 2.0])
    with pytest.raises(ModelError, match="no body"):
        ModelBuilder("empty").build()
    m = b.build()
    assert (m.nq, m.nv, m.joint_names) == (4, 3, ("a",))
    assert_close(m.neutral_configuration(), [0, 0, 0, 1])
