"""The oracle adaptation is measured against (:class:`robodyn_ros.simulation.adaptive_loop.OracleLoop`): the
same loop on the plant's exact model, the payload added to it when it is attached. ``time_to_oracle`` on
synthetic series; on a perturbed UR5 the oracle tracks far better than the nominal model (so it cannot be the
nominal model under another name), keeps tracking through the payload, and its report keys are finite."""
import math

import numpy as np
import pytest

from robodyn_ros.model.errors import ModelError
from robodyn_ros.simulation.adaptive_loop import (AdaptiveLoopConfig, OracleLoop, rms, same_kinematics,
                                                  time_to_oracle, twin_experiment, window_ratios)

ATTACH, DURATION = 2.0, 3.5


def series(t, scale):
    """A ``{"t", "error"}`` run of two joints whose error is ``scale(t)`` (alternating sign, so RMS = scale)."""
    sign = np.where(np.arange(len(t)) % 2, 1.0, -1.0)
    return {"t": t, "error": np.stack([scale(t) * sign, scale(t) * sign], axis=1)}


def test_time_to_oracle_is_the_window_after_the_last_one_above_twice():
    t = np.arange(0.0, 10.0, 1e-3)
    oracle = series(t, lambda t: np.full_like(t, 1e-5))
    # 10 x the oracle until 4 s, within 2 x after, but 3 x again over 6-7 s
    adapted = series(t, lambda t: 1e-5 * np.where(t < 4.0, 10.0, np.where((t >= 6.0) & (t < 7.0), 3.0, 1.5)))
    windows = window_ratios(adapted, oracle)
    assert [w[0] for w in windows] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    assert time_to_oracle(windows) == 7.0
    assert time_to_oracle(windows, factor=5.0) == 4.0
    assert time_to_oracle(window_ratios(oracle, oracle)) == 1.0          # within from the first window


def test_time_to_oracle_is_none_when_the_last_window_is_above():
    t = np.arange(0.0, 6.0, 1e-3)
    oracle = series(t, lambda t: np.full_like(t, 1e-5))
    late = series(t, lambda t: 1e-5 * np.where(t >= 5.0, 2.5, 1.0))      # only the last second above 2 x
    assert time_to_oracle(window_ratios(late, oracle)) is None
    assert time_to_oracle([]) is None
    assert time_to_oracle([(1.0, 1.0, 1.0), (2.0, math.nan, 1.0)]) is None     # not finite: not within


@pytest.fixture(scope="module")
def ur5_twin():
    """The twin experiment, short, on the UR5 simulated as ``perturbed:0``: nominal, adapted and oracle runs."""
    from robodyn_ros.cli.demo_robot import demo_robot
    from robodyn_ros.simulation.plant import load_plant
    setup = demo_robot("ur5")
    plant = load_plant("perturbed:0", setup.model)
    config = AdaptiveLoopConfig(duration=DURATION, attach_time=ATTACH, payload_link=setup.robot.wrist_link,
                                kp=setup.config["kp"], kd=setup.config["kd"])
    report, adapted, nominal = twin_experiment(setup.model, plant, setup.reference, config)
    return setup, plant, report, adapted, nominal


def test_oracle_report_keys_are_finite(ur5_twin):
    _, _, report, _, _ = ur5_twin
    assert report["oracle_payload_applied"] is True
    assert math.isfinite(report["tracking_rms_oracle"]) and report["tracking_rms_oracle"] > 0
    assert math.isfinite(report["worst_oracle_window_ratio"])
    assert report["time_to_oracle"] is None or report["time_to_oracle"] in [w[0] for w in report["oracle_window_ratios"]]
    assert len(report["oracle_window_ratios"]) == len(report["window_ratios"])
    assert all(math.isfinite(x) for w in report["oracle_window_ratios"] for x in w)
    assert report["time_to_oracle"] == time_to_oracle(report["oracle_window_ratios"])


def test_the_report_measures_the_run_against_the_learning_bound(ur5_twin):
    """The twin report's Cramér–Rao keys (robodyn_ros/simulation/learning_limit.py): the bound's time to the oracle
    from the oracle's own RMS, the plant's noise at the loop's rate (the rows per second are checked on a longer
    run in test_learning_limit.py: this one attaches its payload before the estimator's first estimate)."""
    setup, plant, report, adapted, _ = ur5_twin
    bound = report["learning_bound"]
    target = np.sqrt(3.0) * setup.config["kp"] * report["tracking_rms_oracle"]
    assert bound["model_error_for_2x_oracle"] == pytest.approx(target)
    assert bound["time_to_oracle_bound"] == pytest.approx((bound["model_error_1s"] / target) ** 2)
    assert 0 < bound["directions"] <= bound["parameters"] and bound["effort_std"] == list(plant.effort_noise)
    assert bound["rate"] == 1000.0 and report["model_error_seconds"] == []
    assert adapted["t_estimate"][0] > ATTACH


def test_oracle_is_the_plant_not_the_nominal_model(ur5_twin):
    """Before the payload the oracle tracks at least ten times better than the nominal loop (the plant differs
    from the URDF by 10-35 % in torque; an oracle that were the nominal model would give a ratio of 1), and it
    holds that through the payload, which it is given at the instant it is attached."""
    setup, plant, report, adapted, nominal = ur5_twin
    assert same_kinematics(setup.model, plant.model)        # the oracle on the URDF's regressor, the plant's β
    oracle = adapted["oracle"]
    before = rms(oracle["error"], oracle["t"], 1.0, ATTACH)
    after = rms(oracle["error"], oracle["t"], ATTACH, DURATION)
    print(f"\nUR5 perturbed:0: nominal {report['tracking_rms_nominal']:.2e}, oracle {report['tracking_rms_oracle']:.2e} "
          f"rad; oracle before / after the payload {before:.2e} / {after:.2e}")
    assert report["tracking_rms_oracle"] <= report["tracking_rms_nominal"] / 10.0
    assert after <= 3.0 * before
    assert after <= rms(nominal["error"], nominal["t"], ATTACH, DURATION) / 10.0


def test_a_plant_of_another_structure_has_no_oracle():
    """A UR5 whose second joint turns about another axis moves otherwise and has other base parameters: a
    ModelError, before any simulation."""
    import robodyn_ros as rd
    from robodyn_ros.cli.demo_robot import demo_robot
    from robodyn_ros.robots import bundled_urdf_path
    from robodyn_ros.simulation.plant import Plant
    import xml.etree.ElementTree as ET
    setup = demo_robot("ur5")
    root = ET.parse(bundled_urdf_path("ur5")).getroot()
    joint = [j for j in root.findall("joint") if j.get("type") != "fixed"][1]
    joint.find("axis").set("xyz", "1 0 0")
    other = rd.Model.from_urdf(ET.tostring(root, encoding="unicode"))
    assert not same_kinematics(setup.model, other)
    with pytest.raises(ModelError, match="base parameters"):
        OracleLoop(setup.model, Plant(other), setup.reference, AdaptiveLoopConfig(duration=1.0, attach_time=None))
