"""Teleop closes the loop with the real sim bridge: a +x command moves the simulated gripper
+x; releasing the dead-man makes the sim bridge's watchdog hold the arm where it is."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from test_teleop_node import FakeDevice  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.hardware.teleop.command import TeleopCommand  # noqa: E402
from tether.hardware.teleop.config_teleop import TeleopConfig  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402
from tether_ros.teleop import Teleop  # noqa: E402


def test_keyboard_style_teleop_moves_the_simulated_arm(repo):
    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        [
            "sim.cameras=[]",
            "ros.rate_mode=realtime",
            "episodes.autostart=true",
            "episodes.auto_reset=false",
            "task.max_duration_s=60",
        ],
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        dev = FakeDevice()
        teleop = Teleop(cfg, device=dev, teleop=TeleopConfig(), context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        ex.add_node(teleop)
        backend = bridge.io.runner.backend
        assert spin_until(ex, lambda: bridge.io.runner.steps > 20)  # idle: the watchdog holds
        p0 = backend.ee_pose()[0].copy()
        dev.cmd = TeleopCommand(linear=np.array([1.0, 0.0, 0.0]), deadman=True)
        t0 = bridge.io.runner.obs.stamp_ns
        assert spin_until(ex, lambda: bridge.io.runner.obs.stamp_ns - t0 > 1_000_000_000, 20)
        p1 = backend.ee_pose()[0].copy()
        dx = p1 - p0
        assert dx[0] > 0.03, dx  # about max_linear_speed * 1 s forward
        assert abs(dx[1]) < 0.01 and abs(dx[2]) < 0.01, dx
        dev.cmd = TeleopCommand(linear=np.array([1.0, 0.0, 0.0]), deadman=False)
        t1 = bridge.io.runner.obs.stamp_ns
        assert spin_until(ex, lambda: bridge.io.runner.obs.stamp_ns - t1 > 500_000_000, 20)
        p2 = backend.ee_pose()[0].copy()
        t2 = bridge.io.runner.obs.stamp_ns
        assert spin_until(ex, lambda: bridge.io.runner.obs.stamp_ns - t2 > 500_000_000, 20)
        p3 = backend.ee_pose()[0].copy()
        assert np.linalg.norm(p3 - p2) < 0.002  # released: held in place
        assert bridge.rejected == 0
        for n in (teleop, bridge):
            n.destroy_node()
