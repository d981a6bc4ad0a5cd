"""One robot file carries what every command needs: `robodyn config` writes the URDF, the locked joints, the home
and the floor (a pedestal's lowest point where the URDF has one), and the commands that take a URDF take that
file instead, with the same results as the flags; a file that is neither is one line. Baxter's left arm (12 of
its 19 joints locked, the base on a 0.92-m pedestal) and the UR10 of example-robot-data."""
import os

import numpy as np
import pytest

from conftest import erd_path
from robodyn_ros.cli.command_inputs import robot_inputs
from robodyn_ros.cli.main import main
from robodyn_ros.model.errors import ModelError
from robodyn_ros.ros.parameters import load_params_yaml
from robodyn_ros.ros.robot_config import check_marked, robot_configuration

BAXTER = "baxter_description/urdf/baxter.urdf"
UR10 = "ur_description/urdf/ur10_robot.urdf"
BAXTER_LOCKS = ["head_pan", "right_s0", "right_s1", "right_e0", "right_e1", "right_w0", "right_w1", "right_w2",
                "r_gripper_l_finger_joint", "r_gripper_r_finger_joint", "l_gripper_l_finger_joint",
                "l_gripper_r_finger_joint"]
BAXTER_NEUTRAL = "0,-0.55,0,0.75,0,1.26,0"     # the vendor's neutral pose of the left arm
UR10_HOME = "0,-1.571,1.571,-1.571,-1.571,0"


def urdf(relative):
    path = erd_path(relative)
    if not os.path.isfile(path):
        pytest.skip(f"{path} missing from example-robot-data")
    return path


def baxter_locks():
    return [f"--lock-joint={name}=0" for name in BAXTER_LOCKS]


def test_a_pedestal_is_the_floor_and_the_home_is_checked_as_excite_checks_its_start(tmp_path, capsys):
    """Baxter's floor is its pedestal's lowest point (z = -0.924 m), not the base plane (nothing reported
    'below the base'); a home whose gravity torque exceeds an effort limit with excite's margin (the neutral
    pose: 50.2 N m on left_s1, limit 50) is refused in one line naming the joint and the numbers; the file
    written keeps the locks and the floor for the commands."""
    out = tmp_path / "baxter.yaml"
    assert main(["config", urdf(BAXTER), "--output", str(out), *baxter_locks()]) == 0
    printed = capsys.readouterr().out
    assert "below the base" not in printed and "warning" not in printed, printed
    assert "floor or table at z = -0.924 m in the base frame (the lowest point of pedestal)" in printed, printed
    assert load_params_yaml(str(out), "excite")["table_height"] == pytest.approx(-0.92418)
    assert main(["config", urdf(BAXTER), "--output", str(tmp_path / "n.yaml"), "--home", BAXTER_NEUTRAL,
                 *baxter_locks()]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "joint left_s1 needs 50.2 N m" in err[0] and "effort limit 50 N m" in err[0], err
    assert not (tmp_path / "n.yaml").exists()
    # --table-height: the floor given; a home into it is refused as excite refuses it
    assert main(["config", urdf(UR10), "--output", str(tmp_path / "t.yaml"), "--home", UR10_HOME,
                 "--table-height", "0.9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "floor at z = 0.900 m" in err[0], err


def test_the_check_marks_are_true(tmp_path, capsys):
    """The summary names exactly the values the file marks CHECK (it claimed torque noise and friction smoothing,
    which the file does not mark)."""
    out = tmp_path / "ur10.yaml"
    assert main(["config", urdf(UR10), "--output", str(out), "--home", UR10_HOME]) == 0
    printed = capsys.readouterr().out
    marked = check_marked(robot_configuration(urdf(UR10), home=[float(x) for x in UR10_HOME.split(",")]))
    text = out.read_text()
    for name in marked:
        leaf = name.split(".")[-1]
        assert any(f"{leaf}:" in line and "CHECK" in line for line in text.splitlines()), name
    claimed = printed.split("values marked CHECK in the file (")[1].split(")")[0].split(", ")
    on_check_lines = {line.split(":")[0].strip() for line in text.splitlines()
                      if "CHECK" in line and not line.startswith("#")}
    assert claimed == marked and on_check_lines == {name.split(".")[-1] for name in marked}
    assert "friction" not in printed and "torque and F/T" not in printed


def test_the_commands_take_the_robot_file(tmp_path, capsys):
    """excite, info and the resolver identify and replay use take the file for --urdf with the results of the
    flags it stands for (the locks, the home as --start home, the table height); no --lock-joint repeated."""
    out = tmp_path / "ur10.yaml"
    flags = ["--lock-joint", "wrist_3_joint=0.5", "--table-height", "-0.1"]
    assert main(["config", urdf(UR10), "--output", str(out), "--home", "0,-1.571,1.571,-1.571,-1.571", *flags]) == 0
    robot = robot_inputs(str(out))
    assert robot.urdf == urdf(UR10) and robot.locks == {"wrist_3_joint": 0.5} and robot.table_height == -0.1
    np.testing.assert_allclose(robot.home, [0, -1.571, 1.571, -1.571, -1.571])
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    by_file = capsys.readouterr().out
    assert main(["info", urdf(UR10), "--lock-joint", "wrist_3_joint=0.5"]) == 0
    assert capsys.readouterr().out == by_file
    short = ["--period", "2", "--harmonics", "2", "--iterations", "2", "--quiet"]
    assert main(["excite", "--urdf", str(out), "--output", str(tmp_path / "a.csv"), "--start", "home", *short]) == 0
    assert main(["excite", "--urdf", urdf(UR10), "--output", str(tmp_path / "b.csv"),
                 "--start=0,-1.571,1.571,-1.571,-1.571", *flags, *short]) == 0
    assert (tmp_path / "a.csv").read_text() == (tmp_path / "b.csv").read_text()


def test_a_file_that_is_neither_is_one_line(tmp_path, capsys):
    """A YAML that is not robodyn config's, a text file, a file naming joints the URDF lacks: one line saying what
    the file is and what was expected (it was `malformed URDF: Start tag expected`)."""
    other = tmp_path / "other.yaml"
    other.write_text("a: 1\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("left arm, 12 locks\n")
    node_file = tmp_path / "node.yaml"
    node_file.write_text("estimator:\n  ros__parameters:\n    decimation: 2\n")
    for path, says in ((other, "it is neither"), (notes, "it is neither"),
                       (node_file, "no estimator section with urdf_path and joints")):
        for command in (["excite", "--urdf", str(path), "--output", str(tmp_path / "x.csv")],
                        ["info", str(path)]):
            assert main(command) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "expected a URDF (XML, <robot ...>) or a parameter file written by " \
                "'robodyn config" in err[0] and says in err[0] and str(path) in err[0], err
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(ModelError, match="no such file"):
        robot_inputs(str(tmp_path / "missing.yaml"))


def test_an_infeasible_start_is_explained(tmp_path, capsys, monkeypatch):
    """excite names the joint, the constraint and the numbers of a start it cannot use (it said `no feasible
    starting trajectory: ... [ 4.58e-20 -5.5e-01 ...] (check lower/upper, q_start, tau_max)` after 31 silent
    seconds): the effort at Baxter's neutral pose, a joint at its limit, a table given over the file's floor;
    on a terminal it shows its progress."""
    out = tmp_path / "baxter.yaml"
    assert main(["config", urdf(BAXTER), "--output", str(out), *baxter_locks()]) == 0
    for start, extra, says in ((BAXTER_NEUTRAL, [], ["joint left_s1 needs 50.2 N m to hold it against gravity",
                                                     "effort limit 50 N m"]),
                               ("0,-2.147,0,0.75,0,1.26,0", [], ["joint left_s1 at -2.147 lies within 5 % of its",
                                                                 "[-2.147, 1.047]"]),
                               ("0,0,0,1.284,0,0,0", ["--table-height", "0.2"],
                                ["link l_gripper_l_finger goes 0.631 m beyond the floor at z = 0.200 m"])):
        capsys.readouterr()
        assert main(["excite", "--urdf", str(out), "--output", str(tmp_path / "x.csv"), f"--start={start}",
                     *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"the start {start.split(',')[0]}" in err[0], err
        assert all(s in err[0] for s in says), (says, err)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    assert main(["excite", "--urdf", urdf(UR10), "--output", str(tmp_path / "y.csv"), f"--start={UR10_HOME}",
                 "--period", "2", "--harmonics", "2", "--iterations", "2"]) == 0
    err = capsys.readouterr().err
    assert "collision model" in err and "optimising" in err and "100.0%" in err, err
