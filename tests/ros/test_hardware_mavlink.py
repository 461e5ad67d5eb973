"""hardware_bridge flies a PX4-like mock autopilot over real MAVLink (pymavlink, UDP
loopback): takeoff -> velocity setpoints on cmd_vel -> land through the bridge's services,
then a lost link: the autopilot fails safe (lands, disarms) and the bridge reports it on
episode_status."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pymavlink")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.hardware.mock.autopilot import MockAutopilot, MockAutopilotConfig  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.hardware_bridge import HardwareBridge  # noqa: E402


@pytest.fixture
def autopilot():
    # heartbeats at 5 Hz so a 1 s link timeout is not tripped by one late heartbeat
    cfg = MockAutopilotConfig(heartbeat_hz=5.0, link_timeout_s=1.5, offboard_timeout_s=1.0)
    with MockAutopilot(cfg) as ap:
        yield ap


def _call(ex, client, timeout_s=15.0):
    assert client.wait_for_service(timeout_sec=5.0)
    fut = client.call_async(Trigger.Request())
    assert spin_until(ex, fut.done, timeout_s)
    return fut.result()


def test_takeoff_fly_land_then_link_loss_fails_safe(repo, autopilot):
    cfg = load_config(
        repo / "configs/experiments/quad_mavlink_mock.yaml",
        [
            f"hardware.device.url={autopilot.client_url}",
            "hardware.device.link_timeout_s=1.0",
            "hardware.connect_timeout_s=10",
        ],
    )
    with ros_context() as ctx:
        bridge = HardwareBridge(cfg, context=ctx)
        drones = bridge.io
        probe = Node("probe", context=ctx)
        odom: list[np.ndarray] = []
        events: list[dict] = []
        probe.create_subscription(
            Odometry,
            itf.ODOM,
            lambda m: odom.append(
                np.array([m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z])
            ),
            itf.SENSOR_QOS,
        )
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        cmd = probe.create_publisher(Twist, itf.CMD_VEL, itf.COMMAND_QOS)
        takeoff = probe.create_client(Trigger, itf.TAKEOFF)
        land = probe.create_client(Trigger, itf.LAND)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, probe):
            ex.add_node(n)
        height = cfg.drones.takeoff_height

        # takeoff: arm + NAV_TAKEOFF; odom climbs to the takeoff height (ENU z up)
        assert _call(ex, takeoff).success
        assert spin_until(ex, lambda: bool(odom) and odom[-1][2] > 0.9 * height, 20), odom[-1:]
        assert autopilot.armed

        # velocity setpoints: 0.5 m/s forward in the heading frame, streamed at 20 Hz
        start = odom[-1].copy()
        forward = Twist()
        forward.linear.x = 0.5
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            cmd.publish(forward)
            spin_until(ex, lambda: False, 0.05)
        moved = float(np.linalg.norm(odom[-1][:2] - start[:2]))
        assert autopilot.mode == "OFFBOARD" and moved > 0.5, (autopilot.mode, moved)
        assert abs(odom[-1][2] - start[2]) < 0.3  # level flight

        # land: down to the ground, then PX4 disarms
        assert _call(ex, land).success
        assert spin_until(ex, lambda: not autopilot.armed and odom[-1][2] < 0.05, 20), odom[-1]
        assert spin_until(ex, lambda: drones.drone.phase == "ground", 5)

        # again, then the radio dies: nothing in or out
        assert _call(ex, takeoff).success
        assert spin_until(ex, lambda: odom[-1][2] > 0.9 * height, 20)
        autopilot.cut_link()
        cut = time.monotonic()
        assert spin_until(ex, lambda: any(e["event"] == "link_lost" for e in events), 10)
        noticed = time.monotonic() - cut
        assert spin_until(ex, lambda: autopilot.failsafe is not None, 10)
        assert spin_until(ex, lambda: autopilot.landed and not autopilot.armed, 20)
        landed = time.monotonic() - cut
        print(
            f"link cut: bridge noticed after {noticed:.2f} s, autopilot failsafe "
            f"'{autopilot.failsafe}', landed and disarmed after {landed:.2f} s"
        )
        assert "Failsafe activated" in " ".join(autopilot.statustexts)
        # the link comes back: the bridge says so and sees the drone on the ground
        autopilot.cut_link(False)
        assert spin_until(ex, lambda: any(e["event"] == "link_regained" for e in events), 10)
        assert spin_until(ex, lambda: odom[-1][2] < 0.05, 5)
        assert spin_until(ex, lambda: drones.drone.phase == "ground", 5)
        assert [e["event"] for e in events] == ["link_lost", "link_regained"]
        assert events[0]["phase"] == "landing"
        bridge.close()
        for n in (probe, bridge):
            n.destroy_node()
