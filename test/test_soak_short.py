"""A 20-second version of the soak run (issue #9; the 30-minute one is ``robodyn bench soak``, docs/SOAK.md):
simulator, estimator and inverse_dynamics as three processes at 1 kHz with the payload attached at t = 5 s,
checked on the same four criteria.

Numbers: 20 s measured after start-up, windows of 2 s, the first 4 s warm-up.
* zero commands with a NaN or |tau_i| > effort_limit_i;
* all three node processes alive at the end;
* RSS growth of each node from the first window after warm-up (t = 6 s) to the last (t = 20 s) below 10 %
  (the 30-minute run uses 5 %). Looser over 14 s because this window is still early (first payload update,
  first estimator publishes of every message type allocate); measured 0.0-2.1 % here with RSS ~140-180 MB,
  so the bound trips on a leak above ~1.3 MB/s (e.g. 1.3 kB kept per 1 kHz message); slower leaks need the long run;
* the controller's p99 latency (its /diagnostics, rolling 10 000 states) averaged over the last 3 windows
  no worse than over the first 3 after warm-up, within 20 % (soak.verdict's tolerance).
One test function (not a module fixture shared by several): under pytest-xdist (-n 2) every worker would
run its own copy of a module fixture, i.e. two soaks at once on the 2 shared cores.
Also: the loop ran at all (commands >= 25 % of 20 000 states: the machine's 2 cores are shared; measured
60-99.5 % under load 10-17) and the estimator published a payload estimate.
"""
import pytest

from robodyn_ros.benchmarks import soak

pytest.importorskip("rclpy")


def test_soak_twenty_seconds_meets_the_four_criteria(tmp_path):
    path = tmp_path / "soak_short.json"
    report = soak.run(minutes=20 / 60, json=True, report=str(path), window_seconds=2.0, warmup_seconds=4.0,
                      memory_growth_limit=0.10)
    assert path.exists()
    assert len(report["windows"]) == 10
    # the loop ran at all, and the estimator published
    assert report["totals"]["commands"] >= 0.25 * 20 * soak.RATE, report["totals"]
    assert report["estimator_end"]["payload_estimate"] is not None
    assert report["estimator_end"]["base_parameter_count"] > 0
    # 1. no NaN or out-of-limit torque
    v = report["verdict"]["no_bad_torques"]
    assert v["nan_commands"] == 0 and v["over_limit_commands"] == 0, report["bad_command_examples"]
    # 2. no node crashed
    assert report["node_exits"] == {}, report["node_exits"]
    assert all(report["windows"][-1]["alive"].values())
    # 3. RSS growth of each node under 10 % over the 14 measured seconds
    growth = report["verdict"]["memory_growth"]["growth"]
    for kind in soak.NODE_KINDS:
        assert growth[kind] is not None and growth[kind] < 0.10, (kind, growth)
    # 4. controller p99 at the end no worse than at the start (within 20 %)
    v = report["verdict"]["latency_no_worse"]
    assert v["controller_p99_start_ms"] > 0.0
    assert v["controller_p99_end_ms"] <= 1.2 * v["controller_p99_start_ms"], v
    assert report["verdict"]["pass"], report["verdict"]
