"""Keyboard teleop driven in a real terminal: a tmux pane runs the keyboard device's
logger, ``tmux send-keys`` types, and the JSON lines it wrote show what it read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _read(log: Path) -> list[dict]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [json.loads(x) for x in lines if x.endswith("}")]


def _wait(log: Path, pred, timeout_s: float = 5.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = _read(log)
        if pred(rows):
            return rows
        time.sleep(0.02)
    raise AssertionError(f"timed out; last rows: {_read(log)[-3:]}")


def test_keyboard_in_tmux(tmp_path):
    log = tmp_path / "keys.jsonl"
    sock = f"tether-teleop-{os.getpid()}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    cmd = f"{sys.executable} -m tether.hardware.teleop.keyboard --log {log} --hz 100 --duration 20"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "t", "-x", "100", "-y", "40", cmd], check=True
    )

    def keys(*k: str) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "t", *k], check=True)

    try:
        _wait(log, lambda r: len(r) > 3)  # the device is up and polling
        keys("w")  # not armed: no motion
        keys("m")
        rows = _wait(log, lambda r: r[-1]["deadman"])
        assert all(row["linear"] == [0.0, 0.0, 0.0] for row in rows)
        keys("w")
        rows = _wait(log, lambda r: any(row["linear"][0] > 0 for row in r))
        moving = [row for row in rows if row["linear"][0] > 0]
        assert all(row["deadman"] for row in moving)
        assert moving[0]["linear"][1:] == [0.0, 0.0]
        _wait(log, lambda r: r[-1]["linear"][0] == 0.0)  # stops after key_hold_s
        keys("Space", "n")
        rows = _wait(log, lambda r: any("start" in row["events"] for row in r))
        assert any(row["gripper_toggle"] for row in rows)
        keys("Escape")
        rows = _wait(log, lambda r: r[-1]["estop"])
        assert not rows[-1]["deadman"]
        keys("R")
        _wait(log, lambda r: not r[-1]["estop"])
        keys("C-c")  # Ctrl-C still interrupts in cbreak mode; the logger exits cleanly
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            alive = subprocess.run([*tmux, "has-session", "-t", "t"], capture_output=True)
            if alive.returncode != 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the keyboard logger did not exit on Ctrl-C")
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
