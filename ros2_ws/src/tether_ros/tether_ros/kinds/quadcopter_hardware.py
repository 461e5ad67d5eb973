"""A real (or mock) quadcopter on the hardware bridge: one lone drone with the endpoints the
sim bridge gives a simulated one (tether_ros.kinds.quadcopter_sim).

Publishes ``odom`` (nav_msgs/Odometry, twist in the body frame) and ``episode_status``
(std_msgs/String JSON: ``link_lost``, ``link_regained``, ``failsafe`` events); subscribes
``cmd_vel`` (geometry_msgs/Twist in the heading frame) and ``cmd_low_level`` (velocity
setpoints only) and ``estop``; services ``takeoff``, ``land``, ``emergency``, ``~/reset``
(std_srvs/Trigger). Every command passes the same DroneSafety gate as in simulation; at the
control rate the gate's verdict goes to the drone: the command, hold (zero velocity) or land
when commands stop, motors off after an emergency. On shutdown (``close()``) an airborne
drone is landed and one armed on the ground disarmed before the link closes.
"""

from __future__ import annotations

import functools
import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand, TetherError
from tether.core.safety import DroneSafety
from tether.hardware.robots.drones import state13
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node


class HardwareDroneBridge:
    """Creates the drone endpoints on ``node``; ``drone`` is a MavlinkDrone or CrazyflieDrone
    (connected here: a missing device fails the bridge with one sentence)."""

    def __init__(self, node: Node, cfg: ExperimentConfig, drone: Any) -> None:
        self.node = node
        self.cfg = cfg
        self.drone = drone
        self.spec = drone.spec
        self.safety = DroneSafety({"velocity_setpoint": self.spec.action}, cfg.safety)
        self._origin = np.asarray(cfg.hardware.origin if cfg.hardware else (0, 0, 0), np.float64)
        self.rejected = 0
        self.events: list[dict[str, Any]] = []
        self.link_ok = True
        self.failsafe_reported = False
        self._landing_requested = False
        self._t0 = time.monotonic()
        self._seq = 0
        drone.connect()
        self.obs = drone.get_observation()
        self.pub_odom = node.create_publisher(Odometry, itf.ODOM, itf.SENSOR_QOS)
        self.pub_status = node.create_publisher(String, itf.EPISODE_STATUS, itf.EVENT_QOS)
        node.create_subscription(Twist, itf.CMD_VEL, self._on_cmd_vel, itf.COMMAND_QOS)
        node.create_subscription(JointState, itf.CMD_LOW_LEVEL, self._on_low_level, itf.COMMAND_QOS)
        node.create_subscription(Bool, itf.ESTOP, self._on_estop, itf.COMMAND_QOS)
        for srv, fn in (
            (itf.TAKEOFF, self._takeoff),
            (itf.LAND, self._land),
            (itf.EMERGENCY, self._emergency),
        ):
            node.create_service(Trigger, srv, functools.partial(self._srv, fn))
        node.create_service(Trigger, "~/reset", self._srv_reset)
        node.create_timer(self.spec.dt, self._tick)
        node.get_logger().info(
            f"{self.spec.name} over {cfg.world.type} at {self.spec.control_hz:g} Hz; watchdog "
            f"{cfg.safety.watchdog_s:g} s -> {cfg.safety.on_stale}"
        )

    # --- commands --------------------------------------------------------------------------
    def _now(self) -> float:
        return time.monotonic() - self._t0

    def _command(self, values: np.ndarray, what: str) -> None:
        try:
            self.safety.command("velocity_setpoint", values, self._now())
        except InvalidCommand as exc:
            self.rejected += 1
            self.node.get_logger().warning(f"rejected {what}: {exc}", throttle_duration_sec=1.0)

    def _on_cmd_vel(self, msg: Twist) -> None:
        try:
            v = conv.twist_to_setpoint(msg, float(self.obs["state"][8]))
        except InvalidCommand as exc:
            self.rejected += 1
            self.node.get_logger().warning(f"rejected cmd_vel: {exc}", throttle_duration_sec=1.0)
            return
        self._command(v, itf.CMD_VEL)

    def _on_low_level(self, msg: JointState) -> None:
        try:
            mode, values, _ = conv.low_level_to_command(msg)
            if mode != "velocity_setpoint":
                raise InvalidCommand(f"this drone flies velocity setpoints, not {mode}")
        except InvalidCommand as exc:
            self.rejected += 1
            self.node.get_logger().warning(
                f"rejected cmd_low_level: {exc}", throttle_duration_sec=1.0
            )
            return
        self._command(values, itf.CMD_LOW_LEVEL)

    def _on_estop(self, msg: Bool) -> None:
        if msg.data and not self.safety.emergency:
            self.node.get_logger().warning("e-stop: motors off")
            self._emergency()

    def _takeoff(self) -> str:
        self.safety.clear()
        self._landing_requested = False
        return str(self.drone.takeoff(self.cfg.drones.takeoff_height))

    def _land(self) -> str:
        self.safety.clear()
        return str(self.drone.land())

    def _emergency(self) -> str:
        self.safety.trip_emergency()
        return str(self.drone.emergency())

    def _srv(self, fn: Any, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        try:
            resp.success, resp.message = True, str(fn())
        except TetherError as exc:
            resp.success, resp.message = False, str(exc)
        self.node.get_logger().info(f"drone request: {resp.message}")
        return resp

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self.safety.reset()
        self._landing_requested = False
        resp.success, resp.message = True, "safety gate reset"
        return resp

    # --- control loop ----------------------------------------------------------------------
    def _emit(self, event: str, **data: Any) -> None:
        self._seq += 1
        record = {"event": event, "seq": self._seq, **data}
        self.events.append(record)
        self.pub_status.publish(String(data=json.dumps(record)))

    def _tick(self) -> None:
        self.obs = self.drone.get_observation()
        self._watch_link()
        verdict, values = self.safety.verdict(self._now())
        try:
            if verdict == "command" and values is not None:
                self.drone.send_action(values)
            elif verdict == "hold":
                self.drone.hold()
            elif verdict == "land" and not self._landing_requested:
                self._landing_requested = True
                self.drone.land()
        except TetherError as exc:  # a refused mode switch, a lost link mid-command
            self.node.get_logger().warning(
                f"drone command failed: {exc}", throttle_duration_sec=1.0
            )
        stamp = time.monotonic_ns()
        odom, body = conv.frame_ids(self.node.get_namespace())
        state = state13(self.obs["state"])
        state[0:3] += self._origin  # the drone's local frame placed in the swarm's frame
        self.pub_odom.publish(conv.odometry_msg(state, stamp, odom, body))

    def _watch_link(self) -> None:
        lost = bool(self.drone.link_lost)
        if lost and self.link_ok:
            self.link_ok = False
            self.safety.clear()
            self.node.get_logger().error(
                "link to the drone lost: its failsafe lands it; commands are dropped"
            )
            self._emit("link_lost", phase=self.drone.phase)
        elif not lost and not self.link_ok:
            self.link_ok = True
            self._emit("link_regained", phase=self.drone.phase)
        if self.drone.autopilot_failsafe and not self.failsafe_reported:
            self.failsafe_reported = True
            self._emit("failsafe", phase=self.drone.phase)

    def close(self) -> None:
        """Land (or disarm) the drone, then close the link: nobody commands it after this."""
        try:
            self.node.get_logger().info(f"stopping the drone: {self.drone.safe_stop()}")
        except TetherError as exc:  # refused or unanswered: the autopilot's failsafe remains
            self.node.get_logger().error(f"could not land the drone on shutdown: {exc}")
        finally:
            self.drone.disconnect()
