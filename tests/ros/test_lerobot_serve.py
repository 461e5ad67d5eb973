"""policy.type lerobot over ROS 2: a LeRobot worker's chunks go through the policy server,
the chunk executor and the safety filter to the simulated Panda. The worker here is the
stand-in (tests/policies/lerobot_standin.py, LeRobot's protocol without LeRobot);
tests/policies/test_lerobot_real.py serves a real lerobot-train checkpoint the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "policies"))


def test_a_lerobot_workers_chunks_drive_the_panda_through_the_safety_filter(tmp_path: Path):
    """The stand-in holds the arm but commands joint 1 to 10 rad (its limit is 2.9): the
    chunks flow, and the safety filters (the chunk executor's clamps to the joint limits,
    the bridge's limits the speed) stand between every one of them and the arm."""
    pytest.importorskip("mujoco")
    from lerobot_helpers import (
        lerobot_experiment,
        serve_one_episode,
        standin_checkpoint,
        standin_python,
    )

    ckpt = standin_checkpoint(tmp_path / "ckpt", mode="hold", push={"0": 10.0})
    exp = lerobot_experiment(tmp_path, ckpt, standin_python(tmp_path / "env"))
    # 4 s: on a loaded machine (the suite's workers) the first chunks can take a second
    # (the full suite once saw no chunk within the executor's report of a 2 s episode)
    ep = serve_one_episode(exp, tmp_path, seconds=4.0)
    executor = ep["chunk_executor"]
    assert executor["chunks"] >= 5 and executor["executed"] >= 50, executor
    # the executor's filter: every row asked for joint 1 beyond its limit, each was clamped
    rows = executor["safety"]
    assert rows["accepted"] >= 50 and rows["clamped"] >= rows["accepted"] - 2, rows
    # the bridge's filter saw the executor's commands at the control rate
    assert ep["safety"]["accepted"] >= 100, ep["safety"]
