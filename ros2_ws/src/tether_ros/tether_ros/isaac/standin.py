"""isaac_standin: Tether's MuJoCo backend behind the Isaac side's ROS 2 interface, so a graph
with ``sim.type: isaac_ros`` runs end to end on a machine without Isaac Sim (``sim.standin:
true`` starts it; docs/isaac_sim.md).

It speaks what sim/isaac/isaac_ros_scene.py speaks inside Isaac Sim, with the topic names of
the experiment's ``sim.topics``:

  publishes   joint_states (sensor_msgs/JointState, stamped with the simulation time),
              /clock (rosgraph_msgs/Clock), each task object's pose (geometry_msgs/
              PoseStamped), each camera's image (sensor_msgs/Image rgb8) + camera_info
  subscribes  joint_command (sensor_msgs/JointState position targets, by joint name)
  parameters  episode.seed / joint_positions / object_names / object_poses: setting them
              (one SetParametersAtomically call) places the robot and the objects

all with Isaac's default QoS (reliable, keep last 10). Like Isaac playing, it steps on the
wall clock at the control rate whether or not a command came, holding the last target; its
clock runs on across episodes (a reset places things, it does not rewind time).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.experiment import build_task
from tether.sim.config_sim import TableSimConfig
from tether.sim.isaac.config_isaac import IsaacRosConfig
from tether_ros import conversions as conv
from tether_ros.isaac import interface as isaac
from tether_ros.runtime import experiment_from_params, run_node


def mujoco_twin(sim: IsaacRosConfig) -> Any:
    """The MuJoCo config with the Isaac section's shared fields (rate, cameras, physics)."""
    shared = {k: getattr(sim, k) for k in TableSimConfig.model_fields if k != "type"}
    return registry.config_class("sim", "mujoco")(**shared)


class IsaacStandin(Node):
    """The Isaac side's interface over a MuJoCo world (module docstring)."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("tether_isaac_scene", **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        sim = self.cfg.sim
        if not isinstance(sim, IsaacRosConfig):
            raise ConfigError(f"isaac_standin serves sim.type isaac_ros, not {self.cfg.world.type}")
        self.sim = sim
        self.backend = registry.build(
            "sim", mujoco_twin(sim), robot=self.cfg.robot, task=build_task(self.cfg)
        )
        self.robot = self.backend.robot
        self.spec = self.backend.spec
        self.objects = tuple(self.backend.task.objects) if self.backend.task else ()
        self.dt_ns = round(self.spec.dt * 1e9)
        self.clock_ns = 0
        self.steps = 0
        self.commands = 0
        self.target = np.r_[
            self.backend.observe()["state"][: self.robot.dof], self.robot.gripper.home
        ]
        self._next_frame = {c.name: 0 for c in self.spec.cameras}
        self._names = isaac.command_joints(self.robot)

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
        self.create_subscription(JointState, t.joint_command, self._on_command, qos)
        self.declare_parameter(isaac.SEED, -1)
        self.declare_parameter(isaac.JOINT_POSITIONS, Parameter.Type.DOUBLE_ARRAY)
        self.declare_parameter(isaac.OBJECT_NAMES, Parameter.Type.STRING_ARRAY)
        self.declare_parameter(isaac.OBJECT_POSES, Parameter.Type.DOUBLE_ARRAY)
        self.add_on_set_parameters_callback(self._on_params)
        self.create_timer(self.spec.dt, self._tick)
        self.get_logger().info(
            f"Isaac stand-in: {self.spec.name} in MuJoCo at {self.spec.control_hz:g} Hz on the "
            f"wall clock, Isaac's topics {t.joint_states} / {t.joint_command} / {t.clock}"
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

    def _on_params(self, params: list[Parameter]) -> SetParametersResult:
        """An episode start: place the robot and the objects (what Isaac's scene does)."""
        given = {p.name: p.value for p in params}
        if isaac.SEED not in given:
            return SetParametersResult(successful=True)
        q = np.asarray(given.get(isaac.JOINT_POSITIONS) or [], np.float64)
        names = list(given.get(isaac.OBJECT_NAMES) or [])
        poses = np.asarray(given.get(isaac.OBJECT_POSES) or [], np.float64)
        if q.size != len(self._names):
            why = f"{isaac.JOINT_POSITIONS} has {q.size} values for joints {list(self._names)}"
            return SetParametersResult(successful=False, reason=why)
        if poses.size != 7 * len(names) or any(n not in self.objects for n in names):
            why = f"{isaac.OBJECT_POSES} must be 7 values for each of {list(self.objects)}"
            return SetParametersResult(successful=False, reason=why)
        self.backend.reset(int(given[isaac.SEED]))
        dof = self.robot.dof
        self.backend.set_joint_positions(q[:dof], float(q[dof]))
        for i, name in enumerate(names):
            self.backend.set_body_pose(name, poses[7 * i : 7 * i + 3], poses[7 * i + 3 : 7 * i + 7])
        self.target = np.r_[q[:dof], q[dof]]
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
        names = tuple(self.spec.state_names)
        self.pub_js.publish(conv.joint_state_msg(stamp, names, obs["state"], obs["velocity"]))
        self.pub_clock.publish(conv.clock_msg(stamp))

    def close(self) -> None:
        self.backend.close()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(IsaacStandin, args))


if __name__ == "__main__":
    main()
