"""``robodyn demo --scenario payload`` end to end over real DDS (isolated domain): the Panda follows its trajectory, a 2 kg
payload is attached at 5 s, the estimator finds it within 5 % in at most 2 s, and the tracking error after
adaptation is within twice the error before the payload. Shortened to 13 s of simulated time to keep the
suite fast (``robodyn demo`` defaults to 15 s): the "after adaptation" window 8..13 s then spans a whole
period of the 4-s trajectory, as the "before" window 1..5 s does. (At 9 s it was the one second 8..9, the
period's worst with the payload: 3.9e-5 rad against 2.4-2.9e-5 for the seconds after it, so the 2x bound
on 2.1e-5 rad before held or not by a few percent with the load.)"""
import json

import numpy as np

from doc_blocks import code_block, command_argv
from robodyn_ros.cli.demo import main, time_to_within


def test_time_to_within_is_the_last_entry_into_the_band():
    t = np.arange(10.0)
    m = np.array([0, 0, 0, 1.0, 2.5, 2.0, 1.8, 2.05, 2.0, 2.0])
    assert time_to_within(t, m, 2.0, 3.0) == 4.0          # 1.8 at t = 6 is outside 5 %: settles at t = 7
    assert time_to_within(t, np.full(10, 3.0), 2.0, 3.0) is None


def test_demo_scenario_converges(tmp_path, monkeypatch):
    """The block of docs/ADAPTIVE_CONTROL.md's "The payload scenario: a payload seen by the wrist sensor", run
    in a temporary folder with ``--duration 13``."""
    monkeypatch.chdir(tmp_path)
    block = code_block("docs/ADAPTIVE_CONTROL.md", "The payload scenario: a payload seen by the wrist sensor")
    args = command_argv(block, "robodyn demo")
    report_path, plot_path = tmp_path / args[args.index("--report") + 1], tmp_path / args[args.index("--plot") + 1]
    # --no-realtime: a SCHED_FIFO demo would take a core from the other test processes for its duration
    code = main([*args, "--duration", "13", "--no-realtime"])
    report = json.loads(report_path.read_text())
    assert code == 0 and report["completed"], report
    assert abs(report["payload_mass_estimated"] - 2.0) <= 0.05 * 2.0
    assert report["payload_time_to_5_percent"] is not None and report["payload_time_to_5_percent"] <= 2.0
    assert report["tracking_rms_after_adaptation"] <= 2.0 * report["tracking_rms_before_payload"]
    # the payload did disturb the loop before the estimate came in (the test is not vacuous)
    assert report["tracking_rms_after_payload_uncompensated"] > report["tracking_rms_after_adaptation"]
    assert report["non_finite_commands"] == 0
    assert report["simulator_steps"] >= 12900
    assert all(report["acceptance"].values())
    assert plot_path.stat().st_size > 10_000 and plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_twin_scenario_report_and_plot(tmp_path, monkeypatch):
    """The README's demo command (README.md, "The demo") as ``--scenario twin --library`` (the library loop),
    shortened to 8 s with the payload at 6 s (the tracking window 4-6 s begins as the gate's 4-s warm-up
    ends): the report holds the fields of the issue and the plot is written; the numbers themselves are
    checked on longer runs in test_adaptive_twin.py (library loop) and test_twin_nodes.py (the nodes over
    DDS, the demo's default)."""
    monkeypatch.chdir(tmp_path)
    args = command_argv(code_block("README.md", "The demo"), "robodyn demo")
    report_path, plot_path = tmp_path / args[args.index("--report") + 1], tmp_path / args[args.index("--plot") + 1]
    code = main([*args, "--scenario", "twin", "--controller", "computed_torque", "--duration", "8", "--attach-time",
                 "6", "--library"])
    report = json.loads(report_path.read_text())
    assert code == 0
    for key in ("scenario", "controller", "tracking_rms_nominal", "tracking_rms_adapted", "payload_mass_true",
                "payload_mass_estimated", "payload_source", "payload_time_to_5_percent", "non_finite_commands"):
        assert key in report, key
    assert report["scenario"] == "twin" and report["controller"] == "computed_torque"
    assert report["runtime"].startswith("library")
    assert report["payload_source"] == "joint_torques" and report["payload_mass_true"] == 2.0
    assert report["non_finite_commands"] == 0
    assert report["tracking_rms_adapted"] < report["tracking_rms_nominal"]
    assert plot_path.stat().st_size > 10_000 and plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["--scenario", "twin", "--robot", "ur5", "--plant", "twin", "--headless"]) == 2   # the Panda's twin
    assert main(["--scenario", "twin", "--robot", "ur5", "--plant", "perturbed:x", "--headless"]) == 2


def test_the_friction_plot_names_each_joint_and_the_simulated_robot():
    """The friction panel has one legend entry per joint, and calls the dotted lines the twin's only on the Panda
    twin (it said "twin (dotted)" on perturbed plants too)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from robodyn_ros.cli.demo import plot_friction
    adapted = {"t_estimate": np.arange(3.0), "coulomb": np.ones((3, 2))}
    for plant, says in (("perturbed:1 (a plausible real robot drawn around the URDF)", "simulated robot (dotted)"),
                        ("panda_twin (identified from a real Panda's log)", "twin (dotted)")):
        fig, ax = plt.subplots()
        plot_friction(ax, adapted, {"plant": plant, "joints": ["a1", "a2"], "coulomb_true": [0.5, 0.7]})
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a1", "a2"]
        assert ax.get_ylabel().endswith(says), ax.get_ylabel()
        plt.close(fig)
