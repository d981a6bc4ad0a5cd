"""`robodyn identify` (and `replay`) on bags whose efforts are what a robot's driver reports (docs/DRIVERS.md): told the driver
(``--driver``, or the estimator section of ``--config`` or of a file of robodyn config), it fits the same robot
as from joint torques; not told, it refuses (or, for filtered torques it cannot tell apart, fits a worse model).

The robot is a perturbed UR10 of example-robot-data (its masses, inertias, friction and rotor inertia drawn
away from the URDF's, :func:`~robodyn_ros.simulation.perturbed_plant.perturbed_plant`), moved along a Fourier
motion of harmonics up to 1.25 Hz around its home for 30 s at 200 Hz; its joint torques come from its own
inverse dynamics and friction with 0.05 N m of noise, then reported as each driver reports them: minus the
URDF's gravity (UR), divided by torque constants (currents), through a 10-Hz first-order filter (KUKA LBR).
"""
import os

import numpy as np
import pytest
import yaml

import robodyn_ros as rd
from conftest import erd_path
from estimator_feeds import lowpass
from robot_data import plant_gravity, plant_rnea
from robodyn_ros.bags import write_joint_states_bag
from robodyn_ros.cli.identify import main as identify
from robodyn_ros.identification.exciting_trajectory import FourierTrajectory
from robodyn_ros.simulation.plant import load_plant

UR10 = "ur_description/urdf/ur10_robot.urdf"
HOME = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])
TORQUE_CONSTANTS = [10.0, 12.0, 9.0, 11.0, 8.0, 8.0]   # N m/A at the joint
CUTOFF = 10.0                                          # Hz: lbr_fri_ros2_stack's filter of the measured torque



@pytest.fixture(scope="module")
def recording():
    """``(urdf, t, Q, V, TAU, G)``: the perturbed UR10's motion, its joint torques with noise and the URDF's
    gravity torques (what a UR removes from the efforts it reports)."""
    urdf = erd_path(UR10)
    if not os.path.isfile(urdf):
        pytest.skip(f"{urdf} missing from example-robot-data")
    model = rd.Model.from_urdf(urdf)
    plant = load_plant("perturbed:1", model).model
    rng = np.random.default_rng(4)
    a, b = (rng.uniform(-1.0, 1.0, (6, 5)) * 0.3 for _ in range(2))    # velocity amplitudes, rad/s
    t = np.arange(0.0, 30.0, 0.005)
    Q, V, A = FourierTrajectory(q0=HOME, a=a, b=b, period=4.0).evaluate(t)
    assert np.abs(Q - HOME).max() < 1.5 and np.all(np.abs(V) < model.velocity_limit)
    TAU = plant_rnea(plant, Q, V, A) + np.array([rd.friction_torque(plant, v) for v in V])
    TAU += rng.normal(0.0, 0.05, TAU.shape)
    G = plant_gravity(model, Q)
    return urdf, model, t, Q, V, TAU, G


def run_identify(folder, capsys, recording, efforts, *argv, urdf=None):
    """identify with ``--holdout 0.3`` on a bag of ``efforts``; returns ``(exit code, stdout, stderr, document or
    None)``."""
    path, model, t, Q, V = recording[:5]
    bag = write_joint_states_bag(folder / f"bag{len(list(folder.glob('bag*')))}", t, model.joint_names, Q, V,
                                 efforts, storage="mcap")
    out = folder / "params.yaml"
    code = identify([str(bag), "--urdf", urdf or path, "--output", str(out), "--holdout", "0.3", "--quiet", *argv])
    captured = capsys.readouterr()
    doc = yaml.safe_load(out.read_text()) if out.exists() else None
    return code, captured.out, captured.err, doc


def held_out(doc):
    """The identified model's relative torque error on the held-out 30 %."""
    return doc["validation"]["filtered"]["identified"]["overall"]


@pytest.fixture(scope="module")
def generic(tmp_path_factory, recording):
    """held-out error of the identification from the joint torques as they are."""
    path, model, t, Q, V, TAU, G = recording
    bag = write_joint_states_bag(tmp_path_factory.mktemp("generic") / "bag", t, model.joint_names, Q, V, TAU,
                                 storage="mcap")
    out = bag.parent / "params.yaml"
    assert identify([str(bag), "--urdf", path, "--output", str(out), "--holdout", "0.3", "--quiet"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["efforts"] == {"read_as": "joint torques with gravity", "driver": "generic"}
    return held_out(doc)


def test_gravity_compensated_efforts_of_a_ur_identify_the_same_robot(tmp_path, capsys, recording, generic):
    """``--driver ur``: the URDF's gravity added back, the same fit as from the joint torques (to rounding)."""
    TAU, G = recording[5:]
    code, out, err, doc = run_identify(tmp_path, capsys, recording, TAU - G, "--driver", "ur")
    assert code == 0, err
    assert out.splitlines()[0].startswith("efforts read as gravity-compensated torques")
    assert doc["efforts"]["driver"] == "ur"
    assert held_out(doc) == pytest.approx(generic, rel=1e-6)
    # a second bag as validation is read the same way
    bag = sorted(tmp_path.glob("bag*"))[-1]
    out = tmp_path / "validated.yaml"
    code = identify([str(bag), "--urdf", recording[0], "--output", str(out), "--validate", str(bag), "--quiet",
                     "--driver", "ur"])
    assert code == 0, capsys.readouterr().err
    assert yaml.safe_load(out.read_text())["validation"]["filtered"]["identified"]["overall"] < 2.0 * generic
    # replay takes the same option (without it, test_identify_reports.py shows the bag refused)
    from robodyn_ros.cli.replay import main as replay
    bag = sorted(tmp_path.glob("bag*"))[-1]
    out = tmp_path / "replayed.yaml"
    code = replay([str(bag), "--urdf", recording[0], "--output", str(out), "--quiet", "--driver", "ur"])
    assert code == 0, capsys.readouterr().err
    assert out.is_file()


def test_currents_identify_the_same_robot_with_the_torque_constants_of_a_config_file(tmp_path, capsys, recording,
                                                                                      generic):
    """The estimator section of ``--config`` (``effort.kind: current`` and the torque constants) says what the
    efforts are; without the constants the command names the parameter and writes nothing."""
    TAU = recording[5]
    config = tmp_path / "estimator.yaml"
    config.write_text(yaml.safe_dump({"estimator": {"ros__parameters": {
        "effort.kind": "current", "effort.torque_constants": TORQUE_CONSTANTS}}}))
    code, out, err, doc = run_identify(tmp_path, capsys, recording, TAU / TORQUE_CONSTANTS, "--config", str(config))
    assert code == 0, err
    assert held_out(doc) == pytest.approx(generic, rel=1e-6)
    config.write_text(yaml.safe_dump({"estimator": {"ros__parameters": {"effort.kind": "current"}}}))
    (tmp_path / "params.yaml").unlink()
    code, out, err, doc = run_identify(tmp_path, capsys, recording, TAU / TORQUE_CONSTANTS, "--config", str(config))
    assert code == 2 and doc is None and len(err.strip().splitlines()) == 1, err
    assert "effort.torque_constants" in err and str(config) in err


def test_the_driver_in_a_robot_file_is_honoured(tmp_path, capsys, recording, generic):
    """``--urdf FILE.yaml`` of robodyn config with ``driver: ur`` set in its estimator section (what a UR user
    sets once for every node) needs no other option."""
    from robodyn_ros.ros.robot_config import configuration_yaml, robot_configuration
    path, TAU, G = recording[0], recording[5], recording[6]
    config = robot_configuration(path, home=HOME)
    config.sections["estimator"].append(("driver", "ur", "the robot's driver"))
    robot_file = tmp_path / "ur10.yaml"
    robot_file.write_text(configuration_yaml(config))
    code, out, err, doc = run_identify(tmp_path, capsys, recording, TAU - G, urdf=str(robot_file))
    assert code == 0, err
    assert doc["efforts"]["read_as"].startswith("gravity-compensated") and held_out(doc) == pytest.approx(generic,
                                                                                                           rel=1e-6)


def test_filtered_torques_of_a_kuka_lbr_are_fitted_with_the_same_filter_on_the_motion(tmp_path, capsys, recording,
                                                                                      generic):
    """``--driver lbr``: q and v pass through the driver's 10-Hz filter, so that regressor and torques lag
    alike: the held-out error within 2x of the joint torques' and below the fit that ignores the filter."""
    path, model, t, Q, V, TAU, G = recording
    filtered = lowpass(t, TAU, CUTOFF)
    code, out, err, doc = run_identify(tmp_path, capsys, recording, filtered, "--driver", "lbr")
    assert code == 0, err
    assert f"filtered by the driver at {CUTOFF:g} Hz" in doc["efforts"]["read_as"]
    told = held_out(doc)
    (tmp_path / "params.yaml").unlink()
    code, out, err, doc = run_identify(tmp_path, capsys, recording, filtered)
    assert code == 0, err
    ignored = held_out(doc)
    print(f"\nheld-out relative torque error: joint torques {100 * generic:.2f} %, 10-Hz filtered and told "
          f"{100 * told:.2f} %, not told {100 * ignored:.2f} %")
    assert told <= 2.0 * generic
    assert told < 0.9 * ignored


def test_joint_torques_declared_gravity_compensated_are_refused(tmp_path, capsys, recording):
    """The wrong driver: full torques read as a UR's (gravity counted twice) end in one line naming
    ``effort.kind``, and nothing is written."""
    TAU = recording[5]
    code, out, err, doc = run_identify(tmp_path, capsys, recording, TAU, "--driver", "ur")
    assert code == 2 and doc is None and len(err.strip().splitlines()) == 1, err
    assert "effort.kind: torque" in err and "--driver" in err
