"""isaac_standin: Tether's MuJoCo backend behind the Isaac side's ROS 2 interface, so a graph
with ``sim.type: isaac_ros`` runs end to end on a machine without Isaac Sim (``sim.standin:
true`` starts it; docs/isaac_sim.md).

It speaks what sim/isaac/isaac_ros_scene.py speaks inside Isaac Sim, with the topic names of
the experiment's ``sim.topics``:

  publishes   joint_states (sensor_msgs/JointState, stamped with the simulation time: the
              arm's joints, or a base's wheels), /clock (rosgraph_msgs/Clock), each task
              object's pose (geometry_msgs/PoseStamped), each camera's image
              (sensor_msgs/Image rgb8) + camera_info; a base also odom (nav_msgs/Odometry:
              the chassis pose and body twist) and scan (sensor_msgs/LaserScan)
  subscribes  an arm: joint_command (sensor_msgs/JointState position targets, by joint
              name); a base: cmd_vel (geometry_msgs/Twist)
  parameters  episode.seed / joint_positions / base_pose / object_names / object_poses:
              setting them (one SetParametersAtomically call) places the robot and objects

all with Isaac's default QoS (reliable, keep last 10). Like Isaac playing, it steps on the
wall clock at the control rate whether or not a command came, holding the last target; its
clock runs on across episodes (a reset places things, it does not rewind time).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState, LaserScan

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.experiment import build_task, robot_description
from tether.sim.config_mobile_base import MobileBaseSimConfig
from tether.sim.config_sim import TableSimConfig
from tether.sim.isaac.config_isaac import IsaacRosConfig
from tether.sim.robots import diff_drive as dd
from tether_ros import conversions as conv
from tether_ros.isaac import interface as isaac
from tether_ros.kinds.mobile_base import base_odometry_msg, scan_msg, wheel_joint_state_msg
from tether_ros.runtime import experiment_from_params, run_node


def mujoco_twin(sim: IsaacRosConfig, kind: str = "arm") -> Any:
    """The MuJoCo config with the Isaac section's shared fields (rate, cameras, physics; a
    base's lidar and odometry too)."""
    fields = (
        MobileBaseSimConfig.model_fields if kind == "mobile_base" else TableSimConfig.model_fields
    )
    shared = {k: getattr(sim, k) for k in fields if k != "type" and hasattr(sim, k)}
    name = f"mujoco/{kind}"
    cls = registry.config_class("backend", name) if name in registry.available("backend") else None
    return (cls or registry.config_class("sim", "mujoco"))(**shared)


class IsaacStandin(Node):
    """The Isaac side's interface over a MuJoCo world (module docstring)."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("tether_isaac_scene", **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        sim = self.cfg.sim
        if not isinstance(sim, IsaacRosConfig):
            raise ConfigError(f"isaac_standin serves sim.type isaac_ros, not {self.cfg.world.type}")
        self.sim = sim
        self.kind = robot_description(self.cfg).kind
        self.backend = registry.build(
            "sim", mujoco_twin(sim, self.kind), robot=self.cfg.robot, task=build_task(self.cfg)
        )
        self.robot = self.backend.robot
        self.spec = self.backend.spec
        self.objects = tuple(self.backend.task.objects) if self.backend.task else ()
        self.dt_ns = round(self.spec.dt * 1e9)
        self.clock_ns = 0
        self.steps = 0
        self.commands = 0
        self.base = self.kind == "mobile_base"
        state = self.backend.observe()["state"]
        self.target = (
            np.zeros(2) if self.base else np.r_[state[: self.robot.dof], self.robot.gripper.home]
        )
        self._next_frame = {c.name: 0 for c in self.spec.cameras}

        t, qos = sim.topics, isaac.ISAAC_QOS
        self.pub_js = self.create_publisher(JointState, t.joint_states, qos)
        self.pub_clock = self.create_publisher(Clock, t.clock, qos)
        self.pub_poses = {
            n: self.create_publisher(PoseStamped, t.object_pose.format(name=n), qos)
            for n in self.objects
        }
        self.pub_cams = {
            c.name: (
                self.create_publisher(Image, t.image.format(camera=c.name), qos),
                self.create_publisher(CameraInfo, t.camera_info.format(camera=c.name), qos),
            )
            for c in self.spec.cameras
        }
        if self.base:
            self.pub_odom = self.create_publisher(Odometry, t.odom, qos)
            self.pub_scan = self.create_publisher(LaserScan, t.scan, qos)
            self.create_subscription(Twist, t.cmd_vel, self._on_twist, qos)
            command = t.cmd_vel
        else:
            self._names = isaac.command_joints(self.robot)
            self.create_subscription(JointState, t.joint_command, self._on_command, qos)
            command = t.joint_command
        self.declare_parameter(isaac.SEED, -1)
        self.declare_parameter(isaac.JOINT_POSITIONS, Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter(isaac.BASE_POSE, Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter(isaac.OBJECT_NAMES, Parameter.Type.STRING_ARRAY)
        self.declare_parameter(isaac.OBJECT_POSES, Parameter.Type.DOUBLE_ARRAY)
        self.add_on_set_parameters_callback(self._on_params)
        self.create_timer(self.spec.dt, self._tick)
        self.get_logger().info(
            f"Isaac stand-in: {self.spec.name} in MuJoCo at {self.spec.control_hz:g} Hz on the "
            f"wall clock, Isaac's topics {t.joint_states} / {command} / {t.clock}"
        )

    def _on_command(self, msg: JointState) -> None:
        action = isaac.action_from_command(self.robot, msg)
        if action is None or not np.all(np.isfinite(action)):
            self.get_logger().warning(
                f"joint command without every joint of {list(self._names)}: ignored",
                throttle_duration_sec=1.0,
            )
            return
        self.target = action
        self.commands += 1

    def _on_twist(self, msg: Twist) -> None:
        twist = np.array([msg.linear.x, msg.angular.z], np.float64)
        if np.all(np.isfinite(twist)):
            self.target = twist
            self.commands += 1

    def _on_params(self, params: list[Parameter]) -> SetParametersResult:
        """An episode start: place the robot and the objects (what Isaac's scene does)."""
        given = {p.name: p.value for p in params}
        if isaac.SEED not in given:
            return SetParametersResult(successful=True)
        q = np.asarray(given.get(isaac.JOINT_POSITIONS) or [], np.float64)
        names = list(given.get(isaac.OBJECT_NAMES) or [])
        poses = np.asarray(given.get(isaac.OBJECT_POSES) or [], np.float64)
        if not self.base and q.size != len(self._names):
            why = f"{isaac.JOINT_POSITIONS} has {q.size} values for joints {list(self._names)}"
            return SetParametersResult(successful=False, reason=why)
        if poses.size != 7 * len(names) or any(n not in self.objects for n in names):
            why = f"{isaac.OBJECT_POSES} must be 7 values for each of {list(self.objects)}"
            return SetParametersResult(successful=False, reason=why)
        # MuJoCo's reset of the seed draws the start Tether sent (the same code and seed);
        # a base's chassis is placed there, the arm and the objects are set as given
        self.backend.reset(int(given[isaac.SEED]))
        if self.base:
            self.target = np.zeros(2)
        else:
            dof = self.robot.dof
            self.backend.set_joint_positions(q[:dof], float(q[dof]))
            self.target = np.r_[q[:dof], q[dof]]
        for i, name in enumerate(names):
            self.backend.set_body_pose(name, poses[7 * i : 7 * i + 3], poses[7 * i + 3 : 7 * i + 7])
        return SetParametersResult(successful=True)

    def _tick(self) -> None:
        self.backend.step(self.target)
        self.steps += 1
        self.clock_ns += self.dt_ns
        stamp = self.clock_ns
        obs = self.backend.observe()
        for i, name in enumerate(self.objects):
            pose = obs["env_state"][7 * i : 7 * i + 7]
            self.pub_poses[name].publish(conv.pose_msg(pose, stamp, "world"))
        for cam in self.spec.cameras:
            if stamp >= self._next_frame[cam.name]:
                self._next_frame[cam.name] = stamp + round(1e9 / cam.fps)
                frame = f"{cam.name}_optical_frame"
                img, info = self.pub_cams[cam.name]
                img.publish(conv.image_msg(self.backend.render(cam.name), stamp, frame))
                info.publish(conv.camera_info_msg(cam, stamp, frame))
        if self.base:
            self._publish_base(obs, stamp)
        else:
            names = tuple(self.spec.state_names)
            self.pub_js.publish(conv.joint_state_msg(stamp, names, obs["state"], obs["velocity"]))
        self.pub_clock.publish(conv.clock_msg(stamp))

    def _publish_base(self, obs: Any, stamp: int) -> None:
        """What Isaac's odometry, lidar and joint-state nodes publish for a base: the
        chassis pose (the simulator's, not integrated wheels) with the body twist, the scan,
        the wheels."""
        state = obs["state"]
        pose = obs["base_pose"]
        yaw = dd.yaw_of(pose[3:7])
        odom = np.array([pose[0], pose[1], yaw, state[3], state[4]])
        self.pub_odom.publish(base_odometry_msg(odom, stamp))
        self.pub_scan.publish(scan_msg(obs["scan"], stamp, self.sim.mobile_base.lidar))  # type: ignore[attr-defined]
        joints = tuple(self.robot.wheel_joints)
        self.pub_js.publish(wheel_joint_state_msg(state, stamp, joints))

    def close(self) -> None:
        self.backend.close()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(IsaacStandin, args))


if __name__ == "__main__":
    main()
