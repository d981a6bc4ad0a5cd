"""The wrist sensor's wrench regressor as the estimator and the simulator call it (compiled, through its C
entry point, its nonzeros scattered into the (6, 10) matrix) against Pinocchio: ``Y_b(q, v, a) π`` is the wrench
a rigid load of parameters ``π`` at the sensor's frame needs for the frame's motion, gravity included
(``I a + v ×* I v`` with Pinocchio's frame velocity and acceleration, gravity added as an acceleration)."""
import numpy as np
import pinocchio as pin
import pytest

from conftest import PinBridge, load_pair
from robodyn_ros.identification.sensor_wrench import SensorWrenchRegressor


@pytest.mark.parametrize("name, link", [("panda", "panda_link8"), ("ur5", "tool0")])
def test_compiled_regressor_equals_pinocchio(name, link):
    ours, pm = load_pair(name)
    bridge, pd = PinBridge(ours, pm), pm.createData()
    regressor = SensorWrenchRegressor(ours, link)
    interpreted = SensorWrenchRegressor(ours, link, compiled=False)     # CasADi's virtual machine, no C
    fid = pm.getFrameId(link)
    rng = np.random.default_rng(5)
    load = pin.Inertia(1.7, np.array([0.02, -0.01, 0.06]), np.diag([0.011, 0.013, 0.007]))
    pi = load.toDynamicParameters()
    for _ in range(5):
        q = ours.random_configuration(rng)
        v, a = rng.normal(size=ours.nv), rng.normal(size=ours.nv)
        pin.forwardKinematics(pm, pd, bridge.q(q), bridge.v(v), bridge.v(a))
        pin.updateFramePlacements(pm, pd)
        vel = pin.getFrameVelocity(pm, pd, fid, pin.LOCAL)
        acc = pin.getFrameAcceleration(pm, pd, fid, pin.LOCAL)
        acc = acc + pin.Motion(pd.oMf[fid].rotation.T @ (-pm.gravity.linear), np.zeros(3))
        expected = (load * acc + vel.cross(load * vel)).vector
        Y = regressor(q, v, a)
        assert Y.shape == (6, 10)
        np.testing.assert_allclose(Y @ pi, expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max())
        # every entry where the virtual machine puts it (Y π alone cannot see two columns swapped where π agrees)
        np.testing.assert_allclose(Y, interpreted(q, v, a), rtol=1e-12, atol=1e-12 * np.abs(Y).max())
