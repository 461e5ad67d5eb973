"""Stamped joint-trajectory chunks out (trajectory_msgs/JointTrajectory on
``joint_trajectory``, the action's names, header stamp = the observation answered): how a
policy server answers for arms and mobile bases, and how arm teleop commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajectory_msgs.msg import JointTrajectory

from tether.core.types import ActionChunk
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node

    from tether.core.spec import RobotSpec


class TrajectoryOutput:
    """Publishes ActionChunks of ``spec``'s action on ``node``'s joint_trajectory."""

    def __init__(self, node: Node, spec: RobotSpec) -> None:
        self.names = spec.action.names
        self._writer = conv.TrajectoryWriter(self.names)
        self.pub = node.create_publisher(
            JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS, event_callbacks=itf.FAST_PUB
        )

    def publish(self, chunk: ActionChunk) -> None:
        self.pub.publish(self._writer.write(chunk))
