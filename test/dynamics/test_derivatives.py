"""Analytical derivatives of inverse and forward dynamics (IDSVA, DMM/AZA, minv) and the joint-parameter
regressor columns: against Pinocchio (computeRNEADerivatives, computeABADerivatives, computeMinverse),
against central finite differences of our own rnea/aba on the tangent space (q ⊕ δ), and CasADi == NumPy."""
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import PinBridge, assert_close, load_pair
from robodyn_ros.dynamics.aba_derivatives import aba_derivatives, minv
from robodyn_ros.dynamics.friction_regressor import (full_parameter_vector, full_regressor, joint_parameter_names,
                                            joint_parameter_regressor, joint_parameter_vector)
from robodyn_ros.dynamics.rnea_derivatives import rnea_derivatives
from multi_dof_pairs import floating_pair, symmetric, tree_pair

pin = pytest.importorskip("pinocchio")


def pin_forces(ours, pm, f_ext):
    """Our (nbodies, 6) body wrenches as Pinocchio's per-joint local forces."""
    forces = pin.StdVec_Force()
    for _ in range(pm.njoints):
        forces.append(pin.Force.Zero())
    for i, name in enumerate(ours.joint_names):
        forces[pm.getJointId(name) if name != "root_joint" else 1] = pin.Force(f_ext[i, :3], f_ext[i, 3:])
    return forces


def random_state(model, rng):
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


@pytest.fixture(params=["panda", "ur5", "tiago", "talos", "talos_floating", "solo12_floating", "free_flyer_tree"])
def deriv_pair(request):
    name = request.param
    if name == "free_flyer_tree":
        ours, pm = tree_pair(name)
    elif name.endswith("_floating"):
        ours, pm = floating_pair(name[:-len("_floating")])
    else:
        ours, pm = load_pair(name)
    # a rotor inertia on every dof checks that dtau_da = M and da_dtau = M^-1 carry the armature
    ours = ours.with_armature(np.linspace(0.01, 0.2, ours.nv))
    br = PinBridge(ours, pm)
    pm.armature = br.v(ours.armature)
    return name, ours, pm, pm.createData(), br


def test_rnea_derivatives_equal_pinocchio(deriv_pair, rng):
    name, ours, pm, pd, br = deriv_pair
    q, v, a = random_state(ours, rng)
    f_ext = rng.normal(size=(ours.nbodies, 6))
    for fe in (None, f_ext):
        dq, dv, da = rnea_derivatives(ours, q, v, a, fe)
        args = (pm, pd, br.q(q), br.v(v), br.v(a)) + (() if fe is None else (pin_forces(ours, pm, fe),))
        pin.computeRNEADerivatives(*args)
        what = f"{name} {'f_ext' if fe is not None else ''}"
        assert_close(dq, br.from_mat(pd.dtau_dq), what=f"{what} dtau_dq")
        assert_close(dv, br.from_mat(pd.dtau_dv), what=f"{what} dtau_dv")
        assert_close(da, br.from_mat(symmetric(pd.M)), what=f"{what} dtau_da")
    assert_close(da, rd.crba(ours, q), rtol=1e-12, what=f"{name} dtau_da == crba")


@pytest.mark.parametrize("method", ["dmm", "aza", "solve", "auto"])
def test_aba_derivatives_equal_pinocchio(deriv_pair, method, rng):
    name, ours, pm, pd, br = deriv_pair
    q, v, tau = random_state(ours, rng)
    f_ext = rng.normal(size=(ours.nbodies, 6))
    da_dq, da_dv, da_dtau = aba_derivatives(ours, q, v, tau, f_ext, method=method)
    pin.computeABADerivatives(pm, pd, br.q(q), br.v(v), br.v(tau), pin_forces(ours, pm, f_ext))
    assert_close(da_dq, br.from_mat(pd.ddq_dq), what=f"{name} {method} da_dq")
    assert_close(da_dv, br.from_mat(pd.ddq_dv), what=f"{name} {method} da_dv")
    assert_close(da_dtau, br.from_mat(symmetric(pd.Minv)), what=f"{name} {method} da_dtau")
    assert_close(da_dtau @ rd.crba(ours, q), np.eye(ours.nv), what=f"{name} M^-1 M")


def test_minv_equals_pinocchio(deriv_pair, rng):
    name, ours, pm, pd, br = deriv_pair
    q = ours.random_configuration(rng)
    assert_close(minv(ours, q), br.from_mat(symmetric(pin.computeMinverse(pm, pd, br.q(q)))), what=f"{name} minv")


def central_difference_q(f, model, q, h=1e-6):
    """Columns ``(f(q ⊕ h e_k) - f(q ⊕ -h e_k)) / 2h`` (tangent-space central differences)."""
    return np.column_stack([(f(model.integrate(q, h * e)) - f(model.integrate(q, -h * e))) / (2 * h)
                            for e in np.eye(model.nv)])


def central_difference(f, x, h=1e-6):
    return np.column_stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])


@pytest.mark.parametrize("name", ["panda", "solo12_floating", "spherical_tree", "free_flyer_tree"])
def test_derivatives_equal_finite_differences(name, rng):
    """Independent of Pinocchio: central differences of our own rnea/aba (error O(h^2) ~ 1e-10 relative,
    tolerance sqrt(h) scaled, STYLE rule 7)."""
    if name.endswith("_floating"):
        ours = floating_pair(name[:-len("_floating")])[0]
    elif name in ("spherical_tree", "free_flyer_tree"):
        ours = tree_pair(name)[0]
    else:
        ours = load_pair(name)[0]
    q, v, a = random_state(ours, rng)
    f_ext = rng.normal(size=(ours.nbodies, 6))
    dq, dv, da = rnea_derivatives(ours, q, v, a, f_ext)
    assert_close(dq, central_difference_q(lambda x: rd.rnea(ours, x, v, a, f_ext), ours, q), rtol=1e-6, what="dtau_dq")
    assert_close(dv, central_difference(lambda x: rd.rnea(ours, q, x, a, f_ext), v), rtol=1e-6, what="dtau_dv")
    assert_close(da, central_difference(lambda x: rd.rnea(ours, q, v, x, f_ext), a), rtol=1e-6, what="dtau_da")
    tau = rd.rnea(ours, q, v, a)
    ddq, ddv, ddt = aba_derivatives(ours, q, v, tau, f_ext)
    assert_close(ddq, central_difference_q(lambda x: rd.aba(ours, x, v, tau, f_ext), ours, q), rtol=1e-6, what="da_dq")
    assert_close(ddv, central_difference(lambda x: rd.aba(ours, q, x, tau, f_ext), v), rtol=1e-6, what="da_dv")
    assert_close(ddt, central_difference(lambda x: rd.aba(ours, q, v, x, f_ext), tau), rtol=1e-6, what="da_dtau")


def test_complex_step_on_a_revolute_chain(rng):
    """Complex step (no subtractive cancellation, error ~1e-16) of a hand-written planar 2R inverse
    dynamics against our derivatives of the same robot built in code."""
    from robodyn_ros.model.model_builder import ModelBuilder
    m1, m2, l1, c1, c2, I1, I2, g0 = 1.3, 0.8, 0.7, 0.3, 0.25, 0.05, 0.03, 9.81
    b = ModelBuilder("planar2r", gravity=(0.0, -g0, 0.0))
    b.add_body("l1", "revolute", axis=[0, 0, 1], inertia=b.rigid(m1, [c1, 0, 0], np.diag([0.01, 0.01, I1])))
    b.add_body("l2", "revolute", axis=[0, 0, 1], parent="l1", placement=(np.eye(3), [l1, 0, 0]),
               inertia=b.rigid(m2, [c2, 0, 0], np.diag([0.01, 0.01, I2])))
    model = b.build()

    def tau_2r(q, v, a):  # textbook planar 2R (gravity along -y), written for complex arguments
        A1, A2 = I1 + m1 * c1**2, I2 + m2 * c2**2
        M11 = A1 + A2 + m2 * l1**2 + 2 * m2 * l1 * c2 * np.cos(q[1])
        M12 = A2 + m2 * l1 * c2 * np.cos(q[1])
        h = m2 * l1 * c2 * np.sin(q[1])
        g1 = (m1 * c1 + m2 * l1) * g0 * np.cos(q[0]) + m2 * c2 * g0 * np.cos(q[0] + q[1])
        g2 = m2 * c2 * g0 * np.cos(q[0] + q[1])
        return np.array([M11 * a[0] + M12 * a[1] - h * (2 * v[0] * v[1] + v[1]**2) + g1,
                         M12 * a[0] + A2 * a[1] + h * v[0]**2 + g2])

    q, v, a = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2)
    assert_close(rd.rnea(model, q, v, a), tau_2r(q, v, a), rtol=1e-13, what="2R rnea")
    dq, dv, _ = rnea_derivatives(model, q, v, a)
    cs = lambda f, x: np.column_stack([f(x + 1e-30j * e).imag / 1e-30 for e in np.eye(2)])  # noqa: E731
    assert_close(dq, cs(lambda x: tau_2r(x, v, a), q), rtol=1e-13, what="2R dtau_dq")
    assert_close(dv, cs(lambda x: tau_2r(q, x, a), v), rtol=1e-13, what="2R dtau_dv")


@pytest.mark.parametrize("name", ["panda", "free_flyer_tree"])
def test_casadi_equals_numpy(name, rng):
    ca = pytest.importorskip("casadi")
    ours = load_pair(name)[0] if name == "panda" else tree_pair(name)[0]
    q, v, a = random_state(ours, rng)
    f_ext = rng.normal(size=(ours.nbodies, 6))
    qs, vs, as_, fs = ca.SX.sym("q", ours.nq), ca.SX.sym("v", ours.nv), ca.SX.sym("a", ours.nv), ca.SX.sym("f", ours.nbodies, 6)
    fid = ca.Function("rnea_derivatives", [qs, vs, as_, fs], list(rnea_derivatives(ours, qs, vs, as_, fs)))
    for sym, num in zip(fid(q, v, a, f_ext), rnea_derivatives(ours, q, v, a, f_ext)):
        assert_close(np.array(sym), num, rtol=1e-12)
    for method in ("dmm", "aza", "solve"):
        ffd = ca.Function("aba_derivatives", [qs, vs, as_, fs], list(aba_derivatives(ours, qs, vs, as_, fs, method=method)))
        for sym, num in zip(ffd(q, v, a, f_ext), aba_derivatives(ours, q, v, a, f_ext, method=method)):
            assert_close(np.array(sym), num, rtol=1e-10, what=method)
    fm = ca.Function("minv", [qs], [minv(ours, qs)])
    assert_close(np.array(fm(q)), minv(ours, q), rtol=1e-10)


def test_symbolic_inertial_parameters(rng):
    """``pi=`` overrides the model's parameters, symbolically too (adaptive control, identification)."""
    ca = pytest.importorskip("casadi")
    ours = load_pair("ur5")[0]
    q, v, a = random_state(ours, rng)
    pi = ours.inertial_parameters() * rng.uniform(0.5, 1.5, 10 * ours.nbodies)
    other = ours.with_inertial_parameters(pi)
    ps = ca.SX.sym("pi", 10 * ours.nbodies)
    f = ca.Function("d", [ps], list(rnea_derivatives(ours, q, v, a, pi=ps)) + list(aba_derivatives(ours, q, v, a, pi=ps)))
    expected = rnea_derivatives(other, q, v, a) + aba_derivatives(other, q, v, a)
    for sym, num, num_pi in zip(f(pi), expected, rnea_derivatives(ours, q, v, a, pi=pi) + aba_derivatives(ours, q, v, a, pi=pi)):
        assert_close(np.array(sym), num, rtol=1e-10)
        assert_close(num_pi, num, rtol=1e-12)
    assert_close(minv(ours, q, pi=pi), minv(other, q), rtol=1e-12)


def test_aba_derivatives_rejects_unknown_method(rng):
    ours = load_pair("ur5")[0]
    with pytest.raises(ValueError, match="method"):
        aba_derivatives(ours, *random_state(ours, rng), method="cholesky")


# ------------------------------------------------------------------------- joint-parameter regressor columns
def test_full_regressor_reproduces_rnea_plus_friction(robot_pair, rng):
    name, ours, *_ = robot_pair
    ours = ours.with_armature(rng.uniform(0.0, 0.3, ours.nv)).with_friction(
        viscous=rng.uniform(0, 1, ours.nv), coulomb=rng.uniform(0, 2, ours.nv), offset=rng.normal(size=ours.nv))
    q, v, a = random_state(ours, rng)
    v[0] = 0.0  # sign(0) = 0, as in friction_torque
    expected = rd.rnea(ours, q, v, a) + rd.friction_torque(ours, v)
    assert_close(full_regressor(ours, q, v, a) @ full_parameter_vector(ours), expected, what=name)
    Y = rd.regressor(ours, q, v, a)
    assert_close(Y @ ours.inertial_parameters(), rd.rnea(ours, q, v, a) - ours.armature * a, what=f"{name} Y pi")
    assert_close(rd.slotine_li_regressor(ours, q, v, v, a), Y, rtol=1e-12, what=f"{name} Slotine-Li(v, a)")
    Yj = joint_parameter_regressor(ours, v, a)
    assert Yj.shape == (ours.nv, 4 * ours.nv)
    # documented column order: dof i -> columns 4i..4i+3 = [armature, viscous, coulomb, offset]
    i = 1
    assert_close(Yj[:, 4 * i:4 * i + 4], np.outer(np.eye(ours.nv)[i], [a[i], v[i], np.sign(v[i]), 1.0]), rtol=0)
    assert_close(joint_parameter_vector(ours)[4 * i:4 * i + 4],
                 [ours.armature[i], ours.viscous[i], ours.coulomb[i], ours.friction_offset[i]], rtol=0)
    names = joint_parameter_names(ours)
    assert names[4 * i + 2] == f"{ours.joint_names[i]}.coulomb" and len(names) == 4 * ours.nv


def test_joint_parameter_names_of_multi_dof_joints():
    ours, _ = tree_pair("free_flyer_tree")
    names = joint_parameter_names(ours)
    assert names[0] == "b0[0].armature" and names[4 * 6] == "b1[0].armature" and len(names) == 4 * ours.nv
