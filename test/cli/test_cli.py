"""The `robodyn` command as a user runs it."""
import subprocess
import sys

import pytest

from conftest import erd_path
from robodyn_ros.cli import main


def test_info_prints_joints_limits_and_masses(capsys):
    assert main(["info", erd_path("ur_description/urdf/ur5_robot.urdf")]) == 0
    out = capsys.readouterr().out
    assert "shoulder_pan_joint" in out and "total moving mass" in out and "nv = 6" in out


def test_info_bad_file_is_a_clean_error(capsys):
    assert main(["info", "/nonexistent/robot.urdf"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent/robot.urdf: no such file (nor a bundled robot: panda, ur5, iiwa)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_console_script_is_on_path():
    out = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", "info", erd_path("ur_description/urdf/ur5_robot.urdf")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "wrist_3_joint" in out.stdout


def test_info_strict_refuses_what_the_default_loads_with_a_note(tmp_path, capsys):
    """A URDF with a non-physical inertia (the iiwa of Müller and Kumar's Table 1 as printed): ``info``
    loads it and says so in its notes line; ``info --strict`` refuses it in one line naming the link."""
    import warnings
    from robot_data import iiwa_as_published
    path = tmp_path / "iiwa_table_1.urdf"
    path.write_text(iiwa_as_published())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "notes (" in out and "strict=True refuses it" in out
    assert main(["info", str(path), "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "link 'iiwa_link_4' has an inertia violating the triangle inequality" in err[0]


def test_bundled_names_work_wherever_a_urdf_is_asked_for_and_files_get_the_umask(tmp_path, capsys):
    """``Model.from_urdf("ur5")``, ``robodyn info ur5`` and ``robodyn identify BAG --urdf ur5`` take the
    bundled name; an unknown name is a clean error naming the bundled robots; the files identify writes
    (YAML, URDF, PNG) get the user's umask, not mkstemp's 0600."""
    import os

    import robodyn_ros as rd
    from robodyn_ros.bags import write_joint_states_bag
    from robodyn_ros.cli.identify import main as identify
    from robodyn_ros.robots import bundled_urdf_path
    from robot_data import ur5_motion

    assert rd.Model.from_urdf("ur5").fingerprint() == rd.Model.from_urdf(bundled_urdf_path("ur5")).fingerprint()
    assert main(["info", "ur5"]) == 0 and "wrist_3_joint" in capsys.readouterr().out
    model, t, q, v, tau = ur5_motion()
    bag = write_joint_states_bag(tmp_path / "bag", t, model.joint_names, q, v, tau, storage="mcap")
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        out = tmp_path / f"out_{umask:o}"
        out.mkdir()
        previous = os.umask(umask)
        try:
            code = identify([str(bag), "--urdf", "ur5", "--output", str(out / "params.yaml"), "--urdf-out",
                             str(out / "robot.urdf"), "--plot", str(out / "torques.png"), "--quiet",
                             "--no-consistent"])
        finally:
            os.umask(previous)
        assert code == 0, capsys.readouterr().err
        for name in ("params.yaml", "robot.urdf", "torques.png"):
            assert (out / name).stat().st_mode & 0o777 == mode, (name, oct((out / name).stat().st_mode))
    assert identify([str(bag), "--urdf", "kuka", "--output", str(tmp_path / "x.yaml"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--urdf kuka: no such file (nor a bundled robot: panda, ur5, iiwa)" in err and "Traceback" not in err


COMMANDS = ("info", "config", "excite", "record", "identify", "replay", "demo", "node", "bench")
SPHINX = ("``", ":mod:", ":class:", ":func:", ":meth:", ":data:", "`")


def _help(*args):
    proc = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", *args, "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_top_level_help_lists_every_command():
    out = _help()
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()]
    assert [c for c in listed if c in COMMANDS] == list(COMMANDS), out
    assert not any(mark in out for mark in SPHINX), out


@pytest.mark.parametrize("command", ["info", "config", "excite", "demo", "record", "identify", "replay", "node",
                                     "bench"])
def test_command_help_is_plain_text(command):
    out = _help(command)
    assert f"usage: robodyn {command}" in out
    assert not any(mark in out for mark in SPHINX), out


@pytest.mark.parametrize("name", ["simulator", "inverse_dynamics", "estimator", "mpc"])
def test_node_help_prints_the_parameter_table_and_starts_nothing(name):
    """robodyn node NAME --help (and ros2 run's entry point) exit 0 with every parameter of the schema, its type,
    default and allowed values, without initialising rclpy (it would print rcl's log lines)."""
    from robodyn_ros.ros.node_parameters import SCHEMAS
    out = _help("node", name)
    proc = subprocess.run([sys.executable, "-m", "robodyn_ros.ros.node_main", name, "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == out
    lines = out.splitlines()
    for spec in SCHEMAS[name]:
        row = next((line for line in lines if line.startswith(f"  {spec.name}  (")), None)
        assert row is not None, spec.name
        scalar = spec.type in (bool, int, float, str)
        type_name = spec.type.__name__ if scalar else f"list[{spec.element_type.__name__}]"
        assert row.startswith(f"  {spec.name}  ({type_name}, default "), row
        if spec.choices:
            assert "one of " + ", ".join(map(str, spec.choices)) in row
    assert "  autostart  (bool, default true; read-only)" in lines
    assert "kp  (float, default 400.0; in [0.0, 1000000.0]; live)" in out or name != "inverse_dynamics"
    assert not any(mark in out for mark in SPHINX) and "[INFO]" not in proc.stderr and proc.stderr == ""
