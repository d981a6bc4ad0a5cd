"""The kernels' two libraries (robodyn_ros.kernels.parts): a controller or simulator starting on a cold cache
builds the ``dynamics`` part only, a derivative read later builds the ``derivatives`` part (saying so in one
line), and both parts give the results of a build of all of them at once."""
import numpy as np
import pytest
from conftest import assert_close, load_pair

from robodyn_ros.kernels import compile_kernels
from robodyn_ros.kernels.build import cache_key


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODYN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _libraries(cache):
    return sorted(p.name.split(".")[0] for p in cache.glob("_robodyn_kernels_*.so"))


def test_nodes_build_the_dynamics_part_and_derivatives_are_built_when_first_read(private_cache, monkeypatch,
                                                                                 capfd, rng):
    """The inverse_dynamics node's control loop and the simulator's runtime on the UR5 from an empty cache
    leave one library there, the dynamics part's; reading ``rnea_derivatives`` then builds the derivatives
    part with one notice, and every function equals the kernels built all at once in the normal cache."""
    from robodyn_ros.control.control_loop import ControlLoop
    from robodyn_ros.ros.node_parameters import load_robot, resolve_node_config
    from robodyn_ros.simulation.runtime import SimulationRuntime
    robot = load_robot(resolve_node_config("inverse_dynamics", {"robot": "ur5"}))
    model = robot.model
    fingerprint = model.fingerprint()
    capfd.readouterr()
    loop = ControlLoop(robot, resolve_node_config("inverse_dynamics", {"robot": "ur5"}), lambda tau: None)
    SimulationRuntime(robot, resolve_node_config("simulator", {"robot": "ur5"}), lambda: None, lambda *a: None)
    assert _libraries(private_cache) == ["_robodyn_kernels_" + cache_key(fingerprint, "dynamics")]
    notices = [line for line in capfd.readouterr().err.splitlines() if line.startswith("robodyn:")]
    assert len(notices) == 1 and "compiling the dynamics kernels of" in notices[0], notices
    kernels = loop.kernels
    assert kernels.parts == ("dynamics",) and not kernels.from_cache
    q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    dq, dv, M = kernels.rnea_derivatives(q, v, a)
    assert kernels.parts == ("dynamics", "derivatives")
    notices = [line for line in capfd.readouterr().err.splitlines() if line.startswith("robodyn:")]
    assert len(notices) == 1 and "compiling the derivative kernels of" in notices[0], notices
    assert len(_libraries(private_cache)) == 2
    assert set(kernels.sources) >= {"rnea_derivatives", "aba_derivatives"}
    monkeypatch.delenv("ROBODYN_CACHE_DIR")
    ours, _ = load_pair("ur5")
    reference = compile_kernels(ours, register=False)
    assert reference.parts == ("dynamics", "derivatives")
    assert_close(M, reference.crba(q), rtol=1e-12)
    for got, want in zip((dq, dv), reference.rnea_derivatives(q, v, a)[:2]):
        assert_close(got, want, rtol=1e-12)
    calls = {"rnea": (q, v, a), "aba": (q, v, a), "crba": (q,), "gravity_torque": (q,), "regressor": (q, v, a),
             "coriolis_matrix": (q, v), "aba_derivatives": (q, v, a), "rnea_time_derivatives": (q, v, a, v)}
    for name, args in calls.items():
        got, want = getattr(kernels, name)(*args), getattr(reference, name)(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert_close(g, w, rtol=1e-12, what=name)
    Q = np.array([q, q])
    assert_close(kernels.rnea_derivatives_batch(Q, Q, Q)[0][1], reference.rnea_derivatives(q, q, q)[0], rtol=1e-12)


def test_an_unknown_part_is_named(private_cache):
    model, _ = load_pair("ur5")
    with pytest.raises(ValueError, match=r"unknown part\(s\) \['dynamic'\]; the parts are \['dynamics', 'derivatives'\]"):
        compile_kernels(model, parts=("dynamic",))


def test_a_part_read_after_the_compiler_went_away_is_interpreted_with_a_warning(private_cache, monkeypatch, caplog,
                                                                                  rng):
    """The dynamics part compiled, then no compiler: reading a derivative falls back to CasADi's evaluation of
    that part (one warning) with the compiled part's results kept compiled, instead of raising."""
    import logging
    model, _ = load_pair("ur5")
    kernels = compile_kernels(model, register=False, parts=("dynamics",))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with caplog.at_level(logging.WARNING, logger="robodyn_ros.kernels"):
        q, v, a = model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
        dq, dv, M = kernels.rnea_derivatives(q, v, a)
    assert sum("no C compiler" in r.getMessage() for r in caplog.records) == 1
    assert kernels.compiled and kernels.parts == ("dynamics", "derivatives")
    assert_close(M, kernels.crba(q), rtol=1e-12)
    assert_close(kernels.aba_derivatives(q, v, a)[2], np.linalg.inv(M), rtol=1e-10)
