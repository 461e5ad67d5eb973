"""An arm behind a ros2_control JointTrajectoryController: the interface UR, Franka, xArm
and Kinova drivers share. Commands go out as trajectory_msgs/JointTrajectory on
``<driver ns>/<controller>/joint_trajectory``; the state comes from the driver's
``<driver ns>/joint_states`` (sensor_msgs/JointState)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from tether.core import registry
from tether.core.errors import InvalidCommand, TetherError
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether_ros import interface as itf
from tether_ros.drivers.ros_io import check_apart, driver_topic, wait_acked, wait_for

# what ros2_control's examples name the controller (a robot's description may say otherwise)
DEFAULT_CONTROLLER = "joint_trajectory_controller"


class JtcArm:
    """Robot: ``send_action(q)`` (dim,) joint positions -> a one-point JointTrajectory reached
    one control period later (``time_from_start = spec.dt``, streamed like a teleop
    command). Observation ``state`` / ``velocity`` (len(spec.state_names),) rad, rad/s from
    the latest joint_states; the stamp is the monotonic clock when it arrived (ns).

    ``joints``: the driver's names for the action's joints, in action order (default: the
    spec's). State joints the driver does not publish read 0.
    """

    def __init__(
        self,
        node: Any,
        spec: RobotSpec,
        controller: str = DEFAULT_CONTROLLER,
        joints: list[str] | None = None,
        driver_namespace: str = "/driver",
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.node = node
        self.spec = spec
        self.joints = list(joints or spec.action.names)
        if len(self.joints) != spec.action.dim:
            raise TetherError(
                f"hardware.joints names {len(self.joints)} joints, the robot's action has "
                f"{spec.action.dim}"
            )
        rename = dict(zip(spec.action.names, self.joints, strict=True))
        self.state_joints = [rename.get(n, n) for n in spec.state_names]
        self.timeout_s = connect_timeout_s
        self.command_topic = driver_topic(driver_namespace, f"{controller}/joint_trajectory")
        self.state_topic = driver_topic(driver_namespace, "joint_states")
        self._msg: JointState | None = None
        self._stamp_ns = 0
        self._pub = node.create_publisher(JointTrajectory, self.command_topic, itf.COMMAND_QOS)
        node.create_subscription(JointState, self.state_topic, self._on_state, itf.SENSOR_QOS)

    def _on_state(self, msg: JointState) -> None:
        self._msg = msg
        self._stamp_ns = time.monotonic_ns()

    def connect(self) -> None:
        """Wait for the driver's first joint_states; one-sentence TetherError if none comes."""
        if not wait_for(self.node, lambda: self._msg is not None, self.timeout_s):
            raise TetherError(
                f"no arm driver answered: nothing on {self.state_topic} within "
                f"{self.timeout_s:g} s (start the robot's ros2_control driver, or set "
                "hardware.mock: true)"
            )

    def disconnect(self) -> None:
        """Wait until the driver acknowledged the last command sent (the bridge's hold on
        shutdown), then forget the arm's state."""
        if self._msg is not None:
            wait_acked(self._pub)
        self._msg = None

    def _read(self, values: Any) -> np.ndarray:
        assert self._msg is not None
        index = {n: i for i, n in enumerate(self._msg.name)}
        vals = list(values)
        out = [
            vals[index[n]] if n in index and index[n] < len(vals) else 0.0
            for n in self.state_joints
        ]
        return np.asarray(out, np.float32)

    def get_observation(self) -> Observation:
        if self._msg is None:
            raise TetherError("the arm is not connected: call connect() first")
        data = {"state": self._read(self._msg.position)}
        if len(self._msg.velocity) == len(self._msg.name):
            data["velocity"] = self._read(self._msg.velocity)
        return Observation(data, stamp_ns=self._stamp_ns)

    def send_action(self, action: np.ndarray) -> None:
        q = np.asarray(action, np.float64)
        if q.shape != (self.spec.action.dim,) or not np.all(np.isfinite(q)):
            raise InvalidCommand(f"arm command must be {self.spec.action.dim} finite positions")
        dt_ns = round(self.spec.dt * 1e9)
        msg = JointTrajectory()
        msg.joint_names = self.joints
        msg.points = [
            JointTrajectoryPoint(
                positions=q.tolist(),
                time_from_start=Duration(sec=dt_ns // 10**9, nanosec=dt_ns % 10**9),
            )
        ]
        self._pub.publish(msg)


def driver_names(hw: Any, spec: RobotSpec) -> tuple[str, list[str]]:
    """The JointTrajectoryController and the joint names (action order) of the arm's
    driver: the ``hardware:`` section's, else the robot description's
    (``ArmDescription.hardware``, e.g. UR: scaled_joint_trajectory_controller), else
    ros2_control's default controller and the spec's joint names."""
    own = None
    if spec.name in registry.available("robot"):
        own = getattr(registry.load("robot", spec.name), "hardware", None)
    controller = hw.controller or (own.controller if own is not None else DEFAULT_CONTROLLER)
    joints = hw.joints or (own.joints if own is not None else None) or spec.action.names
    return controller, list(joints)


def build_jtc_arm(hw: Any, spec: RobotSpec, node: Any = None) -> JtcArm:
    """The registered hardware type ``jtc_arm``."""
    check_apart(node, hw.driver_namespace)
    controller, joints = driver_names(hw, spec)
    return JtcArm(node, spec, controller, joints, hw.driver_namespace, hw.connect_timeout_s)
