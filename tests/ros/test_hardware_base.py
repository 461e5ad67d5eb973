"""hardware_bridge on a mock base driver (cmd_vel in, odom out under /driver): a twist
command through the bridge's command path drives the base, odometry comes back as Tether's
joint_states, and the task's goal is placed relative to the odometry pose."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros]

from hardware_helpers import spinning  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.hardware_bridge import HardwareBridge  # noqa: E402
from tether_ros.mock_nodes import MockBaseNode  # noqa: E402


def test_mock_base_follows_twist_commands_with_odometry(repo):
    cfg = load_config(
        repo / "configs/experiments/husky_go_to_goal_mock.yaml",
        ["episodes.auto_reset=false", "task.max_duration_s=60", "safety.watchdog_s=5"],
    )
    with ros_context() as ctx:
        mock = MockBaseNode(cfg, context=ctx, namespace="/driver")
        with spinning(mock):
            bridge = HardwareBridge(cfg, context=ctx)
            probe = Node("probe", context=ctx)
            pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
            ex = SingleThreadedExecutor(context=ctx)
            for n in (bridge, probe):
                ex.add_node(n)
            goal = bridge.io.runner.obs["env_state"][:2]
            assert 0.5 < float(np.hypot(*goal)) < 20  # placed around the odometry origin
            assert spin_until(ex, lambda: pub.get_subscription_count() > 0)
            msg = JointTrajectory()
            msg.joint_names = list(bridge.spec.action.names)
            for i in range(100):  # 5 s of 0.5 m/s forward, 0.2 rad/s left
                p = JointTrajectoryPoint(positions=[0.5, 0.2])
                p.time_from_start.sec, p.time_from_start.nanosec = divmod(i * 50_000_000, 10**9)
                msg.points.append(p)
            t = bridge.io.runner.obs.stamp_ns
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
            pub.publish(msg)
            base = mock.base
            assert spin_until(ex, lambda: base.pose[0] > 0.5, timeout_s=20), base.pose
            state = bridge.io.runner.obs["state"]
            # the bridge's state is the driver's odometry (a few ms behind)
            assert abs(state[0] - base.pose[0]) < 0.1 and state[1] > 0 and state[2] > 0
            assert 0.3 < state[3] <= 0.5 + 1e-6 and 0.1 < state[4] <= 0.2 + 1e-6
            assert bridge.rejected == 0
            for n in (probe, bridge):
                n.destroy_node()
        mock.destroy_node()


# the scripted expert, and the shipped learned planner (docs/base_planner.md: odometry and
# the mock's scan in, cmd_vel out)
PLANNERS = {
    "base_expert": [],
    "learned": ["policy.type=onnx", "policy.model=models/husky_nav_planner/model.onnx"],
}


@pytest.mark.parametrize("planner", list(PLANNERS))
def test_mock_base_graph_starts_episodes_and_ends_them_at_the_goal(repo, planner):
    """husky_go_to_goal_mock.yaml as launched (autostart, auto_reset): an episode starts on
    episode_status, the planner's twists reach the mock base, and the episode ends with
    success when the odometry reaches the goal, as in the sim twin (not on the 30 s time
    limit), after which the next one starts: four in a row."""
    from std_msgs.msg import String

    from tether_ros.policy_server import PolicyServer

    cfg = load_config(repo / "configs/experiments/husky_go_to_goal_mock.yaml", PLANNERS[planner])
    assert cfg.episodes.autostart and cfg.episodes.auto_reset
    events: list[dict] = []
    with ros_context() as ctx:
        mock = MockBaseNode(cfg, context=ctx, namespace="/driver")
        with spinning(mock):
            bridge = HardwareBridge(cfg, context=ctx)
            server = PolicyServer(cfg, context=ctx)
            probe = Node("probe", context=ctx)
            probe.create_subscription(
                String,
                itf.EPISODE_STATUS,
                lambda m: events.append(json.loads(m.data)),
                itf.EVENT_QOS,
            )
            ex = SingleThreadedExecutor(context=ctx)
            for n in (bridge, server, probe):
                ex.add_node(n)

            def kinds() -> list[str]:
                return [e["event"] for e in events]

            assert spin_until(ex, lambda: "start" in kinds(), timeout_s=10), events
            assert spin_until(
                ex,
                lambda: mock.last_command is not None and abs(mock.last_command["twist"][0]) > 0.1,
                timeout_s=20,
            ), mock.last_command
            # the goal is 2-5 m away (go_to_goal's default range) in any direction; the
            # planner gets there well within the 30 s limit
            # four episodes in a row, each from where the last ended: goals on every side
            assert spin_until(ex, lambda: kinds().count("end") >= 4, timeout_s=100), events
            ends = [e for e in events if e["event"] == "end"]
            for end in ends:
                assert end["success"] and end["steps"] < cfg.world.control_hz * 30, end
                assert end["rejected"] == 0, end
            assert spin_until(ex, lambda: kinds().count("start") >= 5, timeout_s=5), events
            for n in (probe, server, bridge):
                n.destroy_node()
        mock.destroy_node()
