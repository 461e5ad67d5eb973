"""A tiny in-process rclpy graph -> raw subscriptions -> McapBagWriter -> mcap and rosbags readers."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mcap")
pytest.importorskip("rosbags")
pytestmark = pytest.mark.ros

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from tether.core.data.mcap_bag import McapBagWriter, type_string  # noqa: E402

N = 20
QOS_YAML = (
    "- history: keep_last\n  depth: 50\n  reliability: reliable\n  durability: volatile\n"
    "  deadline:\n    sec: 9223372036\n    nsec: 854775807\n"
    "  lifespan:\n    sec: 9223372036\n    nsec: 854775807\n  liveliness: automatic\n"
    "  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n"
    "  avoid_ros_namespace_conventions: false\n"
)


def test_raw_topics_to_mcap_read_back(tmp_path):
    bag_dir = tmp_path / "raw"
    topics = {"/joint_states": JointState, "/joint_trajectory": JointTrajectory}
    received: dict[str, int] = dict.fromkeys(topics, 0)
    with ros_context() as ctx:
        pub_node = Node("mcap_test_pub", context=ctx)
        rec_node = Node("mcap_test_recorder", context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(pub_node)
        ex.add_node(rec_node)
        bag = McapBagWriter(bag_dir)

        def make_cb(topic: str):
            def cb(data: bytes) -> None:  # raw=True: the CDR bytes as they came off the wire
                bag.write(topic, data, rec_node.get_clock().now().nanoseconds)
                received[topic] += 1

            return cb

        for topic, cls in topics.items():
            bag.add_topic(topic, type_string(cls), QOS_YAML)
            rec_node.create_subscription(cls, topic, make_cb(topic), QoSProfile(depth=50), raw=True)
        pubs = {t: pub_node.create_publisher(c, t, QoSProfile(depth=50)) for t, c in topics.items()}
        assert spin_until(ex, lambda: all(p.get_subscription_count() > 0 for p in pubs.values()))

        sent: list[JointState] = []
        for i in range(N):
            js = JointState(
                name=[f"j{k}" for k in range(7)], position=[i + 0.1 * k for k in range(7)]
            )
            js.velocity = [0.0] * 7  # effort stays empty: the case serialize_message gets wrong
            js.header.stamp.sec = i
            sent.append(js)
            pubs["/joint_states"].publish(js)
            jt = JointTrajectory(joint_names=["a", "b"])
            jt.points = [JointTrajectoryPoint(positions=[float(i), -float(i)])]
            pubs["/joint_trajectory"].publish(jt)
            ex.spin_once(timeout_sec=0.0)
        assert spin_until(ex, lambda: all(n == N for n in received.values()))
        bag.close()
        ex.shutdown()
        pub_node.destroy_node()
        rec_node.destroy_node()

    # mcap (+ mcap_ros2 when installed)
    from mcap.reader import make_reader

    with open(bag_dir / "raw_0.mcap", "rb") as f:
        summary = make_reader(f).get_summary()
        assert summary is not None and summary.statistics is not None
        assert summary.statistics.message_count == 2 * N
    mcap_ros2 = pytest.importorskip("mcap_ros2.decoder")
    with open(bag_dir / "raw_0.mcap", "rb") as f:
        reader = make_reader(f, decoder_factories=[mcap_ros2.DecoderFactory()])
        js_got = [m for _, c, _, m in reader.iter_decoded_messages() if c.topic == "/joint_states"]
    assert [list(m.position) for m in js_got] == [list(m.position) for m in sent]

    # rosbags: the wire bytes deserialize even with the empty trailing float64[]
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    with Reader(bag_dir) as reader:
        assert reader.message_count == 2 * N
        decoded = [
            (c.topic, store.deserialize_cdr(raw, c.msgtype)) for c, _, raw in reader.messages()
        ]
    states = [m for t, m in decoded if t == "/joint_states"]
    assert [m.header.stamp.sec for m in states] == list(range(N))
    assert [list(m.position) for m in states] == [list(m.position) for m in sent]
    assert all(len(m.effort) == 0 for m in states)
    trajs = [m for t, m in decoded if t == "/joint_trajectory"]
    assert [list(m.points[0].positions) for m in trajs] == [[float(i), -float(i)] for i in range(N)]
