"""Algorithms against each other and against mechanics (STYLE rule 8): no Pinocchio needed."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import robodyn_ros as rd
from conftest import assert_close, load_pair
from robodyn_ros.dynamics.dynamic_matrices import coriolis_matrix_garofalo


@pytest.fixture(params=["panda", "ur5", "talos"])
def model(request):
    return load_pair(request.param)[0].with_armature(0.05)


def test_aba_inverts_rnea(model, rng):
    for _ in range(3):
        q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        f_ext = rng.normal(size=(model.nbodies, 6))
        tau = rd.rnea(model, q, v, a, f_ext)
        assert_close(rd.aba(model, q, v, tau, f_ext), a, rtol=1e-9)


def test_rnea_is_m_a_plus_nle(model, rng):
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    assert_close(rd.rnea(model, q, v, a), rd.crba(model, q) @ a + rd.nonlinear_effects(model, q, v))
    assert_close(rd.coriolis_matrix(model, q, v) @ v + rd.gravity_torque(model, q), rd.nonlinear_effects(model, q, v))


def test_mdot_minus_2c_is_skew(model, rng):
    """Garofalo Remark 5: Ṁ = C + Cᵀ; Ṁ by a 4th-order central difference along v."""
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)
    h = 1e-3
    Md = (-rd.crba(model, q + 2 * h * v) + 8 * rd.crba(model, q + h * v) - 8 * rd.crba(model, q - h * v)
          + rd.crba(model, q - 2 * h * v)) / (12 * h)
    C = rd.coriolis_matrix(model, q, v)
    S = Md - 2 * C
    assert_close(S, -S.T, rtol=1e-7, what="Ṁ - 2C skew")
    Cg = coriolis_matrix_garofalo(model, q, v)
    assert_close(Md - 2 * Cg, -(Md - 2 * Cg).T, rtol=1e-7, what="Garofalo Ψ form skew")
    assert_close(Cg @ v, C @ v, what="both factorisations give the same C v")


def test_slotine_li_regressor(model, rng):
    q, v, vr, ar = model.random_configuration(rng), *rng.normal(size=(3, model.nv))
    pi = model.inertial_parameters()
    Y = rd.slotine_li_regressor(model, q, v, vr, ar)
    M0 = rd.crba(model.with_armature(0.0), q)
    assert_close(Y @ pi, M0 @ ar + rd.coriolis_matrix(model, q, v) @ vr + rd.gravity_torque(model, q))
    assert_close(rd.slotine_li_regressor(model, q, v, v, ar), rd.regressor(model, q, v, ar))


def test_energy_conservation_unforced_frictionless(rng):
    """An unforced, frictionless arm under gravity conserves kinetic + potential energy."""
    model = load_pair("ur5")[0]
    com_mass = [(p[0], p[1:4]) for p in model.inertias]

    def energy(q, v):
        kinetic = 0.5 * v @ rd.crba(model, q) @ v
        potential = 0.0
        for (R, p), (m, h) in zip(rd.forward_kinematics(model, q), com_mass):
            potential -= model.gravity @ (m * p + R @ h)
        return kinetic + potential

    def f(_, x):
        q, v = x[:model.nv], x[model.nv:]
        return np.concatenate([v, rd.aba(model, q, v, np.zeros(model.nv))])

    x0 = np.concatenate([model.random_configuration(rng), rng.normal(size=model.nv)])
    sol = solve_ivp(f, (0.0, 1.0), x0, method="DOP853", rtol=1e-11, atol=1e-11)
    e = [energy(x[:model.nv], x[model.nv:]) for x in sol.y.T]
    assert abs(e[-1] - e[0]) < 1e-7 * max(1.0, abs(e[0])), f"energy drift {e[-1] - e[0]:.2e}"
    assert np.ptp(e) < 1e-7 * max(1.0, abs(e[0]))


def test_one_rk4_step_energy(rng):
    """One fixed RK4 step of 1 ms conserves energy to O(h^5)."""
    model = load_pair("panda")[0]
    q, v = model.random_configuration(rng), rng.normal(size=model.nv)

    def energy(q, v):
        pot = sum(-model.gravity @ (pi[0] * p + R @ pi[1:4]) for (R, p), pi in zip(rd.forward_kinematics(model, q), model.inertias))
        return 0.5 * v @ rd.crba(model, q) @ v + pot

    h, tau0 = 1e-3, np.zeros(model.nv)
    f = lambda q, v: (v, rd.aba(model, q, v, tau0))
    k1 = f(q, v)
    k2 = f(q + h / 2 * k1[0], v + h / 2 * k1[1])
    k3 = f(q + h / 2 * k2[0], v + h / 2 * k2[1])
    k4 = f(q + h * k3[0], v + h * k3[1])
    q1 = q + h / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
    v1 = v + h / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    assert abs(energy(q1, v1) - energy(q, v)) < 1e-9


def test_friction_torque():
    model = load_pair("ur5")[0].with_friction(viscous=0.5, coulomb=[1, 2, 3, 4, 5, 6], offset=0.1)
    v = np.array([1.0, -1.0, 0.0, 2.0, -0.5, 0.25])
    assert_close(rd.friction_torque(model, v), 0.5 * v + np.arange(1, 7) * np.sign(v) + 0.1)


def test_friction_from_urdf_dynamics():
    """URDF <dynamics damping friction> becomes viscous and Coulomb friction, not rigid-body terms."""
    xml = """<robot name="r"><link name="base"/><link name="l1"><inertial><mass value="1"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
      <limit lower="-1" upper="1" effort="10" velocity="2"/><dynamics damping="0.3" friction="0.7"/></joint></robot>"""
    m = rd.Model.from_urdf(xml)
    assert_close(rd.friction_torque(m, np.array([2.0])), [0.3 * 2 + 0.7])
    assert_close(rd.rnea(m, np.zeros(1), np.array([2.0]), np.zeros(1)), [0.0], atol=1e-15)
