"""What `robodyn identify` tells its user: every per-joint line names its joint, the condition number is named
as robodyn excite's measure, and a nominal URDF that predicts the bag's torques far off (the UR5's URDF on a
UR10's bag: same joint names, so it loads without complaint) is questioned, while the right URDF is not."""
import os

import numpy as np
import pytest
import yaml

import robodyn_ros as rd
from conftest import erd_path
from robot_data import plant_gravity, plant_rnea
from robodyn_ros.bags import write_joint_states_bag
from robodyn_ros.cli.identify import main as identify
from robodyn_ros.identification.exciting_trajectory import FourierTrajectory

UR10 = "ur_description/urdf/ur10_robot.urdf"
HOME = np.array([0.0, -1.571, 1.571, -1.571, -1.571, 0.0])


@pytest.fixture(scope="module")
def ur10_bag(tmp_path_factory):
    """30 s at 200 Hz of a UR10 on a random 5-harmonic Fourier motion around its home, torques from its URDF
    (friction included) with 0.5 % of their range as noise."""
    path = erd_path(UR10)
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    model = rd.Model.from_urdf(path)
    rng = np.random.default_rng(4)
    period, harmonics = 10.0, 5
    a, b = (rng.uniform(-1.0, 1.0, (6, harmonics)) * 0.12 for _ in range(2))    # velocity amplitudes, rad/s
    trajectory = FourierTrajectory(q0=HOME, a=a, b=b, period=period)
    t = np.arange(0.0, 3 * period, 0.005)
    Q, V, A = trajectory.evaluate(t)
    assert np.abs(Q - HOME).max() < 1.0 and np.all(np.abs(V) < model.velocity_limit)
    tau = plant_rnea(model, Q, V, A) + np.array([rd.friction_torque(model, v) for v in V])
    tau += rng.normal(size=tau.shape) * 0.005 * (tau.max(axis=0) - tau.min(axis=0))
    return write_joint_states_bag(tmp_path_factory.mktemp("bag") / "ur10", t, model.joint_names, Q, V, tau,
                                  storage="mcap"), path


def run_identify(tmp_path, capsys, bag, urdf):
    out = tmp_path / "params.yaml"
    code = identify([str(bag), "--urdf", urdf, "--output", str(out), "--holdout", "0.3", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.splitlines(), yaml.safe_load(out.read_text())


def test_per_joint_lines_name_their_joints_and_the_condition_number_is_named(tmp_path, capsys, ur10_bag):
    bag, urdf = ur10_bag
    lines, doc = run_identify(tmp_path, capsys, bag, urdf)
    joints = rd.Model.from_urdf(urdf).joint_names
    start = lines.index("  per joint, filtered (%):")
    assert lines[start + 1].split()[:1] == ["joint"]
    rows = lines[start + 2:start + 2 + len(joints)]
    assert [row.split()[0] for row in rows] == list(joints)
    assert all(len(row.split()) == 4 for row in rows)            # identified, least squares, nominal URDF
    fit = next(line for line in lines if line.startswith("fit: "))
    assert "regressor condition number" in fit and "the measure robodyn excite prints for its planned motion" in fit
    assert f"{doc['fit']['condition_number']:.4g}" in fit
    assert not any(line.startswith("warning:") for line in lines)   # the right URDF: no question asked
    assert "warning" not in doc["prediction"]
    assert doc["prediction"]["relative_error_nominal_urdf"] < 0.02


def test_a_urdf_of_another_robot_is_questioned(tmp_path, capsys, ur10_bag):
    bag, _ = ur10_bag
    lines, doc = run_identify(tmp_path, capsys, bag, "ur5")
    warning = [line for line in lines if line.startswith("warning:")]
    error = doc["prediction"]["relative_error_nominal_urdf"]
    assert error > 0.3 and len(warning) == 1 and lines[-2] == warning[0]    # the last line before "wrote"
    assert f"with {100 * error:.1f} % relative error (more than 30 %, --nominal-warning): is ur5 the robot of " \
           "this bag?" in warning[0]
    assert doc["prediction"]["warning"] == warning[0][len("warning: "):]
    # the threshold is the user's
    out = tmp_path / "quiet.yaml"
    assert identify([str(bag), "--urdf", "ur5", "--output", str(out), "--quiet", "--nominal-warning", "0"]) == 0
    assert "warning:" not in capsys.readouterr().out


@pytest.mark.parametrize("efforts", ["currents", "gravity_compensated"])
def test_efforts_that_are_not_joint_torques_are_refused_by_identify_and_replay(tmp_path, capsys, ur10_bag, efforts):
    """The UR10 bag with its efforts as a UR driver reports them (motor currents at 10 N m/A, or torques minus the
    URDF's gravity): identify and replay refuse it in one line naming the likely cause, write nothing, and
    identify with --no-effort-check fits it (into a wrong robot: the check is what stands between)."""
    from robodyn_ros.bags import read_joint_states
    from robodyn_ros.cli.replay import main as replay
    bag, urdf = ur10_bag
    model = rd.Model.from_urdf(urdf)
    series = read_joint_states(str(bag), joint_names=model.joint_names)
    if efforts == "currents":
        tau = series.tau / 10.0
    else:
        tau = series.tau - plant_gravity(model, series.q)
    other = write_joint_states_bag(tmp_path / "driver_bag", series.t, model.joint_names, series.q, series.v, tau,
                                   storage="mcap")
    advice = "effort.kind: current" if efforts == "currents" else "effort.kind: gravity_compensated"
    for command, argv in ((identify, ["--holdout", "0.3"]), (replay, [])):
        out = tmp_path / "params.yaml"
        code = command([str(other), "--urdf", urdf, "--output", str(out), "--quiet", *argv])
        err = capsys.readouterr().err
        assert code == 2 and advice in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()
    code = identify([str(other), "--urdf", urdf, "--output", str(tmp_path / "p.yaml"), "--quiet",
                     "--no-effort-check"])
    assert code == 0, capsys.readouterr().err


def test_nothing_learned_is_said_when_the_identified_model_is_no_better_than_the_urdf():
    """One line when the identified model's held-out error is not below the URDF's (by 5 %), none otherwise."""
    from robodyn_ros.identification.validation import TorqueValidation, nothing_learned

    def validation(identified, nominal):
        return TorqueValidation(joint_names=("a", "b"), predictors=("identified", "least_squares", "nominal"),
                                samples=10, norm_filtered=np.ones(2),
                                error_filtered={"identified": np.full(2, identified ** 2),
                                                "least_squares": np.full(2, identified ** 2),
                                                "nominal": np.full(2, nominal ** 2)})
    line = nothing_learned(validation(0.0005, 0.0005))
    assert line.startswith("note: the identified model predicts the held-out torques no better than the URDF "
                           "(0.05 % against 0.05 %)"), line
    assert nothing_learned(validation(0.0100, 0.0101)) is not None
    assert nothing_learned(validation(0.0098, 0.1819)) is None      # the real Panda: 0.98 % against 18.19 %
