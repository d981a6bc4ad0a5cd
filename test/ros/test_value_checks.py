"""Every value that enters the model or a node is checked where it enters (property-based): locked-joint
values, armature and friction on the model; gains and whole parameter files on the nodes' schemas; and a
node process that cannot start says why in one line on stderr and exits 2, with no traceback."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import robodyn_ros as rd
from conftest import CHECKOUT
from robodyn_ros.ros.node_main import params_file_error
from robodyn_ros.ros.node_parameters import INVERSE_DYNAMICS, MAX_KD, MAX_KP, SCHEMAS, resolve_node_config
from robodyn_ros.ros.parameters import validate

SETTINGS = dict(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([math.nan, math.inf, -math.inf, 0.0,
                                                                             -0.0, 1e-300, 1e300, -1.0])


@pytest.fixture(scope="module")
def panda():
    return rd.Model.from_urdf("panda", locked_joints=dict.fromkeys(PANDA_FINGERS, 0.0))


# ------------------------------------------------------------------------------------------ the model
@settings(max_examples=60, **SETTINGS)
@given(value=ANY_FLOAT | st.sampled_from(["0.01", "abc", None, [0.0]]))
def test_locked_joint_value_is_one_finite_number_or_a_model_error(value):
    """Locking Panda's finger at any value: ModelError naming the joint unless it is one finite number;
    then the model's mass matrix is finite, symmetric and positive definite."""
    try:
        m = rd.Model.from_urdf("panda", locked_joints={"panda_finger_joint1": value, "panda_finger_joint2": 0.0})
    except rd.ModelError as exc:
        assert "'panda_finger_joint1'" in str(exc)
        ok = False
    else:
        ok = True
        M = rd.crba(m, m.neutral_configuration())
        assert np.isfinite(M).all() and np.allclose(M, M.T) and np.linalg.eigvalsh(M).min() > 0
    try:
        expected = math.isfinite(float(value)) and abs(float(value)) <= 1e12
    except (TypeError, ValueError):
        expected = False
    assert ok == expected, value


@settings(max_examples=60, **SETTINGS)
@given(values=st.lists(ANY_FLOAT, min_size=7, max_size=7), form=st.sampled_from(["array", "dict", "scalar"]))
def test_armature_and_friction_are_finite_and_non_negative_or_a_model_error(panda, values, form):
    """``with_armature`` and ``with_friction(viscous, coulomb)``: accepted iff every value is finite and
    >= 0 (and not absurdly large); accepted armature keeps M + diag(armature) positive definite and
    ``aba`` the inverse of ``rnea``."""
    arg = {"array": np.array(values), "dict": dict(zip(panda.joint_names, values)), "scalar": values[0]}[form]
    used = values if form != "scalar" else [values[0]]
    expected = all(math.isfinite(x) and 0.0 <= x <= 1e100 for x in used)
    for build in (lambda: panda.with_armature(arg), lambda: panda.with_friction(viscous=arg),
                  lambda: panda.with_friction(coulomb=arg)):
        try:
            m = build()
        except rd.ModelError as exc:
            assert not expected and "of joint 'panda_joint" in str(exc), str(exc)
            continue
        assert expected, values
        assert np.isfinite(m.armature).all() and (m.armature >= 0).all() and (m.viscous >= 0).all()
    if expected and max(used) < 1e6:
        m = panda.with_armature(arg)
        q, v, tau = np.full(7, 0.3), np.full(7, -0.2), np.linspace(-5, 5, 7)
        a = rd.aba(m, q, v, tau)
        np.testing.assert_allclose(rd.rnea(m, q, v, a), tau, atol=1e-8 * (1 + max(used)))


# ------------------------------------------------------------------------------------------ the nodes
@settings(max_examples=100, **SETTINGS)
@given(kp=ANY_FLOAT, kd=ANY_FLOAT)
def test_gains_are_finite_and_in_range(kp, kd):
    """The controller's gains are accepted (at start and by the live parameter service, which share
    this validation) iff finite and in [0, MAX]."""
    errors = validate(INVERSE_DYNAMICS, {"kp": kp, "kd": kd})
    good = [0.0 <= kp <= MAX_KP, 0.0 <= kd <= MAX_KD]      # False for NaN; inf is beyond MAX
    assert len(errors) == good.count(False), errors
    for name, ok in zip(("kp", "kd"), good):
        assert ok != any(e.startswith(f"{name}:") for e in errors)


SCALARS = st.one_of(ANY_FLOAT, st.integers(-10**6, 10**6), st.booleans(),
                    st.text(max_size=8), st.lists(ANY_FLOAT, max_size=8), st.none())


def _yaml_value(x):
    """``x`` with NaN and ±inf as YAML's ``.nan``, ``.inf``, ``-.inf`` markers (unquoted below)."""
    if isinstance(x, float) and math.isnan(x):
        return ".nan"
    if isinstance(x, float) and math.isinf(x):
        return ".inf" if x > 0 else "-.inf"
    return x


@settings(max_examples=80, **SETTINGS)
@given(kind=st.sampled_from(sorted(SCHEMAS)), data=st.data(),
       garbage=st.sampled_from([None, "", "[", "kp: [1", "- a\n- b", "x: {", "\t", "inverse_dynamics: 3",
                                "{ros__parameters: {kp: 1}}", "\x00", "a: *b"]))
def test_any_parameter_file_gives_none_or_one_line(tmp_path_factory, kind, data, garbage):
    """Whatever a parameter file holds: a valid config (every float finite and in range), or one line
    naming the file and the parameter; never an exception, never a multi-line message."""
    path = tmp_path_factory.mktemp("params") / "params.yaml"
    if garbage is None:
        specs = SCHEMAS[kind]
        chosen = data.draw(st.lists(st.sampled_from(specs), max_size=4, unique_by=lambda s: s.name), label="specs")
        params = {}
        for spec in chosen:
            value = data.draw(SCALARS, label=spec.name)
            value = [_yaml_value(v) for v in value] if isinstance(value, list) else _yaml_value(value)
            params[spec.name] = value
        text = yaml.safe_dump({kind: {"ros__parameters": params}}).replace("'.nan'", ".nan") \
            .replace("'.inf'", ".inf").replace("'-.inf'", "-.inf")
    else:
        text = garbage
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    error = params_file_error(kind, ["--ros-args", "--params-file", str(path)])
    if error is None:
        from robodyn_ros.ros.parameters import load_params_yaml
        config = resolve_node_config(kind, load_params_yaml(str(path), "/" + kind))
        for spec in SCHEMAS[kind]:
            value = config[spec.name]
            for x in value if isinstance(value, list) else [value]:
                assert not isinstance(x, float) or math.isfinite(x) or (spec.allow_inf and not math.isnan(x)), \
                    (spec.name, x)
    else:
        assert "\n" not in error and str(path) in error, error


def test_missing_parameter_file_is_one_line(tmp_path):
    error = params_file_error("estimator", ["--ros-args", "--params-file", str(tmp_path / "nope.yaml")])
    assert error == f"parameter file {tmp_path / 'nope.yaml'} does not exist"


@pytest.mark.parametrize("content, says", [
    (None, "does not exist"),
    ("inverse_dynamics:\n  ros__parameters:\n    kp: [1\n", "is not a valid ROS parameter file"),
    ("inverse_dynamics:\n  ros__parameters:\n    kp: 1\n", "kp: expected float, got int 1"),
    ("inverse_dynamics:\n  ros__parameters:\n    kp: -5.0\n", "kp: -5.0 is outside"),
    ("inverse_dynamics:\n  ros__parameters:\n    kp: .inf\n", "kp: inf is not a valid value"),
    ("/**:\n  ros__parameters:\n    mode: pid\n", "mode: 'pid' is not one of"),
], ids=["missing", "unparsable", "wrong-type", "out-of-range", "infinite", "bad-choice"])
def test_node_that_cannot_start_says_why_in_one_line(tmp_path, content, says):
    """``robodyn node inverse_dynamics --ros-args --params-file F``: one line on stderr naming the
    problem, exit code 2, no traceback (before: a 20-40 line traceback, or a raw RCLError)."""
    pytest.importorskip("rclpy")
    path = tmp_path / "params.yaml"
    if content is not None:
        path.write_text(content)
    env = dict(os.environ, PYTHONPATH=CHECKOUT, ROS_DOMAIN_ID=str(150 + os.getpid() % 50))
    proc = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", "node", "inverse_dynamics", "--ros-args",
                           "--params-file", str(path)], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, \
        (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == ""


@pytest.mark.parametrize("override, says", [("kp:=.inf", "kp")])
def test_node_with_a_bad_command_line_parameter_says_why_in_one_line(tmp_path, override, says):
    pytest.importorskip("rclpy")
    env = dict(os.environ, PYTHONPATH=CHECKOUT, ROS_DOMAIN_ID=str(150 + os.getpid() % 50))
    proc = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", "node", "inverse_dynamics", "--ros-args",
                           "-p", override], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, \
        (proc.returncode, proc.stderr[-2000:])


# ------------------------------------------------------------------------------- unknown parameter names
MISSPELT = "inverse_dynamics:\n  ros__parameters:\n    refrence: file\n    kpp: 400.0\n"


def test_misspelt_parameters_in_a_file_are_refused_with_the_closest_name(tmp_path):
    """The issue's file (refrence, kpp) no longer starts a node that follows the generator instead; a name of
    another node in this node's own entry is refused too, and under a wildcard entry, which every node reads,
    only a name that no node has."""
    path = tmp_path / "params.yaml"
    path.write_text(MISSPELT)
    error = params_file_error("inverse_dynamics", ["--ros-args", "--params-file", str(path)])
    assert "unknown parameters 'refrence' (did you mean 'reference'?), 'kpp' (did you mean 'kp'?)" in error
    assert "\n" not in error and str(path) in error
    path.write_text("estimator:\n  ros__parameters:\n    rate: 100.0\n")   # the simulator's and mpc's, not its
    assert "unknown parameter 'rate'" in params_file_error("estimator", ["--ros-args", "--params-file", str(path)])
    path.write_text("/**:\n  ros__parameters:\n    rate: 100.0\n    use_sim_time: true\n")
    assert params_file_error("estimator", ["--ros-args", "--params-file", str(path)]) is None
    path.write_text("/**:\n  ros__parameters:\n    generator:\n      centre: [0.0]\n")
    assert "'generator.centre' (did you mean 'generator.center'?)" in \
        params_file_error("estimator", ["--ros-args", "--params-file", str(path)])
    # a section of a node of another name does not apply to this one
    path.write_text("controller_manager:\n  ros__parameters:\n    update_rate: 1000\n")
    assert params_file_error("estimator", ["--ros-args", "--params-file", str(path)]) is None


def test_misspelt_command_line_parameter_is_refused_with_the_closest_name():
    argv = ["--ros-args", "-p", "refrence:=file"]
    assert params_file_error("inverse_dynamics", argv) == \
        "-p refrence:=file: unknown parameter 'refrence' (did you mean 'reference'?) for node inverse_dynamics"
    assert params_file_error("inverse_dynamics", ["--ros-args", "-p", "other_node:refrence:=file"]) is None
    assert params_file_error("inverse_dynamics", ["--ros-args", "-p", "inverse_dynamics:kpp:=1.0"]).startswith("-p kpp")
    assert params_file_error("inverse_dynamics", ["--ros-args", "-p", "autostart:=false", "-p", "kp:=1.0"]) is None


@pytest.mark.parametrize("how", ["file", "-p"])
def test_node_process_with_a_misspelt_parameter_exits_with_one_line(tmp_path, how):
    pytest.importorskip("rclpy")
    path = tmp_path / "params.yaml"
    path.write_text(MISSPELT)
    extra = ["--params-file", str(path)] if how == "file" else ["-p", "trajectory_fil:=traj.csv"]
    env = dict(os.environ, PYTHONPATH=CHECKOUT, ROS_DOMAIN_ID=str(150 + os.getpid() % 50))
    proc = subprocess.run([sys.executable, "-m", "robodyn_ros.cli", "node", "inverse_dynamics", "--ros-args", *extra],
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    says = "'refrence' (did you mean 'reference'?)" if how == "file" else "(did you mean 'trajectory_file'?)"
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], (proc.returncode, proc.stderr[-2000:])


def test_nodes_created_in_process_refuse_unknown_names(tmp_path):
    """The bringup (pip users' launch) and a node constructed with overrides refuse them as robodyn node does."""
    pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter

    from robodyn_ros.ros.bringup import Bringup
    from robodyn_ros.ros.launch_description_data import NodeEntry
    from robodyn_ros.ros.simulator_node import SimulatorNode
    from robodyn_ros.ros.testing import ros_context

    path = tmp_path / "params.yaml"
    path.write_text(MISSPELT)
    entry = NodeEntry("inverse_dynamics", "inverse_dynamics", "inverse_dynamics")
    with ros_context() as context:
        with pytest.raises(ValueError, match=r"'refrence' \(did you mean 'reference'\?\)"):
            Bringup([entry], context, str(path))
        with pytest.raises(ValueError, match=r"'kpp' \(did you mean 'kp'\?\)"):
            Bringup([entry], context, None, overrides={"inverse_dynamics": {"kpp": 1.0}})
        with pytest.raises(ValueError, match=r"'payload.mas' \(did you mean 'payload.mass'\?\)"):
            SimulatorNode(context=context, parameter_overrides=[Parameter("payload.mas", value=1.0)])
