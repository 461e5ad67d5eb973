"""Mobile base over ROS 2: odom / scan / wheel joint_states / base_pose / clock out, cmd_vel and
stamped twist chunks in through the safety filter; the base expert drives to its goal through
a policy server. Nodes run in this process on their own rclpy context."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet]

from geometry_msgs.msg import Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState, LaserScan  # noqa: E402
from std_msgs.msg import Bool, String  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.errors import ConfigError, InvalidCommand  # noqa: E402
from tether.robots.husky.robot import husky_spec  # noqa: E402
from tether.sim.config_mobile_base import LidarConfig  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.kinds import mobile_base as bb  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402


def _cfg(repo, *overrides):
    return load_config(
        repo / "configs/experiments/husky_go_to_goal.yaml", ["sim.cameras=[]", *overrides]
    )


# --- conversions ---------------------------------------------------------------------------
def test_odometry_round_trip_and_frames():
    odom = np.array([1.5, -2.0, 2.5, 0.4, -0.3], np.float32)
    msg = bb.base_odometry_msg(odom, 1_500_000_000)
    assert (msg.header.frame_id, msg.child_frame_id) == ("odom", "base_link")
    np.testing.assert_allclose(bb.base_odometry_to_array(msg), odom, atol=1e-6)
    msg.twist.twist.linear.x = float("nan")
    with pytest.raises(InvalidCommand):
        bb.base_odometry_to_array(msg)


def test_scan_maps_no_hit_to_inf_and_back():
    lidar = LidarConfig(n_beams=5, fov_deg=180, range_min=0.1, range_max=10.0)
    ranges = np.array([1.0, 10.0, 2.0, 0.1, 10.0], np.float32)
    msg = bb.scan_msg(ranges, 0, lidar)
    assert math.isinf(msg.ranges[1]) and msg.ranges[0] == pytest.approx(1.0)
    assert msg.angle_min == pytest.approx(-math.pi / 2)
    assert msg.angle_max == pytest.approx(math.pi / 2)
    np.testing.assert_allclose(bb.scan_to_array(msg), ranges)


def test_twist_to_action_rejects_nan_anywhere():
    t = Twist()
    t.linear.x, t.angular.z = 0.5, -1.0
    np.testing.assert_allclose(bb.twist_to_action(t), [0.5, -1.0])
    t.linear.y = float("inf")
    with pytest.raises(InvalidCommand):
        bb.twist_to_action(t)


def test_wheel_layout_comes_from_the_state_names():
    assert bb.wheel_joints(husky_spec())[0] == "front_left_wheel"
    from tether.robots.panda.robot import ROBOT as PANDA

    with pytest.raises(ConfigError, match="mobile-base state layout"):
        bb.wheel_joints(PANDA.spec())


# --- nodes ---------------------------------------------------------------------------------
def _spy_on_sim(bridge) -> list[np.ndarray]:
    received: list[np.ndarray] = []
    real_step = bridge.io.runner.backend.step

    def spy(action):
        received.append(np.array(action, copy=True))
        return real_step(action)

    bridge.io.runner.backend.step = spy
    return received


def test_base_topics_and_cmd_vel_through_the_safety_filter(repo):
    cfg = _cfg(
        repo,
        "ros.rate_mode=realtime",
        "episodes.autostart=true",
        "episodes.auto_reset=false",
        "task.max_duration_s=60",
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        received = _spy_on_sim(bridge)
        probe = Node("probe", context=ctx)
        got: dict[str, list] = {"odom": [], "scan": [], "js": [], "clock": []}
        probe.create_subscription(Odometry, itf.ODOM, got["odom"].append, itf.SENSOR_QOS)
        probe.create_subscription(LaserScan, bb.SCAN, got["scan"].append, itf.SENSOR_QOS)
        probe.create_subscription(JointState, itf.JOINT_STATES, got["js"].append, itf.SENSOR_QOS)
        probe.create_subscription(Clock, itf.CLOCK, got["clock"].append, itf.CLOCK_QOS)
        cmd = probe.create_publisher(Twist, itf.CMD_VEL, itf.COMMAND_QOS)
        estop = probe.create_publisher(Bool, itf.ESTOP, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        ex.add_node(probe)
        assert spin_until(
            ex, lambda: all(len(v) > 2 for v in got.values()) and cmd.get_subscription_count()
        )
        assert got["scan"][-1].header.frame_id == "laser"
        assert len(got["scan"][-1].ranges) == cfg.sim.mobile_base.lidar.n_beams
        assert list(got["js"][-1].name) == list(bb.wheel_joints(bridge.spec))

        def drive(vx: float, wz: float = 0.0) -> None:
            """Publish one twist and spin until the simulator took a step."""
            t = Twist()
            t.linear.x, t.angular.z = vx, wz
            cmd.publish(t)
            n = len(received)
            spin_until(ex, lambda: len(received) > n, timeout_s=2)

        x0 = bb.base_odometry_to_array(got["odom"][-1])[0]
        n0 = len(received)
        for _ in range(40):  # 5 m/s is clamped to the Husky's 1 m/s
            drive(5.0)
        fresh = [a for a in received[n0:] if a[0] != 0.0]
        assert fresh and max(a[0] for a in fresh) <= 1.0 + 1e-6
        assert spin_until(ex, lambda: bb.base_odometry_to_array(got["odom"][-1])[0] > x0 + 0.3)

        # the watchdog: no cmd_vel for watchdog_s -> zero twist
        assert spin_until(ex, lambda: len(received) > 3 and np.all(received[-1] == 0.0))
        bad = Twist()
        bad.linear.x = float("nan")
        rejected = bridge.rejected
        cmd.publish(bad)
        assert spin_until(ex, lambda: bridge.rejected > rejected)

        # the e-stop latches: cmd_vel is ignored until ~/reset_estop
        estop.publish(Bool(data=True))
        assert spin_until(ex, lambda: bridge.io.runner.safety.estopped)
        n = len(received)
        for _ in range(10):
            drive(0.5)
        assert all(np.all(a == 0.0) for a in received[n:])
        for node in (probe, bridge):
            node.destroy_node()


@pytest.mark.slow
def test_policy_server_drives_the_husky_to_its_goal(repo):
    cfg = _cfg(
        repo,
        "ros.rate_mode=lockstep",
        "episodes.autostart=true",
        "episodes.auto_reset=false",
        "task.distance_range=[1.5, 2.0]",
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        assert set(server.inputs.state.extra) == {"scan", "base_pose"}
        events: list[dict] = []
        probe = Node("probe", context=ctx)
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: any(e["event"] == "end" for e in events), timeout_s=240)
        end = next(e for e in events if e["event"] == "end")
        assert end["success"], end
        assert end["stale_steps"] < end["steps"] // 10  # the policy answered (lockstep)
        assert bridge.rejected == 0
        for node in (probe, server, bridge):
            node.destroy_node()
