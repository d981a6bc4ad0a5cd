"""The `robodyn` command as a user runs it."""
import subprocess
import sys

from conftest import erd_path
from robodyn_ros.cli import main


def test_info_prints_joints_limits_and_masses(capsys):
    assert main(["info", erd_path("ur_description/urdf/ur5_robot.urdf")]) == 0
    out = capsys.readouterr().out
    assert "shoulder_pan_joint" in out and "total moving mass" in out and "nv = 6" in out


def test_info_bad_file_is_a_clean_error(capsys):
    assert main(["info", "/nonexistent/robot.urdf"]) == 2
    err = capsys.readouterr().err
    assert "URDF file not found: /nonexistent/robot.urdf" in err and "Traceback" not in err


def test_console_script_is_on_path():
    out = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", "info", erd_path("ur_description/urdf/ur5_robot.urdf")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "wrist_3_joint" in out.stdout
