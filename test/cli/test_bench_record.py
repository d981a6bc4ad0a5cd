"""`robodyn bench WHICH --record FILE.md`: the figures appended to a Markdown file as one dated section with
the machine's load, the file's earlier content kept, nothing written when the write fails."""
import datetime
import os
import sys
import types

import pytest

from robodyn_ros.benchmarks import record
from robodyn_ros.cli.main import main

RESULT = {"rti_median_ms": 0.39123456, "solves": 300, "profile": {"nlp_f_ms": 0.0237, "calls": 4}, "notes": []}


def test_a_section_holds_the_date_the_load_and_every_figure():
    when = datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.timezone.utc)
    text = record.record_section("mpc", RESULT, when=when, load=1.25)
    assert text.startswith("## `robodyn bench mpc`, 2026-01-02 03:04 UTC\n")
    assert "1-min load 1.25" in text and f"{os.cpu_count()} cores" in text
    block = text.split("```text\n")[1].split("```")[0].splitlines()
    assert block == ["rti_median_ms: 0.391235", "solves: 300", "profile.nlp_f_ms: 0.0237", "profile.calls: 4",
                     "notes: []"]


def test_records_append_to_the_file_and_keep_what_it_held(tmp_path):
    path = tmp_path / "PERFORMANCE.md"
    record.append_record(path, "mpc", RESULT)                       # created
    record.append_record(path, "kernels", {"panda": {"rnea_us": 1.5}})
    text = path.read_text()
    assert text.count("## `robodyn bench ") == 2 and text.index("bench mpc") < text.index("bench kernels")
    assert "panda.rnea_us: 1.5" in text


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "PERFORMANCE.md"
    path.write_text("# Performance\n")

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(record.os, "replace", fail)
    with pytest.raises(OSError):
        record.append_record(path, "mpc", RESULT)
    assert path.read_text() == "# Performance\n" and os.listdir(tmp_path) == ["PERFORMANCE.md"]


def test_the_command_records_what_the_bench_returned(tmp_path, monkeypatch, capsys):
    fake = types.ModuleType("robodyn_ros.benchmarks.mpc")
    fake.run = lambda json=False: dict(RESULT)                      # the measuring itself is not under test
    monkeypatch.setitem(sys.modules, "robodyn_ros.benchmarks.mpc", fake)
    path = tmp_path / "perf.md"
    assert main(["bench", "mpc", "--record", str(path)]) == 0
    assert "rti_median_ms: 0.391235" in path.read_text()
