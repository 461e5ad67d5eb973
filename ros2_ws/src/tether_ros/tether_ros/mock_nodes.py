"""Mock hardware behind the interfaces of real drivers, for ``hardware.mock: true``:

- ``mock_arm``: a ros2_control JointTrajectoryController look-alike on MockArm (limits,
  latency): subscribes ``<controller>/joint_trajectory``, publishes ``joint_states``;
- ``mock_base``: a base driver on MockBase: subscribes ``cmd_vel``, publishes ``odom`` and
  the ``scan`` of a lidar on open ground (every beam: no hit);
- ``mock_autopilot``: MockAutopilot, a PX4-like flight controller speaking real MAVLink on
  UDP loopback (no ROS topics; a node so that `tether up` and launch run it alike).

Arm and base run in ``hardware.driver_namespace``, where the bridge's JtcArm / TwistBase
look. When a mock stops it logs the last command it received (``last command received:``
and a JSON object with its arrival time ``t_ns``, CLOCK_MONOTONIC): what a bridge's last word
to the hardware was, e.g. its safe stop on shutdown. ``python -m tether_ros.mock_nodes --ros-args -r __node:=mock_arm ...`` picks the mock
by node name (what `tether up` runs); installed, each is its own executable.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState, LaserScan
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig, HardwareConfig
from tether.core.errors import ConfigError, InvalidCommand, TetherError
from tether.core.experiment import robot_spec
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.drivers.jtc_arm import driver_names
from tether_ros.runtime import experiment_from_params, run_node

# how often the mocks publish their state (Hz); ros2_control's joint_state_broadcaster
# defaults to the controller manager's update rate, 100 Hz or more
STATE_HZ = 100.0
SCAN_HZ = 10.0  # a typical 2D lidar
LAST_COMMAND = "last command received: "


def _report_last(node: Node, last: dict[str, Any] | None) -> None:
    """Log the last command a mock received (a JSON object), or that none came."""
    if last is None:
        node.get_logger().info("no command received")
    else:
        node.get_logger().info(LAST_COMMAND + json.dumps(last))


def _hardware(cfg: ExperimentConfig) -> HardwareConfig:
    if cfg.hardware is None:
        raise ConfigError(f"experiment '{cfg.name}' has no hardware: section to mock")
    return cfg.hardware


def _seconds(d: Duration) -> float:
    return d.sec + d.nanosec * 1e-9


class MockArmNode(Node):
    """A JointTrajectoryController + joint_state_broadcaster on a MockArm."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("mock_arm", start_parameter_services=False, **kwargs)
        from tether.hardware.mock.arm import MockArm, MockArmConfig

        self.cfg = cfg or experiment_from_params(self)
        hw = _hardware(self.cfg)
        spec = robot_spec(self.cfg)
        self.arm = MockArm(spec, MockArmConfig.model_validate(hw.mock_options))
        self.arm.connect()
        # the driver's names: the hardware section's, else the robot's (a UR5e mock runs
        # scaled_joint_trajectory_controller, as ur_robot_driver names it)
        controller, driver = driver_names(hw, spec)
        rename = dict(zip(spec.action.names, driver, strict=True))
        self.names = [rename.get(n, n) for n in spec.state_names]
        self.joints = driver  # action order
        self.rejected = 0
        # the last trajectory's final point, where the arm was when it arrived, and when
        self.last_command: dict[str, Any] | None = None
        # the arm's positions published in the last 0.5 s (newest last): a hold is one of them
        self.published: deque[list[float]] = deque(maxlen=int(STATE_HZ / 2))
        self.pub = self.create_publisher(JointState, itf.JOINT_STATES, itf.SENSOR_QOS)
        self.create_subscription(
            JointTrajectory,
            f"{controller.strip('/')}/joint_trajectory",
            self._on_trajectory,
            itf.COMMAND_QOS,
        )
        self.create_timer(1.0 / STATE_HZ, self._publish)
        self.get_logger().info(
            f"mock {spec.name} arm: {controller}/joint_trajectory in, joint_states out, "
            f"latency {self.arm.cfg.latency_s * 1e3:g} ms"
        )

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            index = {n: i for i, n in enumerate(msg.joint_names)}
            missing = [n for n in self.joints if n not in index]
            if missing or not msg.points:
                raise InvalidCommand(f"trajectory lacks joints {missing} or points")
            order = [index[n] for n in self.joints]
            points = np.array([[p.positions[i] for i in order] for p in msg.points])
            times = np.array([_seconds(p.time_from_start) for p in msg.points])
            self.arm.get_observation()  # brings the arm's state up to now
            measured = self.arm.q.tolist()
            self.arm.send_trajectory(points, times)
            recent = np.array(self.published) if self.published else np.array([measured])
            self.last_command = {
                "t_ns": time.monotonic_ns(),
                "positions": points[-1].tolist(),
                "measured": measured,
                # how far the command's final point is from the nearest position this arm
                # published in the last 0.5 s (a hold at a measured position: ~0)
                "from_published": float(np.abs(recent - points[-1]).max(1).min()),
            }
        except (InvalidCommand, IndexError) as exc:  # a JTC rejects the goal as a whole
            self.rejected += 1
            self.get_logger().warning(f"rejected trajectory: {exc}", throttle_duration_sec=1.0)

    def _publish(self) -> None:
        obs = self.arm.get_observation()
        stamp = self.get_clock().now().nanoseconds
        msg = conv.joint_state_msg(stamp, tuple(self.names), obs["state"], obs["velocity"])
        # in action order (the trajectory's), as published in this message
        self.published.append(self.arm.q.tolist())
        self.pub.publish(msg)

    def close(self) -> None:
        _report_last(self, self.last_command)


class MockBaseNode(Node):
    """A diff-drive base driver on a MockBase: cmd_vel in, odom (frame odom -> base_link)
    out."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("mock_base", start_parameter_services=False, **kwargs)
        from tether.hardware.mock.base import MockBase, MockBaseConfig

        self.cfg = cfg or experiment_from_params(self)
        hw = _hardware(self.cfg)
        self.base = MockBase(robot_spec(self.cfg), MockBaseConfig.model_validate(hw.mock_options))
        self.base.connect()
        self.last_command: dict[str, Any] | None = None  # twist (vx, wz) and arrival time
        self.pub = self.create_publisher(Odometry, itf.ODOM, itf.SENSOR_QOS)
        self.pub_scan = self.create_publisher(LaserScan, "scan", itf.SENSOR_QOS)
        self.create_subscription(Twist, itf.CMD_VEL, self._on_cmd_vel, itf.COMMAND_QOS)
        self.create_timer(1.0 / STATE_HZ, self._publish)
        self.create_timer(1.0 / SCAN_HZ, self._publish_scan)

    def _on_cmd_vel(self, msg: Twist) -> None:
        self.last_command = {"t_ns": time.monotonic_ns(), "twist": [msg.linear.x, msg.angular.z]}
        try:
            self.base.send_action(np.array([msg.linear.x, msg.angular.z]))
        except InvalidCommand as exc:
            self.get_logger().warning(f"rejected cmd_vel: {exc}", throttle_duration_sec=1.0)

    def close(self) -> None:
        _report_last(self, self.last_command)

    def _publish(self) -> None:
        obs = self.base.get_observation()
        x, y, _yaw, vx, wz = (float(v) for v in obs["state"][:5])
        pose = obs["base_pose"]
        msg = Odometry()
        msg.header.stamp = conv.to_time(self.get_clock().now().nanoseconds)
        msg.header.frame_id, msg.child_frame_id = "odom", "base_link"
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        p.x, p.y = x, y
        o.w, o.x, o.y, o.z = (float(v) for v in pose[3:7])
        msg.twist.twist.linear.x, msg.twist.twist.angular.z = vx, wz
        self.pub.publish(msg)

    def _publish_scan(self) -> None:
        from tether.sim.config_mobile_base import LidarConfig
        from tether_ros.kinds.mobile_base import scan_msg

        lidar = LidarConfig()  # what the bridge assumes without a sim section
        ranges = np.full(lidar.n_beams, lidar.range_max)
        self.pub_scan.publish(scan_msg(ranges, self.get_clock().now().nanoseconds, lidar))


class MockAutopilotNode(Node):
    """Runs MockAutopilot where the experiment's MAVLink client sends
    (``hardware.device.url``, default ``udpout:127.0.0.1:14560``)."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("mock_autopilot", start_parameter_services=False, **kwargs)
        from tether.hardware.mavlink.config_mavlink import MavlinkConfig
        from tether.hardware.mock.autopilot import MockAutopilot, MockAutopilotConfig
        from tether.hardware.robots.factory import device_config, mock_autopilot_url

        self.cfg = cfg or experiment_from_params(self)
        hw = _hardware(self.cfg)
        url = mock_autopilot_url(device_config(MavlinkConfig, hw).url)
        opts = {"url": url, **hw.mock_options}
        try:
            self.autopilot = MockAutopilot(MockAutopilotConfig.model_validate(opts)).start()
        except OSError as exc:
            raise TetherError(f"the mock autopilot cannot listen on {url}: {exc}") from None
        self.get_logger().info(f"mock PX4 autopilot listening on {url}")

    def close(self) -> None:
        self.autopilot.close()
        ap = self.autopilot
        last = None
        if ap.last_command is not None:
            name, t_ns = ap.last_command
            last = {"t_ns": t_ns, "command": name, "mode": ap.mode, "armed": ap.armed}
        _report_last(self, last)


MOCKS: dict[str, Any] = {
    "mock_arm": MockArmNode,
    "mock_base": MockBaseNode,
    "mock_autopilot": MockAutopilotNode,
}


def arm_main(args: list[str] | None = None) -> None:
    sys.exit(run_node(MockArmNode, args))


def base_main(args: list[str] | None = None) -> None:
    sys.exit(run_node(MockBaseNode, args))


def autopilot_main(args: list[str] | None = None) -> None:
    sys.exit(run_node(MockAutopilotNode, args))


def main(args: list[str] | None = None) -> None:
    """Pick the mock by the ``__node:=`` remap (as `tether up` starts it)."""
    argv = sys.argv if args is None else args
    names = [a.split(":=", 1)[1] for a in argv if a.startswith("__node:=")]
    node = MOCKS.get(names[-1] if names else "")
    if node is None:
        print(f"error: name the mock with -r __node:=<{'|'.join(MOCKS)}>", file=sys.stderr)
        sys.exit(2)
    sys.exit(run_node(node, args))


if __name__ == "__main__":
    main()
