"""Killing the recorder node with SIGKILL never corrupts saved episodes.

The kill points come from the recorder's own progress, not from the wall clock: right after
an episode's ``saved`` status, in the middle of an episode (once the recorder has acked a
chosen amount of the episode's sim time on ``recorder_ack``), and between the episode's end
event and its save. Every saved episode stays loadable, the one in progress is dropped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import Header, String  # noqa: E402

from tether.core.data.lerobot import LeRobotReader, recover  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.recorder import RECORDER_STATUS  # noqa: E402

WAIT_S = 120.0  # the longest wait for one step of the recorder's progress


@dataclass
class Progress:
    """What the graph reports: the recorder's saved statuses, the sim bridge's episode events,
    and the sim time of the joint states the recorder acked in the episode in progress."""

    saved: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    # stamps (ns) of the acked joint states since the sim clock last restarted; the clock
    # restarts at each reset, and one topic from one publisher arrives in order, so a stamp
    # below the last one is the next episode's
    acked_ns: list[int] = field(default_factory=list)
    restarts: int = 0  # sim clock restarts seen in the acks (one per reset)
    saved_at: list[int] = field(default_factory=list)  # ``restarts`` at each save

    def on_status(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("event") == "saved":
            self.saved.append(event)
            self.saved_at.append(self.restarts)

    def on_episode(self, msg: String) -> None:
        self.episodes.append(json.loads(msg.data))

    def on_ack(self, msg: Header) -> None:
        if msg.frame_id != itf.JOINT_STATES:
            return
        t = msg.stamp.sec * 1_000_000_000 + msg.stamp.nanosec
        if self.acked_ns and t < self.acked_ns[-1]:
            self.acked_ns = []
            self.restarts += 1
        self.acked_ns.append(t)

    def recorded_s(self) -> float:
        """Sim time the recorder has taken in of the episode in progress, s."""
        return (self.acked_ns[-1] - self.acked_ns[0]) / 1e9 if self.acked_ns else 0.0

    def unsaved_successes(self) -> int:
        """Episodes that ended with success but whose save was not heard (yet)."""
        ends = sum(e.get("event") == "end" and bool(e.get("success")) for e in self.episodes)
        return ends - len(self.saved)


# Where each `tether record` run is killed, in the recorder's progress.
def after_saved(k: int) -> Callable[[Progress], bool]:
    return lambda p: len(p.saved) >= k


def mid_episode(after: int, seconds: float) -> Callable[[Progress], bool]:
    """``seconds`` into an episode that started after ``after`` saves (an episode of the lift
    expert is 2.9 s). The next episode's reset comes after the save (`tether record` waits
    for it), so its clock restart is seen after the saved status."""

    def when(p: Progress) -> bool:
        if len(p.saved) < after or (after and p.restarts <= p.saved_at[after - 1]):
            return False
        return p.recorded_s() >= seconds

    return when


def at_end_event(p: Progress) -> bool:
    """A successful episode just ended; the recorder is about to save it, or saving."""
    return p.unsaved_successes() > 0


KILLS = [
    ("right after the first save", after_saved(1)),
    ("1.0 s into an episode", mid_episode(0, 1.0)),
    ("at a successful end event", at_end_event),
    ("0.5 s into an episode after a save", mid_episode(1, 0.5)),
]


def _recorder_pid(root) -> int | None:
    out = subprocess.run(
        ["pgrep", "-f", f"tether_ros.recorder.*{root}"], capture_output=True, text=True
    ).stdout.split()
    return int(out[0]) if out else None


def _record_until(repo, root, kill_when: Callable[[Progress], bool]) -> tuple[int, int]:
    """Run `tether record`, SIGKILL its recorder the moment ``kill_when`` holds; returns the
    saves heard before the kill and the successful episodes whose save was not heard."""
    with ros_context() as ctx:
        node = rclpy.create_node("sigkill_watch", context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        p = Progress()
        subs = [
            node.create_subscription(String, RECORDER_STATUS, p.on_status, itf.EVENT_QOS),
            node.create_subscription(String, itf.EPISODE_STATUS, p.on_episode, itf.EVENT_QOS),
            node.create_subscription(Header, itf.RECORDER_ACK, p.on_ack, itf.COMMAND_QOS),
        ]
        # each run appends to the same dataset (the recorder resumes an existing one)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tether.cli.main",
                "record",
                str(repo / "configs/experiments/panda_lift_expert.yaml"),
                "--episodes",
                "50",
                "--out",
                str(root),
                "ros.rate_mode=lockstep",
                "ros.wait_for_recorder=true",  # the recorder acks what it took in
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        try:
            # matched to every publisher (events are transient local: the ones sent before
            # come now), and the recorder is taking in the sim's states
            up = spin_until(
                ex,
                lambda: all(s.get_publisher_count() >= 1 for s in subs) and bool(p.acked_ns),
                WAIT_S,
            )
            assert up, f"matched {[s.get_publisher_count() for s in subs]}, {len(p.acked_ns)} acks"
            pid = _recorder_pid(root)
            assert pid is not None, "no recorder process"
            reached = spin_until(ex, lambda: kill_when(p) or proc.poll() is not None, WAIT_S)
            assert reached and proc.poll() is None, f"no kill point; exit {proc.poll()}"
            os.kill(pid, signal.SIGKILL)
            heard, pending = len(p.saved), p.unsaved_successes()
            proc.wait(timeout=60)  # `tether record` notices the dead node and stops
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            node.destroy_node()
    return heard, pending


def _assert_loadable(root) -> int:
    r = LeRobotReader(root)
    for ep in range(r.num_episodes):
        data = r.episode(ep)
        n = len(data["frame_index"])
        assert n > 30 and np.isfinite(data["observation.state"]).all()
        assert data["observation.images.front"].shape == (n, 96, 96, 3)
    return r.num_episodes


def test_sigkill_of_the_recorder_leaves_saved_episodes_loadable(repo, tmp_path):
    root = tmp_path / "ds"
    total = 0
    for what, kill_when in KILLS:
        heard, pending = _record_until(repo, root, kill_when)
        n = _assert_loadable(root)
        # the saves heard are on disk; the episode in progress is not. Killed between an
        # episode's successful end and its saved status, the recorder may or may not have
        # finished that save (or its status was still in flight): either is fine, as long as
        # what is there loads
        allowed = set(range(total + heard, total + heard + max(pending, 0) + 1))
        assert n in allowed, f"killed {what}: {n} episodes, expected {sorted(allowed)}"
        recover(root)  # what a new recorder does before appending
        total = LeRobotReader(root).num_episodes
        assert total == n  # recover keeps every loadable episode
    assert total >= 2
