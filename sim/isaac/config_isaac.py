"""Config of ``sim.type: isaac_ros``: Tether drives an Isaac Sim that runs in its own process
(its own Python and GPU) through the topics of Isaac's ROS 2 bridge. Light: pydantic only.

Every name is configurable because Isaac's examples differ (``joint_states`` /
``joint_command`` in the ROS 2 bridge tutorials, ``isaac_joint_states`` /
``isaac_joint_commands`` in NVIDIA's MoveIt example); the defaults are the MoveIt example's,
which do not collide with the ``joint_states`` Tether's own bridge publishes. The script Isaac
runs (sim/isaac/isaac_ros_scene.py) and the stand-in (tether_ros.isaac.standin) read the same
section, so one experiment YAML names the topics for both sides (docs/isaac_sim.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.sim.config_mobile_base import MobileBaseSimConfig
from tether.sim.config_sim import TableSimConfig


class IsaacTopics(BaseModel):
    """The Isaac side's topics (relative names resolve in ``ros.namespace``)."""

    model_config = ConfigDict(extra="forbid")
    # sensor_msgs/JointState the articulation publishes (ROS2 Publish Joint State node)
    joint_states: str = "isaac_joint_states"
    # sensor_msgs/JointState of position targets the articulation controller takes
    # (ROS2 Subscribe Joint State -> Articulation Controller)
    joint_command: str = "isaac_joint_commands"
    # rosgraph_msgs/Clock (ROS2 Publish Clock): the simulation time every Tether node follows
    clock: str = "/clock"
    # geometry_msgs/PoseStamped of each task object, ``{name}`` = the task's object name.
    # Isaac's own way is /tf (ROS2 Publish Transform Tree), but tf2_msgs has no PyPI wheel, so
    # the scene script publishes a PoseStamped per object (docs/isaac_sim.md)
    object_pose: str = "isaac_objects/{name}/pose"
    # sensor_msgs/Image (rgb8) and CameraInfo of each camera (ROS2 Camera Helper),
    # ``{camera}`` = the camera's name in ``cameras``
    image: str = "isaac_camera/{camera}/rgb"
    camera_info: str = "isaac_camera/{camera}/camera_info"
    # a mobile base: geometry_msgs/Twist into the differential controller (ROS2 Subscribe
    # Twist), nav_msgs/Odometry (ROS2 Publish Odometry), sensor_msgs/LaserScan (ROS2 RTX
    # Lidar Helper); the wheels' JointState comes on ``joint_states``
    cmd_vel: str = "isaac_cmd_vel"
    odom: str = "isaac_odom"
    scan: str = "isaac_scan"


class IsaacRosConfig(TableSimConfig):
    """A running Isaac Sim over ROS 2. Tether starts no simulator: the sim bridge relays
    Isaac's state into Tether's topics and sends each control step's safe command to Isaac as
    a JointState of position targets. ``control_hz`` and ``cameras`` are Tether's (the bridge
    steps at ``control_hz`` on the wall clock, like Isaac playing in real time); the physics
    fields configure only the stand-in."""

    type: Literal["isaac_ros"] = "isaac_ros"
    topics: IsaacTopics = Field(default_factory=IsaacTopics)
    # the Isaac-side node whose parameters start an episode: Tether sets episode.seed,
    # episode.joint_positions, episode.object_names and episode.object_poses in one
    # rcl_interfaces/SetParametersAtomically call, the scene places the robot and objects
    scene_node: str = "tether_isaac_scene"
    # run Tether's MuJoCo stand-in (tether_ros.isaac.standin) as the scene node: the same
    # topics, types, QoS and /clock as the Isaac side, so the graph runs without Isaac Sim
    standin: bool = False
    # how long to wait for Isaac's first joint_states (and for the scene node), seconds
    connect_timeout_s: float = Field(30.0, gt=0)
    # how long an episode reset may take on the Isaac side, seconds
    reset_timeout_s: float = Field(10.0, gt=0)


class IsaacRosMobileBaseConfig(IsaacRosConfig, MobileBaseSimConfig):
    """``sim:`` of a mobile base in Isaac Sim over ROS 2: the lidar settings say what Isaac's
    scan must look like (its beam count is checked) and configure the stand-in's."""


class IsaacSimConfig(TableSimConfig):
    """Isaac Sim in process (``sim.type: isaacsim``): the sim bridge (or `tether eval`) runs
    inside Isaac Sim's Python, which must be created before anything else imports isaacsim
    (tether.sim.isaac.isaacsim_backend). Needs an NVIDIA RTX GPU and Isaac Sim 4.5 / 5.x."""

    type: Literal["isaacsim"] = "isaacsim"
    # the robot's USD: a path under Isaac's asset root ("/Isaac/...") or a file; None: the
    # asset of the robot's name in tether.sim.isaac.isaacsim_backend.ISAAC_ROBOTS (the Franka
    # of Isaac Sim 4.5 / 5.x for panda)
    usd: str | None = None
    # which of Isaac's Python APIs drives the articulation: "core" (isaacsim.core.api, 4.5 /
    # 5.x), "experimental" (isaacsim.core.experimental, 5.x / 6.x, where 6.x deprecates the
    # core API), "auto": experimental where it imports, else core
    api: Literal["auto", "core", "experimental"] = "auto"
