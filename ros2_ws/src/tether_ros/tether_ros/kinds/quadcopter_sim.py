"""The simulated drones of a quadcopter experiment over ROS 2: N drones of one world, around
DroneFleet (tether.sim.drone_bridge).

Per drone, under its namespace (none for a single drone; cf0, cf1, ... for several):
publishes ``odom`` (nav_msgs/Odometry, frame ``<ns>/odom``, child ``<ns>/base_link``, twist in
the body frame), ``imu`` (sensor_msgs/Imu, specific force incl. the gravity reaction) and
``objects/target/pose`` (the task reference, PoseStamped); subscribes ``cmd_vel``
(geometry_msgs/Twist in the heading frame -> velocity setpoint -> cascaded PID) and
``cmd_low_level`` (sensor_msgs/JointState: rotor rpm, thrust + body rates or a world
velocity setpoint, layout in conversions.LOW_LEVEL_CHANNELS); services ``takeoff``,
``land``, ``emergency`` (std_srvs/Trigger). Shared: ``/clock``, ``estop`` (std_msgs/Bool:
true = emergency for every drone), ``~/reset`` (std_srvs/Trigger: new episode, releases
emergencies). Every command passes the drone safety gate; a rejected one is logged and
counted, never applied.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand
from tether.core.protocols import SimBackend
from tether.core.timing import LatencyTracker, now_ns
from tether.sim.drone_bridge import Drone, DroneFleet
from tether.sim.quadrotor.dynamics import quat_yaw
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node


def drone_topic(drone: str, topic: str) -> str:
    """A drone's relative topic or service name: ``cf0/odom``, or ``odom`` for a lone drone."""
    return f"{drone}/{topic}" if drone else topic


class DroneBridge:
    """Creates the drone endpoints on ``node`` and steps the fleet (realtime or lockstep)."""

    def __init__(self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None = None):
        self.node = node
        self.cfg = cfg
        self.fleet = DroneFleet(cfg, backend=backend)
        self.spec = self.fleet.backend.spec
        self.mode = cfg.ros.rate_mode
        self.rejected = 0
        self.latency = {d.name: LatencyTracker() for d in self.fleet.drones}
        self.step_wall_ns: list[int] = []
        self._published_ns = 0
        self._answered: dict[str, bool] = {}
        self._last_cmd_wall: dict[str, int] = {}
        log = node.get_logger()

        self.pub_clock = node.create_publisher(
            Clock, itf.CLOCK, itf.CLOCK_QOS, event_callbacks=itf.FAST_PUB
        )
        self.pubs: dict[str, tuple[Any, Any, Any]] = {}
        for d in self.fleet.drones:
            n = d.name
            self.pubs[n] = (
                node.create_publisher(
                    Odometry, drone_topic(n, itf.ODOM), itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
                ),
                node.create_publisher(
                    Imu, drone_topic(n, itf.IMU), itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
                ),
                node.create_publisher(
                    PoseStamped,
                    drone_topic(n, itf.object_pose_topic("target")),
                    itf.SENSOR_QOS,
                    event_callbacks=itf.FAST_PUB,
                ),
            )
            node.create_subscription(
                Twist,
                drone_topic(n, itf.CMD_VEL),
                lambda msg, d=d: self._on_cmd_vel(d, msg),
                itf.COMMAND_QOS,
                event_callbacks=itf.FAST_SUB,
            )
            node.create_subscription(
                JointState,
                drone_topic(n, itf.CMD_LOW_LEVEL),
                lambda msg, d=d: self._on_low_level(d, msg),
                itf.COMMAND_QOS,
                event_callbacks=itf.FAST_SUB,
            )
            for srv, fn in (
                (itf.TAKEOFF, self.fleet.takeoff),
                (itf.LAND, self.fleet.land),
                (itf.EMERGENCY, self.fleet.emergency),
            ):
                node.create_service(
                    Trigger, drone_topic(n, srv), functools.partial(self._srv, fn, n)
                )
        node.create_subscription(
            Bool, itf.ESTOP, self._on_estop, itf.COMMAND_QOS, event_callbacks=itf.FAST_SUB
        )
        node.create_service(Trigger, "~/reset", self._srv_reset)
        node.create_timer(self.fleet.dt, self._tick)
        self.fleet.reset()
        self._publish()
        names = ", ".join(f"/{d.name}" if d.name else "(no namespace)" for d in self.fleet.drones)
        log.info(
            f"{len(self.fleet.drones)} x {self.spec.name} in {cfg.sim.type} at "
            f"{self.spec.control_hz:g} Hz ({self.mode}): {names}; watchdog "
            f"{cfg.safety.watchdog_s:g} s -> {cfg.safety.on_stale}"
        )

    # --- commands --------------------------------------------------------------------------
    def _reject(self, d: Drone, what: str, exc: Exception) -> None:
        self.rejected += 1
        self.node.get_logger().warning(
            f"rejected {drone_topic(d.name, what)}: {exc}", throttle_duration_sec=1.0
        )

    def _accepted(self, d: Drone, stamp: int = 0) -> None:
        # lockstep: a stamped command answers the observation of its stamp; one answering an
        # older observation (the policy catching up) is obeyed but does not step the world
        if stamp == 0 or stamp == self.fleet.stamp_ns:
            self._answered[d.name] = True
        self._last_cmd_wall[d.name] = now_ns()
        if self.mode == "lockstep" and self._all_answered():
            self._step()

    def _on_cmd_vel(self, d: Drone, msg: Twist) -> None:
        try:
            yaw = float(quat_yaw(d.state[None, 3:7])[0])
            self.fleet.command(d.name, "velocity_setpoint", conv.twist_to_setpoint(msg, yaw))
        except InvalidCommand as exc:
            self._reject(d, itf.CMD_VEL, exc)
            return
        self._accepted(d)

    def _on_low_level(self, d: Drone, msg: JointState) -> None:
        try:
            mode, values, stamp = conv.low_level_to_command(msg)
            self.fleet.command(d.name, mode, values)
        except InvalidCommand as exc:
            self._reject(d, itf.CMD_LOW_LEVEL, exc)
            return
        if stamp:
            self.latency[d.name].match(stamp)
        self._accepted(d, stamp)

    def _on_estop(self, msg: Bool) -> None:
        if msg.data:
            for d in self.fleet.drones:
                if d.phase != "emergency":
                    self.node.get_logger().warning(f"e-stop: motors off ({d.name or 'drone'})")
                    self.fleet.emergency(d.name)

    def _srv(
        self, fn: Any, name: str, _req: Trigger.Request, resp: Trigger.Response
    ) -> Trigger.Response:
        resp.success, resp.message = fn(name)
        self.node.get_logger().info(f"{drone_topic(name, 'request')}: {resp.message}")
        return resp

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self.fleet.reset()
        self._publish()
        resp.success, resp.message = True, json.dumps({"resets": self.fleet.resets})
        return resp

    # --- stepping --------------------------------------------------------------------------
    def _all_answered(self) -> bool:
        """Lockstep: every drone commanded within the lockstep timeout answered the latest
        observation (drones nobody commands do not hold the world back)."""
        horizon = now_ns() - round(self.cfg.ros.lockstep_timeout_s * 1e9)
        active = [n for n, t in self._last_cmd_wall.items() if t >= horizon]
        return bool(active) and all(self._answered.get(n, False) for n in active)

    def _tick(self) -> None:
        if self.mode == "realtime":
            self._step()
            return
        waited_s = (now_ns() - self._published_ns) * 1e-9
        horizon = now_ns() - round(self.cfg.ros.lockstep_timeout_s * 1e9)
        commanded = any(t >= horizon for t in self._last_cmd_wall.values())
        # nobody commands (takeoff / hover / landing): advance at the control rate; a
        # commander that went quiet: step on the timeout and let the watchdog act
        if not commanded or waited_s > self.cfg.ros.lockstep_timeout_s:
            self._step()

    def _step(self) -> None:
        self.fleet.step()
        self.step_wall_ns.append(now_ns())
        del self.step_wall_ns[:-1000]
        self._publish()

    def _publish(self) -> None:
        stamp = self.fleet.stamp_ns
        wall = now_ns()
        for d in self.fleet.drones:
            odom_frame, body = conv.frame_ids(self._ns(d))
            pub_odom, pub_imu, pub_target = self.pubs[d.name]
            if d.target is not None:
                pub_target.publish(conv.pose_msg(d.target, stamp, odom_frame))
            pub_imu.publish(conv.imu_msg(d.state, d.accel, stamp, body))
            self.latency[d.name].mark(stamp, wall)
            pub_odom.publish(conv.odometry_msg(d.state, stamp, odom_frame, body))
            self._answered[d.name] = False
        self._published_ns = wall
        self.pub_clock.publish(conv.clock_msg(stamp))

    def _ns(self, d: Drone) -> str:
        base = self.node.get_namespace().strip("/")
        return "/".join(x for x in (base, d.name) if x)

    def rate_hz(self) -> float | None:
        """Achieved control rate over the last (up to) 1000 steps, wall clock."""
        t = self.step_wall_ns
        return (len(t) - 1) / ((t[-1] - t[0]) * 1e-9) if len(t) > 10 else None

    def close(self) -> None:
        self.fleet.close()
