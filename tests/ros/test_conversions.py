"""Message <-> core conversions: pure functions, no ROS context needed."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from tether.core.errors import InvalidCommand  # noqa: E402
from tether.core.spec import CameraSpec  # noqa: E402
from tether.core.types import ActionChunk  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402


def test_time_round_trip():
    for ns in (0, 1, 999_999_999, 1_000_000_000, 12_345_678_901_234):
        assert conv.from_time(conv.to_time(ns)) == ns
        assert conv.from_duration(conv.to_duration(ns)) == ns


def test_chunk_trajectory_round_trip(panda):
    names = panda.action.names
    actions = np.random.default_rng(0).uniform(-1, 1, (4, len(names))).astype(np.float32)
    chunk = ActionChunk(actions, dt=0.01, t0_ns=2_000_000_000)
    msg = conv.chunk_to_trajectory(chunk, names)
    assert conv.from_time(msg.header.stamp) == chunk.t0_ns
    assert [conv.from_duration(p.time_from_start) for p in msg.points] == [
        0,
        10**7,
        2 * 10**7,
        3 * 10**7,
    ]
    back = conv.trajectory_to_chunk(msg, panda)
    np.testing.assert_allclose(back.actions, actions, atol=1e-6)
    assert back.dt == pytest.approx(0.01) and back.t0_ns == chunk.t0_ns


def test_trajectory_joint_order_is_normalised(panda):
    names = list(panda.action.names)
    row = np.arange(len(names), dtype=np.float32) * 0.01
    msg = conv.chunk_to_trajectory(ActionChunk(row, 0.01), tuple(names))
    perm = names[::-1]
    msg.joint_names = perm
    msg.points[0].positions = [float(row[names.index(n)]) for n in perm]
    np.testing.assert_allclose(conv.trajectory_to_chunk(msg, panda).actions[0], row, atol=1e-7)


@pytest.mark.parametrize(
    "fault",
    [
        "unknown_name",
        "missing_name",
        "nan",
        "inf",
        "short",
        "long",
        "empty",
        "duplicate",
        "uneven_time",
    ],
)
def test_bad_trajectories_are_rejected(panda, fault):
    names = list(panda.action.names)
    msg = conv.chunk_to_trajectory(ActionChunk(np.zeros((3, len(names))), 0.01), tuple(names))
    if fault == "unknown_name":
        msg.joint_names = names[:-1] + ["elbow_of_doom"]
    elif fault == "missing_name":
        msg.joint_names = names[:-1]
    elif fault == "nan":
        msg.points[1].positions = [float("nan")] * len(names)
    elif fault == "inf":
        msg.points[0].positions = [float("inf")] + [0.0] * (len(names) - 1)
    elif fault == "short":
        msg.points[0].positions = [0.0] * (len(names) - 1)
    elif fault == "long":
        msg.points[2].positions = [0.0] * (len(names) + 1)
    elif fault == "empty":
        msg.points = []
    elif fault == "duplicate":
        msg.joint_names = [names[0]] * len(names)
    elif fault == "uneven_time":
        msg.points[2].time_from_start = conv.to_duration(15_000_000)
    with pytest.raises(InvalidCommand):
        conv.trajectory_to_chunk(msg, panda)


def test_joint_state_round_trip_and_reordering(panda):
    q = np.linspace(-1, 1, len(panda.state_names)).astype(np.float32)
    msg = conv.joint_state_msg(7, panda.state_names, q, np.zeros_like(q))
    np.testing.assert_allclose(conv.joint_state_to_array(msg, panda.state_names), q, atol=1e-7)
    msg.name = list(reversed(msg.name))
    msg.position = list(reversed(msg.position))
    np.testing.assert_allclose(conv.joint_state_to_array(msg, panda.state_names), q, atol=1e-7)
    msg.name = msg.name[:-1]
    with pytest.raises(InvalidCommand):
        conv.joint_state_to_array(msg, panda.state_names)


def test_image_round_trip_and_bgr():
    img = np.random.default_rng(1).integers(0, 255, (6, 5, 3), dtype=np.uint8)
    msg = conv.image_msg(img, 3, "cam")
    assert (msg.height, msg.width, msg.step, msg.encoding) == (6, 5, 15, "rgb8")
    np.testing.assert_array_equal(conv.image_to_array(msg), img)
    msg.encoding = "bgr8"
    np.testing.assert_array_equal(conv.image_to_array(msg), img[..., ::-1])
    msg.encoding = "mono16"
    with pytest.raises(InvalidCommand):
        conv.image_to_array(msg)
    msg.encoding = "rgb8"
    msg.height = 100
    with pytest.raises(InvalidCommand):
        conv.image_to_array(msg)


def test_camera_info_and_pose():
    cam = CameraSpec(name="front", width=96, height=96, fovy_deg=90.0)
    info = conv.camera_info_msg(cam, 0, "front_optical_frame")
    assert info.k[0] == pytest.approx(48.0) and info.k[2] == pytest.approx(48.0)
    pose = np.array([0.1, -0.2, 0.3, 1.0, 0.0, 0.0, 0.0], np.float32)
    np.testing.assert_allclose(conv.pose_to_array(conv.pose_msg(pose, 5, "world")), pose)
