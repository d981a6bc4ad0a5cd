"""A 20-second version of the soak run (issue #9; the 30-minute one is ``robodyn bench soak``, docs/SOAK.md):
simulator, estimator and inverse_dynamics as three processes at 1 kHz with the payload attached at t = 5 s,
checked on the four criteria of the 30-minute run (the fourth, latency, measured but not judged: see
below).

Numbers: 20 s measured after start-up, windows of 2 s, the first 4 s warm-up.
* zero commands with a NaN or |tau_i| > effort_limit_i;
* all three node processes alive at the end;
* RSS growth of each node from the first window after warm-up (t = 6 s) to the last (t = 20 s) below 10 %
  (the 30-minute run uses 5 %). Looser over 14 s because this window is still early (first payload update,
  first estimator publishes of every message type allocate); measured 0.0-2.1 % here with RSS ~140-180 MB,
  so the bound trips on a leak above ~1.3 MB/s (e.g. 1.3 kB kept per 1 kHz message); slower leaks need the long run;
* the controller's p99 latency (its /diagnostics, rolling 10 000 states) measured in the first 3 windows
  after warm-up and the last 3, finite and positive. Whether the end is no worse than the start (within
  20 %, soak.verdict's tolerance) is a timing verdict, judged by the 30-minute ``robodyn bench soak`` on an
  idle machine, not here: in 20 s beside a second pytest worker on the same 2 cores one run measured
  0.267 ms at the start and 0.335 ms at the end (1.25x), with nothing wrong with the nodes.
One test function (not a module fixture shared by several): under pytest-xdist (-n 2) every worker would
run its own copy of a module fixture, i.e. two soaks at once on the 2 shared cores.
Also: the loop ran at all (commands >= 25 % of 20 000 states: the machine's 2 cores are shared; measured
60-99.5 % under load 10-17) and the estimator published a payload estimate.

Control quality (none of the four criteria sees a loop that does not track):
* the largest |q - q_d| (the controller's ``~/tracking_error``) in every measured window below
  ``TRACKING_BOUND`` = 0.5 rad (controller on its nominal model: see the test's first comment). Measured (2026-11-23 13:21 UTC, HEAD aa228a2, load 3-4): 0.005-0.05 rad,
  0.11 rad in the window where the 2 kg payload attaches (simulated t = 5 s; the controller uses the
  estimator's payload, which converges over the following seconds). 0.5 rad is 4.5x that transient; the
  non-tracking runs seen (a joint driven into its limit stop, torques at the effort limit, F/T
  "saturated" at 200-800 N) give 2.4-4.1 rad;
* the estimator's payload mass at the end within 10 % of the true 2 kg (measured 1.886, 1.944 and
  1.975 kg after ~15 s of payload; 5.7 % the worst).

The CDR parsers of the monitor (raw subscriptions) are checked against ``rclpy.serialization`` below.
"""
import struct

import numpy as np
import pytest

from robodyn_ros.bags import cdr
from robodyn_ros.benchmarks import soak, soak_report

# one worker runs the tests that start many processes, one after another (setup.cfg: --dist loadgroup)
pytestmark = pytest.mark.xdist_group("processes")

pytest.importorskip("rclpy")
TRACKING_BOUND = 0.5       # rad, see the module docstring
PAYLOAD_TRUE_MASS = 2.0    # kg, config/panda.yaml's payload, attached at simulated t = soak.PAYLOAD_ATTACH_TIME


def test_soak_twenty_seconds_meets_the_four_criteria(tmp_path):
    # the controller applies the estimator's payload live (use_estimates, as in the 30-minute soak). Before the
    # estimator published only converged payloads (payload_publish_std), 1 run in 3-5 lost tracking (3.8 rad)
    # for 2-8 s around the attachment; with the gate 8 of 8 20-s runs tracked within 0.035 rad.
    path = tmp_path / "soak_short.json"
    report = soak.run(minutes=20 / 60, json=True, report=str(path), window_seconds=2.0, warmup_seconds=4.0,
                      memory_growth_limit=0.10)
    assert path.exists()
    for w in report["windows"]:
        print(soak_report.format_row(w))
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
    # control quality: the loop tracks its reference, the estimator finds the payload
    measured = [w for w in report["windows"] if not w["warmup"]]
    tracking = [w["tracking_error_max_rad"] for w in measured]
    assert max(tracking) < TRACKING_BOUND, tracking
    mass = report["estimator_end"]["payload_estimate"]["mass"]
    assert abs(mass - PAYLOAD_TRUE_MASS) <= 0.10 * PAYLOAD_TRUE_MASS, \
        (mass, [w["estimator_payload_mass"] for w in report["windows"]])
    # the harness's own columns are there: CPU per process, idle fraction, memory beside the rule
    for w in measured:
        assert set(w["cpu_percent"]) == {*soak.NODE_KINDS, "monitor"}
        assert all(0.0 <= c <= 100.0 * soak.os.cpu_count() + 5.0 for c in w["cpu_percent"].values()), w["cpu_percent"]
        assert 0.0 <= w["machine_idle_fraction"] <= 1.0
    info = report["verdict"]["memory_growth"]["information"]
    assert info["growth_after_memory_warmup"] is not None
    # 4. the controller's p99 at the start and at the end measured (their ratio: the module docstring)
    v = report["verdict"]["latency_no_worse"]
    assert 0.0 < v["controller_p99_start_ms"] < np.inf and 0.0 < v["controller_p99_end_ms"] < np.inf, v
    print(f"controller p99 {v['controller_p99_start_ms']} ms -> {v['controller_p99_end_ms']} ms")
    assert all(report["verdict"][c]["pass"] for c in ("no_bad_torques", "no_crashes", "memory_growth")), \
        report["verdict"]


# --- the monitor's CDR parsers against rclpy's serializer (no soak, milliseconds)

def _multiarray(dims, data_offset, data):
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    msg = Float64MultiArray(data=[float(x) for x in data])
    msg.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride) for label, size, stride in dims]
    msg.layout.data_offset = data_offset
    return msg


LAYOUTS = [
    [],                                                     # the commands: no dims
    [("", 0, 0)],                                           # an empty label (string of length 1: the NUL)
    [("x", 7, 7)],                                          # 1-char label: 2 bytes + 2 of padding
    [("abc", 2, 6), ("rows_and_more", 3, 3)],               # 4-byte label (no padding), then 14 bytes
    [("stamp", 1, 1)] + [(f"panda_joint{i}", 1, 1) for i in range(1, 8)],   # the tracking error's layout
]


@pytest.mark.parametrize("dims", LAYOUTS, ids=lambda d: f"{len(d)}dims")
@pytest.mark.parametrize("n", [0, 1, 2, 7, 69])
def test_float64_multiarray_parser_matches_rclpy_serialization(dims, n):
    from rclpy.serialization import serialize_message

    rng = np.random.default_rng(n + 10 * len(dims))
    data = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5, size=n)
    if n >= 2:
        data[:2] = [np.inf, -0.0]
    buf = serialize_message(_multiarray(dims, n + 3, data))
    parsed_dims, data_offset, parsed = cdr.read_float64_multiarray(buf, labels=True)
    assert parsed_dims == [tuple(d) for d in dims]
    assert data_offset == n + 3
    assert parsed.shape == (n,) and parsed.tobytes() == data.astype("<f8").tobytes()   # bit for bit
    assert [d[1:] for d in cdr.read_float64_multiarray(buf)[0]] == [d[1:] for d in dims]   # labels skipped


def test_float64_multiarray_parser_reads_big_endian_cdr():
    """rclpy writes little endian only; a big-endian buffer (encapsulation 0x00 0x00) built by hand with the
    same alignment rules: 1 dim "ab" (size 2, stride 1), data_offset 5, data [1.5, -2.25]."""
    body = struct.pack(">I", 1) + struct.pack(">I", 3) + b"ab\0" + b"\0" + struct.pack(">III", 2, 1, 5)
    body += struct.pack(">I", 2) + b"\xee" * 4     # data length at body offset 24, padding to 32 for the doubles
    body += struct.pack(">dd", 1.5, -2.25)
    dims, offset, data = cdr.read_float64_multiarray(b"\x00\x00\x00\x00" + body, labels=True)
    assert dims == [("ab", 2, 1)] and offset == 5 and data.tolist() == [1.5, -2.25]


@pytest.mark.parametrize("sec,nanosec", [(0, 0), (12, 345_000_000), (1_795_440_109, 999_999_999), (-3, 5)])
def test_header_stamp_parser_matches_rclpy_serialization(sec, nanosec):
    from rclpy.serialization import serialize_message

    from robodyn_ros.ros.messages import make_joint_state

    joints = [f"panda_joint{i}" for i in range(1, 8)]
    msg = make_joint_state(0.0, joints, np.zeros(7), np.zeros(7), np.zeros(7))
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    msg.header.frame_id = "base"
    assert cdr.header_stamp_ns(serialize_message(msg)) == sec * 1_000_000_000 + nanosec


def test_report_records_the_run_and_the_machine_not_the_repository():
    header = soak._report_header(1.0, 6.0, 12.0, 20.0, "poll", False)
    assert header["rate_hz"] == soak.RATE and header["machine"]["cpus"] == soak.os.cpu_count()
    assert not {"issue", "git_head", "git_status_short"} & set(header)
