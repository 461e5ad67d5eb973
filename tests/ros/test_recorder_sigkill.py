"""Killing the recorder node with SIGKILL at random moments never corrupts saved episodes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

from tether.core.data.lerobot import LeRobotReader, recover  # noqa: E402


def _recorder_pid(root) -> int | None:
    out = subprocess.run(
        ["pgrep", "-f", f"tether_ros.recorder.*{root}"], capture_output=True, text=True
    ).stdout.split()
    return int(out[0]) if out else None


def test_sigkill_of_the_recorder_leaves_saved_episodes_loadable(repo, tmp_path):
    rng = random.Random(7)
    root = tmp_path / "ds"
    saved_before = 0
    for _ in range(4):
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
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        try:
            deadline = time.monotonic() + 60
            while _recorder_pid(root) is None and time.monotonic() < deadline:
                time.sleep(0.1)
            pid = _recorder_pid(root)
            assert pid is not None, "the recorder never started"
            time.sleep(rng.uniform(6.0, 14.0))  # mid-episode or mid-save, at random
            os.kill(pid, signal.SIGKILL)
            proc.wait(timeout=60)  # `tether record` notices the dead node and stops
        finally:
            if proc.poll() is None:
                proc.kill()
        r = LeRobotReader(root)
        assert r.num_episodes >= saved_before  # nothing saved earlier was lost
        for ep in range(r.num_episodes):
            data = r.episode(ep)
            n = len(data["frame_index"])
            assert n > 30 and np.isfinite(data["observation.state"]).all()
            assert data["observation.images.front"].shape == (n, 96, 96, 3)
        recover(root)  # what a new recorder does before appending
        saved_before = LeRobotReader(root).num_episodes
    assert saved_before >= 2
