"""The MPC's prediction with the joint damping of vendor URDFs (:func:`robodyn_ros.control.mpc.stage.
implicit_damping_model`): the xArm7 (2-10 N m s/rad, down to 1.4e-4 kg m²) and the Unitree Z1 (1-2 N m s/rad
on 3e-4 kg m²) have joints whose viscous friction over inertia is thousands per second, which 10-ms RK4
intervals cannot integrate explicitly; predicted with the damping linearly implicit, the MPC tracks them. The
bundled robots' models are unchanged (the same object, so the same compiled functions and solutions)."""

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import erd_path
from robodyn_ros.control.adaptive_mpc import MpcSoundness
from robodyn_ros.control.mpc import parameter_vector
from robodyn_ros.control.mpc.stage import IMPLICIT_DAMPING, implicit_damping_model
from robodyn_ros.dynamics.crba import crba

H = 0.01        # the MPC's default interval (one RK4 step)


def xarm7():
    return rd.Model.from_urdf(erd_path("xarm_description/urdf/xarm7.urdf"))


@pytest.mark.parametrize("name", ["panda", "ur5", "iiwa"])
def test_bundled_robots_keep_the_explicit_prediction(name):
    from robodyn_ros.cli.demo_robot import demo_robot
    model = demo_robot(name).model
    assert implicit_damping_model(model, H) is model


def test_only_the_stiff_joints_get_implicit_damping():
    """On the xArm7, the armature grows by ``h f_v`` exactly on the joints with ``h f_v >= M_ii`` somewhere
    (at least the wrist, ``f_v / M`` about 14 000 1/s); the nominal parameters, inadmissible for the 10-ms
    RK4 prediction of the URDF's model, are admissible for the prediction model (every damping mode
    ``|h λ| < 1``)."""
    model = xarm7()
    implicit = implicit_damping_model(model, H)
    added = implicit.armature - model.armature
    stiff = added > 0
    assert stiff[-1] and not stiff.all()
    np.testing.assert_allclose(added[stiff], H * model.viscous[stiff])
    q0 = model.neutral_configuration()
    assert H * model.viscous[-1] >= IMPLICIT_DAMPING * np.diag(crba(model, q0))[-1]
    theta = parameter_vector(model)
    raw_ok, reason = MpcSoundness(model, H).admissible(theta, [q0])
    ok, _ = MpcSoundness(implicit, H).admissible(theta, [q0])
    assert not raw_ok and "cannot integrate" in reason
    assert ok


def test_mpc_tracks_the_xarm7_with_its_own_model_as_plant(monkeypatch):
    """The library loop's MPC (RTI, 10 ms, its 1 kHz output stage) with the xArm7's URDF as plant, no
    adaptation, 3 s: tracks the 0.3-rad reference to 1e-3 rad RMS over 1-3 s (measured 1.4e-4), every command
    finite. With the URDF's model predicted explicitly (the implicit damping turned off) the same loop leaves
    the reference by more than 0.1 rad (measured 4.0; it diverged to 0.2-4 rad RMS on perturbed plants)."""
    from robodyn_ros.control.reference import fourier_reference
    from robodyn_ros.control.mpc import compile_cache
    from robodyn_ros.simulation.adaptive_loop import AdaptiveLoop, AdaptiveLoopConfig, rms
    from robodyn_ros.simulation.plant import Plant

    model = xarm7()
    home = np.clip(np.zeros(model.nv), model.lower + 0.35, model.upper - 0.35)
    config = AdaptiveLoopConfig(controller="mpc", duration=3.0, attach_time=None, adapt=False)

    def tracking():
        out = AdaptiveLoop(model, Plant(model), fourier_reference(home, 0.3, 4.0, 2), config).run()
        return rms(out["error"], out["t"], 1.0, 3.0), out["non_finite_commands"]
    value, non_finite = tracking()
    print(f"\nxArm7, MPC, own model as plant: {value:.2e} rad RMS")
    assert non_finite == 0 and value <= 1e-3, value
    monkeypatch.setattr(compile_cache, "prediction_model", lambda m, config: m)
    explicit, _ = tracking()
    print(f"predicted explicitly: {explicit:.2e} rad RMS")
    assert not explicit <= 0.1, explicit
