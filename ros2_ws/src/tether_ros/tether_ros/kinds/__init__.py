"""Per-kind ROS 2 I/O: what the nodes publish, subscribe and serve for each robot kind.

The nodes (sim_bridge, hardware_bridge, policy_server, teleop, the recorder) and the node
graph are shells that ask the adapter of the robot's kind, looked up in the registry (kind
``ros_io``, registered by tether_ros.plugins): none of them tests a kind or a robot's name,
so a new robot of a known kind touches no node, and a new kind is one adapter module plus
one registry entry.

===========  =============================================  ==============================
kind         bridge publishes / takes                       policy server answers on
===========  =============================================  ==============================
arm          joint_states / joint_trajectory                joint_trajectory (a chunk)
mobile_base  odom, scan, base_pose, wheel joint_states /     joint_trajectory (a chunk of
             cmd_vel, joint_trajectory                      twists, the action's names)
quadcopter   per drone: odom, imu / cmd_vel, cmd_low_level;  cmd_low_level (the chunk's
             services takeoff, land, emergency              first row, one drone each)
===========  =============================================  ==============================

Every kind also has /clock, ``estop`` (std_msgs/Bool, latched), ``objects/<name>/pose`` of
the task's objects and the spec's cameras; the policy server and teleop assemble an
Observation from the kind's state topics plus those (:mod:`tether_ros.kinds.inputs`). Every
simulated world runs in episodes the same way (:class:`tether_ros.kinds.runner.EpisodeBridge`:
episode_status, ~/start_episode, ~/stop_episode, ~/reset, ros.wait_for_recorder).
Topic names and QoS: tether_ros.interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tether.core import registry
from tether.core.errors import ConfigError

if TYPE_CHECKING:
    from rclpy.node import Node

    from tether.core.config import ExperimentConfig
    from tether.core.protocols import Robot, SimBackend
    from tether.core.spec import RobotSpec
    from tether.core.types import ActionChunk, Observation
    from tether.hardware.teleop.command import TeleopCommand
    from tether.hardware.teleop.config_teleop import TeleopConfig

# what a state subscription hands on: stream key, header stamp (ns), value
Offer = Callable[[str, int, np.ndarray], None]


class BridgeIO(Protocol):
    """A kind's endpoints on a bridge node, and the world behind them (a simulator or a
    robot). Built in the node's ``__init__``; it steps the world from its own timers."""

    spec: RobotSpec
    # commands refused (malformed, or refused by the safety gate): logged, never applied
    rejected: int

    def close(self) -> None:
        """Leave the robot safe (hardware: the last safe command, a landing) and release the
        world; called while the ROS context is still valid."""


class StateInputs(Protocol):
    """Subscriptions to a kind's state topics; each valid message becomes one
    ``offer(key, stamp_ns, value)``. ``keys``: every key an observation needs."""

    keys: tuple[str, ...]

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The kind's part of an Observation (``state`` and its extras) from one complete,
        stamp-matched set of ``keys``."""


class PolicyOutput(Protocol):
    """Publishes a policy's answer to one observation (``chunk.t0_ns`` = its stamp)."""

    def publish(self, chunk: ActionChunk) -> None:
        """Publish the answer (again, for a re-sent observation)."""


class TeleopIO(Protocol):
    """How a teleop command becomes a robot command for one kind."""

    # the mapping needs the measured state (an arm's IK starts from where the arm is)
    needs_state: bool

    def command(self, cmd: TeleopCommand, obs: Observation | None) -> bool:
        """Publish the command for one control period (``cmd.action``, a device's full
        action, wins over its motion); ``obs``: the latest observation (None before the
        first). False when nothing was sent."""

    def release(self) -> None:
        """The dead-man was released or the scene reset: the next command starts afresh."""


class KindIO(Protocol):
    """The ROS 2 adapter of one robot kind (registry kind ``ros_io``)."""

    kind: str
    # whether a chunk_executor can execute this kind's chunks (ros.chunked)
    chunked: bool

    def sim_bridge(self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None) -> BridgeIO:
        """The endpoints of the simulated world (``backend``: use this one instead of
        building the experiment's)."""

    def hardware_bridge(self, node: Node, cfg: ExperimentConfig, robot: Robot | None) -> BridgeIO:
        """The same endpoints driving real (or mock) hardware (``robot``: use this one
        instead of building the one ``hardware:`` names)."""

    def state_inputs(
        self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer
    ) -> StateInputs:
        """Subscribe the state topics a consumer reading observation ``keys`` needs."""

    def policy_output(self, node: Node, spec: RobotSpec) -> PolicyOutput:
        """The publisher of a policy server's answers."""

    def teleop(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> TeleopIO:
        """Teleop's command path."""

    def policy_servers(self, cfg: ExperimentConfig) -> list[tuple[str, list[str]]]:
        """The policy servers the graph runs: (namespace under ``ros.namespace``, overrides
        added to the experiment's) for each one."""

    def policy_topics(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        """What shows that the policy servers are connected: for each, (a topic the bridge
        publishes that the server subscribes, the topic the server answers on), relative to
        ``ros.namespace``; a supervisor waits until each has a subscriber and a publisher."""

    def recording(self, cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]) -> Any:
        """What the recorder subscribes and how it forms the dataset (kinds.streams)."""


def kind_io(kind: str) -> KindIO:
    """The registered ROS 2 adapter of robot ``kind``; ConfigError when none is."""
    if kind not in registry.available("ros_io"):
        known = ", ".join(registry.available("ros_io")) or "none"
        raise ConfigError(f"no ROS 2 I/O for robot kind '{kind}' (registered: {known})")
    io: KindIO = registry.load("ros_io", kind)()
    return io


def experiment_io(cfg: ExperimentConfig) -> KindIO:
    """The adapter of the experiment robot's kind (from its description)."""
    from tether.core.experiment import robot_description

    return kind_io(str(robot_description(cfg).kind))
