"""teleop: a human (keyboard, gamepad, SpaceMouse) or the scripted expert drives the robot.

Reads the device at the control rate (wall clock); the robot kind's adapter
(tether_ros.kinds) turns each reading into the robot's command: an arm's end-effector deltas
through its kinematics -> joint_trajectory (one target held for a few control periods,
header stamp = the latest observation's), a mobile base's or drone's motion -> cmd_vel
(geometry_msgs/Twist); a device's full action (the scripted expert) goes out as the kind's
command of that action. While the dead-man is released nothing is sent, so the bridge's
watchdog holds. An observing device (the scripted expert) gets the robot's observation,
assembled from the kind's topics as the policy server assembles it. The e-stop publishes
std_msgs/Bool on ``estop`` (true when engaged, false on release); ``~/release_estop``
(std_srvs/Trigger) releases it: the bridges latch the e-stop, so it also calls their
``reset_estop`` (``sim_bridge/reset_estop``, ``hardware_bridge/reset_estop``). Episode keys
call ``<episode_node>/start_episode``, ``stop_episode`` and ``discard_episode``
(std_srvs/Trigger) and are announced on ``teleop_events`` (std_msgs/String, JSON
``{"event": ..., "seq": ..., "stamp_ns": ...}``, ``stop_success`` / ``stop_fail`` carry the
operator's verdict).

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
from pydantic import ValidationError
from rclpy.node import Node
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.experiment import build_task, robot_spec
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.teleop.command import EpisodeEvent, ObservingDevice, TeleopDevice
from tether.hardware.teleop.config_teleop import TeleopConfig
from tether.hardware.teleop.devices import build_device
from tether_ros import interface as itf
from tether_ros.kinds import kind_io
from tether_ros.kinds.inputs import ObservationInputs
from tether_ros.runtime import experiment_from_params, run_node

TELEOP_EVENTS = "teleop_events"
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


class Teleop(Node):
    """ROS 2 shell around a TeleopDevice and the robot kind's command path (``io``)."""

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
        kind = kind_io(self.spec.kind)
        self.io = kind.teleop(self, self.spec, self.tcfg)
        # the latest observation, its state and stamp (None before the first)
        self.observation: Observation | None = None
        self.state: np.ndarray | None = None
        self.stamp: int | None = None
        self.published = 0
        self._estop: bool | None = None
        self._estop_sent_ns = 0
        self._event_seq = 0

        self.pub_estop = self.create_publisher(Bool, itf.ESTOP, itf.COMMAND_QOS)
        self.pub_events = self.create_publisher(String, TELEOP_EVENTS, itf.EVENT_QOS)
        self.inputs: ObservationInputs | None = None
        if self.io.needs_state or isinstance(self.device, ObservingDevice):
            keys = tuple(getattr(self.device, "observation_keys", ())) or ("state",)
            objects = build_task(self.cfg).objects if "env_state" in keys else ()
            self.inputs = ObservationInputs(self, kind, self.spec, keys, objects, self._offer)
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
            f"teleop: {self.device.name} -> {self.spec.name} ({self.spec.kind}) at "
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
    def _offer(self, key: str, stamp: int, value: np.ndarray) -> None:
        obs = self.inputs.add(key, stamp, value) if self.inputs is not None else None
        if obs is None:
            return
        if self.stamp is not None and obs.stamp_ns < self.stamp:
            # the clock went back: the scene was reset. Start the next command from where the
            # robot is now, not from the last episode's target (which would pull it back there)
            self.io.release()
        self.observation, self.state, self.stamp = obs, obs["state"], obs.stamp_ns
        if isinstance(self.device, ObservingDevice):
            self.device.observe(obs)

    # --- the control step ---------------------------------------------------------------
    def _tick(self) -> None:
        cmd = self.device.read()
        self._set_estop(cmd.estop)
        for ev in cmd.events:
            self._episode_event(ev)
        if cmd.estop or not cmd.deadman:
            self.io.release()
            return
        if self.io.command(cmd, self.observation):
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
