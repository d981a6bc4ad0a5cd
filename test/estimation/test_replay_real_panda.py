"""`robodyn replay` on the real Panda log (Gaz et al. 2019, the `panda_data` fixture), next to `robodyn
identify` on the same split, both as the README's "Identifying the real Panda" block runs them: the first
70 % of the log as a ROS 2 bag and the last 30 % as another (tools/panda_log_to_bag.py), the parameters each
command writes predict the torques of the last 30 %.

Replay runs the bag through OnlineEstimator as the estimator node would with config/panda_real.yaml (5 Hz
causal filter, joint torques only); its final estimate becomes consistent inertials and friction
(tanh(v / 1e-3) Coulomb term, the estimator's). Identify: the batch command as the README writes it, with
its defaults (5 Hz zero-phase filter, tanh(v / 0.05)). Error: ||tau_f - tau_hat_f|| / ||tau_f|| over the
last 30 %, both through the same 5 Hz zero-phase low-pass (edges of the filter dropped), the prediction from
the written URDF (inertias, read back by our loader) plus the YAML's armature and friction.
"""
import importlib.util
import os
import shlex
import subprocess

import numpy as np
import pytest
import yaml

import robodyn_ros as rd
from conftest import CHECKOUT
from doc_blocks import code_block, command_argv, command_lines
from robodyn_ros.identification.base_parameters import smooth_sign
from robodyn_ros.identification.batch import filtered_samples, predict_torques
from robodyn_ros.identification.blas_threads import limit_blas_threads

ROOT = CHECKOUT
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
CUTOFF = 5.0

limit_blas_threads()


def _tool():
    path = os.path.join(ROOT, "tools", "panda_log_to_bag.py")
    spec = importlib.util.spec_from_file_location("panda_log_to_bag", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_block():
    """The README's "Identifying the real Panda" block: the log as two bags, then ``robodyn identify``."""
    return code_block("README.md", "Identifying the real Panda")


def test_the_readme_block_writes_no_name_a_checkout_holds():
    """The block runs from the checkout's root (it calls ``tools/`` by path): no bag or file it writes may be
    named like something the repository holds (a bag named ``test`` would be refused, the folder exists)."""
    block = readme_block()
    written = [shlex.split(line)[3] for line in command_lines(block) if line.startswith("python tools/")]
    identify = command_argv(block, "robodyn identify")
    written += [identify[identify.index(option) + 1] for option in ("--output", "--urdf-out")]
    assert len(written) == 4, written
    files = subprocess.run(["git", "ls-files"], cwd=CHECKOUT, capture_output=True, text=True, check=True).stdout
    held = {path.split("/")[0] for path in files.splitlines()}
    assert "test" in held                                                  # the listing is the checkout's
    assert not [name for name in written if name.split("/")[0] in held], (written, sorted(held))


@pytest.fixture(scope="module")
def split(panda_data, tmp_path_factory):
    """The README block's two ``tools/panda_log_to_bag.py`` lines, run in a temporary folder on the log;
    ``(folder, the held-out 30 % as arrays, the training bag)``."""
    out = tmp_path_factory.mktemp("gaz_replay")
    tool = _tool()
    lines = [shlex.split(line) for line in command_lines(readme_block()) if line.startswith("python tools/")]
    assert [line[1] for line in lines] == ["tools/panda_log_to_bag.py"] * 2, lines
    for line in lines:
        args = [panda_data if arg == "$DATA" else str(out / arg) if n == 1 else arg for n, arg in enumerate(line[2:])]
        assert tool.main(args) == 0, line
    t, q, v, tau = tool.load_log(panda_data)
    last = tool.split(len(t), last=0.3)
    assert last.start == int(0.7 * len(t))
    return out, (t[last], q[last], v[last], tau[last]), out / command_argv(readme_block(), "robodyn identify")[0]


def _prediction_error(params_path, urdf_path, held_out, coulomb_width):
    params = yaml.safe_load(open(params_path))
    t, q, v, tau = held_out
    T, Q, V, A, TAU = filtered_samples(t, q, v, tau, CUTOFF, decimate=1)
    model = rd.Model.from_urdf(str(urdf_path))
    assert model.joint_names == tuple(JOINTS)
    joints = params["joints"]
    model = model.with_armature({n: joints[n]["armature"] for n in JOINTS}).with_friction(*(np.zeros(7),) * 3)
    visc, coul, off = (np.array([joints[n][k] for n in JOINTS]) for k in ("viscous", "coulomb", "offset"))
    predicted = predict_torques(model, Q, V, A) + visc * V + coul * smooth_sign(V, coulomb_width) + off
    return float(np.linalg.norm(TAU - predicted) / np.linalg.norm(TAU)), params


def test_replay_predicts_the_held_out_torques_next_to_identify(panda_data, split, monkeypatch):
    """Replay with config/panda_real.yaml, next to the README block's ``robodyn identify`` line as written (run
    in the block's folder)."""
    from robodyn_ros.cli.main import main
    out, held_out, bag = split
    config = os.path.join(ROOT, "config", "panda_real.yaml")
    assert main(["replay", str(bag), "--urdf", "panda", "--output", str(out / "replay.yaml"),
                 "--urdf-out", str(out / "replay.urdf"), "--plot", str(out / "replay.png"), "--config", config,
                 "--quiet"]) == 0
    e_replay, params = _prediction_error(out / "replay.yaml", out / "replay.urdf", held_out, coulomb_width=1e-3)
    monkeypatch.chdir(out)
    identify = command_argv(readme_block(), "robodyn identify")
    assert main(["identify", *identify, "--quiet"]) == 0
    written = {option: out / identify[identify.index(option) + 1] for option in ("--output", "--urdf-out")}
    e_identify, _ = _prediction_error(written["--output"], written["--urdf-out"], held_out, coulomb_width=0.05)
    print(f"\nGaz Panda, last 30 % (5 Hz zero-phase on both): robodyn replay {100 * e_replay:.2f} %, "
          f"robodyn identify {100 * e_identify:.2f} %; replay in-sample {100 * params['fit']['relative_error']:.2f} %, "
          f"{params['replay']['base_parameter_updates']} RLS updates")
    assert e_replay <= 0.02
    assert params["replay"]["samples"] == int(0.7 * len(np.loadtxt(os.path.join(panda_data, "exciting_traj_time.txt"))))
    assert params["replay"]["payload_changes"] == 0
    assert params["physical_consistency"]["solver_status"] == "Solve_Succeeded"
    assert len(params["base_parameters"]["values"]) == 69 and list(params["links"])[-1] == "panda_link7"
    assert (out / "replay.png").stat().st_size > 1000


def test_replay_of_a_bad_input_is_one_line_and_writes_nothing(split, tmp_path, capsys):
    from robodyn_ros.cli.main import main
    out, _, bag = split
    bad = tmp_path / "bad.yaml"
    bad.write_text("estimator:\n  ros__parameters:\n    filter:\n      cutoff: 5\n")   # an integer for a float
    assert main(["replay", str(bag), "--urdf", "panda", "--output", str(tmp_path / "p.yaml"),
                 "--config", str(bad), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "filter.cutoff" in err[0] and "nothing was written" in err[0]
    assert main(["replay", str(tmp_path / "no_bag"), "--urdf", "panda", "--output", str(tmp_path / "p.yaml"),
                 "--quiet"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    # an estimator that forgets 10 % a sample does not converge on the real robot's data: refused, nothing written
    forgetful = tmp_path / "forgetful.yaml"
    forgetful.write_text("estimator:\n  ros__parameters:\n    forgetting: 0.9\n")
    assert main(["replay", str(bag), "--urdf", "panda", "--output", str(tmp_path / "p.yaml"), "--urdf-out",
                 str(tmp_path / "p.urdf"), "--config", str(forgetful), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not converge" in err[0], err
    assert not list(tmp_path.glob("p.*")) and not list(tmp_path.glob(".robodyn-*"))


def test_replay_with_the_estimators_defaults_predicts_the_held_out_torques(split):
    """No ``--config``: the estimator's defaults (20 Hz, the noise of each joint learnt from the data, the
    change detector armed once converged) on the real robot's log: no payload change reported, the
    consistent fit solved, the last 30 % predicted within 2 % (the URDF: 18 %)."""
    from robodyn_ros.cli.main import main
    out, held_out, bag = split
    assert main(["replay", str(bag), "--urdf", "panda", "--output", str(out / "default.yaml"),
                 "--urdf-out", str(out / "default.urdf"), "--quiet"]) == 0
    e_default, params = _prediction_error(out / "default.yaml", out / "default.urdf", held_out, coulomb_width=0.02)
    print(f"\nGaz Panda, last 30 %: robodyn replay with the defaults {100 * e_default:.2f} %, in-sample "
          f"{100 * params['fit']['relative_error']:.2f} %")
    assert e_default <= 0.02
    assert params["replay"]["payload_changes"] == 0
    assert params["physical_consistency"]["solver_status"] in ("Solve_Succeeded", "Solved_To_Acceptable_Level")
