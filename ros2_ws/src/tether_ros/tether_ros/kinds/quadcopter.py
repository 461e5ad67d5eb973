"""ROS 2 I/O of a quadcopter: odom / imu out, cmd_vel / cmd_low_level in, takeoff / land /
emergency services, per drone.

Bridge: the simulated fleet (:class:`~tether_ros.kinds.quadcopter_sim.DroneBridge`, drone i
as ``cf<i>``, a lone drone without a namespace) or one real drone
(:class:`~tether_ros.kinds.quadcopter_hardware.HardwareDroneBridge`). Policy server: one per
drone, in the drone's namespace, seeing a one-drone world: ``odom`` (nav_msgs/Odometry) ->
``state`` (13,) (a swarm policy: then its neighbours' odom, NeighbourOdometryInputs); answers each observation with the first row of the policy's chunk on
``cmd_low_level`` (sensor_msgs/JointState in the policy's action mode, header stamp = the
observation's, so the bridge's lockstep and latency match it to what it answers). A real
drone gets no policy server: it flies velocity setpoints on cmd_vel (teleop, a planner),
the drone policies are trained on the simulator's rotor commands. Teleop: a velocity
setpoint Twist on cmd_vel, or a device's full action on cmd_low_level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState

from tether.core.errors import InvalidCommand, TetherError
from tether.core.types import NEIGHBOURS_KEY, ActionChunk, Observation
from tether.hardware.teleop.mappers import drone_velocity
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node

    from tether.core.config import ExperimentConfig
    from tether.core.protocols import Robot, SimBackend
    from tether.core.spec import RobotSpec
    from tether.hardware.teleop.command import TeleopCommand
    from tether.hardware.teleop.config_teleop import TeleopConfig
    from tether_ros.kinds import Offer
    from tether_ros.kinds.quadcopter_hardware import HardwareDroneBridge
    from tether_ros.kinds.quadcopter_sim import DroneBridge
    from tether_ros.kinds.streams import Recording

# one drone's action and state sizes (per drone: 4 command channels, the 13-vector state)
DRONE_ACTION_DIM = 4


def drone_topic(drone: str, topic: str) -> str:
    """A drone's relative topic or service name: ``cf0/odom``, or ``odom`` for a lone drone."""
    return f"{drone}/{topic}" if drone else topic


def offer_odom(node: Node, offer: Offer, key: str, msg: Odometry) -> None:
    """Offer an odom message's state (13,) under ``key`` at its stamp; a malformed one is
    logged (throttled) and dropped."""
    try:
        state = conv.odometry_to_state(msg)
    except InvalidCommand as exc:
        node.get_logger().warning(f"ignored odom: {exc}", throttle_duration_sec=1.0)
        return
    offer(key, conv.from_time(msg.header.stamp), state)


class OdometryInputs:
    """odom -> ``state`` (13,): position m, quaternion wxyz, linear velocity m/s world,
    angular velocity rad/s body."""

    keys = ("state",)

    def __init__(self, node: Node, offer: Offer) -> None:
        self.node = node
        self._offer = offer
        node.create_subscription(
            Odometry, itf.ODOM, self._on_odom, itf.SENSOR_QOS, event_callbacks=itf.FAST_SUB
        )

    def _on_odom(self, msg: Odometry) -> None:
        offer_odom(self.node, self._offer, "state", msg)

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"state": ready["state"]}


class NeighbourOdometryInputs(OdometryInputs):
    """A swarm policy's inputs (``NEIGHBOURS_KEY`` among its keys): ``state`` (13 (1 + M),)
    = this drone's odom, then the latest odom of each of M neighbours: the drones in the
    namespaces beside this one (``/cf3/odom`` beside ``/cf2``), found by topic discovery
    every ``DISCOVERY_S`` (a drone that joins later is seen then). A neighbour whose last
    odom is more than ``STALE_S`` older than this drone's is left out (landed, lost)."""

    DISCOVERY_S = 0.5
    STALE_S = 0.5

    def __init__(self, node: Node, offer: Offer) -> None:
        super().__init__(node, offer)
        ns = node.get_namespace().rstrip("/")
        self._own = ns
        self._parent = ns.rsplit("/", 1)[0]
        self._latest: dict[str, tuple[int, np.ndarray]] = {}
        self._own_stamp = 0
        self._discover()
        node.create_timer(self.DISCOVERY_S, self._discover)

    def _discover(self) -> None:
        if not self._own:  # a lone drone (no namespace) has no neighbours
            return
        for name, types in self.node.get_topic_names_and_types():
            if not name.endswith("/" + itf.ODOM) or "nav_msgs/msg/Odometry" not in types:
                continue
            ns = name[: -len(itf.ODOM) - 1]
            if ns == self._own or ns in self._latest or ns.rsplit("/", 1)[0] != self._parent:
                continue
            self._latest[ns] = (-(10**18), np.zeros(0))
            self.node.create_subscription(
                Odometry,
                name,
                lambda msg, n=ns: self._on_neighbour(n, msg),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
            self.node.get_logger().info(f"swarm: neighbour {ns} ({name})")

    def _on_neighbour(self, ns: str, msg: Odometry) -> None:
        try:
            self._latest[ns] = (conv.from_time(msg.header.stamp), conv.odometry_to_state(msg))
        except InvalidCommand:
            return

    def _on_odom(self, msg: Odometry) -> None:
        self._own_stamp = conv.from_time(msg.header.stamp)
        super()._on_odom(msg)

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        stale = self._own_stamp - round(self.STALE_S * 1e9)
        others = [s for t, s in self._latest.values() if t >= stale and s.size == 13]
        return {"state": np.concatenate([ready["state"], *others]).astype(np.float32)}


class FleetInputs:
    """A batched server's inputs (a spec of N > 1 drones): every drone's ``cf<i>/odom`` and,
    when the policy reads ``env_state``, its ``cf<i>/objects/target/pose``, matched by stamp
    (one simulator step publishes them all) -> ``state`` (13 N,), ``env_state`` (7 N,)."""

    provides = ("state", "env_state")

    def __init__(self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer) -> None:
        from tether.sim.drone_bridge import drone_names

        self.node = node
        self.names = drone_names(spec.action.dim // DRONE_ACTION_DIM)
        goals = "env_state" in keys
        self.keys = tuple(f"odom/{n}" for n in self.names) + (
            tuple(f"goal/{n}" for n in self.names) if goals else ()
        )
        for n in self.names:
            node.create_subscription(
                Odometry,
                drone_topic(n, itf.ODOM),
                lambda msg, n=n: self._on_odom(n, msg, offer),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
            if goals:
                node.create_subscription(
                    PoseStamped,
                    drone_topic(n, itf.object_pose_topic("target")),
                    lambda msg, n=n: offer(
                        f"goal/{n}", conv.from_time(msg.header.stamp), conv.pose_to_array(msg)
                    ),
                    itf.SENSOR_QOS,
                    event_callbacks=itf.FAST_SUB,
                )

    def _on_odom(self, name: str, msg: Odometry, offer: Offer) -> None:
        offer_odom(self.node, offer, f"odom/{name}", msg)

    def observation(self, ready: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {"state": np.concatenate([ready[f"odom/{n}"] for n in self.names])}
        if f"goal/{self.names[0]}" in ready:
            out["env_state"] = np.concatenate([ready[f"goal/{n}"] for n in self.names])
        return out


class FleetOutput:
    """A batched server's answer: drone i's 4 columns of the chunk's first row on its
    ``cf<i>/cmd_low_level``, stamped with the observation answered."""

    def __init__(self, node: Node, spec: RobotSpec) -> None:
        from tether.sim.drone_bridge import drone_names

        self.mode = spec.action.mode
        self.pubs = [
            node.create_publisher(
                JointState,
                drone_topic(n, itf.CMD_LOW_LEVEL),
                itf.COMMAND_QOS,
                event_callbacks=itf.FAST_PUB,
            )
            for n in drone_names(spec.action.dim // DRONE_ACTION_DIM)
        ]

    def publish(self, chunk: ActionChunk) -> None:
        row = np.asarray(chunk.actions[0], np.float64)
        for i, pub in enumerate(self.pubs):
            block = row[DRONE_ACTION_DIM * i : DRONE_ACTION_DIM * (i + 1)]
            pub.publish(conv.low_level_msg(self.mode, block, chunk.t0_ns))


class LowLevelOutput:
    """A chunk's first row on cmd_low_level, in the spec's action mode, stamped with the
    observation it answers."""

    def __init__(self, node: Node, spec: RobotSpec) -> None:
        if spec.action.dim != DRONE_ACTION_DIM:
            raise TetherError(
                f"a drone policy server flies one drone or a whole world, but this spec has "
                f"{spec.action.dim} actions: run one per drone namespace with "
                "sim.quadrotor.num_drones=1 (tether up does)"
            )
        self.mode = spec.action.mode
        self.pub = node.create_publisher(
            JointState, itf.CMD_LOW_LEVEL, itf.COMMAND_QOS, event_callbacks=itf.FAST_PUB
        )

    def publish(self, chunk: ActionChunk) -> None:
        row = np.asarray(chunk.actions[0], np.float64)
        self.pub.publish(conv.low_level_msg(self.mode, row, chunk.t0_ns))


class DroneTeleop:
    """The device's motion as a velocity setpoint Twist on cmd_vel (heading frame: x, y, z
    m/s and yaw rate; the drone must be airborne: takeoff first), or a device's full action
    (a scripted controller) on cmd_low_level in the spec's action mode."""

    needs_state = False

    def __init__(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> None:
        self.node = node
        self.spec = spec
        self.tcfg = tcfg
        self.pub_twist = node.create_publisher(Twist, itf.CMD_VEL, itf.COMMAND_QOS)
        self.pub_low = node.create_publisher(JointState, itf.CMD_LOW_LEVEL, itf.COMMAND_QOS)

    def release(self) -> None:
        pass  # (the drone safety gate holds or lands when commands stop)

    def command(self, cmd: TeleopCommand, obs: Observation | None) -> bool:
        if cmd.action is None:
            t = drone_velocity(cmd, self.tcfg.max_linear_speed, self.tcfg.max_angular_speed)
            self.pub_twist.publish(conv.twist_msg(t.linear, t.angular))
            return True
        if obs is None:
            return False  # a full action answers an observation: wait for the first
        a = np.asarray(cmd.action, np.float64)
        if a.shape != (DRONE_ACTION_DIM,) or not np.isfinite(a).all():
            self.node.get_logger().warning(
                f"device action of shape {a.shape} dropped", throttle_duration_sec=1.0
            )
            return False
        self.pub_low.publish(conv.low_level_msg(self.spec.action.mode, a, obs.stamp_ns))
        return True


class QuadcopterIO:
    """The quadcopter adapter (registry ``ros_io`` / ``quadcopter``)."""

    kind = "quadcopter"
    chunked = False

    def sim_bridge(
        self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None
    ) -> DroneBridge:
        from tether_ros.kinds.quadcopter_sim import DroneBridge

        return DroneBridge(node, cfg, backend)

    def hardware_bridge(
        self, node: Node, cfg: ExperimentConfig, robot: Robot | None
    ) -> HardwareDroneBridge:
        from tether.hardware.robots.factory import build_robot
        from tether_ros.kinds.quadcopter_hardware import HardwareDroneBridge

        assert cfg.hardware is not None
        return HardwareDroneBridge(node, cfg, robot or build_robot(cfg.hardware, None, node))

    def state_inputs(
        self, node: Node, spec: RobotSpec, keys: Sequence[str], offer: Offer
    ) -> OdometryInputs:
        if spec.action.dim > DRONE_ACTION_DIM:  # one batched server for the whole world
            return FleetInputs(node, spec, keys, offer)  # type: ignore[return-value]
        if NEIGHBOURS_KEY in keys:  # a swarm policy: the other drones' odom too
            return NeighbourOdometryInputs(node, offer)
        return OdometryInputs(node, offer)

    def policy_output(self, node: Node, spec: RobotSpec) -> LowLevelOutput:
        if spec.action.dim > DRONE_ACTION_DIM:  # one batched server for the whole world
            return FleetOutput(node, spec)  # type: ignore[return-value]
        return LowLevelOutput(node, spec)

    def teleop(self, node: Node, spec: RobotSpec, tcfg: TeleopConfig) -> DroneTeleop:
        return DroneTeleop(node, spec, tcfg)

    def policy_servers(self, cfg: ExperimentConfig) -> list[tuple[str, list[str]]]:
        """One per simulated drone, in its namespace (``cf<i>``; a lone drone: none), each
        seeing a one-drone world; one per member of a hardware fleet; none for a lone real
        drone (it flies cmd_vel)."""
        from tether.sim.drone_bridge import drone_names

        if cfg.hardware is not None:
            # a hardware swarm: one per fleet member, on its one-drone experiment
            hw = cfg.hardware
            return [
                (m.namespace.strip("/"), hw.member_overrides(i)) for i, m in enumerate(hw.fleet)
            ]
        quad = getattr(cfg.sim, "quadrotor", None)
        n = quad.num_drones if quad is not None else 1
        if n > 1 and cfg.drones.policy_servers == "batched":
            return [("", [])]  # one server for the whole world, in the robot's namespace
        extra = ["sim.quadrotor.num_drones=1"] if n > 1 else []
        return [(drone, list(extra)) for drone in drone_names(n)]

    def policy_topics(self, cfg: ExperimentConfig) -> list[tuple[str, str]]:
        """Each flown drone's odom and cmd_low_level, whichever server answers it: the
        simulated drones, a hardware fleet's members (none for a lone real drone)."""
        from tether.sim.drone_bridge import drone_names

        if cfg.hardware is not None:
            names = [m.namespace.strip("/") for m in cfg.hardware.fleet]
        else:
            quad = getattr(cfg.sim, "quadrotor", None)
            names = drone_names(quad.num_drones if quad is not None else 1)
        return [(drone_topic(ns, itf.ODOM), drone_topic(ns, itf.CMD_LOW_LEVEL)) for ns in names]

    def recording(
        self, cfg: ExperimentConfig, spec: RobotSpec, objects: tuple[str, ...]
    ) -> Recording:
        from tether_ros.kinds import streams

        return streams.recording(cfg, spec, objects)
