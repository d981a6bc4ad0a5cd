"""Every URDF of example-robot-data that Pinocchio loads loads here too, and the public numeric functions
agree with Pinocchio on it to 1e-8: ``rnea, crba, aba, nonlinear_effects, gravity_torque,
coriolis_matrix, rnea_derivatives, aba_derivatives, regressor``, fixed base on every robot and free-flyer
base on every robot with a moving body.

Robots whose URDFs carry non-physical inertias (ANYmal, Go1, B1, HyQ, Allegro, PR2, ...) load as Pinocchio
loads them, with a note per link; robots with a moving body whose subtree has no inertia (Romeo's fingers)
have a singular mass matrix: ``aba`` refuses them naming the body, and is compared with armature on every
joint (in both libraries) instead.
"""
import functools
import glob
import os
import warnings

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import PinBridge, assert_close, erd_root
from robodyn_ros.model.errors import NonPhysicalInertiaWarning
from robodyn_ros.model.urdf_loader import massless_subtrees

pin = pytest.importorskip("pinocchio")


def _erd_urdfs():
    """Every ``.urdf`` under example-robot-data's robots folder, relative paths (empty if not installed)."""
    try:
        root = erd_root()
    except pytest.skip.Exception:
        return []
    return sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "**", "*.urdf"), recursive=True))


URDFS = _erd_urdfs()

REFUSED_BY_PINOCCHIO = "Pinocchio refuses it: its <robot> has no name"
NO_JOINT = "one rigid body: no degree of freedom on a fixed base (compared with a free-flyer base)"
LEFT_OUT = {("ur_description/urdf/ur3.urdf", False): REFUSED_BY_PINOCCHIO,
            ("ur_description/urdf/ur3.urdf", True): REFUSED_BY_PINOCCHIO,
            ("hector_description/robots/quadrotor_base.urdf", False): NO_JOINT,
            ("iris_description/robots/iris_simple.urdf", False): NO_JOINT}
"""The URDF and base cases with nothing to compare against Pinocchio, and why."""

CASES = [pytest.param(rel, floating_base, id=f"{rel}-{'floating' if floating_base else 'fixed'}")
         for rel in URDFS for floating_base in (False, True) if (rel, floating_base) not in LEFT_OUT]
"""``(rel, floating_base)`` of every URDF on both bases, but those of :data:`LEFT_OUT`."""


@functools.lru_cache(maxsize=None)
def pinocchio_model(rel, floating_base=False):
    """Pinocchio's model of ``rel``, or None when Pinocchio refuses the file."""
    path = os.path.join(erd_root(), rel)
    try:
        return pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromUrdf(path)
    except (RuntimeError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def our_model(rel, floating_base=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NonPhysicalInertiaWarning)
        return rd.Model.from_urdf(os.path.join(erd_root(), rel), floating_base=floating_base)


def test_every_urdf_pinocchio_loads_loads_here():
    """The count: of the URDFs example-robot-data ships, every one Pinocchio loads loads here, with the same
    number of degrees of freedom (Pinocchio counts a continuous joint as nq = 2); a non-physical one warns
    and is named in ``notes``, and ``strict=True`` refuses it."""
    if not URDFS:
        pytest.skip("example-robot-data is not installed (pip install '.[test]')")
    pinocchio_loads, refused = [], []
    for rel in URDFS:
        pm = pinocchio_model(rel)
        if pm is None:
            continue
        pinocchio_loads.append(rel)
        path = os.path.join(erd_root(), rel)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                m = rd.Model.from_urdf(path)
        except rd.ModelError as exc:
            refused.append(f"{rel}: {exc}")
            continue
        assert m.nv == pm.nv, rel
        nonphysical = [w for w in caught if issubclass(w.category, NonPhysicalInertiaWarning)]
        assert len(nonphysical) == len(caught) <= 1, [str(w.message) for w in caught]
        if nonphysical:
            assert any("strict=True refuses" in n for n in m.notes) or massless_subtrees(m), rel
            with pytest.raises(rd.ModelError):
                rd.Model.from_urdf(path, strict=True)
    assert not refused, "\n".join(refused)
    assert len(pinocchio_loads) >= 60, f"only {len(pinocchio_loads)} of {len(URDFS)} load in Pinocchio"


def states(m, rng, n=2):
    for _ in range(n):
        yield m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)


def full(Mp):
    return np.triu(Mp) + np.triu(Mp, 1).T


def _pair(rel, floating_base):
    pm = pinocchio_model(rel, floating_base)
    if pm is None:
        pytest.skip(f"Pinocchio does not load {rel}")
    m = our_model(rel, floating_base)
    if m.nv == 0:
        pytest.skip(f"{rel}: no degree of freedom")
    return m, pm


def _with_armature_if_singular(m, pm, b):
    """``(m, pm)``: with armature 0.1 on every joint of both models when ``m`` has a massless moving
    subtree (singular M), after checking that ``aba`` refuses it naming the body."""
    if not massless_subtrees(m):
        return m, pm
    q, v, tau = next(states(m, np.random.default_rng(1)))
    with pytest.raises(rd.ModelError, match="articulated inertia of body"):
        rd.aba(m, q, v, tau)
    m = m.with_armature(0.1)
    pm = pin.Model(pm)
    pm.armature = b.v(m.armature)
    return m, pm


@pytest.mark.parametrize("rel, floating_base", CASES)
def test_dynamics_agree_with_pinocchio(rel, floating_base):
    """rnea, crba, aba, nonlinear_effects, gravity_torque, coriolis_matrix through the public API."""
    m, pm = _pair(rel, floating_base)
    pd, b = pm.createData(), PinBridge(m, pm)
    rng = np.random.default_rng(20261124)
    for q, v, a in states(m, rng):
        qp, vp = b.q(q), b.v(v)
        assert_close(rd.rnea(m, q, v, a), b.from_v(pin.rnea(pm, pd, qp, vp, b.v(a))), what=f"{rel} rnea")
        assert_close(rd.crba(m, q), b.from_mat(full(pin.crba(pm, pd, qp))), what=f"{rel} crba")
        assert_close(rd.nonlinear_effects(m, q, v), b.from_v(pin.nonLinearEffects(pm, pd, qp, vp)), what=f"{rel} nle")
        assert_close(rd.gravity_torque(m, q), b.from_v(pin.computeGeneralizedGravity(pm, pd, qp)), what=f"{rel} g")
        assert_close(rd.coriolis_matrix(m, q, v), b.from_mat(pin.computeCoriolisMatrix(pm, pd, qp, vp)), what=f"{rel} C")
    m, pm = _with_armature_if_singular(m, pm, b)
    pd = pm.createData()
    for q, v, tau in states(m, rng):
        tau = 10 * tau
        a, expected = rd.aba(m, q, v, tau), b.from_v(pin.aba(pm, pd, b.q(q), b.v(v), b.v(tau)))
        assert_aba_close(a, expected, rd.crba(m, q), what=f"{rel} aba")


def assert_aba_close(a, expected, M, what):
    """``a == expected`` to 1e-8, or to ``cond(M) * 1e-15`` when that is larger: two correct solutions of
    ``M a = b`` differ by about cond(M) times the rounding error, and the iCub's tiny wrist and finger
    links give cond(M) up to 1e13 at random configurations."""
    cond = np.linalg.cond(M)
    assert_close(a, expected, rtol=max(1e-8, cond * 1e-15), what=f"{what} (cond(M) {cond:.1e})")


@pytest.mark.parametrize("rel, floating_base", CASES)
def test_derivatives_and_regressor_agree_with_pinocchio(rel, floating_base):
    """rnea_derivatives, aba_derivatives and regressor through the public API (one state per robot)."""
    m, pm = _pair(rel, floating_base)
    pd, b = pm.createData(), PinBridge(m, pm)
    rng = np.random.default_rng(20261125)
    q, v, a = next(states(m, rng))
    qp, vp, ap = b.q(q), b.v(v), b.v(a)
    dq, dv, da = rd.rnea_derivatives(m, q, v, a)
    pin.computeRNEADerivatives(pm, pd, qp, vp, ap)
    assert_close(dq, b.from_mat(pd.dtau_dq), what=f"{rel} dtau_dq")
    assert_close(dv, b.from_mat(pd.dtau_dv), what=f"{rel} dtau_dv")
    assert_close(da, b.from_mat(full(pd.M)), what=f"{rel} dtau_da")
    Y = rd.regressor(m, q, v, a)
    Yp = b.from_mat(pin.computeJointTorqueRegressor(pm, pd, qp, vp, ap), cols=False)
    joint_names = ["root_joint" if n == "root_joint" else n for n in m.joint_names]
    cols = np.concatenate([np.arange(10) + 10 * (pm.getJointId(j) - 1) for j in joint_names])
    assert_close(Y, Yp[:, cols], what=f"{rel} regressor")
    m, pm = _with_armature_if_singular(m, pm, b)
    pd = pm.createData()
    tau = 10 * rng.normal(size=m.nv)
    da_dq, da_dv, da_dtau = rd.aba_derivatives(m, q, v, tau)
    pin.computeABADerivatives(pm, pd, qp, vp, b.v(tau))
    M = rd.crba(m, q)
    for mine, theirs, name in ((da_dq, pd.ddq_dq, "da_dq"), (da_dv, pd.ddq_dv, "da_dv"),
                               (da_dtau, full(pd.Minv), "da_dtau")):
        assert_aba_close(mine, b.from_mat(theirs), M, what=f"{rel} {name}")
