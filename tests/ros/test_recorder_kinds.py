"""The recorder works for every robot kind: a mobile base and a drone, recorded over ROS 2
from their scripted experts, give LeRobot v3 datasets whose features are the spec's, whose
length is the episode's sim time x fps, and whose actions are what the expert commanded.
(The arm: test_recorder.py, test_record_sim_time.py.)"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.data.lerobot import LeRobotReader  # noqa: E402
from tether.core.experiment import robot_spec  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.recorder import RECORDER_STATUS, Recorder  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

FPS = 30
# a recorder driven by its own services only, not by the bridge's episode_status
BY_HAND = [Parameter("follow_episodes", value=False)]


@dataclass(frozen=True)
class Kind:
    """One robot kind's case: its experiment, the topic its expert commands on, and how to
    read the command in force at a time from one message."""

    config: str
    overrides: tuple[str, ...]
    command_topic: str
    command_type: Any
    # message -> (stamp ns, value at time t)
    command: Callable[[Any, Any], tuple[int, Callable[[int], np.ndarray]]]
    extra: str  # the kind's extra feature


def _chunk(msg: JointTrajectory, spec: Any) -> tuple[int, Callable[[int], np.ndarray]]:
    c = conv.trajectory_to_chunk(msg, spec)
    return c.t0_ns, lambda t: c.actions[-1] if c.action_at(t) is None else c.action_at(t)


def _low_level(msg: JointState, _spec: Any) -> tuple[int, Callable[[int], np.ndarray]]:
    _, values, stamp = conv.low_level_to_command(msg)
    return stamp, lambda _t: values.astype(np.float32)


KINDS = {
    "mobile_base": Kind(
        "husky_go_to_goal.yaml",
        # short drives, so an episode takes seconds
        ("task.distance_range=[1.0, 1.5]",),
        itf.JOINT_TRAJECTORY,
        JointTrajectory,
        _chunk,
        "observation.scan",
    ),
    "quadcopter": Kind(
        "quad_pid_hover.yaml",
        ("task.success_window_s=1.0", "task.max_duration_s=4.0"),
        itf.CMD_LOW_LEVEL,
        JointState,
        _low_level,
        "observation.imu",
    ),
}


class _Commands:
    """The commands the probe heard, split into episodes where the sim clock went back."""

    def __init__(self) -> None:
        self.episodes: list[dict[int, Callable[[int], np.ndarray]]] = [{}]
        self.last = -1

    def add(self, stamp: int, value_at: Callable[[int], np.ndarray]) -> None:
        if stamp < self.last:
            self.episodes.append({})
        self.last = stamp
        self.episodes[-1][stamp] = value_at

    def at(self, ep: int, t: int) -> np.ndarray:
        """The command in force at time t of episode ep (latest stamp <= t)."""
        stamps = [s for s in self.episodes[ep] if s <= t]
        assert stamps, (ep, t, sorted(self.episodes[ep])[:5])
        return self.episodes[ep][max(stamps)](t)


def _check_features(r: LeRobotReader, spec: Any, extra: str) -> None:
    feats = r.info["features"]
    assert feats["observation.state"]["names"] == list(spec.state_names)
    assert feats["observation.state"]["shape"] == [len(spec.state_names)]
    assert feats["action"]["names"] == list(spec.action.names)
    assert feats["action"]["shape"] == [spec.action.dim]
    assert extra in feats and "observation.environment_state" in feats
    assert r.info["robot_type"] == spec.name and r.info["fps"] == FPS


@pytest.mark.parametrize("kind", list(KINDS))
def test_recorded_actions_are_what_the_expert_commanded(repo, tmp_path, kind):
    case = KINDS[kind]
    cfg = load_config(
        repo / "configs/experiments" / case.config,
        [
            *case.overrides,
            "sim.cameras=[]",
            "ros.rate_mode=lockstep",
            "episodes.autostart=false",
            "episodes.auto_reset=true",
        ],
    )
    spec = robot_spec(cfg)
    assert spec.kind == kind
    root = tmp_path / "ds"
    commands = _Commands()
    ends: list[dict] = []
    status: list[dict] = []
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(root), context=ctx)
        nodes = [rec, SimBridge(cfg, context=ctx), PolicyServer(cfg, context=ctx)]
        probe = Node("probe", context=ctx)
        probe.create_subscription(
            String, RECORDER_STATUS, lambda m: status.append(json.loads(m.data)), itf.EVENT_QOS
        )
        probe.create_subscription(
            String,
            itf.EPISODE_STATUS,
            lambda m: ends.append(json.loads(m.data)) if '"end"' in m.data else None,
            itf.EVENT_QOS,
        )
        probe.create_subscription(
            case.command_type,
            case.command_topic,
            lambda m: commands.add(*case.command(m, spec)),
            itf.COMMAND_QOS,
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (*nodes, probe):
            ex.add_node(n)
        # start once the probe hears the commands, so it misses nothing of episode 0
        assert spin_until(ex, lambda: probe.count_publishers(case.command_topic) >= 1)
        start = probe.create_client(Trigger, "sim_bridge/start_episode")
        assert spin_until(ex, start.service_is_ready)
        future = start.call_async(Trigger.Request())
        assert spin_until(ex, future.done)
        assert spin_until(ex, lambda: sum(s["event"] == "saved" for s in status) >= 2, 240)
        rec.close()
        for n in (*nodes, probe):
            n.destroy_node()

    r = LeRobotReader(root)
    _check_features(r, spec, case.extra)
    saved = [s for s in status if s["event"] in ("saved", "discarded")]
    assert r.num_episodes >= 2
    for ep in range(2):
        # the i-th saved episode is the i-th successful end (failures are discarded)
        end = [e for e in ends if e["success"]][ep]
        data = r.episode(ep)
        n = len(data["frame_index"])
        assert abs(n - end["sim_time_s"] * FPS) <= 2, (n, end, saved)
        np.testing.assert_allclose(data["timestamp"], np.arange(n) / FPS, atol=1e-6)
        assert np.isfinite(data["observation.state"]).all()
        ep_index = [i for i, e in enumerate(ends) if e["success"]][ep]
        for i in range(n):
            t = round(i * 1e9 / FPS)
            want = commands.at(ep_index, t)
            np.testing.assert_allclose(
                data["action"][i], want, rtol=1e-6, atol=1e-6, err_msg=f"episode {ep} frame {i}"
            )
    # the expert did something: the commands change over an episode
    assert np.ptp(r.episode(0)["action"], axis=0).max() > 0


@pytest.mark.parametrize("kind", list(KINDS))
def test_tether_record_scripted_writes_a_dataset(repo, tmp_path, kind):
    case = KINDS[kind]
    out = tmp_path / "ds"
    cmd = [
        sys.executable,
        "-m",
        "tether.cli.main",
        "record",
        str(repo / "configs/experiments" / case.config),
        "--teleop",
        "scripted",
        "--episodes",
        "2",
        "--out",
        str(out),
        "--fps",
        str(FPS),
        *case.overrides,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 saved" in r.stdout, r.stdout
    saved = re.findall(r"saved \((\d+) frames, (\d+) dropped\) in ([\d.]+) s of sim time", r.stdout)
    assert len(saved) == 2, r.stdout
    reader = LeRobotReader(out)
    assert reader.num_episodes == 2
    spec = robot_spec(load_config(repo / "configs/experiments" / case.config))
    _check_features(reader, spec, case.extra)
    for ep, (frames, _dropped, sim_s) in enumerate(saved):
        assert reader.episodes[ep]["length"] == int(frames)
        # whole episodes: a frame at 0, 1/fps, ... up to the end (the recorder heard the
        # robot and the expert before the first episode started: its first frame is there)
        assert int(frames) == math.floor(float(sim_s) * FPS + 1e-6) + 1, r.stdout
    data = reader.episode(0)
    for cam in spec.cameras:  # the camera's frames were written with the rest
        assert len(data[f"observation.images.{cam.name}"]) == len(data["frame_index"])


def test_a_drone_flight_recorded_by_hand_holds_the_commanded_rotor_speeds(repo, tmp_path):
    """The recorder's own ~/start_episode and ~/stop_episode on the drone bridge's topics (not
    following the bridge's episodes): the hover PID's rotor commands are the dataset's
    actions, frame for frame."""
    case = KINDS["quadcopter"]
    cfg = load_config(
        repo / "configs/experiments" / case.config,
        ["sim.cameras=[]", "ros.rate_mode=lockstep"],
    )
    spec = robot_spec(cfg)
    commands = _Commands()
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(tmp_path / "ds"), context=ctx, parameter_overrides=BY_HAND)
        nodes = [rec, SimBridge(cfg, context=ctx), PolicyServer(cfg, context=ctx)]
        probe = Node("probe", context=ctx)
        probe.create_subscription(
            case.command_type,
            case.command_topic,
            lambda m: commands.add(*case.command(m, spec)),
            itf.COMMAND_QOS,
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (*nodes, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: len(commands.episodes[0]) > 10, 30)
        start = rec.aligner.clock_ns
        assert start is not None
        rec.start_episode(start)  # messages from this stamp on
        assert spin_until(ex, lambda: rec.aligner.clock_ns >= start + 2_000_000_000, 60)
        status = json.loads(rec.save_episode())
        rec.close()
        for n in (*nodes, probe):
            n.destroy_node()
    assert status["event"] == "saved" and status["dropped"] == 0, status
    r = LeRobotReader(tmp_path / "ds")
    _check_features(r, spec, case.extra)
    data = r.episode(0)
    n = len(data["frame_index"])
    assert abs(n - 2.0 * FPS) <= 2, n
    k0 = -(-start * FPS // 1_000_000_000)  # the first frame: the first grid point >= start
    for i in range(n):
        t = round((k0 + i) * 1e9 / FPS)
        np.testing.assert_allclose(data["action"][i], commands.at(0, t), err_msg=f"frame {i}")
    assert np.ptp(data["action"], axis=0).max() > 0  # the PID works the rotors
    # the state is the drone's odometry: it flies toward the target (0, 0, 1)
    assert np.isfinite(data["observation.state"]).all()
    np.testing.assert_allclose(data["observation.environment_state"][:, :3], [[0, 0, 1]] * n)


def test_two_drones_are_recorded_side_by_side(repo, tmp_path):
    """A two-drone world (cf0, cf1, one policy server each): the dataset's state and action
    are the drones' in order, each drone's columns its own policy's commands."""
    path = repo / "configs/experiments/quad_pid_figure_eight.yaml"
    base = ["sim.cameras=[]", "ros.rate_mode=lockstep"]
    cfg = load_config(path, base)
    one = load_config(path, [*base, "sim.quadrotor.num_drones=1"])  # what each server sees
    spec = robot_spec(cfg)
    commands = {d: _Commands() for d in ("cf0", "cf1")}
    with ros_context() as ctx:
        rec = Recorder(cfg, output=str(tmp_path / "ds"), context=ctx, parameter_overrides=BY_HAND)
        servers = [PolicyServer(one, namespace=d, context=ctx) for d in commands]
        nodes = [rec, SimBridge(cfg, context=ctx), *servers]
        probe = Node("probe", context=ctx)
        for d, c in commands.items():
            probe.create_subscription(
                JointState,
                f"{d}/{itf.CMD_LOW_LEVEL}",
                lambda m, c=c: c.add(*_low_level(m, spec)),
                itf.COMMAND_QOS,
            )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (*nodes, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: all(len(c.episodes[0]) > 10 for c in commands.values()), 30)
        start = rec.aligner.clock_ns
        assert start is not None
        rec.start_episode(start)
        assert spin_until(ex, lambda: rec.aligner.clock_ns >= start + 1_000_000_000, 60)
        status = json.loads(rec.save_episode())
        rec.close()
        for n in (*nodes, probe):
            n.destroy_node()
    assert status["event"] == "saved" and status["dropped"] == 0, status
    r = LeRobotReader(tmp_path / "ds")
    _check_features(r, spec, "observation.imu")
    assert r.info["features"]["observation.imu"]["shape"] == [12]
    data = r.episode(0)
    k0 = -(-start * FPS // 1_000_000_000)
    for i in range(len(data["frame_index"])):
        t = round((k0 + i) * 1e9 / FPS)
        for j, c in enumerate(commands.values()):
            np.testing.assert_allclose(
                data["action"][i, 4 * j : 4 * j + 4], c.at(0, t), err_msg=f"frame {i} drone {j}"
            )
    # each drone flies its own figure eight: the references differ
    env = data["observation.environment_state"]
    assert np.abs(env[:, 0:3] - env[:, 7:10]).max() > 0.1
