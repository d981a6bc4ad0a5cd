"""τ̇, τ̈ (Müller and Kumar) and Ṁ, Ċ, ġ, J̇, J̈ (Garofalo Prop. 6): against high-order finite differences
of our own rnea along smooth trajectories on real arms, and against the paper's closed-form 2R model."""
import casadi as ca
import numpy as np
import pytest

import robodyn_ros as rd
from conftest import assert_close, erd_path
from robot_data import iiwa_as_published
from robodyn_ros.dynamics.matrix_time_derivatives import (body_jacobian_derivatives, coriolis_matrix_time_derivative,
                                                 gravity_torque_time_derivative, mass_matrix_time_derivative)
from robodyn_ros.dynamics.time_derivatives import rnea_time_derivatives

ARMS = {"panda": "panda_description/urdf/panda.urdf", "ur5": "ur_description/urdf/ur5_robot.urdf",
        "z1": "z1_description/urdf/z1.urdf"}


def smooth_trajectory(model, rng):
    """q(t) = q0 + A sin(w t + phi): returns t -> (q, v, a, jerk, snap)."""
    q0, A, phi = model.random_configuration(rng), rng.uniform(0.2, 0.6, model.nv), rng.uniform(0, 6, model.nv)
    w = rng.uniform(0.5, 2.0, model.nv)

    def at(t):
        s, c = np.sin(w * t + phi), np.cos(w * t + phi)
        return q0 + A * s, A * w * c, -A * w**2 * s, -A * w**3 * c, A * w**4 * s
    return at


def fd1(f, t, h=1e-3):
    """Sixth-order central first derivative."""
    return (-f(t - 3 * h) + 9 * f(t - 2 * h) - 45 * f(t - h) + 45 * f(t + h) - 9 * f(t + 2 * h) + f(t + 3 * h)) / (60 * h)


def fd2(f, t, h=1e-3):
    """Sixth-order central second derivative."""
    return (2 * f(t - 3 * h) - 27 * f(t - 2 * h) + 270 * f(t - h) - 490 * f(t) + 270 * f(t + h) - 27 * f(t + 2 * h)
            + 2 * f(t + 3 * h)) / (180 * h * h)


@pytest.fixture(params=list(ARMS))
def arm(request):
    return rd.Model.from_urdf(erd_path(ARMS[request.param])).with_armature(0.05)


def test_tau_dot_and_ddot_match_finite_differences(arm, rng):
    traj = smooth_trajectory(arm, rng)
    tau = lambda t: rd.rnea(arm, *traj(t)[:3])
    for t in (0.0, 0.7, 1.9):
        q, v, a, j, s = traj(t)
        td, tdd = rnea_time_derivatives(arm, q, v, a, j, s)
        assert_close(td, fd1(tau, t), rtol=1e-6, what="tau_dot")
        assert_close(tdd, fd2(tau, t), rtol=1e-6, what="tau_ddot")
        assert_close(rnea_time_derivatives(arm, q, v, a, j), td, rtol=1e-14, what="first order alone")


def test_tau_dot_with_wrench_rates(arm, rng):
    traj = smooth_trajectory(arm, rng)
    F0, F1, F2 = rng.normal(size=(3, arm.nbodies, 6))
    t0 = 0.4
    tau = lambda t: rd.rnea(arm, *traj(t)[:3], f_ext=F0 + F1 * (t - t0) + 0.5 * F2 * (t - t0) ** 2)
    td, tdd = rnea_time_derivatives(arm, *traj(t0), f_ext=F0, f_ext_dot=F1, f_ext_ddot=F2)
    assert_close(td, fd1(tau, t0), rtol=1e-6)
    assert_close(tdd, fd2(tau, t0), rtol=1e-6)


def test_matrix_time_derivatives(arm, rng):
    traj = smooth_trajectory(arm, rng)
    t0 = 1.1
    q, v, a = traj(t0)[:3]
    Md = mass_matrix_time_derivative(arm, q, v)
    assert_close(Md, fd1(lambda t: rd.crba(arm, traj(t)[0]), t0), rtol=1e-6, what="Ṁ")
    C = rd.coriolis_matrix(arm, q, v)
    assert_close(Md, C + C.T, rtol=1e-12, what="Ṁ = C + Cᵀ")
    assert_close(coriolis_matrix_time_derivative(arm, q, v, a),
                 fd1(lambda t: rd.coriolis_matrix(arm, *traj(t)[:2]), t0), rtol=1e-6, what="Ċ")
    assert_close(gravity_torque_time_derivative(arm, q, v), fd1(lambda t: rd.gravity_torque(arm, traj(t)[0]), t0),
                 rtol=1e-6, what="ġ")
    _, Jd, Jdd = body_jacobian_derivatives(arm, q, v, a)
    assert_close(np.array(Jd), fd1(lambda t: np.array(rd.body_jacobians(arm, traj(t)[0])), t0), rtol=1e-6, what="J̇")
    assert_close(np.array(Jdd), fd2(lambda t: np.array(rd.body_jacobians(arm, traj(t)[0])), t0), rtol=1e-6, what="J̈")


def planar_2r_urdf(L1, L2, m1, m2):
    """Müller and Kumar Sect. 6.1: point masses at the link ends, z joint axes, links along x."""
    link = '<link name="{n}"><inertial><origin xyz="{L} 0 0"/><mass value="{m}"/>' \
           '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
    joint = '<joint name="{n}" type="continuous"><parent link="{p}"/><child link="{c}"/><origin xyz="{x} 0 0"/>' \
            '<axis xyz="0 0 1"/></joint>'
    return ('<robot name="planar_2r"><link name="base"/>' + link.format(n="l1", L=L1, m=m1) + link.format(n="l2", L=L2, m=m2)
            + joint.format(n="q1", p="base", c="l1", x=0) + joint.format(n="q2", p="l1", c="l2", x=L1) + "</robot>")


def test_planar_2r_closed_form(rng):
    """τ of the paper's closed form (Sect. 6.1), differentiated symbolically in time, equals our τ̇, τ̈."""
    L1, L2, m1, m2, g = 0.7, 0.5, 2.0, 1.3, 9.81
    model = rd.Model.from_urdf(planar_2r_urdf(L1, L2, m1, m2), gravity=(0.0, -g, 0.0))
    x = [ca.SX.sym(f"x{k}", 2) for k in range(5)]           # q, q̇, q̈, q⃛, q⃜
    q, qd, qdd = x[0], x[1], x[2]
    c1, c2, s2, c12 = ca.cos(q[0]), ca.cos(q[1]), ca.sin(q[1]), ca.cos(q[0] + q[1])
    M11 = m1 * L1**2 + m2 * (L1**2 + L2**2 + 2 * L1 * L2 * c2)
    M12 = m2 * (L2**2 + L1 * L2 * c2)
    h = -m2 * L1 * L2 * s2
    tau = ca.vertcat(M11 * qdd[0] + M12 * qdd[1] + h * (2 * qd[0] * qd[1] + qd[1] ** 2) + (m1 + m2) * L1 * g * c1 + m2 * L2 * g * c12,
                     M12 * qdd[0] + m2 * L2**2 * qdd[1] - h * qd[0] ** 2 + m2 * L2 * g * c12)

    def ddt(expr):
        return sum(ca.jacobian(expr, x[k]) @ x[k + 1] for k in range(4))
    closed = ca.Function("closed", x, [tau, ddt(tau), ddt(ddt(tau))])
    for _ in range(5):
        xs = [rng.normal(size=2) for _ in range(5)]
        t0, t1, t2 = (np.array(r).squeeze() for r in closed(*xs))
        assert_close(rd.rnea(model, *xs[:3]), t0, rtol=1e-12, what="2R tau")
        td, tdd = rnea_time_derivatives(model, *xs)
        assert_close(td, t1, rtol=1e-12, what="2R tau_dot")
        assert_close(tdd, t2, rtol=1e-12, what="2R tau_ddot")


def test_casadi_equals_numpy(rng):
    model = rd.Model.from_urdf(erd_path(ARMS["ur5"]))
    xs = [model.random_configuration(rng)] + [rng.normal(size=model.nv) for _ in range(4)]
    X = [ca.SX.sym(f"x{k}", model.nv) for k in range(5)]
    f = ca.Function("f", X, list(rnea_time_derivatives(model, *X)))
    td, tdd = (np.array(r).squeeze() for r in f(*xs))
    n_td, n_tdd = rnea_time_derivatives(model, *xs)
    assert_close(td, n_td, rtol=1e-12)
    assert_close(tdd, n_tdd, rtol=1e-12)


def test_iiwa_14_of_table_1_as_published(rng):
    """Müller and Kumar's iiwa 14 (Table 1 as printed) loads with a note on links 4 and 7 (``strict=True``
    refuses it), agrees with Pinocchio, and its τ̇, τ̈ match sixth-order finite differences of rnea
    along a smooth trajectory, on the interpreted and the public (dispatching) path."""
    import pinocchio as pin
    from robodyn_ros.model.errors import NonPhysicalInertiaWarning
    xml = iiwa_as_published()
    with pytest.warns(NonPhysicalInertiaWarning, match="'iiwa_link_4', 'iiwa_link_7'"):
        m = rd.Model.from_urdf(xml)
    assert [n for n in m.notes if "triangle inequality" in n and "strict=True" in n] and \
        all(any(f"'iiwa_link_{k}'" in n for n in m.notes) for k in (4, 7))
    with pytest.raises(rd.ModelError, match="'iiwa_link_4' has an inertia violating the triangle inequality"):
        rd.Model.from_urdf(xml, strict=True)
    pm = pin.buildModelFromXML(xml)
    pd = pm.createData()
    traj = smooth_trajectory(m, rng)
    tau = lambda t: rd.rnea(m, *traj(t)[:3])
    for t in (0.0, 0.8, 2.3):
        q, v, a, j, s = traj(t)
        assert_close(rd.rnea(m, q, v, a), pin.rnea(pm, pd, q, v, a), what="rnea vs Pinocchio")
        td, tdd = rd.rnea_time_derivatives(m, q, v, a, j, s)
        assert_close(td, fd1(tau, t), rtol=1e-6, what="tau_dot")
        assert_close(tdd, fd2(tau, t), rtol=1e-6, what="tau_ddot")
        assert_close(rd.rnea_time_derivatives(m, q, v, a, j), td, rtol=1e-14, what="first order alone")
        assert np.abs(td).max() > 1.0    # a trajectory that moves the arm, not a test at rest
