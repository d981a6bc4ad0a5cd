"""Computed torque with the exact model as plant on the vendor arms whose URDFs carry stiff joint friction
(the xArm7: 2-10 N m s/rad and 1 N m Coulomb on joints down to 1.4e-4 kg m²; the Unitree Z1: 1-2 N m s/rad and
1-2 N m), on both engines, one integration step per control step: nothing diverges, the law held for its
period tracks to 1e-4 rad on this package's engine, and without the hold it lags on both engines alike."""

import numpy as np
import pytest

import robodyn_ros as rd
from conftest import erd_path
from robodyn_ros.benchmarks.tracking import tracking_rms

pytest.importorskip("mujoco", reason="the mujoco package is not installed (pip install '.[mujoco]')")

ARMS = {"xarm7": "xarm_description/urdf/xarm7.urdf", "z1": "z1_description/urdf/z1.urdf"}


def arm(name):
    model = rd.Model.from_urdf(erd_path(ARMS[name]))
    lo, hi = model.lower + 0.35, model.upper - 0.35
    return model, np.clip(np.zeros(model.nv), lo, hi)


@pytest.mark.parametrize("name", sorted(ARMS))
def test_stiff_friction_arm_tracks_with_the_held_law(name):
    """The library loop (kp 400, kd 40, default noise, 0.3 rad / 4 s Fourier reference), computed torque held
    for its 1-ms period (:mod:`robodyn_ros.control.base_parameter_control`): RMS over t = 1-5 s <= 1e-4 rad
    on this package's engine (measured 1.0-1.2e-5), <= 2.5e-4 on MuJoCo's 1-ms semi-implicit Euler step
    (measured 1.3-1.5e-4); finite on both. Without the hold (the law at the sampled state) it is 3-4e-4 on
    this package's engine, which the first bound catches."""
    model, home = arm(name)
    bounds = {"robodyn": 1e-4, "mujoco": 2.5e-4}
    for engine, bound in bounds.items():
        value, _, non_finite = tracking_rms(model, home, engine)
        assert non_finite == 0 and value <= bound, f"{name} on {engine}: {value:.2e} rad"


def test_law_at_the_sample_lags_alike_on_both_engines():
    """The law at the sampled state (friction at the reference velocity) on the xArm7, whose wrist's friction
    settles within the hold: both engines give the same error within 1.5 times, below 1e-3 rad, finite, and
    above the held law's on this package's engine (the lag is the sampled law's, not the integrator's)."""
    model, home = arm("xarm7")
    ours, _, bad_ours = tracking_rms(model, home, "robodyn", at_sample=True)
    theirs, _, bad_theirs = tracking_rms(model, home, "mujoco", at_sample=True)
    held = tracking_rms(model, home, "robodyn")[0]
    print(f"\nxArm7, computed torque at the sample: robodyn {ours:.2e} rad, mujoco {theirs:.2e} rad; held: {held:.2e}")
    assert bad_ours == bad_theirs == 0
    assert ours < 1e-3 and theirs < 1e-3
    assert abs(np.log(ours / theirs)) < np.log(1.5), (ours, theirs)
    assert held < ours / 3
