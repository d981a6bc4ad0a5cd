"""A newly applied parameter set enters the control law over a ramp (robodyn_ros.control.parameter_blend): the
blend is the convex combination of the two sets, continuous when a switch arrives mid-ramp, and on a plant where
switching at once made the adapted loop worse than the nominal one, the ramp keeps it within the never-worse
rule."""
import os

import numpy as np
import pytest

from conftest import erd_path
from robodyn_ros.cli.main import main
from robodyn_ros.control.parameter_blend import ParameterBlend


def test_the_blend_is_a_continuous_convex_combination_that_ends_at_the_target():
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, -2.0]), np.array([0.0, 0.0])
    blend = ParameterBlend(a, duration=0.5)
    assert blend.due(0.0) is None and np.array_equal(blend.value(0.0), a)
    blend.switch(b, 1.0)
    assert np.allclose(blend.due(1.0), a)
    assert np.allclose(blend.due(1.2), a + 0.4 * (b - a))
    mid = blend.value(1.25)
    blend.switch(c, 1.25)                      # mid-ramp: starts where the blend is, no jump
    assert np.allclose(blend.due(1.25), mid)
    assert np.allclose(blend.due(1.5), mid + 0.5 * (c - mid))
    assert np.allclose(blend.due(1.75), c)     # the end of the ramp is delivered once
    assert blend.due(1.8) is None and np.array_equal(blend.value(9.0), c)
    blend.switch(b, 2.0)
    blend.shift(-2.0)                          # a time reset: the ramp continues where it was
    assert np.allclose(blend.due(0.1), c + 0.2 * (b - c))
    blend.switch(a, 0.2)                       # back to the nominal parameters: at once
    assert np.array_equal(blend.due(0.2), a) and blend.due(0.3) is None
    at_once = ParameterBlend(a, duration=0.0)
    at_once.switch(b, 3.0)
    assert np.array_equal(at_once.due(3.0), b) and at_once.due(3.001) is None
    with pytest.raises(ValueError, match="blend duration"):
        ParameterBlend(a, duration=-1.0)


def test_a_ramp_keeps_a_light_wristed_ur10_never_worse_where_a_switch_made_it_worse(tmp_path):
    """example-robot-data's UR10 (not a bundled robot, its file written by ``robodyn config``) on the seeded
    perturbed plant 7 under computed torque (library loop): applied at once, an accepted estimate left a 1-s
    window 1.51 times worse than the nominal loop (its wrists' gains are kp·M of a URDF without armature); over
    the default ramp every window from 1 s is within 1.2 and the adaptation still tracks better overall."""
    from robodyn_ros.cli.demo_robot import demo_robot
    from robodyn_ros.simulation.adaptive_loop import AdaptiveLoopConfig, twin_experiment
    from robodyn_ros.simulation.plant import load_plant

    urdf = erd_path("ur_description/urdf/ur10_robot.urdf")
    if not os.path.isfile(urdf):
        pytest.skip(f"{urdf} missing from example-robot-data")
    robot_file = tmp_path / "ur10.yaml"
    assert main(["config", urdf, "--home", "0,-1.571,1.571,-1.571,-1.571,0", "--output", str(robot_file)]) == 0
    setup = demo_robot(str(robot_file), str(tmp_path))
    plant = load_plant("perturbed:7", setup.model)
    reports = {}
    for blend_time in (0.0, AdaptiveLoopConfig.blend_time):
        config = AdaptiveLoopConfig(controller="computed_torque", duration=15.0, attach_time=7.5,
                                    payload_link=setup.robot.wrist_link, kp=setup.config["kp"], kd=setup.config["kd"],
                                    blend_time=blend_time)
        reports[blend_time], _, _ = twin_experiment(setup.model, plant, setup.reference, config, oracle=False)
    switched, blended = reports[0.0], reports[AdaptiveLoopConfig.blend_time]
    print(f"\nworst window switched {switched['worst_window_ratio']:.3f}, blended {blended['worst_window_ratio']:.3f}; "
          f"ratio {switched['tracking_ratio']:.2f}, {blended['tracking_ratio']:.2f}")
    assert switched["worst_window_ratio"] > 1.2          # the defect the ramp removes
    assert blended["worst_window_ratio"] <= 1.2, blended["window_ratios"]
    assert blended["tracking_ratio"] > 1.0 and blended["non_finite_commands"] == 0
