"""ROS 2 I/O of an arm (any arm: its facts come from the robot's description).

Bridge: ``joint_states`` (sensor_msgs/JointState: the spec's state names, positions rad / m,
velocities when the world reports them) out, stamped ``joint_trajectory`` chunks in, plus
what every runner bridge has (tether_ros.kinds.runner). Policy server: joint_states ->
``state``; answers with the whole chunk on joint_trajectory, and a chunk_executor can execute
those (ros.chunked). Teleop: end-effector deltas through the arm's own kinematics (its DH
chain, ``ArmDescription.kinematics``) -> a short joint_trajectory chunk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from sensor_msgs.msg import JointState

from tether.core import registry
from tether.core.errors import InvalidCommand, TetherError
from tether.core.types import ActionChunk, Observation
from tether.hardware.teleop.mappers import ArmMapper
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.kinds.runner import RunnerBridge
from tether_ros.kinds.runner_hardware import HardwareRunnerBridge
from tether_ros.kinds.trajectory import TrajectoryOutput

if TYPE_CHECKING:
    from collections.abc import Callable

    from rclpy.node import Node

    from tether.core.config import ExperimentConfig
    from tether.core.protocols import Robot, SimBackend
    from tether.core.spec import RobotSpec
    from tether.hardware.teleop.command import TeleopCommand
    from tether.hardware.teleop.config_teleop import TeleopConfig
    from tether_ros.kinds import Offer
    from tether_ros.kinds.streams import Recording

# a teleop target stays in force for this many control periods: a command that reaches the
# bridge a step or two late (load, wake-up jitter) still applies instead of expiring, and
# releasing the dead-man still stops within HOLD_PERIODS + the watchdog
HOLD_PERIODS = 5


class ArmTopics:
    """An arm's own bridge topic: joint_states from the observation's state (and velocity)."""

    def __init__(
        self,
        node: Node,
        cfg: ExperimentConfig,
        spec: RobotSpec,
        on_action: Callable[[np.ndarray], None],
        on_reject: Callable[[Exception], None],
    ) -> None:
        self.names = spec.state_names
        self._js = conv.JointStateWriter(self.names)

    def publish(self, obs: Observation) -> tuple[str, ...]:
        return ()  # (joint_states is all an arm has: the bridge publishes it)

    def joint_states(self, obs: Observation) -> JointState:
        return self._js.write(obs.stamp_ns, obs["state"], obs.get("velocity"))


class JointStateInputs:
    """joint_states -> ``state`` (the spec's state names, in order)."""

    keys = ("state",)

    def __init__(self, node: Node, spec: RobotSpec, offer: Offer) -> None:
        self.node = node
        self.names = spec.state_names
        self._offer = offer
        node.create_subscription(
            JointState,
            itf.JOINT_STATES,
            self._on_state,
            itf.SENSOR_QOS,
            event_callbacks=itf.FAST_SUB,
        )

    def _on_state(self, msg: JointState) -> None:
        try:
            state = conv.joint_state_to_array(msg, self.names)
        except InvalidCommand as exc:
            self.node.get_logger().warning(
                f"ignored joint_states: {exc}", throttle_duration_sec=1.0
            )
            return
        self._offer("state", conv.from_time(msg.header.stamp), state)

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"state": ready["state"]}


class ArmTeleop:
    """End-effector deltas (or a device's full action) -> a joint_trajectory chunk of
    HOLD_PERIODS rows stamped with the latest observation's stamp."""

    needs_state = True

    def __init__(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> None:
        if spec.action.mode != "joint_position":
            raise TetherError(f"arm teleop drives joint_position arms, not '{spec.action.mode}'")
        robot = registry.load("robot", spec.name)  # its kinematics, limits and gripper
        self.mapper = ArmMapper.for_arm(
            robot,
            spec.dt,
            tcfg.joint_speed_scale,
            max_linear_speed=tcfg.max_linear_speed,
            max_angular_speed=tcfg.max_angular_speed,
        )
        self.node = node
        self.spec = spec
        self.out = TrajectoryOutput(node, spec)
        self.engaged = False

    def release(self) -> None:
        self.engaged = False

    def command(self, cmd: TeleopCommand, obs: Observation | None) -> bool:
        if obs is None:
            return False  # no robot state yet: nothing to move from
        if not self.engaged:
            self.mapper.reset()  # (re)start from where the robot is
            self.engaged = True
        if cmd.action is not None:
            action = np.asarray(cmd.action, np.float64)
            if action.shape != self.spec.action.shape or not np.isfinite(action).all():
                self.node.get_logger().warning(
                    f"device action of shape {action.shape} dropped", throttle_duration_sec=1.0
                )
                return False
        else:
            action = self.mapper.step(cmd, obs["state"])
        rows = np.repeat(action[None], HOLD_PERIODS, 0)
        self.out.publish(ActionChunk(rows, self.spec.dt, obs.stamp_ns))
        return True


class ArmIO:
    """The arm adapter (registry ``ros_io`` / ``arm``)."""

    kind = "arm"
    chunked = True

    def sim_bridge(
        self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None
    ) -> RunnerBridge:
        return RunnerBridge(node, cfg, backend, ArmTopics)

    def hardware_bridge(
        self, node: Node, cfg: ExperimentConfig, robot: Robot | None
    ) -> HardwareRunnerBridge:
        return HardwareRunnerBridge(node, cfg, robot, ArmTopics)

    def state_inputs(
        self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer
    ) -> JointStateInputs:
        return JointStateInputs(node, spec, offer)

    def policy_output(self, node: Node, spec: RobotSpec) -> TrajectoryOutput:
        return TrajectoryOutput(node, spec)

    def teleop(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> ArmTeleop:
        return ArmTeleop(node, spec, tcfg)

    def policy_servers(self, cfg: ExperimentConfig) -> list[tuple[str, list[str]]]:
        return [("", [])]

    def policy_topics(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        return [(itf.JOINT_STATES, itf.JOINT_TRAJECTORY)]

    def recording(
        self, cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]
    ) -> Recording:
        from tether_ros.kinds import streams

        return streams.recording(cfg, spec, objects)
