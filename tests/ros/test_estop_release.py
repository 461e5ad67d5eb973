"""The e-stop latches in the bridge: teleop engages it over ``estop``; its ``~/release_estop``
releases it through the bridge's ``~/reset_estop`` (a false on ``estop`` alone would not)."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.hardware.teleop import TeleopCommand, TeleopConfig  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402
from tether_ros.teleop import Teleop  # noqa: E402


class Device:
    name = "fake"

    def __init__(self) -> None:
        self.cmd = TeleopCommand()

    def read(self) -> TeleopCommand:
        return self.cmd

    def release_estop(self) -> None:
        self.cmd = TeleopCommand()

    def close(self) -> None:
        pass


def test_teleop_release_resets_the_bridge_latch(repo):
    cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        ["sim.cameras=[]", "ros.rate_mode=realtime", "episodes.auto_reset=false"],
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        dev = Device()
        teleop = Teleop(cfg, device=dev, teleop=TeleopConfig(), context=ctx)
        probe = Node("probe", context=ctx)
        release = probe.create_client(Trigger, "/teleop/release_estop")
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, teleop, probe):
            ex.add_node(n)
        dev.cmd = TeleopCommand(estop=True)
        assert spin_until(ex, lambda: bridge.io.runner.safety.estopped, timeout_s=20)
        assert spin_until(ex, release.service_is_ready)
        # the bridge's reset service must be visible to teleop before it can call it
        assert spin_until(ex, lambda: teleop._reset_estop_clients[0].service_is_ready())
        future = release.call_async(Trigger.Request())
        assert spin_until(ex, future.done) and future.result().success
        assert "1 bridge" in future.result().message
        assert spin_until(ex, lambda: not bridge.io.runner.safety.estopped, timeout_s=10)
        for n in (probe, teleop, bridge):
            n.destroy_node()
