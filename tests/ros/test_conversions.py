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
        "huge",
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
    elif fault == "huge":  # finite in float64, beyond float32
        msg.points[1].positions = [0.0] * (len(names) - 1) + [1e39]
    with pytest.raises(InvalidCommand):
        conv.trajectory_to_chunk(msg, panda)


def _fields(msg):
    """A message's content as plain values (arrays as lists), to compare two messages."""
    out = {}
    for name in msg.get_fields_and_field_types():
        v = getattr(msg, name)
        if hasattr(v, "get_fields_and_field_types"):
            v = _fields(v)
        elif isinstance(v, list) and v and hasattr(v[0], "get_fields_and_field_types"):
            v = [_fields(x) for x in v]
        elif not isinstance(v, str):
            v = list(v) if hasattr(v, "__len__") else v
        out[name] = v
    return out


def test_trajectory_writer_writes_what_chunk_to_trajectory_builds(panda):
    """The policy server's reused message: the same content as a fresh one for chunks of
    changing length and spacing, and what trajectory_to_chunk reads back."""
    names = panda.action.names
    writer = conv.TrajectoryWriter(names)
    rng = np.random.default_rng(3)
    first = None
    for horizon, dt, t0 in ((1, 0.01, 5), (1, 0.01, 7_000_000_123), (4, 0.01, 9), (4, 0.02, 11)):
        chunk = ActionChunk(rng.uniform(-1, 1, (horizon, len(names))), dt, t0)
        msg = writer.write(chunk)
        first = first or msg
        assert msg is first  # one message, rewritten
        assert _fields(msg) == _fields(conv.chunk_to_trajectory(chunk, names))
        back = conv.trajectory_to_chunk(msg, panda)
        np.testing.assert_array_equal(back.actions, chunk.actions)
        assert back.t0_ns == t0


def test_joint_state_writer_writes_what_joint_state_msg_builds(panda):
    names = panda.state_names
    writer = conv.JointStateWriter(names)
    rng = np.random.default_rng(4)
    for stamp in (0, 1_999_999_999, 12_345_678_901_234):
        q = rng.uniform(-1, 1, len(names)).astype(np.float32)
        for v in (None, rng.uniform(-1, 1, len(names)).astype(np.float32)):
            msg = writer.write(stamp, q, v)
            assert _fields(msg) == _fields(conv.joint_state_msg(stamp, names, q, v))
            np.testing.assert_array_equal(conv.joint_state_to_array(msg, names), q)


def test_rotate_is_the_cross_product_formula_bit_for_bit():
    """_rotate (odometry in and out) in Python floats gives exactly what the np.cross form
    v + w t + u x t, t = 2 u x v, gives."""
    rng = np.random.default_rng(5)
    for _ in range(500):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        v = rng.normal(size=3) * 10
        for inverse in (False, True):
            u = -q[1:] if inverse else q[1:]
            t = 2.0 * np.cross(u, v)
            want = v + q[0] * t + np.cross(u, t)
            np.testing.assert_array_equal(conv._rotate(q, v, inverse), want)


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
