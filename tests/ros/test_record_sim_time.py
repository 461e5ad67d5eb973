"""`tether record` with the scripted expert steps in sim time: a slow machine records the same
episodes as a fast one.

The same seeds are recorded twice: without cameras on an idle machine, then with two cameras
(160x120 and 96x96) while busy loops load every core. Sim time is the dataset's reference,
so the kept episodes, their lengths and their states and actions must be identical (the
realtime recorder kept 5 of 11 episodes with cameras on a busy 2-core machine: the expert's
answers came late and it missed the time limit).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytest.importorskip("pyarrow")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

from tether.core.data.lerobot import LeRobotReader  # noqa: E402

EPISODES = 3
CAMERAS = (
    "sim.cameras=[{name: front, width: 160, height: 120, fps: 30}, "
    "{name: wrist, width: 96, height: 96, fps: 30}]"
)
# a busy loop at normal priority (whatever this process's policy is: never real-time)
HOG = (
    "import os\n"
    "if hasattr(os, 'sched_setscheduler'):\n"
    "    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))\n"
    "while True:\n    pass\n"
)


def _record(repo, out, cameras: str) -> list[tuple[int, int]]:
    """Record EPISODES successes; (seed, frames) of each saved episode, in order."""
    cmd = [
        sys.executable,
        "-m",
        "tether.cli.main",
        "record",
        str(repo / "configs/experiments/panda_lift_expert.yaml"),
        "--episodes",
        str(EPISODES),
        "--out",
        str(out),
        cameras,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stepping in sim time" in r.stdout, r.stdout
    saved = re.findall(r"episode seed (\d+): saved \((\d+) frames, 0 dropped\)", r.stdout)
    assert len(saved) == EPISODES, r.stdout
    return [(int(seed), int(frames)) for seed, frames in saved]


def test_record_is_the_same_with_cameras_on_a_busy_machine(repo, tmp_path):
    plain = _record(repo, tmp_path / "plain", "sim.cameras=[]")
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(max(2, os.cpu_count() or 2))
    ]
    try:
        busy = _record(repo, tmp_path / "busy", CAMERAS)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy == plain  # the same seeds kept, the same number of frames each
    a, b = LeRobotReader(tmp_path / "plain"), LeRobotReader(tmp_path / "busy")
    lengths = [frames for _, frames in plain]
    assert [e["length"] for e in a.episodes] == [e["length"] for e in b.episodes] == lengths
    for ep in range(EPISODES):
        da, db = a.episode(ep), b.episode(ep)
        for key in ("observation.state", "observation.environment_state", "action"):
            np.testing.assert_array_equal(da[key], db[key], err_msg=f"episode {ep} {key}")
        assert len(db["observation.images.front"]) == plain[ep][1]
