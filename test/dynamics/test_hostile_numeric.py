"""Hostile input to the public numeric functions (issue 9): any value of any argument either raises
ModelError/ValueError whose message names the argument, or -- for finite input of the right shape --
returns finite results of the right shape. Nothing else (no TypeError, OverflowError, IndexError, no NaN
out of finite input, no warning on stderr).

Property-based (hypothesis), derandomized so that every run checks the same examples.
"""
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import robodyn_ros as rd
from robodyn_ros.model.model import MAX_MAGNITUDE
from robodyn_ros.robots import bundled_robot_info, bundled_urdf_path
from robodyn_ros.simulation.simulator import Simulator

MODEL = rd.Model.from_urdf(bundled_urdf_path("ur5"))
NV, NB = MODEL.nv, MODEL.nbodies
HOME = np.array(bundled_robot_info("ur5")["home"])
PI = MODEL.inertial_parameters()


def _step(tau_command):
    sim = Simulator(MODEL, q0=HOME)
    sim.step(tau_command)
    return np.concatenate([sim.q, sim.v])


# function name -> (call taking keyword overrides, its arguments with their shapes, output shape)
FUNCTIONS = {
    "rnea": (lambda q=HOME, v=np.zeros(NV), a=np.zeros(NV), f_ext=None, pi=None:
             rd.rnea(MODEL, q, v, a, f_ext=f_ext, pi=pi),
             {"q": (NV,), "v": (NV,), "a": (NV,), "f_ext": (NB, 6), "pi": (10 * NB,)}, (NV,)),
    "aba": (lambda q=HOME, v=np.zeros(NV), tau=np.zeros(NV), f_ext=None, pi=None:
            rd.aba(MODEL, q, v, tau, f_ext=f_ext, pi=pi),
            {"q": (NV,), "v": (NV,), "tau": (NV,), "f_ext": (NB, 6), "pi": (10 * NB,)}, (NV,)),
    "crba": (lambda q=HOME, pi=None: rd.crba(MODEL, q, pi=pi), {"q": (NV,), "pi": (10 * NB,)}, (NV, NV)),
    "regressor": (lambda q=HOME, v=np.zeros(NV), a=np.zeros(NV): rd.regressor(MODEL, q, v, a),
                  {"q": (NV,), "v": (NV,), "a": (NV,)}, (NV, 10 * NB)),
    "coriolis_matrix": (lambda q=HOME, v=np.zeros(NV), pi=None: rd.coriolis_matrix(MODEL, q, v, pi=pi),
                        {"q": (NV,), "v": (NV,), "pi": (10 * NB,)}, (NV, NV)),
    "friction_torque": (lambda v=np.zeros(NV), viscous=None, coulomb=None, offset=None:
                        rd.friction_torque(MODEL, v, viscous, coulomb, offset),
                        {"v": (NV,), "viscous": (NV,), "coulomb": (NV,), "offset": (NV,)}, (NV,)),
    "Simulator.step": (lambda tau_command=np.zeros(NV): _step(tau_command), {"tau_command": (NV,)}, (2 * NV,)),
}
OPTIONAL = {"f_ext", "pi", "viscous", "coulomb", "offset"}   # None: the model's own values
CASES = [(f, arg) for f, (_, args, _) in FUNCTIONS.items() for arg in args]

# ------------------------------------------------------------------------------------------ strategies
PLAUSIBLE = st.floats(-1e6, 1e6, allow_nan=False)
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


def valid_values(arg, shape):
    """Finite values of the right shape (arrays, lists, ints); parameters stay physical (each body's 10
    parameters scaled by a positive factor), since ABA needs positive-definite inertias."""
    if arg == "pi":
        return st.lists(st.floats(0.01, 100.0), min_size=NB, max_size=NB).map(
            lambda s: PI * np.repeat(s, 10))
    arrays = hnp.arrays(np.float64, shape, elements=PLAUSIBLE)
    return st.one_of(arrays, arrays.map(lambda x: x.tolist()),
                     hnp.arrays(np.int64, shape, elements=st.integers(-1000, 1000)))


def invalid_values(shape):
    """Everything else: NaN/inf/huge entries, wrong shapes (0-d, 2-d, ...), scalars, strings, ragged
    lists, complex numbers, ints beyond float range, None."""
    n = int(np.prod(shape))
    with_bad_entry = st.tuples(hnp.arrays(np.float64, shape, elements=PLAUSIBLE),
                               st.integers(0, n - 1),
                               st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -1.7e308, 2 * MAX_MAGNITUDE]))

    def poke(t):
        x, k, bad = t
        x.ravel()[k] = bad
        return x
    wrong_shape = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=7),
                             elements=ANY_FLOAT).filter(lambda x: x.shape != shape)
    return st.one_of(
        with_bad_entry.map(poke),
        hnp.arrays(np.float64, shape, elements=ANY_FLOAT).filter(lambda x: not np.isfinite(x).all()),
        wrong_shape, wrong_shape.map(lambda x: x.tolist()),
        ANY_FLOAT, st.integers(), st.none(), st.text(max_size=8),
        st.lists(st.text(max_size=3), min_size=n, max_size=n),
        st.just([[1.0, 2.0], 3.0]), st.just({"q": 1.0}),
        hnp.arrays(np.complex128, shape, elements=st.complex_numbers(max_magnitude=10)),
        st.just([10 ** 400] * n).map(lambda x: np.reshape(np.array(x, dtype=object), shape).tolist()),
    )


def check_call(function, arg, value):
    """The property: a clean, named refusal, or finite results of the right shape."""
    call, args, out_shape = FUNCTIONS[function]
    shape = args[arg]
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a ComplexWarning or overflow RuntimeWarning is a failure
        try:
            out = call(**{arg: value})
        except ValueError as exc:        # ModelError is a ValueError
            assert re.search(rf"(^|[\s:']){re.escape(arg)}([\s\[']|$)", str(exc)), \
                f"{function}: the error for {arg} does not name it: {exc}"
            return "refused"
    arr = np.asarray(np.zeros(shape) if value is None and arg in OPTIONAL else value)
    assert arr.dtype.kind in "iuf" and arr.shape == shape and np.all(np.abs(arr) <= MAX_MAGNITUDE), \
        f"{function} accepted {arg}={value!r}"
    out = np.asarray(out)
    assert out.shape == out_shape and np.isfinite(out).all(), f"{function}({arg}={value!r}) -> {out}"
    return "ok"


# ---------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("function, arg", CASES, ids=[f"{f}-{a}" for f, a in CASES])
@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_any_argument_is_refused_by_name_or_gives_finite_results(function, arg, data):
    shape = FUNCTIONS[function][1][arg]
    value = data.draw(st.one_of(valid_values(arg, shape), invalid_values(shape)), label=arg)
    check_call(function, arg, value)


# Regression examples found by the properties above (before the fixes in model.py / friction.py /
# simulation.py / rnea, aba, crba, dynamic_matrices): each raised something else or returned NaN.
@pytest.mark.parametrize("function, arg, value", [
    ("rnea", "q", "abc"),                            # numpy's ValueError without the argument's name
    ("rnea", "q", [1.0, [2.0, 3.0]]),                # ragged list: ditto
    ("rnea", "q", [10 ** 400] * 6),                  # OverflowError
    ("rnea", "q", {"q": 1.0}),                       # TypeError
    ("rnea", "v", np.ones(6) * 1j),                  # ComplexWarning, imaginary part dropped silently
    ("rnea", "v", np.full(6, 1e200)),                # finite input, NaN torques (v x I v overflows)
    ("regressor", "v", np.full(6, 1e200)),           # inf in Y
    ("regressor", "a", [np.nan, 0, 0, 0, 0, 0]),    # the message named "a_r", not "a"
    ("rnea", "pi", [1.0]),                           # IndexError
    ("rnea", "pi", np.full(60, np.nan)),             # NaN torques
    ("aba", "pi", np.zeros(59)),                     # IndexError
    ("coriolis_matrix", "pi", np.full(60, np.inf)),  # NaN
    ("friction_torque", "viscous", np.zeros(3)),     # numpy broadcasting error
    ("friction_torque", "coulomb", np.full(6, np.nan)),  # NaN friction
    ("Simulator.step", "tau_command", "x"),          # numpy's ValueError
    ("Simulator.step", "tau_command", [10 ** 400] * 6),  # OverflowError
])
def test_regressions(function, arg, value):
    assert check_call(function, arg, value) == "refused"


def test_valid_defaults_give_finite_results():
    """The property's "ok" branch is reachable for every function (the test can fail both ways)."""
    for function, (_, args, _) in FUNCTIONS.items():
        arg = next(iter(args))
        assert check_call(function, arg, HOME if arg == "q" else np.full(args[arg], 0.5)) == "ok"
