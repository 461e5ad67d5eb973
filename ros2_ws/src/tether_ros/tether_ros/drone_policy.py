"""The drone half of policy_server: one drone's policy over ROS 2.

Runs in the drone's namespace (``/cf0``; none for a lone drone). Subscribes ``odom``
(nav_msgs/Odometry -> Observation["state"] (13,)) and, when the policy reads env_state,
``objects/target/pose`` (the task reference -> Observation["env_state"] (7,)); answers each
observation (both stamps equal) with the first row of the policy's chunk on
``cmd_low_level`` (sensor_msgs/JointState in the policy's action mode, header stamp = the
observation's, so the bridge's lockstep and latency match it to what it answers). A stamp that goes back in time (a reset) resets the policy;
so does ``~/reset`` (std_srvs/Trigger).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from tether.core.errors import InvalidCommand, TetherError
from tether.core.timing import StampSync, now_ns
from tether.core.types import Observation
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node


class DronePolicyIO:
    """One drone's policy endpoints on ``node``; ``policy`` answers in action ``mode``."""

    def __init__(self, node: Node, policy: Any, mode: str, dim: int, use_target: bool) -> None:
        if dim != 4:
            raise TetherError(
                f"a drone policy server flies one drone, but this spec has {dim // 4}: run one "
                "per drone namespace with sim.quadrotor.num_drones=1 (tether up does)"
            )
        self.node = node
        self.policy = policy
        self.mode = mode
        self.use_target = use_target
        self.sync = StampSync(("state", "target") if use_target else ("state",))
        self.last_stamp: int | None = None
        self.last_msg: Any = None
        self.infer_ms: list[float] = []
        self.answer_wall_ns: list[int] = []
        self.pub = node.create_publisher(
            JointState, itf.CMD_LOW_LEVEL, itf.COMMAND_QOS, event_callbacks=itf.FAST_PUB
        )
        node.create_subscription(
            Odometry, itf.ODOM, self._on_odom, itf.SENSOR_QOS, event_callbacks=itf.FAST_SUB
        )
        if use_target:
            node.create_subscription(
                PoseStamped,
                itf.object_pose_topic("target"),
                self._on_target,
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        node.create_service(Trigger, "~/reset", self._srv_reset)
        node.get_logger().info(
            f"drone policy ({mode}) in {node.get_namespace()}: odom"
            f"{' + objects/target/pose' if use_target else ''} -> {itf.CMD_LOW_LEVEL}"
        )

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self.reset()
        resp.success, resp.message = True, "policy reset"
        return resp

    def reset(self) -> None:
        self.policy.reset()
        self.sync.clear()
        self.last_stamp = None
        self.last_msg = None

    def _on_odom(self, msg: Odometry) -> None:
        try:
            state = conv.odometry_to_state(msg)
        except InvalidCommand as exc:
            self.node.get_logger().warning(f"ignored odom: {exc}", throttle_duration_sec=1.0)
            return
        self._offer("state", conv.from_time(msg.header.stamp), state)

    def _on_target(self, msg: PoseStamped) -> None:
        self._offer("target", conv.from_time(msg.header.stamp), conv.pose_to_array(msg))

    def _offer(self, key: str, stamp: int, value: np.ndarray) -> None:
        if self.last_stamp is not None and stamp < self.last_stamp:
            self.node.get_logger().info("time went back (simulator reset): resetting the policy")
            self.reset()
        if stamp == self.last_stamp:
            return  # an observation already answered
        ready = self.sync.add(key, stamp, value)
        if ready is not None:
            self._act(stamp, ready)

    def _act(self, stamp: int, ready: dict[str, np.ndarray]) -> None:
        state = ready["state"]
        data = {"state": state}
        if self.use_target:
            data["env_state"] = ready["target"]
        t0 = now_ns()
        chunk = self.policy.act(Observation(data, stamp_ns=stamp))
        msg = conv.low_level_msg(self.mode, np.asarray(chunk.actions[0], np.float64), stamp)
        self.pub.publish(msg)
        t1 = now_ns()
        self.infer_ms.append((t1 - t0) * 1e-6)
        self.answer_wall_ns.append(t1)
        del self.infer_ms[:-10000], self.answer_wall_ns[:-10000]
        self.last_stamp, self.last_msg = stamp, msg

    def rate_hz(self) -> float | None:
        """Answers per second (wall clock) over the last (up to) 10000 observations."""
        t = self.answer_wall_ns
        return (len(t) - 1) / ((t[-1] - t[0]) * 1e-9) if len(t) > 10 else None
