"""State derivatives of M, C, g (Garofalo Prop. 5): against central differences of our crba /
coriolis_matrix / gravity_torque on the tangent space, and against the independent IDSVA recursion
(``∂(M a)/∂q``, ``∂(C v)/∂q``, ``∂(C v)/∂v`` are RNEA derivatives with gravity removed)."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close, load_pair
from robodyn_ros.dynamics.matrix_derivatives import dC_dq, dC_dv, dg_dq, dM_dq
from robodyn_ros.dynamics.rnea_derivatives import rnea_derivatives
from multi_dof_pairs import floating_pair, tree_pair


def model_named(name):
    if name.endswith("_floating"):
        return floating_pair(name[:-len("_floating")])[0]
    if name.endswith("_tree"):
        return tree_pair(name)[0]
    return load_pair(name)[0]


def tangent_difference(f, model, q, h=1e-6):
    """``[k] = (f(q ⊕ h e_k) - f(q ⊕ -h e_k)) / 2h``."""
    return np.array([(f(model.integrate(q, h * e)) - f(model.integrate(q, -h * e))) / (2 * h) for e in np.eye(model.nv)])


@pytest.mark.parametrize("name", ["panda", "ur5", "solo12_floating", "spherical_tree", "free_flyer_tree"])
def test_matrix_derivatives_equal_finite_differences(name, rng):
    model = model_named(name)
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    assert_close(dM_dq(model, q), tangent_difference(lambda x: rd.crba(model, x), model, q), rtol=1e-6, what="dM_dq")
    assert_close(dC_dq(model, q, v), tangent_difference(lambda x: rd.coriolis_matrix(model, x, v), model, q),
                 rtol=1e-6, what="dC_dq")
    fd_v = np.array([(rd.coriolis_matrix(model, q, v + 1e-6 * e) - rd.coriolis_matrix(model, q, v - 1e-6 * e)) / 2e-6
                     for e in np.eye(model.nv)])
    assert_close(dC_dv(model, q, v), fd_v, rtol=1e-6, what="dC_dv")
    assert_close(dg_dq(model, q), tangent_difference(lambda x: rd.gravity_torque(model, x), model, q).T,
                 rtol=1e-6, what="dg_dq")


@pytest.mark.parametrize("name", ["panda", "talos", "talos_floating", "free_flyer_tree"])
def test_matrix_derivatives_agree_with_idsva(name, rng):
    model = model_named(name)
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    weightless = model.with_gravity([0.0, 0.0, 0.0])
    dM, dCq, dCv = dM_dq(model, q), dC_dq(model, q, v), dC_dv(model, q, v)
    C = rd.coriolis_matrix(model, q, v)
    # ∂(M a)/∂q: IDSVA with v = 0 and no gravity
    assert_close(np.einsum("hij,j->ih", dM, a), rnea_derivatives(weightless, q, 0 * v, a)[0], what="dM a")
    # ∂(C v)/∂q and ∂(C v)/∂v = C + [∂C/∂v_h v]: IDSVA with a = 0 and no gravity
    dq, dv, _ = rnea_derivatives(weightless, q, v, 0 * a)
    assert_close(np.einsum("hij,j->ih", dCq, v), dq, what="dC_dq v")
    assert_close(C + np.einsum("hij,j->ih", dCv, v), dv, what="dC_dv")
    assert_close(dg_dq(model, q), rnea_derivatives(model, q, 0 * v, 0 * a)[0], what="dg_dq")
    # C is linear in v, and Ṁ = Σ_h ∂M/∂q_h v_h = C + C^T
    assert_close(np.einsum("hij,h->ij", dCv, v), C, what="C linear in v")
    assert_close(np.einsum("hij,h->ij", dM, v), C + C.T, what="Mdot = C + C^T")


def test_shapes_and_symmetry(rng):
    model = model_named("ur5")
    q = model.random_configuration(rng)
    dM = dM_dq(model, q)
    assert dM.shape == (model.nv,) * 3
    assert_close(dM, dM.transpose(0, 2, 1), rtol=1e-14, what="each ∂M/∂q_h is symmetric")
    # the first joint (vertical axis, base-fixed) does not change M
    assert_close(dM[0], np.zeros((model.nv, model.nv)), atol=1e-12, what="∂M/∂q_0")
    with pytest.raises(ValueError, match="q has shape"):
        dM_dq(model, q[:-1])
