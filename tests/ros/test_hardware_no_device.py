"""`mock: false` with no device attached: the hardware bridge exits non-zero within a few
seconds with one clear sentence (no traceback), for every hardware type."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from tether_ros.graph import NodeSpec, ros_args  # noqa: E402

CASES = {
    "jtc_arm": ("panda_lift_mock", [], "no arm driver answered: nothing on /driver/joint_states"),
    "twist_base": ("husky_go_to_goal_mock", [], "no base driver answered: nothing on /driver/odom"),
    "mavlink": (
        "quad_mavlink_mock",
        ["hardware.device.url=udpin:127.0.0.1:0"],
        "no MAVLink autopilot answered on 'udpin:127.0.0.1:0' within 2 s",
    ),
    "crazyflie": (
        "quad_mavlink_mock",
        ["hardware.type=crazyflie", "hardware.device={}"],
        "the Crazyflie needs Bitcraze's cflib, which is not installed: pip install cflib",
    ),
}


def test_no_device_fails_fast_with_one_sentence(repo):
    procs = {}
    started = time.monotonic()
    for kind, (experiment, extra, _) in CASES.items():
        overrides = ["hardware.mock=false", "hardware.connect_timeout_s=2", *extra]
        params = {
            "experiment": str(repo / f"configs/experiments/{experiment}.yaml"),
            "overrides": overrides,
        }
        node = NodeSpec("hardware_bridge", "tether_ros", "hardware_bridge", "", "", params)
        procs[kind] = subprocess.Popen(
            [sys.executable, "-m", "tether_ros.hardware_bridge", *ros_args(node)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # a hung bridge dumps every thread's stack on SIGABRT (see below)
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    for kind, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # seen once in a full CI-way run (mavlink), never alone: keep the evidence
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"{kind}: the bridge did not exit within 60 s; its threads:\n{err[-6000:]}")
        elapsed = time.monotonic() - started
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        print(f"{kind}: exit {proc.returncode} after {elapsed:.1f} s: {errors}")
        assert proc.returncode == 2, err
        assert "Traceback" not in err, err
        assert len(errors) == 1 and CASES[kind][2] in errors[0], err
