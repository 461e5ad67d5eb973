"""Topic names and QoS of Tether's ROS 2 interface, in one place (see ARCHITECTURE.md).

Topic names are relative, so a namespace per robot gives multi-robot setups; only /clock is
global. Sensor streams use sensor-data QoS; commands and events are reliable.
"""

from __future__ import annotations

from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

CLOCK = "/clock"
# what a graph that finds another on its ROS 2 domain tells the user to do (graph.py, the sim
# bridge)
FREE_DOMAIN = (
    "stop it, or start this one on a free domain (ROS_DOMAIN_ID=<n> or ros.domain_id in "
    "the experiment)"
)
JOINT_STATES = "joint_states"
JOINT_TRAJECTORY = "joint_trajectory"
EPISODE_STATUS = "episode_status"
ESTOP = "estop"
# drones (each under its namespace when there are several: /cf0/odom, ...)
ODOM = "odom"
IMU = "imu"
CMD_VEL = "cmd_vel"
CMD_LOW_LEVEL = "cmd_low_level"  # sensor_msgs/JointState, layout in conversions.LOW_LEVEL_CHANNELS
TAKEOFF = "takeoff"
LAND = "land"
EMERGENCY = "emergency"
# std_msgs/Header, one per sensor message the recorder took in: frame_id = the message's
# topic (as the publisher names it), stamp = its header stamp (ros.wait_for_recorder)
RECORDER_ACK = "recorder_ack"
# std_msgs/String: the instruction in force (a language-conditioned task or policy); the sim
# bridge publishes each episode's, anyone may publish a new one
INSTRUCTION = "instruction"


def image_topic(camera: str) -> str:
    return f"camera/{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    return f"camera/{camera}/camera_info"


def object_pose_topic(name: str) -> str:
    return f"objects/{name}/pose"


SENSOR_QOS = qos_profile_sensor_data
COMMAND_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE
)
# as rclcpp::ClockQoS: best effort, keep last 1 (rclpy's TimeSource subscribes best effort)
CLOCK_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT
)
# late joiners (a supervisor started after the bridge) still get recent episode events
EVENT_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
# the instruction: reliable, latched; a late joiner gets the one in force (keep last 1)
INSTRUCTION_QOS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

# No QoS-event handlers on the nodes' endpoints: each is a waitable that rclpy's executor
# re-adds to its wait set on every spin (~40 % of a 500 Hz loop's time). The QoS of every
# Tether topic is fixed here, so the default "incompatible QoS" warnings add little.
FAST_PUB = PublisherEventCallbacks(use_default_callbacks=False)
FAST_SUB = SubscriptionEventCallbacks(use_default_callbacks=False)
