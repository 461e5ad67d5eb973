"""policy_server: runs a Policy built from the experiment config over ROS 2.

Subscribes joint_states, objects/<name>/pose (when the policy reads env_state) and camera
images (when it reads images/<cam>); answers each observation with a JointTrajectory chunk
whose header stamp is the observation's stamp. A stamp that goes back in time (a simulator
reset) resets the policy; ~/reset (std_srvs/Trigger) does too. Quadcopter experiments serve
one drone per policy server instead (odom in, cmd_low_level or cmd_vel out): see
tether_ros.drone_policy. Mobile bases: the state comes from odom + the wheel joint_states,
plus scan and base_pose when the policy reads them (tether_ros.base_bridge); the chunk goes out
on joint_trajectory with the twist names, stamped, so the bridge's deadline watchdog applies.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand
from tether.core.experiment import build_policy, build_task, robot_spec
from tether.core.timing import StampSync, now_ns
from tether.core.types import IMAGE_PREFIX, Observation
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.base_bridge import BasePolicyInputs
from tether_ros.drone_policy import DronePolicyIO
from tether_ros.runtime import experiment_from_params, run_node


class PolicyServer(Node):
    """ROS 2 shell around a Policy."""

    def __init__(self, cfg: ExperimentConfig | None = None, **kwargs: Any) -> None:
        super().__init__("policy_server", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        self.spec = robot_spec(self.cfg)
        self.policy = build_policy(self.cfg, self.spec)
        keys = list(self.policy.contract.get("observation_keys", ["state"]))
        self.drone: DronePolicyIO | None = None
        if self.spec.kind == "quadcopter":  # odom in, cmd_low_level or cmd_vel out
            a = self.spec.action
            self.drone = DronePolicyIO(self, self.policy, a.mode, a.dim, "env_state" in keys)
            return
        self.objects: tuple[str, ...] = build_task(self.cfg).objects if "env_state" in keys else ()
        self.cameras = [k[len(IMAGE_PREFIX) :] for k in keys if k.startswith(IMAGE_PREFIX)]
        self.base: BasePolicyInputs | None = None
        if self.spec.kind == "mobile_base":  # odom + wheel joint_states (+ scan, base_pose)
            self.base = BasePolicyInputs(self, self.spec, keys, self._offer)
        state_keys = self.base.required if self.base is not None else ("state",)
        self.sync = StampSync((*state_keys, *(f"obj/{o}" for o in self.objects)))
        self.images: dict[str, np.ndarray] = {}
        self.last_stamp: int | None = None
        self.last_msg: JointTrajectory | None = None
        self.infer_ms: list[float] = []

        self.pub = self.create_publisher(
            JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS, event_callbacks=itf.FAST_PUB
        )
        if self.base is None:
            self.create_subscription(
                JointState,
                itf.JOINT_STATES,
                self._on_state,
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        for name in self.objects:
            self.create_subscription(
                PoseStamped,
                itf.object_pose_topic(name),
                lambda msg, n=name: self._on_object(n, msg),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        for cam in self.cameras:
            self.create_subscription(
                Image,
                itf.image_topic(cam),
                lambda msg, c=cam: self._on_image(c, msg),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        self.create_service(Trigger, "~/reset", self._srv_reset)
        # chunk mode: answer chunk_request (from a chunk_executor) on action_chunk with a
        # fresh chunk for the latest observation, instead of answering every observation
        self.chunk_mode = bool(self.declare_parameter("chunk_mode", False).value)
        self.latest: tuple[int, dict[str, np.ndarray]] | None = None
        if self.chunk_mode:
            self.chunk_pub = self.create_publisher(JointTrajectory, "action_chunk", itf.COMMAND_QOS)
            self.create_subscription(Header, "chunk_request", self._on_request, itf.COMMAND_QOS)
        self.get_logger().info(
            f"policy {self.cfg.policy.type} for {self.spec.name}: inputs state"
            f"{', env_state ' + str(list(self.objects)) if self.objects else ''}"
            f"{', cameras ' + str(self.cameras) if self.cameras else ''}"
        )

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self._reset()
        resp.success, resp.message = True, "policy reset"
        return resp

    def _reset(self) -> None:
        self.policy.reset()
        self.sync.clear()
        self.last_stamp = None
        self.last_msg = None

    def _on_state(self, msg: JointState) -> None:
        try:
            state = conv.joint_state_to_array(msg, self.spec.state_names)
        except InvalidCommand as exc:
            self.get_logger().warning(f"ignored joint_states: {exc}", throttle_duration_sec=1.0)
            return
        self._offer("state", conv.from_time(msg.header.stamp), state)

    def _on_object(self, name: str, msg: PoseStamped) -> None:
        self._offer(f"obj/{name}", conv.from_time(msg.header.stamp), conv.pose_to_array(msg))

    def _on_image(self, cam: str, msg: Image) -> None:
        try:
            self.images[cam] = conv.image_to_array(msg)
        except InvalidCommand as exc:
            self.get_logger().warning(f"ignored image: {exc}", throttle_duration_sec=1.0)

    def _offer(self, key: str, stamp: int, value: np.ndarray) -> None:
        if self.last_stamp is not None and stamp < self.last_stamp:
            self.get_logger().info("time went back (simulator reset): resetting the policy")
            self._reset()
        if stamp == self.last_stamp and self.last_msg is not None:
            if key == "state":
                self.pub.publish(self.last_msg)  # a re-sent observation: same answer
            return
        ready = self.sync.add(key, stamp, value)
        if ready is not None:
            self._act(stamp, ready)

    def _act(self, stamp: int, ready: dict[str, np.ndarray]) -> None:
        if any(cam not in self.images for cam in self.cameras):
            return  # wait for the first image of every camera
        data: dict[str, np.ndarray] = (
            self.base.observation(ready) if self.base is not None else {"state": ready["state"]}
        )
        if self.objects:
            data["env_state"] = np.concatenate([ready[f"obj/{o}"] for o in self.objects])
        for cam in self.cameras:
            data[IMAGE_PREFIX + cam] = self.images[cam]
        if self.chunk_mode:
            self.latest = (stamp, data)
            observe = getattr(self.policy, "observe", None)
            if observe is not None:  # the observation history advances at the control rate
                observe(Observation(data, stamp_ns=stamp))
            return
        t0 = now_ns()
        chunk = self.policy.act(Observation(data, stamp_ns=stamp))
        self.infer_ms.append((now_ns() - t0) * 1e-6)
        chunk.t0_ns = stamp
        msg = conv.chunk_to_trajectory(chunk, self.spec.action.names)
        self.last_stamp, self.last_msg = stamp, msg
        self.pub.publish(msg)

    def _on_request(self, _msg: Header) -> None:
        """A chunk_executor's queue runs low: a fresh chunk for the latest observation."""
        if self.latest is None:
            return
        stamp, data = self.latest
        replan = getattr(self.policy, "replan", None)
        if replan is not None:
            replan()
        t0 = now_ns()
        chunk = self.policy.act(Observation(data, stamp_ns=stamp))
        self.infer_ms.append((now_ns() - t0) * 1e-6)
        chunk.t0_ns = stamp
        self.chunk_pub.publish(conv.chunk_to_trajectory(chunk, self.spec.action.names))


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(PolicyServer, args))


if __name__ == "__main__":
    main()
