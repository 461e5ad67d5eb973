"""recorder: samples the robot's topics at the dataset fps (in sim/robot time) and writes
episodes as a LeRobotDataset v3.0 (parquet + one MP4 per camera).

What it subscribes is the recording of the robot's kind, given by the kind's adapter
(registry ``ros_io``; tether_ros.kinds.streams): an arm's joint_states and
joint_trajectory, a base's odom + wheel joint_states, scan and its commands
(joint_trajectory chunks or cmd_vel), a drone's odom, imu and commands (cmd_low_level,
cmd_vel); for every kind the task's object poses (observation.environment_state) and the
cameras (observation.images.<name>). The action of a frame is the command in force at the
frame's time. Alignment and episode bookkeeping live in tether.core.data.align; this node
is the ROS plumbing around it.

Episodes follow the sim bridge's episode_status (start -> start; end -> save if it
succeeded, else discard, unless keep_failures) and can be driven by hand with
~/start_episode, ~/stop_episode (save) and ~/discard_episode (std_srvs/Trigger). Publishes
recorder_status (JSON: saved, discarded), recorder_ready (std_msgs/Bool, latched: it has
heard every stream an episode's end waits for, so an episode started now is whole), and with
``ros.wait_for_recorder`` a recorder_ack (std_msgs/Header: topic, stamp) for each sensor
message it took in, so a lockstep sim bridge never steps past what the recorder has. Each
episode's task string is the ``task_text`` parameter (default: the sentence of the task's
registry entry, option ``task``, e.g. "lift the cube"), or the latest std_msgs/String on
``instruction`` heard before the episode started, or the instruction the start event
carries (a language-conditioned task draws one per episode). Saved episodes survive a
SIGKILL (see tether.core.data.lerobot); Ctrl-C drops the episode in progress and
finalizes.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from rclpy.node import Node
from rclpy.serialization import deserialize_message
from std_msgs.msg import Bool, Header, String
from std_srvs.srv import Trigger

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.data.align import EpisodeAligner, assemble
from tether.core.errors import InvalidCommand, TetherError
from tether.core.experiment import build_task, robot_spec
from tether_ros import interface as itf
from tether_ros.kinds import experiment_io
from tether_ros.kinds.streams import Recording, Stream
from tether_ros.runtime import experiment_from_params, run_node

# a task's registry option: the sentence its episodes get (LeRobot's per-episode task)
TASK_OPTION = "task"
RECORDER_STATUS = "recorder_status"
# std_msgs/Bool, latched: true once the recorder has heard every stream an episode's end waits
# for (the sensors and, in lockstep, the commands), so an episode started now is whole
RECORDER_READY = "recorder_ready"
INSTRUCTION = itf.INSTRUCTION  # std_msgs/String: the task sentence of the next episodes
END_GRACE_S = 5.0  # longest wait for an ended episode's last observations (a lagging recorder)


def experiment_recording(cfg: ExperimentConfig) -> Recording:
    """What the recorder subscribes and writes for an experiment: its robot kind's
    recording, from the kind's ROS adapter."""
    spec = robot_spec(cfg)
    rec: Recording = experiment_io(cfg).recording(cfg, spec, tuple(build_task(cfg).objects))
    return rec


def dataset_features(cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """LeRobot features of an experiment's dataset: state, action, environment state, the
    kind's extras, one video per camera (names from the RobotSpec)."""
    return experiment_recording(cfg).info


def task_sentence(task_type: str) -> str:
    """The default task string of a task's episodes: the sentence its registry entry gives
    (option ``task``), else its name in words."""
    sentence = ""
    if task_type in registry.available("task"):
        sentence = registry.entry("task", task_type).options.get(TASK_OPTION, "")
    return sentence or task_type.replace("_", " ")


class Recorder(Node):
    """ROS 2 shell around EpisodeAligner + LeRobotWriter."""

    def __init__(
        self, cfg: ExperimentConfig | None = None, output: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__("recorder", start_parameter_services=False, **kwargs)
        from tether.core.data.lerobot import LeRobotWriter

        self.cfg = cfg or experiment_from_params(self)
        out = output or self.declare_parameter("output", "").value
        if not out:
            raise TetherError("recorder: set the 'output' parameter to the dataset directory")
        self.fps = int(self.declare_parameter("fps", 30).value)
        self.task_text = str(
            self.declare_parameter("task_text", task_sentence(self.cfg.task.type)).value
        )
        self.keep_failures = bool(self.declare_parameter("keep_failures", False).value)
        self.follow = bool(self.declare_parameter("follow_episodes", True).value)
        # also write each episode's raw topics to a rosbag2 MCAP bag in <output>/mcap/
        self.record_mcap = bool(self.declare_parameter("mcap", False).value)
        self.bag: Any = None
        self._bag_topics: dict[str, str] = {}
        self.spec = robot_spec(self.cfg)
        self.recording_spec = experiment_recording(self.cfg)
        self.features = self.recording_spec.info
        self.writer = LeRobotWriter(
            Path(out),
            self.fps,
            self.features,
            robot_type=self.spec.name,
            resume=(Path(out) / "meta/info.json").exists(),
        )
        streams = self.recording_spec.streams
        keys = tuple(dict.fromkeys(s.key for s in streams))
        ages = {s.key: s.max_age_s for s in streams if s.max_age_s is not None}
        # an ended episode waits for the sensors of its last observation and, in lockstep
        # (every observation is answered), for the answer to it: the last frame's action
        lockstep = self.cfg.ros.rate_mode == "lockstep"
        ends = [s.key for s in streams if s.every_step and (lockstep or not s.command)]
        self.aligner = EpisodeAligner(
            keys,
            self.fps,
            self.recording_spec.clock_key,
            ages,
            end_keys=tuple(dict.fromkeys(ends)),
            # the aligner stamps unstamped commands (a Twist, a drone's cmd_low_level at 0)
            lockstep=lockstep,
        )
        self._latest: dict[str, Any] = {}  # latest value per stream (decoders may read them)
        self.create_timer(0.05, self._maybe_save)

        self.pub_status = self.create_publisher(String, RECORDER_STATUS, itf.EVENT_QOS)
        self.pub_ready = self.create_publisher(Bool, RECORDER_READY, itf.EVENT_QOS)
        self.ready = False
        self.pub_ack = (
            self.create_publisher(Header, itf.RECORDER_ACK, itf.COMMAND_QOS)
            if self.cfg.ros.wait_for_recorder and self.cfg.ros.rate_mode == "lockstep"
            else None
        )
        for stream in streams:
            self._subscribe(stream)
        if self.follow:
            self.create_subscription(String, itf.EPISODE_STATUS, self._on_episode, itf.EVENT_QOS)
        self.create_subscription(String, INSTRUCTION, self._on_instruction, itf.EVENT_QOS)
        self.create_service(Trigger, "~/start_episode", self._srv(lambda: self.start_episode()))
        self.create_service(Trigger, "~/stop_episode", self._srv(self.save_episode))
        self.create_service(Trigger, "~/discard_episode", self._srv(self.discard_episode))
        self.get_logger().info(
            f"recording {list(self.features)} of a {self.spec.kind} at {self.fps} fps to {out}"
        )

    @property
    def recording(self) -> bool:
        return self.aligner.recording

    @property
    def frames(self) -> int:
        return self.aligner.frames

    # --- streams ---------------------------------------------------------------------
    def _subscribe(self, stream: Stream) -> None:
        """Subscribe raw: the wire bytes go to the MCAP bag as they are (re-serializing an
        rclpy message can append stray bytes that strict CDR readers reject), then the
        message is decoded once for the dataset. A sensor stream's messages are
        acknowledged on recorder_ack once handled (ros.wait_for_recorder)."""
        from tether.core.data.mcap_bag import type_string

        cls, topic = stream.msg_type, stream.topic
        full_name = self.resolve_topic_name(topic)  # bags hold absolute names
        self._bag_topics[full_name] = type_string(cls)
        pub_ack = None if stream.command else self.pub_ack
        qos = itf.COMMAND_QOS if stream.command else itf.SENSOR_QOS

        def on_raw(data: bytes) -> None:
            if self.bag is not None and self.recording:
                self.bag.write(full_name, data, self.get_clock().now().nanoseconds)
            msg = deserialize_message(data, cls)
            self._take(stream, msg)
            if pub_ack is not None:  # taken in (and any frame it completed, written)
                pub_ack.publish(Header(stamp=msg.header.stamp, frame_id=topic))

        self.create_subscription(cls, topic, on_raw, qos, event_callbacks=itf.FAST_SUB, raw=True)

    def _take(self, stream: Stream, msg: Any) -> None:
        try:
            stamp, value = stream.decode(msg, self._latest)
        except InvalidCommand:
            return  # malformed, or not a command of this dataset: the robot did not do it
        if stamp is None and self.aligner.clock_ns is None:
            return  # unstamped (a Twist) before the robot's first message: no time to give it
        self._latest[stream.key] = value
        if not self.ready and all(k in self._latest for k in self.aligner.end_keys):
            self.ready = True  # (a subscription can match after the first messages went out)
            self.pub_ready.publish(Bool(data=True))
            self.get_logger().info("ready: heard every stream")
        for frame in self.aligner.push(stream.key, stamp, value):
            self._add(frame)
        if self.aligner.ending and stream.key in self.aligner.end_keys:
            self._maybe_save()

    def _add(self, frame: dict[str, Any]) -> None:
        self.writer.add_frame(assemble(frame, self.recording_spec.features))

    # --- episodes ----------------------------------------------------------------------
    def _on_instruction(self, msg: String) -> None:
        text = msg.data.strip()
        if text:
            self.task_text = text  # the task of the episodes that start from now on

    def _on_episode(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("event") == "start":
            if event.get("instruction"):  # the episode's own (a language-conditioned task)
                self.task_text = str(event["instruction"])
            self.start_episode(event.get("stamp_ns"))
        elif event.get("event") == "end" and self.recording:
            if event.get("success") or self.keep_failures:
                # the end event can overtake the episode's last messages (topics are not
                # ordered): save once every end stream reaches the end, or after a grace
                end_ns = round(float(event.get("sim_time_s", 0.0)) * 1e9)
                self.aligner.end(end_ns, time.monotonic() + END_GRACE_S)
                self._maybe_save()
            else:
                self.discard_episode("the episode failed")

    def _maybe_save(self) -> None:
        if self.aligner.end_due(time.monotonic()):
            self.save_episode()

    def start_episode(self, start_ns: int | None = None) -> str:
        """Start an episode; messages already heard at or after ``start_ns`` are part of it."""
        if self.aligner.ending:
            self.save_episode()  # the previous episode's end is certain now
        if self.recording:
            self.writer.discard_episode()
        self.writer.start_episode(self.task_text)
        if self.record_mcap:
            self._open_bag()
        for frame in self.aligner.start(start_ns):  # messages heard before the start event
            self._add(frame)
        return "recording"

    def save_episode(self) -> str:
        if not self.recording:
            return "not recording"
        for frame in self.aligner.finish():  # the episode's last frames
            self._add(frame)
        if self.frames == 0:
            self.writer.discard_episode()
            self._close_bag(keep=False)
            reason = "no frames"
            unheard = self.aligner.unheard()  # (kept until the next start)
            if unheard:
                reason += f"; nothing of this episode heard on {', '.join(unheard)}"
            return self._status("discarded", reason=reason)
        index = self.writer.save_episode()
        self._close_bag(keep=True)
        return self._status(
            "saved", episode=index, frames=self.frames, dropped=self.aligner.stats.dropped
        )

    def discard_episode(self, reason: str = "asked") -> str:
        if not self.recording:
            return "not recording"
        self.aligner.discard()
        self.writer.discard_episode()
        self._close_bag(keep=False)
        return self._status("discarded", reason=reason, frames=self.frames)

    def _open_bag(self) -> None:
        """One bag per episode, named by the index the episode gets if it is saved, so a
        crash can only touch the episode in progress (its bag lacks metadata.yaml)."""
        from tether.core.data.mcap_bag import McapBagWriter

        self._close_bag(keep=False)
        path = self.writer.root / "mcap" / f"episode_{self.writer.num_episodes:06d}"
        if path.exists():
            shutil.rmtree(path)  # left by a crash while recording this index
        self.bag = McapBagWriter(path)
        for topic, type_name in self._bag_topics.items():
            self.bag.add_topic(topic, type_name)

    def _close_bag(self, keep: bool) -> None:
        if self.bag is None:
            return
        bag, self.bag = self.bag, None
        bag.close()
        if not keep:
            shutil.rmtree(bag.path, ignore_errors=True)

    def _status(self, event: str, **data: Any) -> str:
        text = json.dumps({"event": event, "episodes": self.writer.num_episodes, **data})
        self.pub_status.publish(String(data=text))
        self.get_logger().info(text)
        return text

    def _srv(self, fn: Any) -> Any:
        def handler(_req: Trigger.Request, resp: Trigger.Response) -> Trigger.Response:
            try:
                resp.message, resp.success = fn(), True
            except TetherError as exc:
                resp.message, resp.success = str(exc), False
            return resp

        return handler

    def close(self) -> None:
        if self.aligner.ending:  # an ended episode waiting for its last frames
            self.save_episode()
        if self.recording:
            self.aligner.discard()
            self.writer.discard_episode()
            self._close_bag(keep=False)
        self.writer.finalize()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(Recorder, args))


if __name__ == "__main__":
    main()
