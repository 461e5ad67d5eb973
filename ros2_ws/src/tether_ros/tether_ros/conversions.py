"""Pure conversions between ROS 2 messages and tether.core types (no node, no context).

Every function that reads a message from outside validates it and raises InvalidCommand with
one sentence saying what is wrong, so a node can log it and carry on.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import PoseStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from tether.core.errors import InvalidCommand
from tether.core.spec import CameraSpec, RobotSpec
from tether.core.types import ActionChunk

NS = 1_000_000_000


def to_time(ns: int) -> Time:
    return Time(sec=int(ns // NS), nanosec=int(ns % NS))


def from_time(t: Time) -> int:
    return int(t.sec) * NS + int(t.nanosec)


def to_duration(ns: int) -> Duration:
    return Duration(sec=int(ns // NS), nanosec=int(ns % NS))


def from_duration(d: Duration) -> int:
    return int(d.sec) * NS + int(d.nanosec)


def clock_msg(ns: int) -> Clock:
    return Clock(clock=to_time(ns))


def joint_state_msg(
    stamp_ns: int, names: tuple[str, ...], position: np.ndarray, velocity: np.ndarray | None = None
) -> JointState:
    """JointState for ``names``; ``position``/``velocity`` shape (len(names),), SI units."""
    msg = JointState()
    msg.header.stamp = to_time(stamp_ns)
    msg.name = list(names)
    msg.position = np.asarray(position, np.float64).tolist()
    if velocity is not None:
        msg.velocity = np.asarray(velocity, np.float64).tolist()
    return msg


def joint_state_to_array(msg: JointState, names: tuple[str, ...]) -> np.ndarray:
    """Positions of ``names`` (in that order) from a JointState, float32 shape (len(names),)."""
    got = msg.name
    if len(msg.position) != len(got):
        raise InvalidCommand(f"JointState has {len(got)} names but {len(msg.position)} positions")
    pos = (
        np.frombuffer(msg.position, np.float64)
        if isinstance(msg.position, array.array)
        else np.asarray(msg.position, np.float64)
    )
    if len(got) == len(names) and all(a == b for a, b in zip(got, names, strict=True)):
        return pos.astype(np.float32)  # the usual case: same order, no lookup
    index = {n: i for i, n in enumerate(got)}
    missing = [n for n in names if n not in index]
    if missing:
        raise InvalidCommand(f"JointState lacks joints {missing}")
    return pos[[index[n] for n in names]].astype(np.float32)


def chunk_to_trajectory(chunk: ActionChunk, names: tuple[str, ...]) -> JointTrajectory:
    """A JointTrajectory whose header stamp is the chunk's t0 and point i is at i*dt."""
    msg = JointTrajectory()
    msg.header.stamp = to_time(chunk.t0_ns)
    msg.joint_names = list(names)
    step_ns = round(chunk.dt * NS)
    points = []
    for i, row in enumerate(np.asarray(chunk.actions, np.float64)):
        p = JointTrajectoryPoint()
        p.positions = row.tolist()
        p.time_from_start = to_duration(i * step_ns)
        points.append(p)
    msg.points = points
    return msg


def trajectory_to_chunk(msg: JointTrajectory, spec: RobotSpec) -> ActionChunk:
    """Validate a JointTrajectory against the robot's action spec and return an ActionChunk.

    Joint names must be exactly the action's names (any order; reordered here); every point
    needs one finite position per joint; points must be evenly spaced in time_from_start.
    """
    want = spec.action.names
    got = list(msg.joint_names)
    if len(got) != len(set(got)):
        raise InvalidCommand(f"trajectory has duplicate joint names {got}")
    if set(got) != set(want):
        unknown = sorted(set(got) - set(want))
        missing = sorted(set(want) - set(got))
        raise InvalidCommand(
            f"trajectory joint names do not match the robot: unknown {unknown}, missing {missing}"
        )
    if not msg.points:
        raise InvalidCommand("trajectory has no points")
    n = len(want)
    rows = [p.positions for p in msg.points]
    for k, r in enumerate(rows):
        if len(r) != n:
            raise InvalidCommand(f"trajectory point {k} has {len(r)} positions, expected {n}")
    actions = np.array(rows, np.float64)
    if not np.isfinite(actions).all():
        raise InvalidCommand("trajectory contains NaN or inf")
    if got != list(want):
        order = [got.index(name) for name in want]
        actions = actions[:, order]
    times = [from_duration(p.time_from_start) for p in msg.points]
    if len(times) > 1:
        steps = np.diff(times)
        if np.any(steps <= 0):
            raise InvalidCommand("trajectory time_from_start must increase strictly")
        dt_ns = float(np.median(steps))
        if np.max(np.abs(steps - dt_ns)) > 0.01 * dt_ns:
            raise InvalidCommand("trajectory points must be evenly spaced in time")
        dt = dt_ns / NS
    else:
        dt = spec.dt
    # a first point later than the stamp shifts the chunk's start
    return ActionChunk(actions.astype(np.float32), dt, from_time(msg.header.stamp) + times[0])


def image_msg(img: np.ndarray, stamp_ns: int, frame_id: str) -> Image:
    """sensor_msgs/Image (rgb8) from an (H, W, 3) uint8 array."""
    img = np.ascontiguousarray(img, dtype=np.uint8)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"image must be (H, W, 3) uint8, got {img.shape}")
    msg = Image()
    msg.header.stamp = to_time(stamp_ns)
    msg.header.frame_id = frame_id
    msg.height, msg.width = int(img.shape[0]), int(img.shape[1])
    msg.encoding = "rgb8"
    msg.step = int(img.shape[1] * 3)
    data = array.array("B")
    data.frombytes(img.tobytes())
    msg.data = data  # array.array skips the per-element check of a bytes assignment
    return msg


def image_to_array(msg: Image) -> np.ndarray:
    """(H, W, 3) uint8 RGB from an rgb8/bgr8 Image; raises InvalidCommand otherwise."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise InvalidCommand(f"image encoding '{msg.encoding}' not supported (rgb8, bgr8)")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    buf = np.frombuffer(msg.data, np.uint8)
    if step < w * 3 or buf.size < h * step:
        raise InvalidCommand(f"image data has {buf.size} bytes, expected {h * step}")
    img = buf[: h * step].reshape(h, step)[:, : w * 3].reshape(h, w, 3)
    return img[..., ::-1] if msg.encoding == "bgr8" else img


def camera_info_msg(cam: CameraSpec, stamp_ns: int, frame_id: str) -> CameraInfo:
    """Pinhole CameraInfo, no distortion, from a CameraSpec."""
    k = cam.intrinsics()
    msg = CameraInfo()
    msg.header.stamp = to_time(stamp_ns)
    msg.header.frame_id = frame_id
    msg.height, msg.width = cam.height, cam.width
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = k.flatten().tolist()
    msg.r = np.eye(3).flatten().tolist()
    msg.p = np.hstack([k, np.zeros((3, 1))]).flatten().tolist()
    return msg


def pose_msg(pose7: np.ndarray, stamp_ns: int, frame_id: str) -> PoseStamped:
    """PoseStamped from position (3,) + quaternion wxyz (4,)."""
    p = np.asarray(pose7, np.float64)
    msg = PoseStamped()
    msg.header.stamp = to_time(stamp_ns)
    msg.header.frame_id = frame_id
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = p[:3].tolist()
    w, x, y, z = p[3:7].tolist()
    o = msg.pose.orientation
    o.w, o.x, o.y, o.z = w, x, y, z
    return msg


def pose_to_array(msg: PoseStamped) -> np.ndarray:
    """Position (3,) + quaternion wxyz (4,) float32 from a PoseStamped."""
    p, o = msg.pose.position, msg.pose.orientation
    return np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z], np.float32)
