"""The wire between Tether and the Isaac side (sim/isaac/isaac_ros_scene.py, or the stand-in):
QoS, message types, the episode parameters and the command's joint names. The scene script
runs in Isaac Sim's own Python and cannot import this module: it repeats these constants, and
tests/ros/test_isaac_ros.py checks that they agree.

Isaac Sim's ROS 2 bridge publishes and subscribes with the default QoS (reliable, keep last
10, volatile) unless a node's ``qosProfile`` says otherwise; both sides use that here.
"""

from __future__ import annotations

import numpy as np
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from tether.core.robot import ArmDescription

# Isaac Sim's ROS 2 bridge default: reliable, keep last 10, volatile
ISAAC_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=10,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)
# the parameters of the scene node that start an episode, set in one
# rcl_interfaces/SetParametersAtomically call (setting episode.seed applies them all)
SEED = "episode.seed"
JOINT_POSITIONS = "episode.joint_positions"  # the articulation's joints (command order)
BASE_POSE = "episode.base_pose"  # a mobile base: x y z (m), qw qx qy qz, world frame
OBJECT_NAMES = "episode.object_names"
OBJECT_POSES = "episode.object_poses"  # 7 per object: x y z (m), qw qx qy qz, world frame
EPISODE_PARAMETERS = (SEED, JOINT_POSITIONS, BASE_POSE, OBJECT_NAMES, OBJECT_POSES)


def command_joints(robot: ArmDescription) -> tuple[str, ...]:
    """The joints a command names: the arm's, then every finger joint (Isaac drives each
    joint of the articulation; the fingers get the same opening)."""
    return (*robot.arm_joints, *robot.gripper.joints)


def command_positions(robot: ArmDescription, action: np.ndarray) -> np.ndarray:
    """Tether's arm action (dof + 1: joint positions, one finger opening) as position
    targets for :func:`command_joints`."""
    a = np.asarray(action, np.float64)
    return np.concatenate([a[: robot.dof], np.full(len(robot.gripper.joints), a[robot.dof])])


def action_from_command(robot: ArmDescription, msg: JointState) -> np.ndarray | None:
    """The arm action a command message carries (by joint name), None when it lacks a joint
    of the arm or the first finger."""
    index = {n: i for i, n in enumerate(msg.name)}
    names = (*robot.arm_joints, robot.gripper.joints[0])
    if any(n not in index or index[n] >= len(msg.position) for n in names):
        return None
    return np.array([msg.position[index[n]] for n in names], np.float64)
