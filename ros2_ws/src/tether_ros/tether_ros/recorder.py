"""recorder: samples the robot's topics at the dataset fps (in sim/robot time) and writes
episodes as a LeRobotDataset v3.0 (parquet + one MP4 per camera).

Subscribes joint_states (observation.state), objects/<name>/pose
(observation.environment_state), joint_trajectory (action: the command in force at each
frame's time) and camera/<name>/image_raw (observation.images.<name>). Episodes follow the
sim bridge's episode_status (start -> start; end -> save if it succeeded, else discard,
unless keep_failures) and can be driven by hand with ~/start_episode, ~/stop_episode
(save) and ~/discard_episode (std_srvs/Trigger). Publishes recorder_status (JSON), and with
``ros.wait_for_recorder`` a recorder_ack (std_msgs/Header: topic, stamp) for each sensor
message it took in, so a lockstep sim bridge never steps past what the recorder has.
Each episode's task string is the ``task_text`` parameter (default: the task's sentence),
or the latest std_msgs/String on ``instruction`` heard before the episode started.
Saved episodes survive a SIGKILL (see tether.core.data.lerobot); Ctrl-C drops the episode
in progress and finalizes.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Header, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from tether.core.config import ExperimentConfig
from tether.core.errors import InvalidCommand, TetherError
from tether.core.experiment import build_task, robot_spec
from tether.core.types import ActionChunk
from tether_ros import conversions as conv
from tether_ros import interface as itf
from tether_ros.runtime import experiment_from_params, run_node

TASK_TEXT = {"lift": "lift the cube", "reach": "reach the target"}
RECORDER_STATUS = "recorder_status"
INSTRUCTION = "instruction"  # std_msgs/String: the task sentence of the next episodes
END_GRACE_S = 5.0  # longest wait for an ended episode's last observations (a lagging recorder)
MAX_JUMP_NS = 1_000_000_000  # within an episode a stream never jumps ahead by more than this


def dataset_features(cfg: ExperimentConfig) -> dict[str, dict[str, Any]]:
    """LeRobot features for an experiment: state, environment state, action, one video per
    camera (names from the RobotSpec)."""
    spec = robot_spec(cfg)
    objects = build_task(cfg).objects
    env_names = [f"{o}.{c}" for o in objects for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
    feats: dict[str, dict[str, Any]] = {
        "observation.state": {
            "dtype": "float32",
            "shape": [len(spec.state_names)],
            "names": list(spec.state_names),
        },
        "action": {
            "dtype": "float32",
            "shape": [spec.action.dim],
            "names": list(spec.action.names),
        },
    }
    if env_names:
        feats["observation.environment_state"] = {
            "dtype": "float32",
            "shape": [len(env_names)],
            "names": env_names,
        }
    for cam in spec.cameras:
        feats[f"observation.images.{cam.name}"] = {
            "dtype": "video",
            "shape": [cam.height, cam.width, 3],
            "names": ["height", "width", "channels"],
        }
    return feats


class Recorder(Node):
    """ROS 2 shell around FrameSampler + LeRobotWriter."""

    def __init__(
        self, cfg: ExperimentConfig | None = None, output: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__("recorder", start_parameter_services=False, **kwargs)
        from tether.core.data.lerobot import LeRobotWriter
        from tether.core.data.sampler import FrameSampler

        self.cfg = cfg or experiment_from_params(self)
        out = output or self.declare_parameter("output", "").value
        if not out:
            raise TetherError("recorder: set the 'output' parameter to the dataset directory")
        self.fps = int(self.declare_parameter("fps", 30).value)
        self.task_text = str(
            self.declare_parameter(
                "task_text", TASK_TEXT.get(self.cfg.task.type, self.cfg.task.type)
            ).value
        )
        self.keep_failures = bool(self.declare_parameter("keep_failures", False).value)
        self.follow = bool(self.declare_parameter("follow_episodes", True).value)
        # also write each episode's raw topics to a rosbag2 MCAP bag in <output>/mcap/
        self.record_mcap = bool(self.declare_parameter("mcap", False).value)
        self.bag: Any = None
        self._bag_topics: dict[str, str] = {}
        self.spec = robot_spec(self.cfg)
        self.objects = tuple(build_task(self.cfg).objects)
        self.features = dataset_features(self.cfg)
        self.writer = LeRobotWriter(
            Path(out),
            self.fps,
            self.features,
            robot_type=self.spec.name,
            resume=(Path(out) / "meta/info.json").exists(),
        )
        keys = [
            "state",
            "action",
            *(f"obj/{o}" for o in self.objects),
            *(f"img/{c.name}" for c in self.spec.cameras),
        ]
        # cameras may run slower than the dataset; allow one camera period of age
        ages = {f"img/{c.name}": 1.5 / c.fps for c in self.spec.cameras}
        self.sampler = FrameSampler(tuple(keys), self.fps, ages)
        self.recording = False
        self.frames = 0
        # messages heard while idle: the first observation of an episode can arrive before
        # the episode's start event (different topics are not ordered), so it is replayed
        self._idle: deque[tuple[str, int, Any]] = deque(maxlen=256)
        self._armed: set[str] = set()
        self._last_state: int | None = None  # stamp of the episode's latest joint state
        self._last_stamp: dict[str, int] = {}  # latest accepted stamp per stream
        self._pending_save: tuple[int, float] | None = None  # (end stamp ns, wall deadline)
        self.create_timer(0.05, self._maybe_save)
        self._arm_until: int | None = None

        self.pub_status = self.create_publisher(String, RECORDER_STATUS, itf.EVENT_QOS)
        self.pub_ack = (
            self.create_publisher(Header, itf.RECORDER_ACK, itf.COMMAND_QOS)
            if self.cfg.ros.wait_for_recorder and self.cfg.ros.rate_mode == "lockstep"
            else None
        )
        self._subscribe(JointState, itf.JOINT_STATES, self._on_state, itf.SENSOR_QOS)
        self._subscribe(
            JointTrajectory, itf.JOINT_TRAJECTORY, self._on_action, itf.COMMAND_QOS, ack=False
        )
        for o in self.objects:
            self._subscribe(
                PoseStamped,
                itf.object_pose_topic(o),
                lambda m, o=o: self._push(
                    f"obj/{o}", conv.from_time(m.header.stamp), conv.pose_to_array(m)
                ),
                itf.SENSOR_QOS,
            )
        for c in self.spec.cameras:
            self._subscribe(
                Image,
                itf.image_topic(c.name),
                lambda m, c=c.name: self._on_image(c, m),
                itf.SENSOR_QOS,
            )
        if self.follow:
            self.create_subscription(String, itf.EPISODE_STATUS, self._on_episode, itf.EVENT_QOS)
        self.create_subscription(String, INSTRUCTION, self._on_instruction, itf.EVENT_QOS)
        self.create_service(Trigger, "~/start_episode", self._srv(lambda: self.start_episode()))
        self.create_service(Trigger, "~/stop_episode", self._srv(self.save_episode))
        self.create_service(Trigger, "~/discard_episode", self._srv(self.discard_episode))
        self.get_logger().info(f"recording {list(self.features)} at {self.fps} fps to {out}")

    # --- streams ---------------------------------------------------------------------
    def _subscribe(self, cls: Any, topic: str, handler: Any, qos: Any, ack: bool = True) -> None:
        """Subscribe raw: the wire bytes go to the MCAP bag as they are (re-serializing an
        rclpy message can append stray bytes that strict CDR readers reject), then the
        message is decoded once for the dataset. ``ack``: acknowledge each message on
        recorder_ack once handled (the sim bridge's streams, with ros.wait_for_recorder)."""
        from tether.core.data.mcap_bag import type_string

        full_name = self.resolve_topic_name(topic)  # bags hold absolute names
        self._bag_topics[full_name] = type_string(cls)

        pub_ack = self.pub_ack if ack else None

        def on_raw(data: bytes) -> None:
            if self.bag is not None and self.recording:
                self.bag.write(full_name, data, self.get_clock().now().nanoseconds)
            msg = deserialize_message(data, cls)
            handler(msg)
            if pub_ack is not None:  # taken in (and any frame it completed, written)
                pub_ack.publish(Header(stamp=msg.header.stamp, frame_id=topic))

        self.create_subscription(cls, topic, on_raw, qos, event_callbacks=itf.FAST_SUB, raw=True)

    def _push(self, key: str, stamp: int, value: Any) -> None:
        if self.recording and key not in self._armed:
            # a message of the previous episode can still arrive after this one started
            # (topics are not ordered); a stream joins once it shows the new episode's clock
            if self._arm_until is not None and stamp > self._arm_until:
                return
            self._armed.add(key)
        if not self.recording:
            if any(k == key and t > stamp for k, t, _ in self._idle):
                # this stream's clock went back: its newer messages are the last episode's.
                # Only this stream's: the new episode's messages already heard on other
                # streams (an image of t=0 before the late action of the last episode's
                # end) must stay to be replayed at the start
                kept = [m for m in self._idle if m[0] != key or m[1] <= stamp]
                self._idle = deque(kept, maxlen=self._idle.maxlen)
            self._idle.append((key, stamp, value))
            return
        last = self._last_stamp.get(key)
        if last is not None and stamp - last > MAX_JUMP_NS:
            return  # far ahead of this stream's clock: a late message of the last episode
        self._last_stamp[key] = stamp
        if key == "state":
            self._last_state = stamp
        for frame in self.sampler.push(key, stamp, value):
            self._add(frame)
        if key == "state" and self._pending_save is not None:
            self._maybe_save()

    def _on_state(self, msg: JointState) -> None:
        try:
            state = conv.joint_state_to_array(msg, self.spec.state_names)
        except InvalidCommand:
            return
        self._push("state", conv.from_time(msg.header.stamp), state)

    def _on_action(self, msg: JointTrajectory) -> None:
        try:
            chunk = conv.trajectory_to_chunk(msg, self.spec)
        except InvalidCommand:
            return  # the sim bridge rejects it too: it is not what the robot did
        self._push("action", chunk.t0_ns, chunk)

    def _on_image(self, cam: str, msg: Image) -> None:
        try:
            img = conv.image_to_array(msg).copy()
        except InvalidCommand:
            return
        self._push(f"img/{cam}", conv.from_time(msg.header.stamp), img)

    def _add(self, frame: dict[str, Any]) -> None:
        chunk: ActionChunk = frame["action"]
        action = chunk.action_at(frame["stamp_ns"])
        row = {
            "observation.state": frame["state"],
            "action": chunk.actions[-1] if action is None else action,
        }
        if self.objects:
            row["observation.environment_state"] = np.concatenate(
                [frame[f"obj/{o}"] for o in self.objects]
            ).astype(np.float32)
        for c in self.spec.cameras:
            row[f"observation.images.{c.name}"] = frame[f"img/{c.name}"]
        self.writer.add_frame(row)
        self.frames += 1

    # --- episodes ----------------------------------------------------------------------
    def _on_instruction(self, msg: String) -> None:
        text = msg.data.strip()
        if text:
            self.task_text = text  # the task of the episodes that start from now on

    def _on_episode(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("event") == "start":
            self.start_episode(event.get("stamp_ns"))
        elif event.get("event") == "end" and self.recording:
            if event.get("success") or self.keep_failures:
                # the end event can overtake the episode's last observations (topics are
                # not ordered): save once the joint states reach the end, or after a grace
                end_ns = round(float(event.get("sim_time_s", 0.0)) * 1e9)
                self._pending_save = (end_ns, time.monotonic() + END_GRACE_S)
                self._maybe_save()
            else:
                self.discard_episode("the episode failed")

    def _maybe_save(self) -> None:
        if self._pending_save is None:
            return
        end_ns, deadline = self._pending_save
        caught_up = self._last_state is not None and self._last_state >= end_ns
        if caught_up or time.monotonic() > deadline:
            self._pending_save = None
            self.save_episode()

    def start_episode(self, start_ns: int | None = None) -> str:
        """Start an episode; messages already heard at or after ``start_ns`` are part of it."""
        if self._pending_save is not None:
            self._pending_save = None
            self.save_episode()  # the previous episode's end is certain now
        if self.recording:
            self.writer.discard_episode()
        self.sampler.reset()
        self.writer.start_episode(self.task_text)
        self.recording, self.frames = True, 0
        self._last_state = None
        self._last_stamp = {}
        # with a known start time, streams join at their first message within 0.5 s of it
        self._arm_until = None if start_ns is None else start_ns + 500_000_000
        self._armed = set(self.sampler.keys) if start_ns is None else set()
        if self.record_mcap:
            self._open_bag()
        early = [m for m in self._idle if start_ns is not None and m[1] >= start_ns]
        self._idle.clear()
        for key, stamp, value in early:
            self._push(key, stamp, value)
        return "recording"

    def save_episode(self) -> str:
        if not self.recording:
            return "not recording"
        if self._last_state is not None:
            for frame in self.sampler.flush(self._last_state):  # the episode's last frames
                self._add(frame)
        self.recording = False
        if self.frames == 0:
            self.writer.discard_episode()
            self._close_bag(keep=False)
            return self._status("discarded", reason="no frames")
        index = self.writer.save_episode()
        self._close_bag(keep=True)
        return self._status(
            "saved", episode=index, frames=self.frames, dropped=self.sampler.stats.dropped
        )

    def discard_episode(self, reason: str = "asked") -> str:
        if not self.recording:
            return "not recording"
        self.recording = False
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
        if self._pending_save is not None:  # an ended episode waiting for its last frames
            self._pending_save = None
            self.save_episode()
        if self.recording:
            self.writer.discard_episode()
            self._close_bag(keep=False)
            self.recording = False
        self.writer.finalize()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(Recorder, args))


if __name__ == "__main__":
    main()
