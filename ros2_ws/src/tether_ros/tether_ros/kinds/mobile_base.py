"""ROS 2 I/O of a mobile base: odom, scan, base_pose, wheel joint_states, cmd_vel.

Bridge (:class:`BaseTopics`, on a runner bridge): publishes ``odom`` (nav_msgs/Odometry from
the wheel odometry, REP-105: frame ``odom``, child ``base_link``, twist in the body frame),
``scan`` (sensor_msgs/LaserScan, frame ``laser``; a beam that hits nothing reads +inf,
REP-117), ``base_pose`` (geometry_msgs/PoseStamped in ``world``: the true pose, standing in
for a localization system), and ``joint_states`` with the wheel joints only (angle rad, speed
rad/s); subscribes ``cmd_vel`` (geometry_msgs/Twist, body frame: linear.x m/s, angular.z
rad/s), an unstamped command in force for ``safety.watchdog_s``. Stamped command chunks
(from a policy server) arrive on ``joint_trajectory`` with the action names (linear_x,
angular_z), as for any robot, and go through the same safety filter.

Policy server (:class:`BaseStateInputs`): rebuilds the observation a base policy was trained
on (``state`` = odometry (5,) + wheel angles (4,) + wheel speeds (4,), ``scan``,
``base_pose``) from those topics, matched by stamp; answers with stamped chunks on
joint_trajectory, so the bridge's deadline watchdog applies. Teleop: a body-frame Twist on
cmd_vel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState, LaserScan

from tether.core.errors import ConfigError, InvalidCommand
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.teleop.mappers import base_twist
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.kinds.runner import RunnerBridge
from tether_ros.kinds.runner_hardware import HardwareRunnerBridge
from tether_ros.kinds.trajectory import TrajectoryOutput

if TYPE_CHECKING:
    from rclpy.node import Node

    from tether.core.config import ExperimentConfig
    from tether.core.protocols import Robot, SimBackend
    from tether.hardware.teleop.command import TeleopCommand
    from tether.hardware.teleop.config_teleop import TeleopConfig
    from tether.sim.config_mobile_base import LidarConfig
    from tether_ros.kinds import Offer
    from tether_ros.kinds.streams import Recording

ODOM_STATE = ("odom_x", "odom_y", "odom_yaw", "odom_vx", "odom_wz")
SCAN = "scan"
BASE_POSE = "base_pose"
ODOM_FRAME, BASE_FRAME, LASER_FRAME, WORLD_FRAME = "odom", "base_link", "laser", "world"


# --- pure conversions --------------------------------------------------------------------
def wheel_joints(spec: RobotSpec) -> tuple[str, ...]:
    """The wheel joint names of a base whose state is odometry (5,) + N angles + N speeds
    (``<joint>_position`` then ``<joint>_velocity``), as ``husky_spec``; ConfigError else."""
    names = spec.state_names
    n = (len(names) - len(ODOM_STATE)) // 2
    pos, vel = names[len(ODOM_STATE) : len(ODOM_STATE) + n], names[len(ODOM_STATE) + n :]
    ok = (
        names[: len(ODOM_STATE)] == ODOM_STATE
        and len(vel) == n
        and all(p.endswith("_position") for p in pos)
        and [v.removesuffix("_velocity") for v in vel] == [p.removesuffix("_position") for p in pos]
    )
    if not ok:
        raise ConfigError(
            f"robot '{spec.name}' has no mobile-base state layout (odometry {list(ODOM_STATE)} "
            "then <wheel>_position and <wheel>_velocity) for ROS 2"
        )
    return tuple(p.removesuffix("_position") for p in pos)


def base_odometry_msg(odom: np.ndarray, stamp_ns: int) -> Odometry:
    """nav_msgs/Odometry of (x m, y m, yaw rad, vx m/s, wz rad/s): pose in ``odom``, twist in
    ``base_link`` (REP-105)."""
    x, y, yaw, vx, wz = (float(v) for v in np.asarray(odom, np.float64)[:5])
    msg = Odometry()
    msg.header.stamp = conv.to_time(stamp_ns)
    msg.header.frame_id = ODOM_FRAME
    msg.child_frame_id = BASE_FRAME
    msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
    o = msg.pose.pose.orientation
    o.w, o.z = math.cos(yaw / 2), math.sin(yaw / 2)
    msg.twist.twist.linear.x, msg.twist.twist.angular.z = vx, wz
    return msg


def base_odometry_to_array(msg: Odometry) -> np.ndarray:
    """(x, y, yaw, vx, wz) float32 (5,) of a planar base's Odometry; raises InvalidCommand."""
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    yaw = math.atan2(2 * (o.w * o.z + o.x * o.y), 1 - 2 * (o.y * o.y + o.z * o.z))
    out = np.array([p.x, p.y, yaw, msg.twist.twist.linear.x, msg.twist.twist.angular.z], np.float64)
    if not np.all(np.isfinite(out)):
        raise InvalidCommand("odometry contains NaN or inf")
    return out.astype(np.float32)


def scan_msg(ranges: np.ndarray, stamp_ns: int, lidar: LidarConfig) -> LaserScan:
    """sensor_msgs/LaserScan of lidar ranges (n_beams,) m, counter-clockwise from -fov/2;
    a reading at range_max (no hit) becomes +inf (REP-117)."""
    r = np.asarray(ranges, np.float64)
    fov = math.radians(lidar.fov_deg)
    n = len(r)
    msg = LaserScan()
    msg.header.stamp = conv.to_time(stamp_ns)
    msg.header.frame_id = LASER_FRAME
    if lidar.fov_deg >= 360.0:
        msg.angle_min, msg.angle_increment = -math.pi, 2 * math.pi / n
    else:
        msg.angle_min, msg.angle_increment = -fov / 2, (fov / (n - 1) if n > 1 else 0.0)
    msg.angle_max = msg.angle_min + msg.angle_increment * (n - 1)
    msg.range_min, msg.range_max = float(lidar.range_min), float(lidar.range_max)
    msg.ranges = np.where(r >= lidar.range_max, np.inf, r).astype(np.float32).tolist()
    return msg


def scan_to_array(msg: LaserScan) -> np.ndarray:
    """Ranges (n,) float32 m as the simulator reports them: +inf (no hit) -> range_max, below
    range_min -> range_min; NaN (no reading) -> range_max."""
    r = np.asarray(msg.ranges, np.float64)
    r = np.where(np.isnan(r) | (r > msg.range_max), msg.range_max, r)
    return np.maximum(r, msg.range_min).astype(np.float32)


def twist_to_action(msg: Twist) -> np.ndarray:
    """Action (2,) = (linear.x m/s, angular.z rad/s) of a body-frame Twist; the other
    components are not the base's to follow (a diff-drive base ignores them) but must be
    finite. Raises InvalidCommand on NaN / inf; the safety filter clamps the values."""
    lin, ang = msg.linear, msg.angular
    vals = np.array([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z], np.float64)
    if not np.all(np.isfinite(vals)):
        raise InvalidCommand("cmd_vel contains NaN or inf")
    return np.array([lin.x, ang.z], np.float64)


def wheel_joint_state_msg(state: np.ndarray, stamp_ns: int, joints: tuple[str, ...]) -> JointState:
    """JointState of the wheels: angles (rad) and speeds (rad/s) from a base state."""
    n, k = len(joints), len(ODOM_STATE)
    s = np.asarray(state, np.float64)
    return conv.joint_state_msg(stamp_ns, joints, s[k : k + n], s[k + n : k + 2 * n])


def wheel_state_from_msg(msg: JointState, joints: tuple[str, ...]) -> np.ndarray:
    """Wheel angles then speeds (2 N,) float32 from a JointState; raises InvalidCommand."""
    pos = conv.joint_state_to_array(msg, joints)
    if len(msg.velocity) != len(msg.name):
        raise InvalidCommand(f"JointState has {len(msg.name)} names but no velocities")
    index = {n: i for i, n in enumerate(msg.name)}
    vel = np.asarray([msg.velocity[index[j]] for j in joints], np.float32)
    return np.concatenate([pos, vel])


def lidar_of(cfg: ExperimentConfig) -> LidarConfig:
    """The experiment's lidar: the simulator's, else (hardware) the defaults."""
    from tether.sim.config_mobile_base import LidarConfig

    mb = getattr(cfg.world, "mobile_base", None)
    return mb.lidar if mb is not None else LidarConfig()


# --- bridge side -------------------------------------------------------------------------
class BaseTopics:
    """A mobile base's own endpoints on a runner bridge ``node``.

    ``on_action(action (2,))`` receives each valid cmd_vel; ``on_reject(exc)`` each bad one.
    """

    def __init__(
        self,
        node: Node,
        cfg: ExperimentConfig,
        spec: RobotSpec,
        on_action: Callable[[np.ndarray], None],
        on_reject: Callable[[Exception], None],
    ) -> None:
        self.spec = spec
        self.lidar = lidar_of(cfg)
        self.joints = wheel_joints(spec)
        self._on_action, self._on_reject = on_action, on_reject
        self.pub_odom = node.create_publisher(
            Odometry, itf.ODOM, itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
        )
        self.pub_scan = node.create_publisher(
            LaserScan, SCAN, itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
        )
        self.pub_pose = node.create_publisher(
            PoseStamped, BASE_POSE, itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
        )
        node.create_subscription(
            Twist, itf.CMD_VEL, self._on_cmd_vel, itf.COMMAND_QOS, event_callbacks=itf.FAST_SUB
        )

    def _on_cmd_vel(self, msg: Twist) -> None:
        try:
            action = twist_to_action(msg)
        except InvalidCommand as exc:
            self._on_reject(exc)
            return
        self._on_action(action)

    def joint_states(self, obs: Observation) -> JointState:
        return wheel_joint_state_msg(obs["state"], obs.stamp_ns, self.joints)

    def publish(self, obs: Observation) -> list[str]:
        """Publish scan, base_pose, odom of one observation (joint_states: the caller);
        returns the topics published."""
        stamp = obs.stamp_ns
        published = [itf.ODOM]
        if SCAN in obs.data:
            self.pub_scan.publish(scan_msg(obs[SCAN], stamp, self.lidar))
            published.append(SCAN)
        if BASE_POSE in obs.data:
            self.pub_pose.publish(conv.pose_msg(obs[BASE_POSE], stamp, WORLD_FRAME))
            published.append(BASE_POSE)
        self.pub_odom.publish(base_odometry_msg(obs["state"][: len(ODOM_STATE)], stamp))
        return published


# --- policy side -------------------------------------------------------------------------
class BaseStateInputs:
    """Subscribes what a base policy reads and offers it by stamp: ``state`` (odometry (5,),
    completed with ``wheels`` into the 13-vector by :meth:`observation`), ``wheels``, and
    ``scan`` / ``base_pose`` when ``keys`` name them."""

    def __init__(self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer) -> None:
        self.joints = wheel_joints(spec)
        self.node = node
        self._offer = offer
        self.extra = tuple(k for k in (SCAN, BASE_POSE) if k in keys)
        self.keys = ("state", "wheels", *self.extra)
        node.create_subscription(
            Odometry, itf.ODOM, self._on_odom, itf.SENSOR_QOS, event_callbacks=itf.FAST_SUB
        )
        node.create_subscription(
            JointState,
            itf.JOINT_STATES,
            self._on_wheels,
            itf.SENSOR_QOS,
            event_callbacks=itf.FAST_SUB,
        )
        if SCAN in self.extra:
            node.create_subscription(
                LaserScan, SCAN, self._on_scan, itf.SENSOR_QOS, event_callbacks=itf.FAST_SUB
            )
        if BASE_POSE in self.extra:
            node.create_subscription(
                PoseStamped, BASE_POSE, self._on_pose, itf.SENSOR_QOS, event_callbacks=itf.FAST_SUB
            )

    def _guard(self, topic: str, fn: Callable[[], tuple[int, np.ndarray]], key: str) -> None:
        try:
            stamp, value = fn()
        except InvalidCommand as exc:
            self.node.get_logger().warning(f"ignored {topic}: {exc}", throttle_duration_sec=1.0)
            return
        self._offer(key, stamp, value)

    def _on_odom(self, msg: Odometry) -> None:
        self._guard(
            itf.ODOM,
            lambda: (conv.from_time(msg.header.stamp), base_odometry_to_array(msg)),
            "state",
        )

    def _on_wheels(self, msg: JointState) -> None:
        self._guard(
            itf.JOINT_STATES,
            lambda: (conv.from_time(msg.header.stamp), wheel_state_from_msg(msg, self.joints)),
            "wheels",
        )

    def _on_scan(self, msg: LaserScan) -> None:
        self._offer(SCAN, conv.from_time(msg.header.stamp), scan_to_array(msg))

    def _on_pose(self, msg: PoseStamped) -> None:
        self._offer(BASE_POSE, conv.from_time(msg.header.stamp), conv.pose_to_array(msg))

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The policy's inputs from one complete set: state (13,) and the extras."""
        data = {"state": np.concatenate([ready["state"], ready["wheels"]]).astype(np.float32)}
        for k in self.extra:
            data[k] = ready[k]
        return data


# --- teleop ------------------------------------------------------------------------------
class BaseTeleop:
    """A body-frame Twist on cmd_vel: the device's motion (linear.x forward, linear.y when
    holonomic, angular.z), or a device's full action (vx m/s, wz rad/s)."""

    needs_state = False

    def __init__(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> None:
        self.node = node
        self.tcfg = tcfg
        self.pub = node.create_publisher(Twist, itf.CMD_VEL, itf.COMMAND_QOS)

    def release(self) -> None:
        pass  # (a twist is in force for the watchdog period only)

    def command(self, cmd: TeleopCommand, obs: Observation | None) -> bool:
        if cmd.action is not None:
            a = np.asarray(cmd.action, np.float64)
            if a.shape != (2,) or not np.isfinite(a).all():
                self.node.get_logger().warning(
                    f"device action of shape {a.shape} dropped", throttle_duration_sec=1.0
                )
                return False
            self.pub.publish(conv.twist_msg([a[0], 0.0, 0.0], [0.0, 0.0, a[1]]))
            return True
        t = base_twist(
            cmd, self.tcfg.max_linear_speed, self.tcfg.max_angular_speed, self.tcfg.holonomic
        )
        self.pub.publish(conv.twist_msg(t.linear, t.angular))
        return True


class MobileBaseIO:
    """The mobile-base adapter (registry ``ros_io`` / ``mobile_base``)."""

    kind = "mobile_base"
    chunked = False

    def sim_bridge(
        self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None
    ) -> RunnerBridge:
        return RunnerBridge(node, cfg, backend, BaseTopics)

    def hardware_bridge(
        self, node: Node, cfg: ExperimentConfig, robot: Robot | None
    ) -> HardwareRunnerBridge:
        return HardwareRunnerBridge(node, cfg, robot, BaseTopics)

    def state_inputs(
        self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer
    ) -> BaseStateInputs:
        return BaseStateInputs(node, spec, keys, offer)

    def policy_output(self, node: Node, spec: RobotSpec) -> TrajectoryOutput:
        return TrajectoryOutput(node, spec)

    def teleop(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> BaseTeleop:
        return BaseTeleop(node, spec, tcfg)

    def policy_servers(self, cfg: ExperimentConfig) -> list[tuple[str, list[str]]]:
        return [("", [])]

    def policy_topics(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        return [(itf.JOINT_STATES, itf.JOINT_TRAJECTORY)]

    def recording(
        self, cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]
    ) -> Recording:
        from tether_ros.kinds import streams

        return streams.recording(cfg, spec, objects)
