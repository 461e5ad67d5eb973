"""The simulated drones of a quadcopter experiment over ROS 2: N drones of one world, around
DroneFleet (tether.sim.drone_bridge), with the episodes every sim bridge has
(tether_ros.kinds.runner.EpisodeBridge).

Per drone, under its namespace (none for a single drone; cf0, cf1, ... for several):
publishes ``odom`` (nav_msgs/Odometry, frame ``<ns>/odom``, child ``<ns>/base_link``, twist in
the body frame), ``imu`` (sensor_msgs/Imu, specific force incl. the gravity reaction) and
``objects/target/pose`` (the task reference, PoseStamped); subscribes ``cmd_vel``
(geometry_msgs/Twist in the heading frame -> velocity setpoint -> cascaded PID) and
``cmd_low_level`` (sensor_msgs/JointState: rotor rpm, thrust + body rates or a world
velocity setpoint, layout in conversions.LOW_LEVEL_CHANNELS); services ``takeoff``,
``land``, ``emergency`` (std_srvs/Trigger). Shared: ``/clock``, the cameras
(``camera/<name>/image_raw`` + ``camera_info``), ``estop`` (std_msgs/Bool: true = emergency
for every drone), ``episode_status`` and ``~/reset`` (new episode, releases emergencies),
``~/start_episode``, ``~/stop_episode`` (std_srvs/Trigger). Every command passes the drone
safety gate; a rejected one is logged and counted, never applied.

The world steps during an episode only (as an arm's), realtime or lockstep; an episode ends
at the task's time limit, or earlier when its success ends it. A crash does not end it (the
end event says ``crashed`` and no success): drones take off from the floor and land on it. In lockstep the world steps
once every drone commanded within ``ros.lockstep_timeout_s`` has answered the current
observation (and, with ``ros.wait_for_recorder``, the recorder has taken it in); with no
drone commanded (takeoff, hover, landing by the services) it steps at the control rate.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np
from geometry_msgs.msg import PoseStamped, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand
from tether.core.experiment import build_task, max_episode_steps
from tether.core.protocols import SimBackend
from tether.core.spec import CameraSpec, cameras_due
from tether.core.timing import LatencyTracker, now_ns
from tether.core.types import Observation, StepResult
from tether.sim.drone_bridge import Drone, DroneFleet
from tether.sim.quadrotor.dynamics import quat_yaw
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.kinds.quadcopter import drone_topic
from tether_ros.kinds.runner import EpisodeBridge

if TYPE_CHECKING:
    from rclpy.node import Node

__all__ = ["DroneBridge", "FleetRunner", "drone_topic"]


class _KeepsVerdict:
    """A backend that keeps its last StepResult: DroneFleet.step uses the observation only,
    an episode also needs the task's reward and verdict."""

    def __init__(self, backend: SimBackend) -> None:
        self.inner = backend
        self.last: StepResult | None = None

    def step(self, action: np.ndarray) -> StepResult:
        self.last = self.inner.step(action)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FleetRunner:
    """Episodes of a DroneFleet, kept as SimRunner keeps them for one robot: the seed of
    each reset (``episodes.seed + k``), steps, return and the task's verdict; the episode is
    done at the time limit (``task.max_duration_s``) or when the task's success ends it.
    A crash (the task's ``failed``: on the floor, too far) fails the episode but does not
    end it: a drone on the ground is where a flight starts and a landing ends (takeoff and
    land services). Also each camera's schedule (its fps, in sim time)."""

    def __init__(self, fleet: DroneFleet, cfg: ExperimentConfig) -> None:
        self.fleet = fleet
        self.cfg = cfg
        self._verdicts = _KeepsVerdict(fleet.backend)
        fleet.backend = self._verdicts  # type: ignore[assignment]
        self.spec = fleet.backend.spec
        self.task = fleet.task if fleet.task is not None else build_task(cfg)
        self.max_steps = max_episode_steps(cfg)
        self.episode = -1
        self.seed = cfg.episodes.seed
        self._camera_next: dict[str, int] = {}
        self._new_episode()

    def _new_episode(self) -> None:
        self.ret = 0.0
        self.success = False
        self.crashed = False
        self.failure: str | None = None
        self.done = False
        self.wall_start_ns: int | None = None
        self.wall_end_ns: int | None = None

    @property
    def backend(self) -> Any:
        return self.fleet.backend

    @property
    def obs(self) -> Observation | None:
        return self.fleet.obs

    @property
    def steps(self) -> int:
        return self.fleet.steps

    def reset(self) -> Observation:
        self.seed = self.cfg.episodes.seed + self.fleet.resets
        self.fleet.reset()
        self.episode += 1
        self._camera_next = {c.name: 0 for c in self.spec.cameras}
        self._new_episode()
        assert self.fleet.obs is not None
        return self.fleet.obs

    def step(self) -> None:
        """One control period of every drone, scored by the task."""
        if self.wall_start_ns is None:
            self.wall_start_ns = now_ns()
        self.fleet.step()
        res = self._verdicts.last
        assert res is not None
        self.ret += float(res.reward)
        self.crashed = self.crashed or bool(res.info.get("failed", False))
        self.success = not self.crashed and (self.success or bool(res.terminated))
        # a named failure ends the episode (a swarm's "collision"; a crash alone does not)
        self.failure = self.failure or res.info.get("failure")
        self.done = bool(res.terminated or self.failure) or self.steps >= self.max_steps
        if self.done:
            self.wall_end_ns = now_ns()

    def cameras_due(self) -> list[CameraSpec]:
        """Cameras whose next frame (at their fps, in sim time) is due now."""
        return cameras_due(self.spec.cameras, self.fleet.stamp_ns, self._camera_next)

    def summary(self) -> dict[str, Any]:
        """Episode result: success, steps, return, sim time, achieved rate."""
        end = self.wall_end_ns or now_ns()
        wall_s = (end - self.wall_start_ns) * 1e-9 if self.wall_start_ns else 0.0
        return {
            "episode": self.episode,
            "seed": self.seed,
            "success": bool(self.success),
            "crashed": self.crashed,
            "steps": self.steps,
            "return": round(self.ret, 4),
            "sim_time_s": round(self.fleet.now_s, 4),
            "wall_s": round(wall_s, 4),
            "control_hz": round(self.steps / wall_s, 2) if wall_s > 0 else None,
            "outcome": "success" if self.success else (self.failure or "timeout"),
            **({"metrics": self.task.metrics()} if hasattr(self.task, "metrics") else {}),
        }


class DroneBridge(EpisodeBridge):
    """Creates the drone endpoints on ``node`` and steps the fleet (realtime or lockstep)."""

    world: FleetRunner

    def __init__(self, node: Node, cfg: ExperimentConfig, backend: SimBackend | None = None):
        self.fleet = DroneFleet(cfg, backend=backend)
        super().__init__(node, cfg, FleetRunner(self.fleet, cfg))
        self.latency = {d.name: LatencyTracker() for d in self.fleet.drones}
        self.step_wall_ns: list[int] = []
        self._answered: dict[str, bool] = {}
        self._last_cmd_wall: dict[str, int] = {}
        log = node.get_logger()

        self.pubs: dict[str, tuple[Any, Any, Any]] = {}
        self._frame_ids: dict[str, tuple[str, str]] = {}
        # each drone's odom, imu and target topics (what the recorder acknowledges)
        self.topic_names: dict[str, tuple[str, str, str]] = {}
        for d in self.fleet.drones:
            n = d.name
            names = (
                drone_topic(n, itf.ODOM),
                drone_topic(n, itf.IMU),
                drone_topic(n, itf.object_pose_topic("target")),
            )
            self.topic_names[n] = names
            self.pubs[n] = (
                node.create_publisher(
                    Odometry, names[0], itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
                ),
                node.create_publisher(Imu, names[1], itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB),
                node.create_publisher(
                    PoseStamped, names[2], itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
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
        node.create_timer(self.fleet.dt, self._tick)
        self.begin()
        where = ", ".join(f"/{d.name}" if d.name else "(no namespace)" for d in self.fleet.drones)
        log.info(
            f"{len(self.fleet.drones)} x {self.spec.name} in {cfg.sim.type} at "
            f"{self.spec.control_hz:g} Hz ({self.mode}): {where}; task {cfg.task.type}; "
            f"watchdog {cfg.safety.watchdog_s:g} s -> {cfg.safety.on_stale}"
        )

    # --- episodes --------------------------------------------------------------------------
    def _on_reset(self) -> None:
        for tracker in self.latency.values():
            tracker.clear()

    def _summary(self) -> dict[str, Any]:
        summary = super()._summary()
        summary["latency_ms"] = [round(x, 4) for t in self.latency.values() for x in t.samples_ms]
        return summary

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
        self._advance()

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

    # --- stepping --------------------------------------------------------------------------
    def _all_answered(self) -> bool:
        """Lockstep: every drone commanded within the lockstep timeout answered the latest
        observation (drones nobody commands do not hold the world back)."""
        horizon = now_ns() - round(self.cfg.ros.lockstep_timeout_s * 1e9)
        active = [n for n, t in self._last_cmd_wall.items() if t >= horizon]
        return bool(active) and all(self._answered.get(n, False) for n in active)

    def _advance(self) -> None:
        """Lockstep: step once every commanding drone answered the current observation and,
        with ros.wait_for_recorder, the recorder has taken it in (else its acknowledgement
        steps)."""
        if self.mode != "lockstep" or not self.running or self.world.done:
            return  # (a finished episode waits in _end_when_recorded)
        if not self._all_answered():
            return
        self._held = not self._recorded()
        if not self._held:
            self._step()

    def _tick(self) -> None:
        if not self.running:
            self._idle_publish()
            return
        if self.world.done:  # waiting for the recorder to take in the final observation
            self._end_when_recorded()
            if self.running and self._resend_due():
                self._publish_obs(resend=True)
            return
        if self.mode == "realtime":
            self._step()
            return
        now = now_ns()
        timeout_s = self.cfg.ros.lockstep_timeout_s
        waited_s = (now - (self._wait_since or now)) * 1e-9
        horizon = now - round(timeout_s * 1e9)
        commanded = any(t >= horizon for t in self._last_cmd_wall.values())
        # nobody commands (takeoff / hover / landing): advance at the control rate; a
        # commander that went quiet: step on the timeout and let the watchdog act
        if (not commanded or waited_s > timeout_s) and self._recorded():
            self._step()
        elif self._resend_due():
            self._resend(waited_s)

    def _step(self) -> None:
        self._held = False
        self.world.step()
        self.step_wall_ns.append(now_ns())
        del self.step_wall_ns[:-1000]
        self._publish_obs()
        if self.world.done:
            self._end_when_recorded()

    def _publish_obs(self, resend: bool = False) -> None:
        """Publish the current observation: the cameras due (``resend``: the latest images
        again), then per drone its target, imu and odom (last: it completes the drone's
        observation), /clock after them."""
        stamp = self.fleet.stamp_ns
        self._publish_cameras(stamp, resend)
        wall = now_ns()
        wait = self._wait_recorder  # bookkeeping for the recorder's acks, only when it counts
        for d in self.fleet.drones:
            odom_frame, body = self._frames(d)
            pub_odom, pub_imu, pub_target = self.pubs[d.name]
            odom_topic, imu_topic, target_topic = self.topic_names[d.name]
            # the target and the imu only where a node reads them (a policy, the recorder,
            # RViz; all of them while the recorder acknowledges): each costs a message and a
            # publish per drone and control step
            if d.target is not None and (wait or self._read(pub_target)):
                pub_target.publish(conv.pose_msg(d.target, stamp, odom_frame))
                if wait:
                    self._sent_out(target_topic, stamp)
            if wait or self._read(pub_imu):
                pub_imu.publish(conv.imu_msg(d.state, d.accel, stamp, body))
                if wait:
                    self._sent_out(imu_topic, stamp)
            if self.running:
                self.latency[d.name].mark(stamp, wall)
            if wait:
                self._sent_out(odom_topic, stamp)
            pub_odom.publish(conv.odometry_msg(d.state, stamp, odom_frame, body))
            if not resend:
                self._answered[d.name] = False
        self._published(stamp)
        if self.pub_clock is not None and self._read(self.pub_clock):
            self.pub_clock.publish(conv.clock_msg(stamp))

    def _ns(self, d: Drone) -> str:
        base = self.node.get_namespace().strip("/")
        return "/".join(x for x in (base, d.name) if x)

    def _frames(self, d: Drone) -> tuple[str, str]:
        """The drone's odometry and body frame ids (fixed: asked once per drone)."""
        frames = self._frame_ids.get(d.name)
        if frames is None:
            frames = self._frame_ids[d.name] = conv.frame_ids(self._ns(d))
        return frames

    def rate_hz(self) -> float | None:
        """Achieved control rate over the last (up to) 1000 steps, wall clock."""
        t = self.step_wall_ns
        return (len(t) - 1) / ((t[-1] - t[0]) * 1e-9) if len(t) > 10 else None

    def close(self) -> None:
        self.fleet.close()
