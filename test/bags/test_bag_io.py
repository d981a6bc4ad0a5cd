"""Bag reading/writing: round trips through both storages, name mapping, repairs and error messages.

The CDR codec is checked against rosbags' own serializer/deserializer (an independent implementation).
"""

import shutil
import time

import numpy as np
import pytest

from robodyn_ros.bags import (
    BagError,
    DEFAULT_T0_NS,
    JOINT_STATE_TYPE,
    WRENCH_STAMPED_TYPE,
    WrenchSeries,
    read_joint_states,
    read_wrenches,
    write_joint_states_bag,
)
from robodyn_ros.bags.cdr import encode_joint_state, encode_wrench_stamped, joint_state_layout
from robodyn_ros.bags.storage import ros2_typestore
from robodyn_ros.model.errors import ModelError

STORAGES = ["sqlite3", "mcap"]
NAMES = ["j1", "j2", "joint_three"]


def _signals(n_samples, n_joints=3, seed=0):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.uniform(0.5e-3, 1.5e-3, n_samples))
    return t, rng.normal(size=(n_samples, n_joints)), rng.normal(size=(n_samples, n_joints)), \
        rng.normal(size=(n_samples, n_joints))


def _ros_messages():
    ts = ros2_typestore()
    return ts, ts.types[JOINT_STATE_TYPE], ts.types["std_msgs/msg/Header"], \
        ts.types["builtin_interfaces/msg/Time"]


@pytest.mark.parametrize("storage", STORAGES)
def test_round_trip_with_wrench(tmp_path, storage):
    t, q, v, tau = _signals(500)
    wrench = WrenchSeries(t=t[::2], frame_id="ft_sensor", w=np.random.default_rng(1).normal(size=(250, 6)))
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q, v, tau, storage=storage, wrench=wrench,
                                  wrench_topic="/ft/wrench")
    series = read_joint_states(path)
    assert series.names == NAMES
    np.testing.assert_array_equal(series.q, q)
    np.testing.assert_array_equal(series.v, v)
    np.testing.assert_array_equal(series.tau, tau)
    np.testing.assert_allclose(series.t, t - t[0], atol=1e-9)  # stamps are whole nanoseconds
    assert series.report.kept == series.report.messages == 500

    # what we wrote is what rosbags' own deserializer reads
    from rosbags.rosbag2 import Reader

    ts = ros2_typestore()
    with Reader(path) as reader:
        connection = next(c for c in reader.connections if c.topic == "/joint_states")
        for i, (_, timestamp, raw) in enumerate(reader.messages(connections=[connection])):
            message = ts.deserialize_cdr(raw, JOINT_STATE_TYPE)
            assert message.name == NAMES
            np.testing.assert_array_equal(message.effort, tau[i])
            assert message.header.stamp.sec * 10**9 + message.header.stamp.nanosec == DEFAULT_T0_NS + round(t[i] * 1e9)

    wrenches = read_wrenches(path, "/ft/wrench", t0_ns=series.t0_ns)
    assert wrenches.frame_id == "ft_sensor"
    np.testing.assert_array_equal(wrenches.w, wrench.w)
    np.testing.assert_allclose(wrenches.t, t[::2] - t[0], atol=1e-9)


def test_storage_file_and_lost_metadata_are_readable(tmp_path):
    t, q, _, _ = _signals(50)
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q)
    storage_file = next(path.glob("*.db3"))
    np.testing.assert_array_equal(read_joint_states(storage_file).q, q)
    (path / "metadata.yaml").unlink()  # what an interrupted `ros2 bag record` leaves behind
    with pytest.warns(UserWarning, match="no metadata.yaml"):
        np.testing.assert_array_equal(read_joint_states(path).q, q)


def test_codec_matches_rosbags():
    ts, JointState, Header, Time = _ros_messages()
    rng = np.random.default_rng(3)
    for case in range(40):
        n = int(rng.integers(0, 6))
        names = ["x" * int(rng.integers(1, 9)) + str(k) for k in range(n)]
        arrays = [rng.normal(size=n) if rng.random() < 0.7 else np.empty(0) for _ in range(3)]
        frame_id = "f" * int(rng.integers(0, 6))
        sec, nsec = int(rng.integers(0, 2**31)), int(rng.integers(0, 10**9))
        message = JointState(header=Header(stamp=Time(sec=sec, nanosec=nsec), frame_id=frame_id),
                             name=names, position=arrays[0], velocity=arrays[1], effort=arrays[2])
        reference = bytes(ts.serialize_cdr(message, JOINT_STATE_TYPE))
        assert encode_joint_state(sec * 10**9 + nsec, frame_id, names, arrays) == reference, case
        for endian_raw in (reference, bytes(ts.serialize_cdr(message, JOINT_STATE_TYPE, little_endian=False))):
            layout = joint_state_layout(endian_raw)
            assert layout.names == tuple(names) and layout.frame_id == frame_id
            assert layout.counts == tuple(len(a) for a in arrays)
            assert layout.size == len(endian_raw)

    Wrench = ts.types[WRENCH_STAMPED_TYPE]
    Vector3 = ts.types["geometry_msgs/msg/Vector3"]
    w = rng.normal(size=6)
    message = Wrench(header=Header(stamp=Time(sec=4, nanosec=5), frame_id="tool"),
                     wrench=ts.types["geometry_msgs/msg/Wrench"](force=Vector3(*w[:3]), torque=Vector3(*w[3:])))
    assert encode_wrench_stamped(4 * 10**9 + 5, "tool", w) == bytes(ts.serialize_cdr(message, WRENCH_STAMPED_TYPE))


@pytest.mark.parametrize("storage", STORAGES)
def test_joint_order_changing_between_messages_is_mapped_by_name(tmp_path, storage):
    t, q, v, _ = _signals(300)
    rng = np.random.default_rng(5)
    orders = [rng.permutation(3) for _ in t]
    names = [[NAMES[k] for k in order] for order in orders]
    path = write_joint_states_bag(tmp_path / "bag", t, names,
                                  np.array([q[i, o] for i, o in enumerate(orders)]),
                                  np.array([v[i, o] for i, o in enumerate(orders)]), storage=storage)
    series = read_joint_states(path, joint_names=["joint_three", "j1"])
    assert series.names == ["joint_three", "j1"]
    np.testing.assert_array_equal(series.q, q[:, [2, 0]])
    np.testing.assert_array_equal(series.v, v[:, [2, 0]])
    assert series.tau is None
    assert set(read_joint_states(path).names) == set(NAMES)


def test_missing_topic_lists_topics_and_types(tmp_path):
    t, q, _, _ = _signals(20)
    wrench = WrenchSeries(t=t, frame_id="ft", w=np.zeros((20, 6)))
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q, wrench=wrench, wrench_topic="/ft/wrench")
    with pytest.raises(ModelError) as err:
        read_joint_states(path, topic="/robot/joint_states")
    assert "'/robot/joint_states' not found" in str(err.value)
    assert "/joint_states [sensor_msgs/msg/JointState]" in str(err.value)
    assert "/ft/wrench [geometry_msgs/msg/WrenchStamped]" in str(err.value)
    with pytest.raises(ModelError, match="has type geometry_msgs/msg/WrenchStamped, expected sensor_msgs"):
        read_joint_states(path, topic="/ft/wrench")
    with pytest.raises(ModelError, match=r"joints \['elbow'\] not found .*'j1', 'j2', 'joint_three'"):
        read_joint_states(path, joint_names=["j1", "elbow"])


def test_paths_that_are_not_bags(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        read_joint_states(tmp_path / "nothing")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelError, match="is not a bag"):
        read_joint_states(tmp_path / "notes.txt")
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(ModelError, match="not a rosbag2 directory"):
        read_joint_states(tmp_path / "empty_dir")
    (tmp_path / "fake.db3").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ModelError, match="cannot open bag"):
        read_joint_states(tmp_path / "fake.db3")


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("fraction", [0.3, 0.9])
def test_truncated_bag_raises_model_error(tmp_path, storage, fraction):
    t, q, _, _ = _signals(2000)
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q, storage=storage)
    storage_file = next(f for f in path.iterdir() if f.suffix in (".db3", ".mcap"))
    data = storage_file.read_bytes()
    storage_file.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(ModelError, match="truncated or corrupt"):
        read_joint_states(path)


def test_corrupt_message_names_its_index(tmp_path):
    from rosbags.rosbag2 import Writer

    good = encode_joint_state(10**18, "", NAMES, [np.zeros(3), np.empty(0), np.empty(0)])
    with Writer(tmp_path / "bag", version=9) as writer:
        connection = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=ros2_typestore())
        writer.write(connection, 1, good)
        writer.write(connection, 2, good[:30])
    with pytest.raises(ModelError, match="message 1 is corrupt") as err:
        read_joint_states(tmp_path / "bag")
    assert isinstance(err.value, BagError)
    assert (err.value.bag, err.value.topic, err.value.index) == (str(tmp_path / "bag"), "/joint_states", 1)
    assert str(err.value).startswith(f"bag {str(tmp_path / 'bag')!r}, topic '/joint_states': message 1 ")


def test_big_endian_messages_are_decoded(tmp_path):
    from rosbags.rosbag2 import Writer

    ts, JointState, Header, Time = _ros_messages()
    with Writer(tmp_path / "bag", version=9) as writer:
        connection = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=ts)
        for i in range(3):
            message = JointState(header=Header(stamp=Time(sec=7, nanosec=i), frame_id=""), name=["b", "a"],
                                 position=np.array([i, -i], dtype=float), velocity=np.empty(0),
                                 effort=np.array([0.5, 1.5]))
            writer.write(connection, i + 1, bytes(ts.serialize_cdr(message, JOINT_STATE_TYPE, little_endian=False)))
    series = read_joint_states(tmp_path / "bag", joint_names=["a", "b"])
    np.testing.assert_array_equal(series.q, [[0, 0], [-1, 1], [-2, 2]])
    np.testing.assert_array_equal(series.tau, [[1.5, 0.5]] * 3)
    assert series.t0_ns == 7 * 10**9 and series.v is None
    np.testing.assert_allclose(series.t, [0, 1e-9, 2e-9])


def test_trailing_padding_after_the_last_field_is_ignored(tmp_path):
    from rosbags.rosbag2 import Writer

    with Writer(tmp_path / "bag", version=9) as writer:
        connection = writer.add_connection("/joint_states", JOINT_STATE_TYPE, typestore=ros2_typestore())
        for i in range(5):
            message = encode_joint_state(10**18 + i, "", NAMES, [np.full(3, float(i)), np.empty(0), np.empty(0)])
            writer.write(connection, i + 1, message + b"\x00" * (4 * (i % 2)))
    series = read_joint_states(tmp_path / "bag")
    np.testing.assert_array_equal(series.q[:, 0], np.arange(5.0))


def test_nan_samples_and_missing_interfaces(tmp_path):
    t, q, v, tau = _signals(200)
    q[[10, 50, 51], 1] = np.nan          # bad position samples: dropped
    v[[70], 0] = np.nan                  # a bad velocity sample: dropped
    tau[:, 2] = np.nan                   # joint without an effort interface: kept as a NaN column
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q, v, tau)
    with pytest.warns(UserWarning, match="dropped_nan=4"):
        series = read_joint_states(path)
    assert series.report.dropped_nan == 4 and series.report.kept == 196
    assert series.report.missing_interfaces == ("effort:joint_three",)
    keep = np.setdiff1d(np.arange(200), [10, 50, 51, 70])
    np.testing.assert_array_equal(series.q, q[keep])
    np.testing.assert_array_equal(series.tau[:, :2], tau[keep, :2])
    assert np.isnan(series.tau[:, 2]).all()


def test_out_of_order_duplicate_and_zero_stamps(tmp_path):
    t, q, _, _ = _signals(100)
    stamps = 10**18 + np.round(t * 1e9).astype(np.int64)
    order = np.arange(100)
    order[[20, 21]] = order[[21, 20]]    # one swap: one decreasing step
    order[[60, 61, 62]] = order[[62, 61, 60]]  # one reversal of three: two decreasing steps
    written_stamps = stamps[order].copy()
    written_stamps[90] = written_stamps[89]  # duplicate of the previous stamp: dropped
    written_stamps[5] = 0                # no stamp: receive time (t[order][5]) is used
    # the bag's receive times increase; the header stamps do not
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q[order], stamp_ns=written_stamps, t0_ns=10**18)
    with pytest.warns(UserWarning):
        series = read_joint_states(path)
    report = series.report
    assert (report.reordered, report.duplicates, report.stamp_fallbacks) == (3, 1, 1)
    assert np.all(np.diff(series.t) > 0)
    expected = np.delete(np.arange(100), 90)  # message 90 carried sample 90's duplicate stamp of 89
    np.testing.assert_array_equal(series.q, q[expected])
    np.testing.assert_allclose(series.t, t[expected] - t[0], atol=1e-9)


def test_progress_reports_completion(tmp_path):
    t, q, _, _ = _signals(10_000)
    path = write_joint_states_bag(tmp_path / "bag", t, NAMES, q, storage="mcap")
    calls = []
    read_joint_states(path, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (10_000, 10_000) and len(calls) >= 2
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))


@pytest.mark.parametrize("storage", STORAGES)
def test_read_speed_100k_messages(tmp_path, storage):
    n_samples = 100_000
    t = np.arange(n_samples) * 1e-3
    q = np.random.default_rng(0).normal(size=(n_samples, 7))
    names = [f"panda_joint{k}" for k in range(1, 8)]
    start = time.perf_counter()
    path = write_joint_states_bag(tmp_path / "bag", t, names, q, q, q, storage=storage)
    written = time.perf_counter() - start
    start = time.perf_counter()
    series = read_joint_states(path)
    seconds = time.perf_counter() - start
    print(f"\n{storage}: wrote 100k JointState (7 joints) in {written:.2f} s, read in {seconds:.2f} s")
    np.testing.assert_array_equal(series.tau, q)
    shutil.rmtree(path)


def test_joint_state_value_check():
    """What robodyn record leaves out: a non-finite position, an infinite velocity or effort, a value beyond
    1e9; a NaN velocity or effort (a missing interface), empty fields and unparsable bytes are not judged
    unsound."""
    from robodyn_ros.bags.value_check import joint_state_problem

    names = ["a", "b", "c"]

    def problem(q, v=(0.0, 0.0, 0.0), tau=(0.0, 0.0, 0.0)):
        return joint_state_problem(encode_joint_state(5, "", names, [np.asarray(x, dtype=float) for x in (q, v, tau)]))

    assert problem([0.1, -2.0, 3e8], [1e3, 0.0, -5.0], [80.0, 0.0, 1.0]) is None
    assert problem([0.0] * 3, [np.nan] * 3, [np.nan] * 3) is None
    assert joint_state_problem(encode_joint_state(5, "", names, [np.zeros(3), [], []])) is None
    assert joint_state_problem(b"\x00\x01\x00\x00garbage") is None
    assert problem([0.0, np.nan, 0.0]) == "position of b is nan"
    assert problem([0.0, 0.0, -np.inf]) == "position of c is -inf"
    assert problem([0.0, 0.0, 2e9]) == "position of c is 2e+09"
    assert problem([0.0] * 3, [0.0, 1e35, 0.0]) == "velocity of b is 1e+35"
    assert problem([0.0] * 3, [0.0] * 3, [np.inf, 0.0, 0.0]) == "effort of a is inf"
