"""The body every simulated world's bridge shares (:class:`EpisodeBridge`), and the bridge of
kinds whose world a SimRunner steps (:class:`RunnerBridge`: arms, mobile bases).

Every sim bridge publishes /clock, ``camera/<name>/image_raw`` + ``camera_info`` (each camera
at its fps in sim time) and ``episode_status`` (std_msgs/String, JSON: ``start`` with
episode, seed, stamp_ns; ``end`` with the task's success, return, steps, sim_time_s, ...);
serves ``~/reset``, ``~/start_episode``, ``~/stop_episode`` (std_srvs/Trigger); follows
``episodes.autostart`` and ``episodes.auto_reset``; and with ``ros.wait_for_recorder`` (in
lockstep) steps only once the recorder has acknowledged every message of the current
observation it records (recorder_ack). Between episodes the world stands still and its state
goes out at ~10 Hz, except after an episode ended (its final state stays the last one sent).

The runner bridge adds ``joint_states``, ``objects/<name>/pose``, ``joint_trajectory``
(stamped chunks), ``estop`` and ``~/reset_estop``. Every command passes the SafetyFilter
(inside SimRunner); a malformed one is logged, counted and dropped. The e-stop latches: a
true on estop engages it, only ~/reset_estop releases it. The kind's own topics (an arm's
joint_states, a base's odom / scan / cmd_vel) come from its :class:`RobotTopics`.

tether_ros.kinds.runner_hardware runs the very same command path on a Robot; the drone
fleet's bridge (tether_ros.kinds.quadcopter_sim) is an EpisodeBridge too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from geometry_msgs.msg import PoseStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Header, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand, StaleCommand, TetherError
from tether.core.protocols import SimBackend
from tether.core.spec import CameraSpec, RobotSpec
from tether.core.timing import now_ns
from tether.core.types import Observation
from tether.sim.runner import SimRunner
from tether_ros import conversions as conv
from tether_ros import interface as itf

if TYPE_CHECKING:
    from rclpy.node import Node

IDLE_PERIOD_S = 0.1  # between episodes, the state goes out at this period (s)
RESEND_S = 0.02  # lockstep: an observation not answered (or not recorded) after this goes again
# realtime: a tick that finds the simulator behind the wall clock steps it this many times at
# most to catch up (ticks late by more start the timeline afresh from now)
MAX_CATCH_UP = 4
# how old the answer to "does any node read this topic" may be (ns): the answer changes as
# nodes come and go, asking the middleware costs microseconds at every control step
READERS_TTL_NS = 50_000_000


class EpisodeWorld(Protocol):
    """A simulated world stepped in episodes: a SimRunner, or the drone fleet's FleetRunner."""

    done: bool  # the episode is over (the task ended it, or it was ended)
    success: bool  # the task's verdict so far

    @property
    def spec(self) -> RobotSpec:
        """The simulated robot's spec (its cameras included)."""

    @property
    def task(self) -> Any:
        """The task (``task.objects``: the names of its objects)."""

    @property
    def backend(self) -> SimBackend:
        """The simulator (``render`` gives the cameras' images)."""

    @property
    def obs(self) -> Observation | None:
        """The current observation (None before the first reset)."""

    @property
    def episode(self) -> int:
        """Counts resets: the episode the current state belongs to."""

    @property
    def seed(self) -> int:
        """The seed of the last reset."""

    @property
    def steps(self) -> int:
        """Control steps since the last reset."""

    def reset(self) -> Observation:
        """Reset with seed ``episodes.seed + k`` for the k-th reset."""

    def summary(self) -> dict[str, Any]:
        """The episode's result: success, return, steps, sim_time_s, ..."""

    def cameras_due(self) -> list[CameraSpec]:
        """The cameras whose next frame (at their fps, in sim time) is due now."""


class Readers:
    """Whether a node subscribes to a publisher, asked of the middleware at most every
    ``READERS_TTL_NS``: the bridge publishes object poses and /clock only where a node reads
    them, and a node that subscribes gets them from at most that long after."""

    def __init__(self) -> None:
        self._known: dict[Any, tuple[bool, int]] = {}

    def forget(self) -> None:
        """Ask afresh next time (an episode starts: a node that just subscribed counts)."""
        self._known.clear()

    def __call__(self, pub: Any) -> bool:
        now = now_ns()
        known = self._known.get(pub)
        if known is None or now - known[1] > READERS_TTL_NS:
            known = self._known[pub] = (pub.get_subscription_count() > 0, now)
        return known[0]


def recorded_topics(
    cfg: ExperimentConfig, spec: RobotSpec, objects: Iterable[str]
) -> frozenset[str]:
    """The sensor topics the recorder takes in (and acknowledges on recorder_ack) for this
    experiment: its kind's recording, less the commands."""
    from tether_ros.kinds import experiment_io

    rec = experiment_io(cfg).recording(cfg, spec, tuple(objects))
    return frozenset(s.topic for s in rec.streams if not s.command)


class EpisodeBridge:
    """Episodes, episode_status, /clock, the cameras and the recorder's acknowledgements of a
    simulated ``world`` on ``node`` (module docstring). A subclass creates the kind's
    endpoints, then calls :meth:`begin`; it provides :meth:`_publish_obs` and
    :meth:`_advance` and steps the world from its own timers."""

    # a simulation: refuse to start where another graph already publishes /clock (robots'
    # bridges, which may share a domain in their namespaces, say False)
    sole_clock = True

    def __init__(self, node: Node, cfg: ExperimentConfig, world: EpisodeWorld) -> None:
        self.node = node
        self.cfg = cfg
        self.world = world
        self.spec = world.spec
        self.mode = cfg.ros.rate_mode
        self.running = False
        self.rejected = 0
        self._status_seq = 0
        self._wait_since: int | None = None  # wall time the current observation first went out
        self._stamp: int | None = None
        self._last_send: int = 0
        # lockstep re-sends: the latest image and camera info of each camera (a re-sent
        # observation must carry the images in force, or a policy that waits for a first
        # image never answers and the sim never steps)
        self._images: dict[str, tuple[Image, CameraInfo]] = {}
        # ros.wait_for_recorder: the topics the recorder acknowledges, and the stamp last
        # published and last acknowledged per topic (bookkeeping only when it counts)
        self._wait_recorder = self.mode == "lockstep" and cfg.ros.wait_for_recorder
        self._recorded_topics = (
            recorded_topics(cfg, self.spec, world.task.objects)
            if self._wait_recorder
            else frozenset()
        )
        self._sent: dict[str, int] = {}
        self._acked: dict[str, int] = {}
        self._held = False  # answered, but the recorder has not taken the observation in yet
        self._read = Readers()

        # a simulator with a clock of its own (Isaac Sim) publishes /clock itself
        own_clock = not getattr(world.backend, "external_clock", False)
        if own_clock and self.sole_clock and node.count_publishers(itf.CLOCK):
            # another graph on this domain (one started without tether's check, e.g. by a
            # launch file): its commands and resets would reach this simulation
            raise TetherError(
                "another graph already publishes /clock on ROS_DOMAIN_ID "
                f"{os.environ.get('ROS_DOMAIN_ID', '0')}: two simulations on one domain take "
                f"each other's commands and resets; {itf.FREE_DOMAIN}"
            )
        self.pub_clock = (
            node.create_publisher(Clock, itf.CLOCK, itf.CLOCK_QOS, event_callbacks=itf.FAST_PUB)
            if own_clock
            else None
        )
        self.pub_status = node.create_publisher(
            String, itf.EPISODE_STATUS, itf.EVENT_QOS, event_callbacks=itf.FAST_PUB
        )
        self.pub_images = {
            c.name: (
                node.create_publisher(
                    Image, itf.image_topic(c.name), itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
                ),
                node.create_publisher(
                    CameraInfo,
                    itf.camera_info_topic(c.name),
                    itf.SENSOR_QOS,
                    event_callbacks=itf.FAST_PUB,
                ),
            )
            for c in self.spec.cameras
        }
        if self._wait_recorder:
            node.create_subscription(
                Header,
                itf.RECORDER_ACK,
                self._on_recorder_ack,
                itf.COMMAND_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        # a language-conditioned task (one with an ``instruction``): publish each episode's
        # instruction, and judge the episode by a new one anyone publishes
        self._language = hasattr(world.task, "set_instruction")
        if self._language:
            self.pub_instruction = node.create_publisher(
                String, itf.INSTRUCTION, itf.INSTRUCTION_QOS, event_callbacks=itf.FAST_PUB
            )
            node.create_subscription(
                String,
                itf.INSTRUCTION,
                self._on_instruction,
                itf.INSTRUCTION_QOS,
                event_callbacks=itf.FAST_SUB,
            )
        node.create_service(Trigger, "~/reset", self._srv_reset)
        node.create_service(Trigger, "~/start_episode", self._srv_start)
        node.create_service(Trigger, "~/stop_episode", self._srv_stop)

    def begin(self) -> None:
        """Reset the world and, with ``episodes.autostart``, start the first episode (the
        subclass calls it once its endpoints exist)."""
        self._reset()
        if self.cfg.episodes.autostart:
            self._start()

    # --- what a kind provides --------------------------------------------------------
    def _publish_obs(self, resend: bool = False) -> None:
        """Publish the current observation (``resend``: again, as it was)."""
        raise NotImplementedError

    def _advance(self) -> None:
        """Lockstep: step if the current observation is answered and recorded."""
        raise NotImplementedError

    def _on_reset(self) -> None:
        """The world was reset: forget per-episode command state."""

    def _summary(self) -> dict[str, Any]:
        """The end event's data."""
        summary = self.world.summary()
        summary["rejected"] = self.rejected
        return summary

    def _on_instruction(self, msg: String) -> None:
        text = msg.data.strip()
        task = self.world.task
        if text and text != task.instruction:
            task.set_instruction(text)
            known = getattr(task, "subtask", "") is not None
            self.node.get_logger().info(
                f"instruction: '{text}'"
                + ("" if known else " (no sub-task of this task: the episode cannot succeed)")
            )

    # --- episode control ---------------------------------------------------------------
    def _reset(self) -> None:
        self.world.reset()
        if self._language and self.world.task.instruction:
            # before the episode's first observation goes out
            self.pub_instruction.publish(String(data=self.world.task.instruction))
        self._images.clear()
        self._sent.clear()
        self._acked.clear()
        self._held = False
        self._wait_since = None
        self.running = False
        self._on_reset()
        self._publish_obs()

    def _start(self) -> None:
        # an episode starts from a reset the world has not stepped from
        if self.world.done or (not self.running and self.world.steps > 0):
            self._reset()
        # a world that runs on between reset and start (Isaac Sim plays on): its episode
        # time starts now
        started = getattr(self.world.backend, "episode_started", None)
        if started is not None:
            started()
        self.running = True
        self._read.forget()
        obs = self.world.obs
        assert obs is not None
        start = {"episode": self.world.episode, "seed": self.world.seed, "stamp_ns": obs.stamp_ns}
        if self._language:
            start["instruction"] = self.world.task.instruction
        self._emit("start", start)
        self._publish_obs()

    def _end(self, stopped: bool = False) -> None:
        self.running = False
        summary = self._summary()
        summary["stopped"] = stopped
        self._emit("end", summary)
        self.world.done = True
        if self.cfg.episodes.auto_reset and not stopped:
            self._start()

    def _emit(self, event: str, data: dict[str, Any]) -> None:
        self._status_seq += 1
        self.pub_status.publish(
            String(data=json.dumps({"event": event, "seq": self._status_seq, **data}))
        )

    def _srv_reset(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self._reset()
        resp.success, resp.message = (
            True,
            json.dumps({"episode": self.world.episode, "seed": self.world.seed}),
        )
        return resp

    def _srv_start(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        self._start()
        resp.success, resp.message = (
            True,
            json.dumps({"episode": self.world.episode, "seed": self.world.seed}),
        )
        return resp

    def _srv_stop(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        if not self.running:
            resp.success, resp.message = False, "no episode is running"
            return resp
        self._end(stopped=True)
        resp.success, resp.message = True, json.dumps({"success": self.world.success})
        return resp

    # --- stepping ----------------------------------------------------------------------
    def _idle_publish(self) -> None:
        """Between episodes, keep publishing the (unchanging) state at ~10 Hz, so late
        subscribers (RViz, robot_state_publisher, a policy server) see the robot."""
        # not after an episode ended: its final state would reach subscribers after the next
        # episode's first one (topics are not ordered) and look like a jump ahead in time
        if not self.world.done and (now_ns() - self._last_send) * 1e-9 >= IDLE_PERIOD_S:
            self._publish_obs()

    def _resend(self, waited_s: float) -> None:
        """Re-send the current observation (sensor QoS is best effort: it may have been
        lost), images included; say so when it is the recorder that holds the step."""
        self._publish_obs(resend=True)
        if self._held and waited_s > 5.0:
            self.node.get_logger().warning(
                "waiting for the recorder to take in the observation "
                f"(ros.wait_for_recorder), {waited_s:.0f} s",
                throttle_duration_sec=5.0,
            )

    def _resend_due(self) -> bool:
        return (now_ns() - self._last_send) * 1e-9 > RESEND_S

    def _recorded(self) -> bool:
        """Whether the recorder acknowledged every message of the current observation
        (always true without ros.wait_for_recorder, and between episodes)."""
        return (
            not self._wait_recorder
            or not self.running
            or all(self._acked.get(topic) == stamp for topic, stamp in self._sent.items())
        )

    def _on_recorder_ack(self, msg: Header) -> None:
        self._acked[msg.frame_id] = conv.from_time(msg.stamp)
        if self.running and self.world.done:
            self._end_when_recorded()
        elif self._held:
            self._advance()

    def _end_when_recorded(self) -> None:
        """The episode is over: end it once the recorder has its final observation and
        that observation is answered (so the recorder saves it complete)."""
        if self._recorded() and self._final_answered():
            self._end()

    def _final_answered(self) -> bool:
        """Whether the final observation's answer is in (a kind whose commands answer each
        observation says; by default nothing is waited for)."""
        return True

    def _sent_out(self, topic: str, stamp: int) -> None:
        """``topic`` went out with ``stamp``: with ros.wait_for_recorder, a step waits for
        its acknowledgement if the recorder takes it in (call only when waiting counts)."""
        if topic in self._recorded_topics:
            self._sent[topic] = stamp

    def _published(self, stamp: int) -> None:
        """Bookkeeping after an observation of ``stamp`` went out (the wall time it first
        did: what a lockstep timeout counts from)."""
        self._last_send = now_ns()
        if stamp != self._stamp or self._wait_since is None:
            self._stamp, self._wait_since = stamp, self._last_send

    def _publish_cameras(self, stamp: int, resend: bool) -> None:
        """The cameras due now (``resend``: every camera's latest image again, as it was)."""
        if resend:
            for name in self._images:
                self._publish_image(name)
            return
        for cam in self.world.cameras_due():
            frame = f"{cam.name}_optical_frame"
            self._images[cam.name] = (
                conv.image_msg(self.world.backend.render(cam.name), stamp, frame),
                conv.camera_info_msg(cam, stamp, frame),
            )
            self._publish_image(cam.name)

    def _publish_image(self, camera: str) -> None:
        img, info = self._images[camera]
        img_pub, info_pub = self.pub_images[camera]
        img_pub.publish(img)
        info_pub.publish(info)
        if self._wait_recorder:
            self._sent_out(itf.image_topic(camera), conv.from_time(img.header.stamp))

    def close(self) -> None:
        self.world.backend.close()


class RobotTopics(Protocol):
    """A kind's own endpoints on a runner bridge."""

    def publish(self, obs: Observation) -> Iterable[str]:
        """Publish the kind's streams of one observation, except joint_states; returns the
        topics it published."""

    def joint_states(self, obs: Observation) -> JointState:
        """The observation's joint_states (the bridge publishes it last: it completes an
        observation for the policy)."""


# (node, cfg, spec, on_action(action (dim,)), on_reject(exc)) -> the kind's topics; a kind
# with an unstamped command (a base's cmd_vel) hands each one to on_action
TopicsFactory = Callable[
    [
        "Node",
        ExperimentConfig,
        RobotSpec,
        Callable[[np.ndarray], None],
        Callable[[Exception], None],
    ],
    RobotTopics,
]


def ros_backend(node: Node, cfg: ExperimentConfig) -> SimBackend | None:
    """The backend of a simulator reached over ROS 2 (a sim type with the registry option
    ``ros_node``, e.g. isaac_ros), built with the bridge's ``node``; None for the others
    (SimRunner builds those)."""
    from tether.core import registry
    from tether.core.experiment import build_task

    sim = cfg.sim
    if sim is None or not registry.entry("sim", sim.type).options.get("ros_node"):
        return None
    backend: SimBackend = registry.build(
        "sim", sim, robot=cfg.robot, task=build_task(cfg), node=node
    )
    return backend


class RunnerBridge(EpisodeBridge):
    """ROS 2 endpoints around a SimRunner, on ``node``."""

    def __init__(
        self,
        node: Node,
        cfg: ExperimentConfig,
        backend: SimBackend | None,
        topics: TopicsFactory,
    ) -> None:
        own = backend is None
        backend = backend or ros_backend(node, cfg)
        try:
            self._setup(node, cfg, backend, topics)
        except BaseException:
            # a simulator reached over ROS 2 runs a thread of its own: never leave it behind
            # (a Ctrl-C while the bridge is built, a reset that failed)
            if own and backend is not None:
                backend.close()
            raise

    def _setup(
        self,
        node: Node,
        cfg: ExperimentConfig,
        backend: SimBackend | None,
        topics: TopicsFactory,
    ) -> None:
        # a world on the wall clock (hardware, Isaac Sim playing) steps in real time
        if getattr(backend, "realtime_only", False) and cfg.ros.rate_mode != "realtime":
            node.get_logger().info(f"{cfg.world.type} runs in real time (ros.rate_mode ignored)")
            cfg = cfg.model_copy(
                update={"ros": cfg.ros.model_copy(update={"rate_mode": "realtime"})}
            )
        self.runner = SimRunner(cfg, backend)
        super().__init__(node, cfg, self.runner)
        self.frame = "world"
        self.old_timeline = 0  # chunks from before a reset, dropped quietly (see _on_trajectory)
        self._got_action = False
        # realtime catch-up (see _steps_due): the wall time of the episode's first tick
        self._own_clock = not getattr(backend, "realtime_only", False)
        self._period_ns = round(self.spec.dt * 1e9)
        self._rt_origin_ns: int | None = None
        self._rt_ticks = 0
        self.topics = topics(node, cfg, self.spec, self._on_action, self._reject_action)

        self.pub_js = node.create_publisher(
            JointState, itf.JOINT_STATES, itf.SENSOR_QOS, event_callbacks=itf.FAST_PUB
        )
        self.pub_objects = {
            name: node.create_publisher(
                PoseStamped,
                itf.object_pose_topic(name),
                itf.SENSOR_QOS,
                event_callbacks=itf.FAST_PUB,
            )
            for name in self.runner.task.objects
        }
        node.create_subscription(
            JointTrajectory,
            itf.JOINT_TRAJECTORY,
            self._on_trajectory,
            itf.COMMAND_QOS,
            event_callbacks=itf.FAST_SUB,
        )
        node.create_subscription(
            Bool, itf.ESTOP, self._on_estop, itf.COMMAND_QOS, event_callbacks=itf.FAST_SUB
        )
        node.create_service(Trigger, "~/reset_estop", self._srv_reset_estop)

        if self.mode == "realtime":
            node.create_timer(self.spec.dt, self._tick)
        else:
            # lockstep housekeeping: re-send a lost observation, step on timeout
            node.create_timer(0.01, self._lockstep_watch)

        self.begin()
        node.get_logger().info(
            f"{self.spec.name} in {cfg.world.type} at {self.spec.control_hz:g} Hz "
            f"({self.mode}), task {cfg.task.type}"
        )

    def _on_reset(self) -> None:
        self._got_action = False

    def _final_answered(self) -> bool:
        """With a recorder waited for in lockstep: whether a command answers the final
        observation (a chunk stamped with it, a twist heard after it), or the policy has
        been quiet for ros.lockstep_timeout_s. The recorder's last frame holds that answer
        (in lockstep its end streams include the commands): ending the episode before it
        came let the next episode's start event overtake it at the recorder, which then
        saved the last frame with the previous chunk's row."""
        obs, chunk = self.runner.obs, self.runner.chunk
        if not self._wait_recorder or obs is None:
            return True
        if chunk is not None and chunk.t0_ns >= obs.stamp_ns:
            return True
        waited = 0.0 if self._wait_since is None else (now_ns() - self._wait_since) * 1e-9
        return waited > self.cfg.ros.lockstep_timeout_s

    def _answered_after_end(self) -> None:
        """A command came in: a finished episode may end now (_end_when_recorded)."""
        if self.running and self.world.done:
            self._end_when_recorded()

    def _summary(self) -> dict[str, Any]:
        summary = super()._summary()
        summary["old_timeline"] = self.old_timeline
        return summary

    # --- commands ----------------------------------------------------------------------
    def _on_estop(self, msg: Bool) -> None:
        safety = self.runner.safety
        log = self.node.get_logger()
        if msg.data and not safety.estopped:
            log.warning("e-stop ENGAGED (call ~/reset_estop to release)")
            safety.engage_estop()
        elif not msg.data and safety.estopped:
            log.warning(
                "e-stop stays engaged: a false on estop does not release it, ~/reset_estop does",
                throttle_duration_sec=1.0,
            )

    def _srv_reset_estop(self, _req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
        was = self.runner.safety.estopped
        self.runner.safety.release_estop()
        if was:
            self.node.get_logger().warning("e-stop released (~/reset_estop)")
        resp.success = True
        resp.message = "e-stop released" if was else "e-stop was not engaged"
        return resp

    def _on_action(self, action: np.ndarray) -> None:
        """An unstamped command (a base's cmd_vel), in force for safety.watchdog_s."""
        try:
            self.runner.submit_command(action)
        except InvalidCommand as exc:
            self._reject_action(exc)
            return
        self._got_action = True
        self._advance()
        self._answered_after_end()

    def _reject_action(self, exc: Exception) -> None:
        self.rejected += 1
        self.node.get_logger().warning(f"rejected cmd_vel: {exc}", throttle_duration_sec=1.0)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            chunk = conv.trajectory_to_chunk(msg, self.spec)
            self.runner.submit(chunk)
        except StaleCommand as exc:
            # expected: the previous episode's last chunk, in flight when the reset came
            self.old_timeline += 1
            self.node.get_logger().debug(f"dropped joint_trajectory: {exc}")
            return
        except InvalidCommand as exc:
            self.rejected += 1
            self.node.get_logger().warning(
                f"rejected joint_trajectory: {exc}", throttle_duration_sec=1.0
            )
            return
        self._got_action = True
        self._advance()
        self._answered_after_end()

    # --- stepping ----------------------------------------------------------------------
    def _tick(self) -> None:
        if not self.running:
            self._rt_origin_ns = None
            self._idle_publish()
            return
        for _ in range(self._steps_due()):
            self._step()
            if not self.running or self.runner.done:
                break

    def _steps_due(self) -> int:
        """Realtime: how many control steps this tick runs. One, unless earlier ticks came
        late: the timer skips the periods it missed, so the simulator would fall behind the
        wall clock (1-2 % at 1 kHz on a busy 2-core machine); it steps again until its steps
        match the wall time since the episode's first tick. A simulator that keeps a clock
        of its own (realtime_only: Isaac Sim playing) always steps once."""
        if not self._own_clock:
            return 1
        now = now_ns()
        if self._rt_origin_ns is None:
            self._rt_origin_ns, self._rt_ticks = now, 0
        behind = round((now - self._rt_origin_ns) / self._period_ns) - self._rt_ticks
        if behind > MAX_CATCH_UP:  # far behind (a pause, a slow reset): start afresh
            self._rt_origin_ns, self._rt_ticks, behind = now, 0, 0
        due = 1 + max(behind, 0)
        self._rt_ticks += due
        return due

    def _advance(self) -> None:
        """Lockstep: step once the current observation is answered and, with
        ros.wait_for_recorder, the recorder has taken it in (else its acknowledgement steps)."""
        if self.mode != "lockstep" or not self.running or self.runner.done:
            return  # (a finished episode waits in _end_when_recorded)
        if not self.runner.answered():
            return
        self._held = not self._recorded()
        if not self._held:
            self._step()

    def _lockstep_watch(self) -> None:
        if not self.running:
            self._idle_publish()
            return
        if self._wait_since is None:
            return
        waited_s = (now_ns() - self._wait_since) * 1e-9
        if self.runner.done:  # waiting for the recorder to take in the final observation
            self._end_when_recorded()
            if self.running and self._resend_due():
                self._publish_obs(resend=True)
            return
        if self._got_action and waited_s > self.cfg.ros.lockstep_timeout_s and self._recorded():
            self._step()  # the policy went quiet: the watchdog in the safety filter holds
        elif self._resend_due():
            self._resend(waited_s)

    def _step(self) -> None:
        self._held = False
        self.runner.step()
        self._publish_obs()
        if self.runner.done:
            self._end_when_recorded()

    def _publish_obs(self, resend: bool = False) -> None:
        """Publish the current observation; joint_states goes last among what the policy
        needs (objects, images, the kind's topics), /clock after it, off the latency path.
        ``resend``: the cameras' latest images go out again (as they were) instead of the
        ones due now."""
        obs = self.runner.obs
        assert obs is not None
        stamp = obs.stamp_ns
        env = obs.get("env_state")
        wait = self._wait_recorder  # bookkeeping for the recorder's acks, only when it counts
        for i, (name, pub) in enumerate(self.pub_objects.items()):
            # an object's pose only where a node takes it in (a policy that reads
            # env_state, the recorder, RViz): a pose nobody reads costs a conversion and a
            # publish on every step of the loop
            if not (wait or self._read(pub)):  # (the recorder's acks count every topic)
                continue
            pub.publish(conv.pose_msg(env[7 * i : 7 * i + 7], stamp, self.frame))
            if wait:
                self._sent_out(itf.object_pose_topic(name), stamp)
        self._publish_cameras(stamp, resend)
        published = self.topics.publish(obs)
        if wait:
            for topic in published:
                self._sent_out(topic, stamp)
        js = self.topics.joint_states(obs)
        self._published(stamp)
        if self.running:
            self.runner.latency.mark(stamp, self._last_send)
        if wait:
            self._sent_out(itf.JOINT_STATES, stamp)
        self.pub_js.publish(js)
        if self.pub_clock is not None and self._read(self.pub_clock):
            self.pub_clock.publish(conv.clock_msg(stamp))
