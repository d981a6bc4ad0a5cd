"""Every numeric function against Pinocchio on real robots from example-robot-data, at random states."""
import numpy as np
import pinocchio as pin
import pytest

import robodyn_ros as rd
from conftest import PinBridge, assert_close, load_pair

N_STATES = 5


def states(model, rng, n=N_STATES):
    for _ in range(n):
        yield model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def full(Mp):
    return np.triu(Mp) + np.triu(Mp, 1).T


def test_rnea(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    for q, v, a in states(m, rng):
        assert_close(rd.rnea(m, q, v, a), b.from_v(pin.rnea(pm, pd, b.q(q), b.v(v), b.v(a))), what=f"{name} rnea")


def test_rnea_with_external_wrenches(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    q, v, a = next(states(m, rng))
    f_ext = rng.normal(size=(m.nbodies, 6)) * 5
    expected = b.from_v(pin.rnea(pm, pd, b.q(q), b.v(v), b.v(a), b.forces(f_ext)))
    assert_close(rd.rnea(m, q, v, a, f_ext), expected, what=f"{name} rnea f_ext")


def test_crba(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    for q, _, _ in states(m, rng):
        M = rd.crba(m, q)
        assert_close(M, b.from_mat(full(pin.crba(pm, pd, b.q(q)))), what=f"{name} crba")
        assert_close(M, M.T, rtol=0, atol=0, what="M symmetric")


def test_aba(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    for q, v, tau in states(m, rng):
        tau = tau * 10
        assert_close(rd.aba(m, q, v, tau), b.from_v(pin.aba(pm, pd, b.q(q), b.v(v), b.v(tau))), what=f"{name} aba")


def test_aba_with_external_wrenches(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    q, v, tau = next(states(m, rng))
    f_ext = rng.normal(size=(m.nbodies, 6))
    expected = b.from_v(pin.aba(pm, pd, b.q(q), b.v(v), b.v(tau), b.forces(f_ext)))
    assert_close(rd.aba(m, q, v, tau, f_ext), expected, what=f"{name} aba f_ext")


def test_nonlinear_effects_gravity_coriolis(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    for q, v, _ in states(m, rng):
        qp, vp = b.q(q), b.v(v)
        assert_close(rd.nonlinear_effects(m, q, v), b.from_v(pin.nonLinearEffects(pm, pd, qp, vp)), what=f"{name} nle")
        assert_close(rd.gravity_torque(m, q), b.from_v(pin.computeGeneralizedGravity(pm, pd, qp)), what=f"{name} g")
        assert_close(rd.coriolis_matrix(m, q, v), b.from_mat(pin.computeCoriolisMatrix(pm, pd, qp, vp)),
                     what=f"{name} C")


def test_regressor(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    for q, v, a in states(m, rng, 2):
        Y = rd.regressor(m, q, v, a)
        Yp = b.from_mat(pin.computeJointTorqueRegressor(pm, pd, b.q(q), b.v(v), b.v(a)), cols=False)
        # Pinocchio's columns follow its joint order: permute body blocks to ours
        cols = np.concatenate([np.arange(10) + 10 * (pm.getJointId(j) - 1) for j in m.joint_names])
        assert_close(Y, Yp[:, cols], what=f"{name} regressor")
        assert_close(Y @ m.inertial_parameters(), rd.rnea(m, q, v, a), what=f"{name} Y pi = tau")


def test_forward_kinematics_and_jacobians(robot_pair, rng):
    name, m, pm, pd, b = robot_pair
    q = m.random_configuration(rng)
    qp = b.q(q)
    pin.forwardKinematics(pm, pd, qp)
    pin.computeJointJacobians(pm, pd, qp)
    pin.updateFramePlacements(pm, pd)
    for i, (R, p) in enumerate(rd.forward_kinematics(m, q)):
        jid = pm.getJointId(m.joint_names[i])
        assert_close(R, pd.oMi[jid].rotation, what=f"{name} R body {i}")
        assert_close(p, pd.oMi[jid].translation, what=f"{name} p body {i}")
    for link in list(m.frames)[-3:]:
        fid = pm.getFrameId(link)
        R, p = rd.frame_placement(m, q, link)
        assert_close(p, pd.oMf[fid].translation, what=f"{name} frame {link}")
        for ref, pref in (("local", pin.LOCAL), ("world", pin.WORLD), ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED)):
            J = rd.frame_jacobian(m, q, link, ref)
            assert_close(J, b.from_mat(pin.getFrameJacobian(pm, pd, fid, pref), rows=False), what=f"{name} J {ref} {link}")


def test_continuous_joint_robot(rng):
    """double_pendulum_continuous: continuous joints are angles for us, (cos, sin) for Pinocchio."""
    m, pm = load_pair("double_pendulum")
    b, pd = PinBridge(m, pm), pm.createData()
    assert all(np.isinf(m.lower)) and m.nq == m.nv == 2 and pm.nq == 4
    for q, v, a in states(m, rng):
        assert_close(rd.rnea(m, q, v, a), b.from_v(pin.rnea(pm, pd, b.q(q), b.v(v), b.v(a))))
        assert_close(rd.aba(m, q, v, a), b.from_v(pin.aba(pm, pd, b.q(q), b.v(v), b.v(a))))


def test_casadi_equals_numpy(rng):
    """The same algorithm code on CasADi SX symbols gives the NumPy numbers (STYLE rule 8)."""
    ca = pytest.importorskip("casadi")
    m, _ = load_pair("panda")
    q, v, a = next(states(m, rng))
    Q, V, A = (ca.SX.sym(s, m.nv) for s in "qva")
    for fn, args, num in (
        (rd.rnea, (Q, V, A), (q, v, a)), (rd.aba, (Q, V, A), (q, v, a)), (rd.crba, (Q,), (q,)),
        (rd.coriolis_matrix, (Q, V), (q, v)), (rd.regressor, (Q, V, A), (q, v, a)),
        (rd.gravity_torque, (Q,), (q,)), (rd.nonlinear_effects, (Q, V), (q, v)),
    ):
        f = ca.Function("f", list(args), [fn(m, *args)])
        out = np.array(f(*num)).squeeze()
        assert_close(out, fn(m, *num), rtol=1e-12, what=fn.__name__)


def test_symbolic_inertial_parameters(rng):
    """``pi`` as a CasADi symbol: rnea is linear in it and equals the regressor."""
    ca = pytest.importorskip("casadi")
    m, _ = load_pair("ur5")
    q, v, a = next(states(m, rng))
    P = ca.SX.sym("pi", 10 * m.nbodies)
    f = ca.Function("f", [P], [rd.rnea(m, ca.DM(q), ca.DM(v), ca.DM(a), pi=P)])
    pi2 = m.inertial_parameters() * rng.uniform(0.5, 1.5, 10 * m.nbodies)
    assert_close(np.array(f(pi2)).squeeze(), rd.regressor(m, q, v, a) @ pi2)
