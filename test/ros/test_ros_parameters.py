"""robodyn_ros.ros.parameters: one schema gives descriptors, pure validation, the config and live updates;
the ROS-free YAML reader gives what ``--ros-args --params-file`` gives a real rclpy node."""
import math
import re

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 wheels) is not installed: pip install '.[ros]'")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from robodyn_ros.ros import parameters as rp  # noqa: E402
from robodyn_ros.ros.parameters import ParameterSpec  # noqa: E402
from robodyn_ros.ros.testing import ros_context  # noqa: E402

SCHEMA = (
    ParameterSpec("urdf_path", str, "", "Robot description file.", read_only=True),
    ParameterSpec("joint_names", list[str], [], "Controlled joints, in command order.", read_only=True),
    ParameterSpec("rate_hz", float, 1000.0, "Control rate.", read_only=True, range=(1.0, 10000.0)),
    ParameterSpec("gains.kp", list[float], [100.0, 100.0], "Proportional gains.", range=(0.0, None), live=True),
    ParameterSpec("gains.lambda", float, 10.0, "Sliding-surface bandwidth.", range=(0.0, 1e3), live=True),
    ParameterSpec("horizon", int, 20, "MPC nodes.", range=(1, 200)),
    ParameterSpec("solver", str, "ipopt", "NLP solver.", choices=("ipopt", "sqpmethod")),
    ParameterSpec("adapt", bool, True, "Adapt the parameters online.", live=True),
)


@pytest.fixture
def context():
    with ros_context() as ctx:
        yield ctx


def write(tmp_path, text, name="params.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------------------------------ pure validation
@pytest.mark.parametrize("values, error", [
    ({"gains.lambda": 5}, r"gains.lambda: expected float, got int 5 \(write it with a decimal point"),
    ({"gains.lambda": -1.0}, r"gains.lambda: -1.0 is outside \[0.0, 1000.0\]"),
    ({"gains.lambda": math.nan}, "gains.lambda: NaN is not a valid value"),
    ({"gains.lambda": math.inf}, r"gains.lambda: inf is not a valid value \(it must be finite\)"),
    ({"gains.kp": [1.0, math.inf]}, r"gains.kp: inf is not a valid value \(it must be finite\)"),
    ({"gains.kp": [1.0, -2.0]}, r"gains.kp: -2.0 is outside \[0.0, inf\]"),
    ({"gains.kp": [1.0, 2]}, "gains.kp: expected float, got int 2"),
    ({"gains.kp": 3.0}, "gains.kp: expected a list of float"),
    ({"horizon": 0}, r"horizon: 0 is outside \[1, 200\]"),
    ({"horizon": True}, "horizon: expected int, got bool True"),
    ({"horizon": 2.0}, "horizon: expected int, got float"),
    ({"solver": "snopt"}, r"solver: 'snopt' is not one of \['ipopt', 'sqpmethod'\]"),
    ({"adapt": 1}, "adapt: expected bool, got int 1"),
])
def test_validate_reports_the_parameter_and_the_rule(values, error):
    errors = rp.validate(SCHEMA, values)
    assert len(errors) == 1
    assert re.search(error, errors[0]), errors


def test_validate_accepts_good_values_and_ignores_foreign_names():
    good = {"gains.lambda": 0.0, "gains.kp": [0.0, 1e3], "horizon": 200, "solver": "sqpmethod", "adapt": False,
            "use_sim_time": True, "someone.else": "x"}
    assert rp.validate(SCHEMA, good) == []
    assert rp.validate(SCHEMA, {"gains.lambda": 1e3, "rate_hz": 1.0}) == []


def test_spec_rejects_contradictions_and_bad_defaults():
    with pytest.raises(ValueError, match="read_only and live"):
        ParameterSpec("x", float, 1.0, "", read_only=True, live=True)
    with pytest.raises(ValueError, match=r"default of x: 5.0 is outside"):
        ParameterSpec("x", float, 5.0, "", range=(0.0, 1.0))
    with pytest.raises(ValueError, match="type"):
        ParameterSpec("x", dict, {}, "")
    with pytest.raises(ValueError, match="a range needs an int or float"):
        ParameterSpec("x", str, "a", "", range=(0, 1))


def test_resolve_config_merges_yaml_over_defaults_and_lists_every_error(tmp_path):
    path = write(tmp_path, "/**:\n  ros__parameters:\n    horizon: 50\n    solver: sqpmethod\n    unknown: 3\n")
    config = rp.resolve_config(SCHEMA, rp.load_params_yaml(path, "mpc"))
    assert config["horizon"] == 50 and config["solver"] == "sqpmethod" and "unknown" not in config
    assert config["gains.kp"] == [100.0, 100.0]
    with pytest.raises(ValueError, match="horizon: 0 is outside.*solver: 'x' is not one of"):
        rp.resolve_config(SCHEMA, {"horizon": 0, "solver": "x"})


# ------------------------------------------------------------------------------------- the YAML reader
PARAMS_FILE = """\
/**:
  ros__parameters:
    gain: 1.0
    flag: yes
    short: y
    sci: 1e-3
    word: hello
    quoted: "12"
    ints: [1, 2, 3]
    floats: [1.0, 2.5]
    strs: [a, "b"]
    bools: [true, off]
    neg_inf: -.inf
    underscored: 1_0
/robot/*:
  ros__parameters:
    gain: 2.0
/robot:
  ctrl:
    ros__parameters:
      mpc:
        horizon: 20
        dt: .01
/**/ctrl:
  ros__parameters:
    gain: 3.0
other:
  ros__parameters:
    gain: 9.0
/robot/ctrl:
  ros__parameters:
    late: 4
"""


def rclpy_overrides(context, path, name, namespace):
    node = Node(name, namespace=namespace, context=context, cli_args=["--ros-args", "--params-file", path])
    try:
        return {key: (list(p.value) if isinstance(p.value, (list, tuple)) or hasattr(p.value, "typecode") else p.value)
                for key, p in node._parameter_overrides.items()}
    finally:
        node.destroy_node()


@pytest.mark.parametrize("name, namespace", [("ctrl", "/robot"), ("ctrl", "/"), ("ctrl", "/x/y"), ("other", "/"),
                                             ("arm", "/robot"), ("arm", "/robot/deep")])
def test_load_params_yaml_matches_rclpy(context, tmp_path, name, namespace):
    path = write(tmp_path, PARAMS_FILE)
    expected = rclpy_overrides(context, path, name, namespace)
    fqn = namespace.rstrip("/") + "/" + name
    got = rp.load_params_yaml(path, fqn)
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}


def test_load_params_yaml_later_entries_win_as_in_rclpy(context, tmp_path):
    path = write(tmp_path, "ctrl:\n  ros__parameters:\n    gain: 2.0\n/**:\n  ros__parameters:\n    gain: 1.0\n")
    assert rp.load_params_yaml(path, "ctrl") == rclpy_overrides(context, path, "ctrl", "/") == {"gain": 1.0}


def test_load_params_yaml_rejects_what_rcl_rejects(tmp_path):
    with pytest.raises(ValueError, match="mixes integers and floats"):
        rp.load_params_yaml(write(tmp_path, "/**:\n  ros__parameters:\n    x: [1, 2.0]\n"), "n")
    with pytest.raises(ValueError, match="neither a namespace nor ros__parameters"):
        rp.load_params_yaml(write(tmp_path, "n:\n  gain: 1.0\n"), "n")
    assert rp.load_params_yaml(write(tmp_path, ""), "n") == {}


# -------------------------------------------------------------------------------- on a real rclpy node
def test_declare_parameters_descriptors_overrides_and_config(context, tmp_path):
    path = write(tmp_path, "/**:\n  ros__parameters:\n    joint_names: [a, b]\n    horizon: 40\n"
                           "    gains:\n      kp: [1.0, 2.0]\n")
    node = Node("mpc", context=context, cli_args=["--ros-args", "--params-file", path])
    try:
        rp.declare_parameters(node, SCHEMA)
        config = rp.read_config(node, SCHEMA)
        assert config == rp.resolve_config(SCHEMA, rp.load_params_yaml(path, "mpc"))
        assert config["joint_names"] == ["a", "b"] and config["horizon"] == 40 and config["gains.kp"] == [1.0, 2.0]
        rate = node.describe_parameter("rate_hz")
        assert rate.read_only and rate.description == "Control rate."
        assert (rate.floating_point_range[0].from_value, rate.floating_point_range[0].to_value) == (1.0, 1e4)
        horizon = node.describe_parameter("horizon")
        assert (horizon.integer_range[0].from_value, horizon.integer_range[0].to_value) == (1, 200)
        assert "One of ['ipopt', 'sqpmethod']" in node.describe_parameter("solver").description
        assert rp.read_config(node, SCHEMA)["urdf_path"] == ""
    finally:
        node.destroy_node()


def test_integer_yaml_value_for_a_float_parameter_fails_with_the_fix(context, tmp_path):
    path = write(tmp_path, "/**:\n  ros__parameters:\n    gains:\n      lambda: 5\n")
    assert rp.validate(SCHEMA, rp.load_params_yaml(path, "n")) != []
    node = Node("n", context=context, cli_args=["--ros-args", "--params-file", path])
    try:
        with pytest.raises(ValueError, match="gains.lambda.*a float needs a decimal point"):
            rp.declare_parameters(node, SCHEMA)
    finally:
        node.destroy_node()


def test_schema_violation_that_rclpy_accepts_is_caught_at_declaration(context, tmp_path):
    path = write(tmp_path, "/**:\n  ros__parameters:\n    solver: snopt\n")
    node = Node("n", context=context, cli_args=["--ros-args", "--params-file", path])
    try:
        with pytest.raises(ValueError, match="solver: 'snopt' is not one of"):
            rp.declare_parameters(node, SCHEMA)
    finally:
        node.destroy_node()


def test_live_update_validates_then_applies_only_live_parameters(context):
    node = Node("n", context=context)
    applied = []
    try:
        rp.declare_parameters(node, SCHEMA)
        rp.install_live_update(node, SCHEMA, applied.append)
        ok = node.set_parameters_atomically([Parameter("gains.lambda", value=20.0), Parameter("horizon", value=30),
                                             Parameter("gains.kp", value=[5.0, 6.0])])
        assert ok.successful
        assert applied == [{"gains.lambda": 20.0, "gains.kp": [5.0, 6.0]}]
        assert rp.read_config(node, SCHEMA)["horizon"] == 30
        # a rejected change is neither stored nor applied: choices and list ranges are ours, scalar ranges rclpy's
        for bad, reason in [(Parameter("solver", value="snopt"), "not one of"),
                            (Parameter("gains.kp", value=[1.0, -1.0]), "outside"),
                            (Parameter("gains.lambda", value=-1.0), "out of range"),
                            (Parameter("rate_hz", value=500.0), "read-only"),
                            (Parameter("gains.lambda", value=3), "type")]:
            result = node.set_parameters([bad])[0]
            assert not result.successful and reason in result.reason, result.reason
        assert len(applied) == 1
        assert rp.read_config(node, SCHEMA)["solver"] == "ipopt"
        node.set_parameters([Parameter("horizon", value=10)])
        assert len(applied) == 1, "a non-live change reaches apply_callback"
    finally:
        node.destroy_node()
