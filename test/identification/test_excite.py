"""`robodyn excite`: the CSV format, the URDF limits checked independently (finite differences of the
written positions, Pinocchio's inverse dynamics for the efforts), rest at both ends, and an excitation at
least as good as that of the trajectory in the real Panda log (Gaz et al. 2019), by the same measure."""
import os

import numpy as np
import pytest

from conftest import erd_path
from robodyn_ros.cli.excite import main
from robodyn_ros.identification.blas_threads import limit_blas_threads
from robodyn_ros.identification.base_parameters import compute_base_parameters
from robodyn_ros.identification.excitation import regressor_condition_number
from robodyn_ros.model.model import Model
from robodyn_ros.robots import bundled_robot_info

limit_blas_threads()
MARGIN = 0.05


@pytest.fixture(scope="module")
def excited(tmp_path_factory):
    out = tmp_path_factory.mktemp("excite")
    code = main(["--urdf", "panda", "--output", str(out / "traj.csv"), "--plot", str(out / "traj.png"),
                 "--iterations", "8"])
    assert code == 0
    with open(out / "traj.csv") as stream:
        header = stream.readline().strip().split(",")
    data = np.loadtxt(out / "traj.csv", delimiter=",", skiprows=1)
    return out, header, data


def _panda():
    info = bundled_robot_info("panda")
    return Model.from_urdf(info["urdf"], locked_joints=info["locked_joints"])


def _derivatives(data):
    """v, a of the written positions by central differences (the motion is periodic: wrap around)."""
    t, q = data[:-1, 0], data[:-1, 1:]            # the last row repeats the first
    h = t[1] - t[0]
    v = (np.roll(q, -1, axis=0) - np.roll(q, 1, axis=0)) / (2 * h)
    a = (np.roll(q, -1, axis=0) - 2 * q + np.roll(q, 1, axis=0)) / h ** 2
    return t, q, v, a


def test_csv_format_limits_and_rest(excited, capsys):
    import pinocchio as pin
    out, header, data = excited
    model = _panda()
    assert header == ["time", *model.joint_names]
    assert data.shape == (10001, 8)
    np.testing.assert_allclose(np.diff(data[:, 0]), 1e-3, atol=1e-9)
    np.testing.assert_allclose(data[-1, 1:], data[0, 1:], atol=1e-9)
    t, q, v, a = _derivatives(data)
    span = model.upper - model.lower
    assert np.all(q >= model.lower + MARGIN / 2 * span) and np.all(q <= model.upper - MARGIN / 2 * span)
    assert np.all(np.abs(v) <= (1 - MARGIN / 2) * model.velocity_limit)
    assert np.max(np.abs(v[0])) < 1e-3 and np.max(np.abs(a[0])) < 1e-2       # at rest at t = 0 (= T)
    pm = pin.buildModelFromUrdf(erd_path("panda_description/urdf/panda.urdf"))
    pd = pm.createData()
    full = lambda x: np.concatenate([x, [0.0, 0.0]])  # noqa: E731  (fingers at 0)
    tau = np.array([pin.rnea(pm, pd, full(q[k]), full(v[k]), full(a[k]))[:7] for k in range(0, len(q), 5)])
    assert np.all(np.abs(tau) <= (1 - MARGIN / 2) * model.effort_limit)
    assert (out / "traj.png").stat().st_size > 10000


def test_condition_number_at_or_under_the_real_panda_log(panda_log, excited, capsys):
    """κ of the written trajectory (recomputed from the CSV) against κ of the real log's trajectory: both
    the condition number of the base regressor (friction columns included) stacked over the motion."""
    from robodyn_ros.identification.batch import filtered_samples
    _, _, data = excited
    model = _panda()
    base = compute_base_parameters(model, coulomb_width=0.05)
    t, q, v, a = _derivatives(data)
    kappa = regressor_condition_number(model, base, q, v, a)
    tg, qg, vg, taug = panda_log
    _, Q, V, A, _ = filtered_samples(tg, qg, vg, taug, 5.0)
    kappa_log = regressor_condition_number(model, base, Q, V, A)
    print(f"\nexcite: regressor condition number {kappa:.1f}; real Panda log (Gaz et al.) {kappa_log:.1f}")
    assert kappa <= kappa_log


def test_bad_input_writes_nothing(tmp_path, capsys):
    assert main(["--urdf", "no_such_robot", "--output", str(tmp_path / "t.csv")]) == 2
    assert main(["--urdf", "panda", "--output", str(tmp_path / "t.csv"), "--margin", "0.7"]) == 2
    err = capsys.readouterr().err
    assert "no_such_robot" in err and "--margin" in err
    assert os.listdir(tmp_path) == []


def test_start_at_home(tmp_path, capsys):
    assert main(["--urdf", "panda", "--output", str(tmp_path / "t.csv"), "--start", "home", "--iterations", "3"]) == 0
    data = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1)
    home = bundled_robot_info("panda")["home"]
    np.testing.assert_allclose(data[0, 1:], home, atol=1e-9)
    np.testing.assert_allclose(data[-1, 1:], home, atol=1e-9)
    assert main(["--urdf", "panda", "--output", str(tmp_path / "u.csv"), "--start", "0,0"]) == 2
    assert "--start has 2 values for 7 joints" in capsys.readouterr().err
    assert not (tmp_path / "u.csv").exists()


def test_start_starting_with_a_negative_value_and_the_printed_start(tmp_path, capsys):
    """--start -0.1,... (argparse alone took the value for an option) starts there; the start excite prints is
    comma-separated, and given back as --start=PRINTED it starts the same motion at the same place."""
    start = "-0.1,-0.785,0,-2.356,0,1.571,0.785"
    fast = ["--urdf", "panda", "--period", "4", "--harmonics", "2", "--iterations", "1"]
    assert main([*fast, "--output", str(tmp_path / "a.csv"), "--start", start]) == 0, capsys.readouterr().err
    first = np.loadtxt(tmp_path / "a.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(first[0, 1:], [float(x) for x in start.split(",")], atol=1e-9)
    out = capsys.readouterr().out
    printed = [line.split(" = ", 1)[1].split()[0] for line in out.splitlines() if "starts and ends at rest at q" in line]
    assert printed == ["-0.1000,-0.7850,0.0000,-2.3560,0.0000,1.5710,0.7850"], out
    assert main([*fast, "--output", str(tmp_path / "b.csv"), f"--start={printed[0]}"]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "b.csv", delimiter=",", skiprows=1), first)
    from robodyn_ros.cli.excite import build_parser
    for spelling in (["--workspace", "-0.5,-0.5,0,0.5,0.5,1"], ["--workspace=-0.5,-0.5,0,0.5,0.5,1"]):
        args = build_parser().parse_args(["--urdf", "panda", "--output", "c.csv", *spelling])
        assert args.workspace == "-0.5,-0.5,0,0.5,0.5,1"
