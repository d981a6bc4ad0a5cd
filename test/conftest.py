"""Shared test fixtures: one `assert_close`, the example-robot-data locator, the real Panda log, the robot
fixture and the Pinocchio comparison helpers."""
import os

# OpenBLAS worker threads spin on this small shared machine and make small factorizations 100x slower
# (robodyn_ros/identification/blas_threads.py): one thread for the tests, before NumPy loads it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import site  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import robodyn_ros as rd  # noqa: E402
from robodyn_ros.identification.blas_threads import limit_blas_threads  # noqa: E402

limit_blas_threads(1)   # in case a plugin loaded NumPy before this file

sys.path.insert(0, os.path.dirname(__file__))

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The checkout's root folder (the tests are in its ``test/<layer>/`` folders)."""

PANDA_DATA = os.environ.get("ROBODYN_PANDA_DATA", os.path.join(CHECKOUT, "..",
                                                               "shared", "data", "panda-gaz2019"))
"""The real Panda log of Gaz et al. (2019): beside the checkout (``../shared/data/panda-gaz2019``), or where
``$ROBODYN_PANDA_DATA`` says."""


@pytest.fixture(scope="session")
def panda_data():
    """Folder of the real Panda log (:data:`PANDA_DATA`); skips the test when the log is absent."""
    if not os.path.isfile(os.path.join(PANDA_DATA, "exciting_traj_time.txt")):
        pytest.skip(f"the Panda log of Gaz et al. (2019) is not in {PANDA_DATA} (set $ROBODYN_PANDA_DATA)")
    return PANDA_DATA


@pytest.fixture(scope="session")
def panda_log(panda_data):
    """``(t (N,), q, v, tau (N, 7))`` of the real Panda log, read once for the session: not to be modified."""
    def load(name):
        return np.loadtxt(os.path.join(panda_data, f"exciting_traj_{name}.txt"))
    t = load("time")
    q, v, tau = (load(n).reshape(len(t), 7) for n in ("positions", "velocity", "torques"))
    return t, q, v, tau


def erd_root():
    """Folder of example-robot-data's robots (installed by the `test` extra through cmeel)."""
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    pytest.skip("example-robot-data is not installed (pip install '.[test]')")


def erd_path(relative):
    return os.path.join(erd_root(), relative)


def assert_close(actual, expected, rtol=1e-8, atol=None, what=""):
    """Relative comparison on the scale of ``expected``: ``|a - e| <= rtol * max(1, |e|_inf)`` (or atol)."""
    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    tol = rtol * scale if atol is None else atol
    err = float(np.abs(actual - expected).max(initial=0.0))
    assert err <= tol, f"{what}: max error {err:.3e} > tolerance {tol:.3e} (scale {scale:.3e})"


# The real robots the numerics are checked on: a name, its URDF and why it is in the list.
ROBOTS = {
    "panda": ("panda_description/urdf/panda.urdf", "prismatic fingers, unaligned axes"),
    "ur5": ("ur_description/urdf/ur5_robot.urdf", "classic 6-DoF arm"),
    "tiago": ("tiago_description/robots/tiago.urdf", "continuous wheel joints, branched tree"),
    "talos": ("talos_data/robots/talos_reduced.urdf", "branched humanoid"),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum_continuous.urdf", "continuous joints"),
}


def load_pair(name, floating_base=False):
    """``(our Model, Pinocchio model)`` of a robot from example-robot-data."""
    import pinocchio as pin
    path = erd_path(ROBOTS[name][0])
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    ours = rd.Model.from_urdf(path, floating_base=floating_base)
    theirs = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromUrdf(path)
    return ours, theirs


class PinBridge:
    """Maps states between our model and Pinocchio's (joint order by name; a continuous joint is an
    angle for us and (cos, sin) for Pinocchio)."""

    def __init__(self, ours, pm):
        self.ours, self.pm = ours, pm
        self.qmap, self.vmap = [], []
        for i, name in enumerate(ours.joint_names):
            jid = pm.getJointId(name) if name != "root_joint" else 1
            j = pm.joints[jid]
            self.qmap.append((ours.idx_q[i], ours.joints[i].nq, j.idx_q, j.nq))
            self.vmap.append((ours.idx_v[i], ours.joints[i].nv, j.idx_v))
        # pv[k] = Pinocchio's tangent index of our tangent index k
        self.pv = np.array([jv + k for (_, nv, jv) in self.vmap for k in range(nv)])
        assert sorted(self.pv) == list(range(pm.nv))

    def q(self, q):
        out = np.zeros(self.pm.nq)
        for iq, nq, jq, jnq in self.qmap:
            if nq == 1 and jnq == 2:
                out[jq:jq + 2] = [np.cos(q[iq]), np.sin(q[iq])]
            else:
                out[jq:jq + jnq] = q[iq:iq + nq]
        return out

    def v(self, v):
        out = np.zeros(self.pm.nv)
        out[self.pv] = v
        return out

    def forces(self, f_ext):
        """Our ``f_ext`` (nbodies, 6) as Pinocchio's per-joint force vector (zero on the universe)."""
        import pinocchio as pin
        fp = [pin.Force.Zero() for _ in range(self.pm.njoints)]
        for i, name in enumerate(self.ours.joint_names):
            fp[self.pm.getJointId(name)] = pin.Force(f_ext[i, :3], f_ext[i, 3:])
        return pin.StdVec_Force(fp)

    def from_v(self, vp):
        """A Pinocchio tangent-ordered vector in our order."""
        return np.asarray(vp)[self.pv]

    def from_mat(self, Mp, rows=True, cols=True):
        Mp = np.asarray(Mp)
        if rows:
            Mp = Mp[self.pv, :]
        if cols:
            Mp = Mp[:, self.pv]
        return Mp


@pytest.fixture(params=["panda", "ur5", "tiago", "talos"])
def robot_pair(request):
    """Our model, Pinocchio's model and data, and the state bridge, for each real test robot."""
    ours, pm = load_pair(request.param)
    return request.param, ours, pm, pm.createData(), PinBridge(ours, pm)


@pytest.fixture
def rng():
    return np.random.default_rng(20261123)


@pytest.fixture
def estimator_factory():
    """``make(**overrides)`` -> an active estimator node in-process (test/estimator_feeds.py); needs rclpy."""
    from estimator_feeds import estimator_nodes
    yield from estimator_nodes()
