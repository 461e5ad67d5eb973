"""A mobile base behind its driver's ``cmd_vel`` (geometry_msgs/Twist) and ``odom``
(nav_msgs/Odometry): Clearpath, TurtleBot and most diff-drive drivers; plus the lidar's
``scan`` (sensor_msgs/LaserScan) in the same namespace when one publishes it."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import LaserScan

from tether.core.errors import InvalidCommand, TetherError
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether_ros import interface as itf
from tether_ros.drivers.ros_io import check_apart, driver_topic, wait_acked, wait_for
from tether_ros.kinds.mobile_base import scan_to_array


class TwistBase:
    """Robot: ``send_action((vx m/s, wz rad/s))`` -> cmd_vel. Observation ``state``
    (len(spec.state_names),) in the husky layout: odometry x, y (m), yaw (rad), vx (m/s),
    wz (rad/s), then wheel angles and speeds, which odom does not carry (0); ``base_pose``
    (7,) x, y, z, wxyz from odom; ``scan`` (n_beams,) m, the latest lidar scan (no hit:
    range_max), once one arrived."""

    def __init__(
        self,
        node: Any,
        spec: RobotSpec,
        driver_namespace: str = "/driver",
        connect_timeout_s: float = 5.0,
    ) -> None:
        if spec.action.dim != 2:
            raise TetherError(
                f"a twist base takes (vx, wz) actions, '{spec.name}' has {spec.action.dim}"
            )
        self.node = node
        self.spec = spec
        self.timeout_s = connect_timeout_s
        self.cmd_topic = driver_topic(driver_namespace, "cmd_vel")
        self.odom_topic = driver_topic(driver_namespace, "odom")
        self._odom: Odometry | None = None
        self._scan: np.ndarray | None = None
        self._stamp_ns = 0
        self._pub = node.create_publisher(Twist, self.cmd_topic, itf.COMMAND_QOS)
        node.create_subscription(Odometry, self.odom_topic, self._on_odom, itf.SENSOR_QOS)
        scan_topic = driver_topic(driver_namespace, "scan")
        node.create_subscription(LaserScan, scan_topic, self._on_scan, itf.SENSOR_QOS)

    def _on_odom(self, msg: Odometry) -> None:
        self._odom = msg
        self._stamp_ns = time.monotonic_ns()

    def _on_scan(self, msg: LaserScan) -> None:
        self._scan = scan_to_array(msg)

    def connect(self) -> None:
        if not wait_for(self.node, lambda: self._odom is not None, self.timeout_s):
            raise TetherError(
                f"no base driver answered: nothing on {self.odom_topic} within "
                f"{self.timeout_s:g} s (start the base driver, or set hardware.mock: true)"
            )

    def disconnect(self) -> None:
        """Stop the base (a zero twist, acknowledged by the driver) and forget its state."""
        if self._odom is not None:
            self._pub.publish(Twist())
            wait_acked(self._pub)
        self._odom = None

    def get_observation(self) -> Observation:
        if self._odom is None:
            raise TetherError("the base is not connected: call connect() first")
        p, o = self._odom.pose.pose.position, self._odom.pose.pose.orientation
        tw = self._odom.twist.twist
        yaw = math.atan2(2 * (o.w * o.z + o.x * o.y), 1 - 2 * (o.y**2 + o.z**2))
        state = np.zeros(len(self.spec.state_names), np.float32)
        state[:5] = (p.x, p.y, yaw, tw.linear.x, tw.angular.z)
        pose = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z], np.float32)
        data = {"state": state, "base_pose": pose}
        if self._scan is not None:
            data["scan"] = self._scan
        return Observation(data, stamp_ns=self._stamp_ns)

    def send_action(self, action: np.ndarray) -> None:
        a = np.asarray(action, np.float64)
        if a.shape != (2,) or not np.all(np.isfinite(a)):
            raise InvalidCommand("a base command is 2 finite numbers (vx m/s, wz rad/s)")
        msg = Twist()
        msg.linear.x, msg.angular.z = float(a[0]), float(a[1])
        self._pub.publish(msg)


def build_twist_base(hw: Any, spec: RobotSpec, node: Any = None) -> TwistBase:
    """The registered hardware type ``twist_base``."""
    check_apart(node, hw.driver_namespace)
    return TwistBase(node, spec, hw.driver_namespace, hw.connect_timeout_s)
