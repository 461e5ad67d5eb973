"""rosbag2 MCAP bags from McapBagWriter read back with the `mcap`, `mcap_ros2` and `rosbags` readers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.ros

pytest.importorskip("mcap")
pytest.importorskip("rclpy")
pytest.importorskip("sensor_msgs.msg")
pytest.importorskip("trajectory_msgs.msg")
pytest.importorskip("geometry_msgs.msg")

from tether.core.data.mcap_bag import (  # noqa: E402
    McapBagWriter,
    message_definition,
    read_raw_messages,
    recover,
    type_string,
)

QOS_YAML = (
    "- history: keep_last\n  depth: 10\n  reliability: reliable\n  durability: volatile\n"
    "  deadline:\n    sec: 9223372036\n    nsec: 854775807\n"
    "  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: automatic\n"
    "  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n"
    "  avoid_ros_namespace_conventions: false\n"
)


def _messages() -> list[tuple[str, Any, int]]:
    from builtin_interfaces.msg import Duration
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import Image, JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    out: list[tuple[str, Any, int]] = []
    t0 = 1_700_000_000_000_000_000
    for i in range(5):
        js = JointState()
        js.header.stamp.sec = 100 + i
        js.header.stamp.nanosec = 250_000_000
        js.header.frame_id = "base"
        js.name = [f"joint{k}" for k in range(7)]
        js.position = [0.1 * k + i for k in range(7)]
        js.velocity = [-0.5 * k for k in range(7)]
        js.effort = [1.5 * i] * 7
        out.append(("/joint_states", js, t0 + i * 10_000_000))

        img = Image()
        img.header.stamp.sec = 100 + i
        img.header.frame_id = "cam"
        img.height, img.width, img.encoding, img.step = 4, 6, "rgb8", 18
        img.data = np.arange(72, dtype=np.uint8).tobytes()[::-1][: 72 - i] + bytes(i)
        out.append(("/camera/front/image_raw", img, t0 + i * 10_000_000 + 1))

        jt = JointTrajectory()
        jt.header.frame_id = "world"
        jt.joint_names = ["a", "b"]
        for k in range(3):
            p = JointTrajectoryPoint()
            p.positions = [float(i), float(k)]
            p.velocities = [0.5, -0.5]
            p.accelerations = [0.0, 0.25]
            p.effort = [1.0, 2.0]
            p.time_from_start = Duration(sec=k, nanosec=1000 * i)
            jt.points.append(p)
        out.append(("/joint_trajectory", jt, t0 + i * 10_000_000 + 2))

        ps = PoseStamped()
        ps.header.frame_id = "world"
        ps.pose.position.x, ps.pose.position.y, ps.pose.position.z = 0.5, -0.25, 0.02 * i
        ps.pose.orientation.w = 1.0
        out.append(("/objects/cube/pose", ps, t0 + i * 10_000_000 + 3))
    return out


def _write_bag(path: Path) -> list[tuple[str, Any, int]]:
    from rclpy.serialization import serialize_message

    msgs = _messages()
    with McapBagWriter(path) as bag:
        for topic, msg, _ in msgs[:4]:
            bag.add_topic(topic, type_string(type(msg)), QOS_YAML)
        for topic, msg, t in msgs:
            bag.write(topic, serialize_message(msg), t)
    return msgs


def _assert_fields_equal(topic: str, got: Any, want: Any) -> None:
    """Compare a decoded message (rosbags / mcap_ros2 object) with the original rclpy message."""
    if topic == "/joint_states":
        assert got.header.stamp.sec == want.header.stamp.sec
        assert got.header.stamp.nanosec == want.header.stamp.nanosec
        assert got.header.frame_id == want.header.frame_id
        assert list(got.name) == list(want.name)
        assert list(got.position) == pytest.approx(list(want.position))
        assert list(got.velocity) == pytest.approx(list(want.velocity))
        assert list(got.effort) == pytest.approx(list(want.effort))
    elif topic == "/camera/front/image_raw":
        assert (got.height, got.width, got.encoding, got.step) == (4, 6, "rgb8", 18)
        assert bytes(bytearray(got.data)) == bytes(want.data)
    elif topic == "/joint_trajectory":
        assert list(got.joint_names) == ["a", "b"]
        assert len(got.points) == 3
        for gp, wp in zip(got.points, want.points, strict=True):
            assert list(gp.positions) == list(wp.positions)
            assert list(gp.velocities) == list(wp.velocities)
            assert gp.time_from_start.sec == wp.time_from_start.sec
            assert gp.time_from_start.nanosec == wp.time_from_start.nanosec
    elif topic == "/objects/cube/pose":
        p, w = got.pose, want.pose
        assert (p.position.x, p.position.y, p.position.z) == (
            w.position.x,
            w.position.y,
            w.position.z,
        )
        assert p.orientation.w == 1.0
    else:
        raise AssertionError(topic)


def test_message_definition_has_nested_types():
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    assert type_string(JointState) == "sensor_msgs/msg/JointState"
    text = message_definition(JointTrajectory)
    assert text.startswith("# The header")
    for dep in (
        "std_msgs/msg/Header",
        "builtin_interfaces/msg/Time",
        "trajectory_msgs/msg/JointTrajectoryPoint",
        "builtin_interfaces/msg/Duration",
    ):
        assert f"{'=' * 80}\nMSG: {dep}\n" in text
        assert text.count(f"MSG: {dep}\n") == 1


def test_definition_from_class_when_no_msg_file(monkeypatch):
    """Without installed .msg files the definition is generated from the rosidl class."""
    from trajectory_msgs.msg import JointTrajectory

    from tether.core.data import mcap_bag

    monkeypatch.setattr(mcap_bag, "_interface_file", lambda *_: None)
    text = message_definition(JointTrajectory)
    assert text.splitlines()[:3] == [
        "std_msgs/msg/Header header",
        "string[] joint_names",
        "trajectory_msgs/msg/JointTrajectoryPoint[] points",
    ]
    assert "MSG: builtin_interfaces/msg/Duration\n" in text
    # and the generated text still parses for rosbags
    rosbags_typesys = pytest.importorskip("rosbags.typesys")
    types = rosbags_typesys.get_types_from_msg(text, "trajectory_msgs/msg/JointTrajectory")
    assert "trajectory_msgs/msg/JointTrajectory" in types


def test_mcap_reader_reads_bag(tmp_path):
    from mcap.reader import make_reader

    bag = tmp_path / "bag"
    msgs = _write_bag(bag)
    assert sorted(p.name for p in bag.iterdir()) == ["bag_0.mcap", "metadata.yaml"]
    with open(bag / "bag_0.mcap", "rb") as f:
        reader = make_reader(f)
        header = reader.get_header()
        assert header.profile == "ros2"
        summary = reader.get_summary()
        assert summary is not None
        assert summary.statistics is not None and summary.statistics.message_count == len(msgs)
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
        for c in summary.channels.values():
            assert c.metadata["offered_qos_profiles"] == QOS_YAML
            assert c.metadata["topic_type_hash"].startswith("RIHS01_")
        meta = list(reader.iter_metadata())
        assert [m.name for m in meta] == ["rosbag2"]
        assert "serialized_metadata" in meta[0].metadata and "ROS_DISTRO" in meta[0].metadata
        got = [(c.topic, m.log_time) for _, c, m in reader.iter_messages(log_time_order=False)]
    assert got == [(topic, t) for topic, _, t in msgs]


def test_mcap_ros2_decoder_reads_bag(tmp_path):
    pytest.importorskip("mcap_ros2")
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    bag = tmp_path / "bag"
    msgs = _write_bag(bag)
    with open(bag / "bag_0.mcap", "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        decoded = list(reader.iter_decoded_messages(log_time_order=False))
    assert len(decoded) == len(msgs)
    for (_, channel, _, got), (topic, want, _) in zip(decoded, msgs, strict=True):
        assert channel.topic == topic
        _assert_fields_equal(topic, got, want)


def test_rosbags_reader_reads_bag(tmp_path):
    pytest.importorskip("rosbags")
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    bag = tmp_path / "bag"
    msgs = _write_bag(bag)

    # 1) the stock Jazzy typestore (same definitions as Kilted for these types)
    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(bag) as reader:
        assert reader.message_count == len(msgs)
        assert {c.topic: c.msgtype for c in reader.connections} == {
            "/joint_states": "sensor_msgs/msg/JointState",
            "/camera/front/image_raw": "sensor_msgs/msg/Image",
            "/joint_trajectory": "trajectory_msgs/msg/JointTrajectory",
            "/objects/cube/pose": "geometry_msgs/msg/PoseStamped",
        }
        assert all(c.msgcount == 5 for c in reader.connections)
        assert reader.duration == msgs[-1][2] - msgs[0][2] + 1
        got = [
            (c.topic, t, store.deserialize_cdr(raw, c.msgtype)) for c, t, raw in reader.messages()
        ]
    assert [(tp, t) for tp, t, _ in got] == [(tp, t) for tp, _, t in msgs]
    for (topic, _, g), (_, want, _) in zip(got, msgs, strict=True):
        _assert_fields_equal(topic, g, want)

    # 2) an empty typestore filled from the definitions stored in the file itself
    from mcap.reader import make_reader

    store2 = get_typestore(Stores.EMPTY)
    with open(bag / "bag_0.mcap", "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    for schema in summary.schemas.values():
        store2.register(get_types_from_msg(schema.data.decode(), schema.name))
    with Reader(bag) as reader:
        for (c, _, raw), (topic, want, _) in zip(reader.messages(), msgs, strict=True):
            _assert_fields_equal(topic, store2.deserialize_cdr(raw, c.msgtype), want)


def test_rosbags_rejects_serialize_message_with_empty_float64_sequence():
    """Known interop gap, documented as it behaves today: ``rclpy.serialization.
    serialize_message`` returns the rmw's *estimated* size when a float64[] is empty
    (JointState.effort == []), i.e. bytes past the end of the CDR message (4 here: 212 bytes
    for a 208-byte message). rclpy ignores them; rosbags 0.11.9 raises ``SerdeError: CDR
    message size mismatch``, and reads the message once they are cut off. Record from
    ``raw=True`` subscriptions (the wire bytes, see tests/ros/test_recorder_mcap.py) instead.
    If rclpy or rosbags changes this, this test fails: update the recorder's note with it."""
    pytest.importorskip("rosbags")
    from rclpy.serialization import deserialize_message, serialize_message
    from rosbags.serde import SerdeError
    from rosbags.typesys import Stores, get_typestore
    from sensor_msgs.msg import JointState

    js = JointState(name=["a"] * 7, position=[1.0] * 7, velocity=[2.0] * 7)
    data = serialize_message(js)
    assert deserialize_message(data, JointState) == js  # rclpy reads its own padding

    store = get_typestore(Stores.ROS2_JAZZY)
    with pytest.raises(SerdeError, match="size mismatch"):
        store.deserialize_cdr(data, "sensor_msgs/msg/JointState")
    # the message itself is complete: rosbags' own size for it is shorter, and the bytes up to
    # that size read back field for field
    types = store.types
    exact = store.serialize_cdr(
        types["sensor_msgs/msg/JointState"](
            header=types["std_msgs/msg/Header"](
                stamp=types["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id=""
            ),
            name=["a"] * 7,
            position=np.ones(7),
            velocity=np.full(7, 2.0),
            effort=np.zeros(0),
        ),
        "sensor_msgs/msg/JointState",
    )
    assert len(data) > len(exact)
    got = store.deserialize_cdr(data[: len(exact)], "sensor_msgs/msg/JointState")
    assert list(got.name) == ["a"] * 7 and len(got.effort) == 0
    np.testing.assert_array_equal(got.velocity, [2.0] * 7)


def test_metadata_yaml(tmp_path):
    import yaml

    bag = tmp_path / "bag"
    msgs = _write_bag(bag)
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["version"] == 9
    assert info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == ["bag_0.mcap"]
    assert info["message_count"] == len(msgs)
    assert info["starting_time"]["nanoseconds_since_epoch"] == msgs[0][2]
    assert info["compression_format"] == "" and info["compression_mode"] == ""
    qos = info["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"]
    assert qos[0]["reliability"] == "reliable" and qos[0]["depth"] == 10


def test_writer_rejects_unknown_topic_and_nonempty_dir(tmp_path):
    bag = tmp_path / "bag"
    with McapBagWriter(bag) as w, pytest.raises(KeyError):
        w.write("/nope", b"\x00\x01\x00\x00", 0)
    with pytest.raises(FileExistsError):
        McapBagWriter(bag)


_KILL_CHILD = textwrap.dedent(
    """
    import sys, time
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState
    from tether.core.data.mcap_bag import McapBagWriter

    bag = McapBagWriter(sys.argv[1], chunk_size=4096)
    bag.add_topic("/joint_states", "sensor_msgs/msg/JointState")
    i = 0
    while True:
        m = JointState()
        m.name = ["j%d" % k for k in range(7)]
        m.position = [float(i)] * 7
        bag.write("/joint_states", serialize_message(m), 1_000 + i)
        i += 1
        if i == 2000:
            print("ready", flush=True)
        if i > 2000:
            time.sleep(0.0005)
    """
)


def test_sigkill_mid_write_leaves_completed_chunks_readable(tmp_path):
    """SIGKILL while writing: completed chunks read back in order; recover() makes a full bag."""
    bag = tmp_path / "bag"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILL_CHILD, str(bag)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert not (bag / "metadata.yaml").exists()

    got = list(read_raw_messages(bag / "bag_0.mcap"))
    # the kill comes after the 2000th write, so at most the chunk still being filled is lost.
    # A message record here is 187 bytes (156 bytes of CDR + 31 of MCAP record header), so a
    # 4 KiB chunk closes at its 22nd message and the open one holds at most 21. Measured: 8
    # lost (1992 read back) in 10 of 10 runs: the first chunk holds 12 messages (it also holds
    # the schema and channel records), then 22 each, so the 2000th write leaves 8 open.
    assert len(got) >= 2000 - 21, f"{2000 - len(got)} of the first 2000 messages lost"
    assert [t for _, _, t, _ in got] == list(range(1_000, 1_000 + len(got)))

    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    last = deserialize_message(got[-1][3], JointState)
    assert list(last.position) == [float(len(got) - 1)] * 7

    kept = recover(bag)
    assert kept == len(got)
    rosbags = pytest.importorskip("rosbags.rosbag2")
    with rosbags.Reader(bag) as reader:
        assert reader.message_count == kept
        assert [t for _, t, _ in reader.messages()][-1] == 1_000 + kept - 1
