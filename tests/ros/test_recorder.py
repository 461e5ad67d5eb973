"""Record scripted episodes over ROS 2 and check the dataset against what was published."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.data.lerobot import LeRobotReader  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.recorder import INSTRUCTION, RECORDER_STATUS, Recorder  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402


class _Stream:
    """What the probe heard on one topic, split into episodes where the sim clock went back."""

    def __init__(self) -> None:
        self.episodes: list[dict[int, object]] = [{}]
        self.last = -1

    def add(self, stamp: int, value: object) -> None:
        if stamp < self.last:
            self.episodes.append({})
        self.last = stamp
        self.episodes[-1].setdefault(stamp, value)

    def at(self, ep: int, t: int):
        """The value in force at time t of episode ep (latest stamp <= t)."""
        stamps = [s for s in self.episodes[ep] if s <= t]
        assert stamps, (ep, t, sorted(self.episodes[ep])[:5], len(self.episodes))
        return self.episodes[ep][max(stamps)]


def test_recorded_frames_match_what_was_published(repo, tmp_path):
    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        ["ros.rate_mode=lockstep", "episodes.autostart=false", "episodes.auto_reset=true"],
    )
    root = tmp_path / "ds"
    streams = {"state": _Stream(), "image": _Stream(), "action": _Stream()}
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(root), context=ctx)
        nodes = [rec, SimBridge(cfg, context=ctx), PolicyServer(cfg, context=ctx)]
        probe = Node("probe", context=ctx)
        status: list[dict] = []
        probe.create_subscription(
            String, RECORDER_STATUS, lambda m: status.append(json.loads(m.data)), itf.EVENT_QOS
        )
        probe.create_subscription(
            JointState,
            itf.JOINT_STATES,
            lambda m: streams["state"].add(
                conv.from_time(m.header.stamp), np.array(m.position, np.float32)
            ),
            itf.SENSOR_QOS,
        )
        probe.create_subscription(
            Image,
            itf.image_topic("front"),
            lambda m: streams["image"].add(
                conv.from_time(m.header.stamp), conv.image_to_array(m).copy()
            ),
            itf.SENSOR_QOS,
        )
        probe.create_subscription(
            JointTrajectory,
            itf.JOINT_TRAJECTORY,
            lambda m: streams["action"].add(
                conv.from_time(m.header.stamp), conv.trajectory_to_chunk(m, rec.spec)
            ),
            itf.COMMAND_QOS,
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (*nodes, probe):
            ex.add_node(n)
        # start only once the probe hears every topic, so it misses nothing of episode 0
        topics = (itf.JOINT_STATES, itf.image_topic("front"), itf.JOINT_TRAJECTORY)
        assert spin_until(ex, lambda: all(probe.count_publishers(t) >= 1 for t in topics))
        start = probe.create_client(Trigger, "sim_bridge/start_episode")
        assert spin_until(ex, start.service_is_ready)
        future = start.call_async(Trigger.Request())
        assert spin_until(ex, future.done)
        assert spin_until(ex, lambda: sum(s["event"] == "saved" for s in status) >= 2, 120)
        rec.close()
        for n in (*nodes, probe):
            n.destroy_node()

    r = LeRobotReader(root)
    assert r.num_episodes >= 2 and r.tasks == ["lift the cube"]
    for ep in range(2):
        data = r.episode(ep)
        n = len(data["frame_index"])
        assert 70 <= n <= 100  # a ~2.8 s lift at 30 fps
        np.testing.assert_allclose(data["timestamp"], np.arange(n) / 30.0, atol=1e-6)
        stamps = [round(i * 1e9 / 30) for i in range(n)]
        for i in (0, n // 2, n - 1):
            t = stamps[i]
            # the frame's state is the joint state published at (or just before) its time
            np.testing.assert_array_equal(data["observation.state"][i], streams["state"].at(ep, t))
            # the action is the command in force at that time
            chunk = streams["action"].at(ep, t)
            want = chunk.action_at(t)
            np.testing.assert_allclose(
                data["action"][i], chunk.actions[-1] if want is None else want, atol=1e-6
            )
            if i == 0:
                continue  # the image at t=0 went out before the probe was connected
            # the decoded video frame is the published image (lossy AV1: small mean error)
            img = streams["image"].at(ep, t).astype(float)
            err = np.abs(data["observation.images.front"][i].astype(float) - img).mean()
            assert err < 8.0, err
        # the cube (environment state) ends up lifted in a saved episode
        z = data["observation.environment_state"][:, 2]
        assert z[-1] - z[0] > 0.05


def test_record_cli_and_dataset_info(repo, tmp_path):
    out = tmp_path / "cli_ds"
    cmd = [
        sys.executable,
        "-m",
        "tether.cli.main",
        "record",
        str(repo / "configs/experiments/panda_lift_expert.yaml"),
        "--episodes",
        "2",
        "--out",
        str(out),
        "--mcap",
        "--task",
        "lift the red cube",
        "ros.rate_mode=lockstep",
        "sim.cameras=[]",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 saved" in r.stdout
    info = subprocess.run(
        [sys.executable, "-m", "tether.cli.main", "dataset", "info", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert info.returncode == 0, info.stderr
    assert "episodes 2" in info.stdout and "observation.state" in info.stdout
    assert LeRobotReader(out).num_episodes == 2
    assert LeRobotReader(out).tasks == ["lift the red cube"]
    # each saved episode has its raw topics in a rosbag2 MCAP bag that rosbags can read
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    bags = sorted((out / "mcap").iterdir())
    assert [b.name for b in bags] == ["episode_000000", "episode_000001"]
    with Reader(bags[0]) as bag:
        counts = {c.topic: c.msgcount for c in bag.connections}
        assert counts["/joint_states"] > 100 and counts["/joint_trajectory"] > 100
        conn = next(c for c in bag.connections if c.topic == "/joint_states")
        _, _, raw = next(bag.messages(connections=[conn]))
        msg = store.deserialize_cdr(raw, conn.msgtype)
        assert list(msg.name)[:2] == ["panda_joint1", "panda_joint2"]


def test_instruction_sets_the_task_of_the_next_episodes(repo, tmp_path):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml")
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(tmp_path / "ds"), context=ctx)
        probe = Node("probe", context=ctx)
        pub = probe.create_publisher(String, INSTRUCTION, itf.EVENT_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (rec, probe):
            ex.add_node(n)
        assert rec.task_text == "lift the cube"
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1)
        pub.publish(String(data="lift the cube and hold it high"))
        assert spin_until(ex, lambda: rec.task_text == "lift the cube and hold it high")
        rec.start_episode()
        assert rec.writer._task == "lift the cube and hold it high"
        pub.publish(String(data="  "))  # blank: ignored
        ex.spin_once(timeout_sec=0.2)
        assert rec.task_text == "lift the cube and hold it high"
        rec.close()
        for n in (rec, probe):
            n.destroy_node()


def test_an_episode_without_frames_names_the_streams_it_never_heard(repo, tmp_path):
    """No policy runs, so no command is ever heard: the recorder's episode has no frames,
    and the discard says which stream held them back (the operator's first clue)."""
    from rclpy.parameter import Parameter

    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        ["sim.cameras=[]", "ros.rate_mode=realtime", "episodes.autostart=true"],
    )
    status: list[dict] = []
    with ros_context() as ctx:
        by_hand = [Parameter("follow_episodes", value=False)]
        rec = Recorder(cfg, output=str(tmp_path / "ds"), context=ctx, parameter_overrides=by_hand)
        bridge = SimBridge(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        probe.create_subscription(
            String, RECORDER_STATUS, lambda m: status.append(json.loads(m.data)), itf.EVENT_QOS
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (rec, bridge, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: bridge.io.runner.steps > 10, 30)
        assert rec.start_episode() == "recording"
        spin_until(ex, lambda: False, 0.5)
        rec.save_episode()
        assert spin_until(ex, lambda: any(s["event"] == "discarded" for s in status), 10)
        rec.close()
        for n in (rec, bridge, probe):
            n.destroy_node()
    discarded = next(s for s in status if s["event"] == "discarded")
    assert discarded["reason"] == "no frames; nothing of this episode heard on action", status
