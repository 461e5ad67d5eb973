"""`tether record --teleop keyboard` driven in a real terminal: tmux runs the command,
``tmux send-keys`` is the operator. Keeps, drops and keeps an episode; the dataset holds
the two kept ones, and the hand moved the way the keys said."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [
    pytest.mark.ros,
    pytest.mark.mujoco,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

from tether.core.data.lerobot import LeRobotReader  # noqa: E402
from tether.sim.robots import panda_kinematics as kin  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ENV_KEYS = ("ROS_DOMAIN_ID", "RMW_IMPLEMENTATION", "FASTDDS_DEFAULT_PROFILES_FILE", "MUJOCO_GL")


def test_record_by_keyboard_in_tmux(tmp_path):
    out = tmp_path / "ds"
    log = tmp_path / "record.log"
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ENV_KEYS if k in os.environ)
    cmd = (
        f"cd {REPO} && env {env} {sys.executable} -m tether.cli.main record "
        "configs/experiments/panda_lift_expert.yaml --teleop keyboard --episodes 2 "
        f"--out {out} 2>&1 | tee {log}; echo EXIT=${{PIPESTATUS[0]}} >> {log}; sleep 60"
    )
    tmux = ["tmux", "-L", f"tether-rec-{os.getpid()}", "-f", "/dev/null"]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "160", "-y", "50", "bash", "-c", cmd],
        check=True,
    )

    def keys(*k: str, repeat: int = 1, gap: float = 0.0) -> None:
        for _ in range(repeat):
            subprocess.run([*tmux, "send-keys", "-t", "t", *k], check=True)
            time.sleep(gap)

    def wait_for(text: str, count: int = 1, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            body = log.read_text() if log.exists() else ""
            if body.count(text) >= count:
                return body
            if "EXIT=" in body:
                raise AssertionError(f"tether record exited early:\n{body[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} after {timeout_s} s:\n{log.read_text()[-3000:]}")

    try:
        wait_for("ready: arm with the dead-man")
        keys("m")
        keys("n")
        wait_for("episode start: queued")
        time.sleep(1.0)
        keys("w", repeat=15, gap=0.12)  # forward (+x)
        keys("y")  # keep
        wait_for("1/2 saved")
        keys("n")
        wait_for("episode start: queued", 2)
        time.sleep(1.0)
        keys("f")  # the operator's verdict: failed, not kept
        wait_for("discarded")
        keys("n")
        wait_for("episode start: queued", 3)
        time.sleep(1.0)
        keys("q", repeat=15, gap=0.12)  # up (+z)
        keys("y")
        body = wait_for("EXIT=", timeout_s=60.0)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)

    assert "EXIT=0" in body, body[-3000:]
    assert "2/2 saved" in body and "episode 3: saved" in body

    ds = LeRobotReader(out)
    assert ds.num_episodes == 2
    moved = []
    for i in range(2):
        state = ds.episode(i, decode_video=False)["observation.state"]
        p0, _ = kin.fk(state[0, :7].astype(np.float64))
        p1, _ = kin.fk(state[-1, :7].astype(np.float64))
        moved.append(p1 - p0)
    # the keys drove the hand: forward in the first kept episode, up in the second
    assert moved[0][0] > 0.03 and abs(moved[0][2]) < moved[0][0]
    assert moved[1][2] > 0.03 and abs(moved[1][0]) < moved[1][2]
