"""teleop: a human (keyboard, gamepad, SpaceMouse) or the scripted expert drives the robot.

Reads the device at the control rate (wall clock). Arms: end-effector deltas through IK ->
joint_trajectory (trajectory_msgs/JointTrajectory, one point, header stamp = the latest
joint_states stamp). Mobile bases and drones: cmd_vel (geometry_msgs/Twist). While the
dead-man is released nothing is sent, so the bridge's watchdog holds. The e-stop publishes
std_msgs/Bool on ``estop`` (true when engaged, false on release); ``~/release_estop``
(std_srvs/Trigger) releases it: the bridges latch the e-stop, so it also calls their
``reset_estop`` (``sim_bridge/reset_estop``, ``hardware_bridge/reset_estop``). Episode keys call ``<episode_node>/start_episode``,
``stop_episode`` and ``discard_episode`` (std_srvs/Trigger) and are announced on
``teleop_events`` (std_msgs/String, JSON ``{"event": ..., "seq": ..., "stamp_ns": ...}``,
``stop_success`` / ``stop_fail`` carry the operator's verdict).

``tether record --teleop keyboard`` points ``episode_node`` at its episode manager, which
serves all three; the sim bridge serves start and stop only.

Parameters: ``experiment`` + ``overrides`` (as every node), ``device`` (keyboard, gamepad,
spacemouse, scripted), ``max_linear_speed`` (m/s), ``max_angular_speed`` (rad/s),
``episode_node``.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from pydantic import ValidationError
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError, InvalidCommand, TetherError
from tether.core.experiment import build_task, robot_spec
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.hardware.teleop.command import EpisodeEvent, ObservingDevice, TeleopDevice
from tether.hardware.teleop.config_teleop import TeleopConfig
from tether.hardware.teleop.devices import build_device
from tether.hardware.teleop.mappers import ArmMapper, TwistCommand, base_twist, drone_velocity
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.runtime import experiment_from_params, run_node

CMD_VEL = "cmd_vel"
TELEOP_EVENTS = "teleop_events"
HOLD_PERIODS = 5
# the bridges whose latched e-stop ~/release_estop resets (their reset_estop service)
BRIDGES = ("sim_bridge", "hardware_bridge")
ESTOP_REPEAT_S = 1.0  # re-announce an engaged e-stop this often (late joiners)
EVENT_SERVICE = {
    EpisodeEvent.START: "start_episode",
    EpisodeEvent.STOP_SUCCESS: "stop_episode",
    # the operator's "failed" verdict: the episode is not kept
    EpisodeEvent.STOP_FAIL: "discard_episode",
    EpisodeEvent.DISCARD: "discard_episode",
}


def arm_mapper(spec: RobotSpec, tcfg: TeleopConfig) -> ArmMapper:
    """An ArmMapper with the robot's kinematics; the Panda is the only arm modelled."""
    if spec.action.mode != "joint_position":
        raise TetherError(f"arm teleop drives joint_position arms, not '{spec.action.mode}'")
    if spec.name != "panda":
        raise TetherError(f"teleop has arm kinematics for the panda only, not '{spec.name}'")
    from tether.sim.robots import panda_kinematics as kin

    vmax = {j.name: j.max_velocity for j in spec.joints}
    names = spec.action.names
    n = len(kin.LOWER)
    gripper = None
    if len(names) > n:
        gripper = (spec.action.low[n], spec.action.high[n])
    return ArmMapper(
        kin.jacobian,
        kin.LOWER,
        kin.UPPER,
        np.array([vmax[x] for x in names[:n]]) * tcfg.joint_speed_scale,
        spec.dt,
        max_linear_speed=tcfg.max_linear_speed,
        max_angular_speed=tcfg.max_angular_speed,
        gripper_range=gripper,
        gripper_speed=vmax.get(names[-1], 0.1) * tcfg.joint_speed_scale,
    )


def twist_msg(t: TwistCommand) -> Twist:
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z = (float(v) for v in t.linear)
    msg.angular.x, msg.angular.y, msg.angular.z = (float(v) for v in t.angular)
    return msg


class Teleop(Node):
    """ROS 2 shell around a TeleopDevice and a mapper for the robot's kind."""

    def __init__(
        self,
        cfg: ExperimentConfig | None = None,
        device: TeleopDevice | None = None,
        teleop: TeleopConfig | None = None,
        spec: RobotSpec | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("teleop", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        self.spec = spec or robot_spec(self.cfg)
        self.tcfg = teleop or self._teleop_from_params()
        self.device = device or build_device(self.tcfg.device, self.cfg, self.spec)
        self.kind = self.spec.kind
        self.mapper = arm_mapper(self.spec, self.tcfg) if self.kind == "arm" else None
        self.state: np.ndarray | None = None
        self.stamp: int | None = None
        self.objects: dict[str, np.ndarray] = {}
        self.published = 0
        self._engaged = False
        self._estop: bool | None = None
        self._estop_sent_ns = 0
        self._observed_stamp: int | None = None
        self._event_seq = 0

        self.pub_traj = self.create_publisher(
            JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS
        )
        self.pub_twist = self.create_publisher(Twist, CMD_VEL, itf.COMMAND_QOS)
        self.pub_estop = self.create_publisher(Bool, itf.ESTOP, itf.COMMAND_QOS)
        self.pub_events = self.create_publisher(String, TELEOP_EVENTS, itf.EVENT_QOS)
        self.create_subscription(JointState, itf.JOINT_STATES, self._on_state, itf.SENSOR_QOS)
        keys = getattr(self.device, "observation_keys", ())
        self._object_names: tuple[str, ...] = (
            tuple(build_task(self.cfg).objects) if "env_state" in keys else ()
        )
        for name in self._object_names:
            self.create_subscription(
                PoseStamped,
                itf.object_pose_topic(name),
                functools.partial(self._on_object, name),
                itf.SENSOR_QOS,
            )
        node = self.tcfg.episode_node.rstrip("/")
        self._episode_clients: dict[str, Any] = {
            srv: self.create_client(Trigger, f"{node}/{srv}") for srv in set(EVENT_SERVICE.values())
        }
        self.create_service(Trigger, "~/release_estop", self._srv_release_estop)
        self._reset_estop_clients: list[Any] = [
            self.create_client(Trigger, f"{bridge}/reset_estop") for bridge in BRIDGES
        ]
        self.create_timer(self.spec.dt, self._tick)
        self.get_logger().info(
            f"teleop: {self.device.name} -> {self.spec.name} ({self.kind}) at "
            f"{self.spec.control_hz:g} Hz"
        )

    def _teleop_from_params(self) -> TeleopConfig:
        defaults = TeleopConfig()
        values = {
            name: self.declare_parameter(name, getattr(defaults, name)).value
            for name in ("device", "max_linear_speed", "max_angular_speed", "episode_node")
        }
        try:
            return TeleopConfig(**values)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"teleop parameter {field}: {err['msg']}") from None

    # --- inputs -------------------------------------------------------------------------
    def _on_state(self, msg: JointState) -> None:
        try:
            self.state = conv.joint_state_to_array(msg, self.spec.state_names)
        except InvalidCommand as exc:
            self.get_logger().warning(f"ignored joint_states: {exc}", throttle_duration_sec=1.0)
            return
        stamp = conv.from_time(msg.header.stamp)
        if self.stamp is not None and stamp < self.stamp:
            # the clock went back: the scene was reset. Start the next command from where the
            # robot is now, not from the last episode's target (which would pull it back there)
            self._engaged = False
        self.stamp = stamp

    def _on_object(self, name: str, msg: PoseStamped) -> None:
        self.objects[name] = conv.pose_to_array(msg)

    def _observe(self) -> None:
        """Hand an ObservingDevice (scripted) each new observation once."""
        if not isinstance(self.device, ObservingDevice) or self.state is None:
            return
        if self.stamp == self._observed_stamp or any(
            n not in self.objects for n in self._object_names
        ):
            return
        data = {"state": self.state}
        if self._object_names:
            data["env_state"] = np.concatenate([self.objects[n] for n in self._object_names])
        assert self.stamp is not None
        self.device.observe(Observation(data, stamp_ns=self.stamp))
        self._observed_stamp = self.stamp

    # --- the control step ---------------------------------------------------------------
    def _tick(self) -> None:
        self._observe()
        cmd = self.device.read()
        self._set_estop(cmd.estop)
        for ev in cmd.events:
            self._episode_event(ev)
        if cmd.estop or not cmd.deadman:
            self._engaged = False
            return
        if self.kind == "arm":
            self._arm_step(cmd)
        else:
            move = drone_velocity if self.kind == "quadcopter" else None
            t = (
                move(cmd, self.tcfg.max_linear_speed, self.tcfg.max_angular_speed)
                if move is not None
                else base_twist(
                    cmd,
                    self.tcfg.max_linear_speed,
                    self.tcfg.max_angular_speed,
                    self.tcfg.holonomic,
                )
            )
            self.pub_twist.publish(twist_msg(t))
            self.published += 1

    def _arm_step(self, cmd: Any) -> None:
        if self.state is None or self.stamp is None:
            return  # no robot state yet: nothing to move from
        assert self.mapper is not None
        if not self._engaged:
            self.mapper.reset()  # (re)start from where the robot is
            self._engaged = True
        if cmd.action is not None:
            action = np.asarray(cmd.action, np.float64)
            if action.shape != self.spec.action.shape or not np.isfinite(action).all():
                self.get_logger().warning(
                    f"device action of shape {action.shape} dropped", throttle_duration_sec=1.0
                )
                return
        else:
            action = self.mapper.step(cmd, self.state)
        # the target stays in force for a few control periods: a command that reaches the
        # bridge a step or two late (load, wake-up jitter) still applies instead of expiring,
        # and releasing the dead-man still stops within HOLD_PERIODS + the watchdog
        chunk = ActionChunk(np.repeat(action[None], HOLD_PERIODS, 0), self.spec.dt, self.stamp)
        self.pub_traj.publish(conv.chunk_to_trajectory(chunk, self.spec.action.names))
        self.published += 1

    # --- e-stop and episodes ------------------------------------------------------------
    def _set_estop(self, engaged: bool) -> None:
        now = self.get_clock().now().nanoseconds
        repeat = engaged and (now - self._estop_sent_ns) * 1e-9 >= ESTOP_REPEAT_S
        # the first reading only matters when engaged: a teleop start never releases an
        # e-stop someone else engaged
        if (self._estop is None and engaged) or (
            self._estop is not None and engaged != self._estop
        ):
            self.get_logger().warning(f"e-stop {'ENGAGED' if engaged else 'released'}")
            repeat = True
        if repeat:
            self.pub_estop.publish(Bool(data=engaged))
            self._estop_sent_ns = now
        self._estop = engaged

    def _srv_release_estop(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        release = getattr(self.device, "release_estop", None)
        if release is not None:
            release()
        self.pub_estop.publish(Bool(data=False))
        self._estop = False
        # a false on estop no longer releases a bridge's latch: its reset service does
        bridges = [c for c in self._reset_estop_clients if c.service_is_ready()]
        for client in bridges:
            client.call_async(Trigger.Request())
        resp.success = True
        resp.message = f"e-stop released ({len(bridges)} bridge(s) asked to reset)"
        return resp

    def _episode_event(self, ev: EpisodeEvent) -> None:
        self._event_seq += 1
        self.pub_events.publish(
            String(
                data=json.dumps({"event": str(ev), "seq": self._event_seq, "stamp_ns": self.stamp})
            )
        )
        client = self._episode_clients[EVENT_SERVICE[ev]]
        if not client.service_is_ready():
            self.get_logger().warning(f"episode {ev}: service {client.srv_name} is not available")
            return
        future = client.call_async(Trigger.Request())
        future.add_done_callback(functools.partial(self._on_episode_reply, ev))

    def _on_episode_reply(self, ev: EpisodeEvent, future: Any) -> None:
        res = future.result()
        if res is None or not res.success:
            why = res.message if res is not None else "no reply"
            self.get_logger().warning(f"episode {ev} refused: {why}")
        else:
            self.get_logger().info(f"episode {ev}: {res.message}")

    def close(self) -> None:
        self.device.close()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(Teleop, args))


if __name__ == "__main__":
    main()
