"""Pure conversions between ROS 2 messages and tether.core types (no node, no context).

Every function that reads a message from outside validates it and raises InvalidCommand with
one sentence saying what is wrong, so a node can log it and carry on.
"""

from __future__ import annotations

import array

import numpy as np
from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from numpy.typing import ArrayLike
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from tether.core.errors import InvalidCommand
from tether.core.safety import F32_MAX
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
    """JointState for ``names``; ``position``/``velocity`` shape (len(names),), SI units (a
    new message each call; a publisher at the control rate keeps a JointStateWriter)."""
    return JointStateWriter(names).write(stamp_ns, position, velocity)


class JointStateWriter:
    """JointStates for ``names``, one message with the names set once, its stamp and arrays
    rewritten per call (a bridge's joint_states at the control rate). The message returned
    is valid until the next call (a publish serialises it at once)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.msg = JointState()
        self.msg.name = list(names)

    def write(
        self, stamp_ns: int, position: np.ndarray, velocity: np.ndarray | None = None
    ) -> JointState:
        msg = self.msg
        stamp = msg.header.stamp
        stamp.sec, stamp.nanosec = divmod(int(stamp_ns), NS)
        msg.position = _doubles(position)
        msg.velocity = array.array("d") if velocity is None else _doubles(velocity)
        return msg


def _doubles(values: ArrayLike) -> array.array:
    """float64 array.array of ``values``, flattened: a message's double[] field, without
    the per-element check a list gets."""
    return array.array("d", np.asarray(values, np.float64).tobytes())


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
    if tuple(got) == tuple(names):
        return pos.astype(np.float32)  # the usual case: same order, no lookup
    index = {n: i for i, n in enumerate(got)}
    missing = [n for n in names if n not in index]
    if missing:
        raise InvalidCommand(f"JointState lacks joints {missing}")
    return pos[[index[n] for n in names]].astype(np.float32)


def chunk_to_trajectory(chunk: ActionChunk, names: tuple[str, ...]) -> JointTrajectory:
    """A JointTrajectory whose header stamp is the chunk's t0 and point i is at i*dt (a new
    message each call; a publisher at the control rate keeps a TrajectoryWriter)."""
    return TrajectoryWriter(names).write(chunk)


class TrajectoryWriter:
    """JointTrajectories of chunks for ``names``, one message with the joint names set once,
    its points kept while the chunks keep their length and spacing (a policy server's answer
    per observation). The message returned is valid until the next call (a publish
    serialises it at once)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.msg = JointTrajectory()
        self.msg.joint_names = list(names)
        self._layout: tuple[int, int] | None = None

    def write(self, chunk: ActionChunk) -> JointTrajectory:
        msg = self.msg
        stamp = msg.header.stamp
        stamp.sec, stamp.nanosec = divmod(int(chunk.t0_ns), NS)
        rows = np.asarray(chunk.actions, np.float64)
        layout = (rows.shape[0], round(chunk.dt * NS))
        if layout != self._layout:
            msg.points = [
                JointTrajectoryPoint(time_from_start=to_duration(i * layout[1]))
                for i in range(layout[0])
            ]
            self._layout = layout
        for point, row in zip(msg.points, rows, strict=True):
            point.positions = array.array("d", row.tobytes())
        return msg


def trajectory_to_chunk(msg: JointTrajectory, spec: RobotSpec) -> ActionChunk:
    """Validate a JointTrajectory against the robot's action spec and return an ActionChunk.

    Joint names must be exactly the action's names (any order; reordered here); every point
    needs one finite position per joint; points must be evenly spaced in time_from_start.
    """
    want = spec.action.names
    got = msg.joint_names
    order: list[int] | None = None
    if tuple(got) != want:  # (the usual case, the action's own order, is one comparison)
        got = list(got)
        if len(got) != len(set(got)):
            raise InvalidCommand(f"trajectory has duplicate joint names {got}")
        if set(got) != set(want):
            unknown = sorted(set(got) - set(want))
            missing = sorted(set(want) - set(got))
            raise InvalidCommand(
                f"trajectory joint names do not match the robot: unknown {unknown}, "
                f"missing {missing}"
            )
        order = [got.index(name) for name in want]
    points = msg.points
    if not points:
        raise InvalidCommand("trajectory has no points")
    n = len(want)
    rows = [p.positions for p in points]
    for k, r in enumerate(rows):
        if len(r) != n:
            raise InvalidCommand(f"trajectory point {k} has {len(r)} positions, expected {n}")
    if len(rows) == 1 and isinstance(rows[0], array.array):
        actions = np.frombuffer(rows[0], np.float64).reshape(1, n)
    else:
        actions = np.array(rows, np.float64)
    # one pass for the usual, valid case: NaN fails the comparison, inf and values beyond
    # float32 exceed the bound
    if not np.abs(actions).max() <= F32_MAX:
        if not np.isfinite(actions).all():
            raise InvalidCommand("trajectory contains NaN or inf")
        raise InvalidCommand("trajectory contains values beyond float32 (huge)")
    if order is not None:
        actions = actions[:, order]
    if len(points) > 1:
        times = [from_duration(p.time_from_start) for p in points]
        steps = np.diff(times)
        if np.any(steps <= 0):
            raise InvalidCommand("trajectory time_from_start must increase strictly")
        dt_ns = float(np.median(steps))
        if np.max(np.abs(steps - dt_ns)) > 0.01 * dt_ns:
            raise InvalidCommand("trajectory points must be evenly spaced in time")
        dt = dt_ns / NS
    else:
        times = [from_duration(points[0].time_from_start)]
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


# --- drones ------------------------------------------------------------------------------
# Drone state: the 13-vector of tether.sim.quadrotor: position (3, m, world), quaternion wxyz
# (world from body), linear velocity (3, m/s, world), angular velocity (3, rad/s, body FLU).
#
# Low-level command (topic ``cmd_low_level``, sensor_msgs/JointState): ``name`` is exactly the
# four channel names of one mode, in any order, and picks the mode:
#     rotor0, rotor1, rotor2, rotor3        -> rotor_rpm: rotor speeds, rpm (0..max_rpm)
#     thrust, roll_rate, pitch_rate, yaw_rate -> thrust_rates: collective thrust N (body z),
#                                              body rates rad/s (FLU)
#     vx, vy, vz, yaw_rate                  -> velocity_setpoint: world ENU velocity m/s and
#                                              yaw rate rad/s (what a velocity policy emits;
#                                              people and planners use cmd_vel)
# ``position`` carries the four values (the generic value array, as JointTrajectory
# ``positions`` carry every action mode); velocity and effort stay empty. header.stamp is the
# time the command is for (the observation it answers); zero means "now".
LOW_LEVEL_CHANNELS: dict[str, tuple[str, ...]] = {
    "rotor_rpm": ("rotor0", "rotor1", "rotor2", "rotor3"),
    "thrust_rates": ("thrust", "roll_rate", "pitch_rate", "yaw_rate"),
    "velocity_setpoint": ("vx", "vy", "vz", "yaw_rate"),
}


def _rotate(q_wxyz: np.ndarray, v: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Rotate a vector (3,) by a unit quaternion wxyz (body -> world; inverse: world -> body)."""
    # the same products and sums as np.cross (bit for bit), in Python floats: two np.cross
    # calls on 3-vectors cost about ten times as much, and this runs for every odometry
    # message at the control rate (both ends of a drone's loop)
    w, ux, uy, uz = (float(x) for x in q_wxyz[:4])
    if inverse:
        ux, uy, uz = -ux, -uy, -uz
    vx, vy, vz = (float(x) for x in v[:3])
    tx, ty, tz = 2.0 * (uy * vz - uz * vy), 2.0 * (uz * vx - ux * vz), 2.0 * (ux * vy - uy * vx)
    return np.array(
        (
            vx + w * tx + (uy * tz - uz * ty),
            vy + w * ty + (uz * tx - ux * tz),
            vz + w * tz + (ux * ty - uy * tx),
        )
    )


def _unit_quat(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, np.float64)
    n = float(np.linalg.norm(q))
    if not np.isfinite(n) or n < 1e-6:
        raise InvalidCommand("orientation quaternion is not a rotation")
    return q / n


def frame_ids(namespace: str) -> tuple[str, str]:
    """(odom frame, body frame) of a drone: ``<ns>/odom``, ``<ns>/base_link`` (REP-105), or
    ``odom``, ``base_link`` for a drone without a namespace."""
    ns = namespace.strip("/")
    return (f"{ns}/odom", f"{ns}/base_link") if ns else ("odom", "base_link")


def odometry_msg(state: np.ndarray, stamp_ns: int, frame_id: str, child_frame_id: str) -> Odometry:
    """nav_msgs/Odometry of a drone state (13,): pose in ``frame_id``, twist in the body frame
    ``child_frame_id`` (REP-105: linear velocity rotated into the body, body rates as is)."""
    s = np.asarray(state, np.float64)
    q = _unit_quat(s[3:7])
    msg = Odometry()
    msg.header.stamp = to_time(stamp_ns)
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    p.x, p.y, p.z = s[0:3].tolist()
    o.w, o.x, o.y, o.z = q.tolist()
    v_body = _rotate(q, s[7:10], inverse=True)
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    lin.x, lin.y, lin.z = v_body.tolist()
    ang.x, ang.y, ang.z = s[10:13].tolist()
    return msg


def odometry_to_state(msg: Odometry) -> np.ndarray:
    """The drone state (13,) float32 of an Odometry whose twist is in the body frame."""
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    raw = np.array(
        [p.x, p.y, p.z, o.w, o.x, o.y, o.z, lin.x, lin.y, lin.z, ang.x, ang.y, ang.z], np.float64
    )
    if not np.isfinite(raw).all():
        raise InvalidCommand("odometry contains NaN or inf")
    q = _unit_quat(raw[3:7])
    v_world = _rotate(q, raw[7:10])
    return np.concatenate([raw[0:3], q, v_world, raw[10:13]]).astype(np.float32)


def imu_msg(state: np.ndarray, specific_force: np.ndarray, stamp_ns: int, frame_id: str) -> Imu:
    """sensor_msgs/Imu of a drone: orientation, body rates (rad/s) and ``specific_force``
    (3,) m/s^2 in the body frame (what an accelerometer reads: (a - g) rotated into the body,
    (0, 0, +9.81) at rest). Covariances zero: unknown (REP-145)."""
    s = np.asarray(state, np.float64)
    q = _unit_quat(s[3:7])
    msg = Imu()
    msg.header.stamp = to_time(stamp_ns)
    msg.header.frame_id = frame_id
    o = msg.orientation
    o.w, o.x, o.y, o.z = q.tolist()
    w, a = msg.angular_velocity, msg.linear_acceleration
    w.x, w.y, w.z = s[10:13].tolist()
    a.x, a.y, a.z = np.asarray(specific_force, np.float64).tolist()
    return msg


def twist_to_setpoint(msg: Twist, yaw: float) -> np.ndarray:
    """A cmd_vel Twist (m/s, rad/s) in the drone's heading frame (body frame turned level:
    x forward, y left, z up) -> velocity setpoint (4,) float64: world vx, vy, vz, yaw rate.

    ``yaw``: the drone's heading, rad. angular.x / angular.y are ignored (a drone cannot hold a
    roll or pitch rate while tracking a velocity). Raises InvalidCommand on NaN / inf.
    """
    lin, ang = msg.linear, msg.angular
    v = np.array([lin.x, lin.y, lin.z, ang.z], np.float64)
    if not np.isfinite(v).all():
        raise InvalidCommand("cmd_vel contains NaN or inf")
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1], v[2], v[3]])


def setpoint_to_twist(setpoint: np.ndarray, yaw: float) -> Twist:
    """Inverse of :func:`twist_to_setpoint`: world vx, vy, vz, yaw rate -> heading-frame Twist."""
    vx, vy, vz, r = (float(x) for x in np.asarray(setpoint, np.float64))
    c, s = np.cos(yaw), np.sin(yaw)
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z = c * vx + s * vy, -s * vx + c * vy, vz
    msg.angular.z = r
    return msg


def twist_msg(linear: ArrayLike, angular: ArrayLike) -> Twist:
    """A Twist of linear (3,) m/s and angular (3,) rad/s velocities."""
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z = (float(v) for v in np.asarray(linear))
    msg.angular.x, msg.angular.y, msg.angular.z = (float(v) for v in np.asarray(angular))
    return msg


def low_level_msg(mode: str, values: np.ndarray, stamp_ns: int = 0) -> JointState:
    """The low-level command JointState (see LOW_LEVEL_CHANNELS) of ``values`` (4,)."""
    if mode not in LOW_LEVEL_CHANNELS:
        raise ValueError(f"no low-level channels for mode '{mode}'")
    return joint_state_msg(stamp_ns, LOW_LEVEL_CHANNELS[mode], values)


def low_level_to_command(msg: JointState) -> tuple[str, np.ndarray, int]:
    """(mode, values (4,) float64 in the mode's channel order, stamp ns) of a low-level
    command. Checks the layout only (names, counts); values are the safety gate's to judge."""
    got = list(msg.name)
    mode = next((m for m, n in LOW_LEVEL_CHANNELS.items() if sorted(got) == sorted(n)), None)
    if mode is None:
        raise InvalidCommand(
            f"low-level command names {got[:8]} are neither "
            + " nor ".join(str(list(n)) for n in LOW_LEVEL_CHANNELS.values())
        )
    names = LOW_LEVEL_CHANNELS[mode]
    if len(msg.position) != len(got):
        raise InvalidCommand(
            f"low-level command has {len(got)} names but {len(msg.position)} values"
        )
    vals = np.asarray(msg.position, np.float64)
    if got != list(names):
        vals = vals[[got.index(n) for n in names]]
    return mode, vals, from_time(msg.header.stamp)
