"""Teleop for every kind through the kind's adapter, with an observing device (as the scripted
expert is): the device gets the observation a policy of that kind reads (a base: odometry +
wheels, plus the goal; a drone: its odometry, plus the target), and its full action goes out
as the kind's command (a base: a Twist on cmd_vel; a drone: cmd_low_level in the spec's mode,
stamped with the observation it answers). Nodes in this process, own rclpy context."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from geometry_msgs.msg import PoseStamped, Twist  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.types import Observation  # noqa: E402
from tether.hardware.teleop import TeleopCommand, TeleopConfig  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.kinds import mobile_base as mb  # noqa: E402
from tether_ros.teleop import Teleop  # noqa: E402

STAMP = 2_000_000_000


class ObservingFake:
    """An ObservingDevice: records what it observes; answers each observation with
    ``action`` (dead-man held) once it has one."""

    name = "observing"
    observation_keys = ("state", "env_state")

    def __init__(self, action: np.ndarray) -> None:
        self.action = action
        self.seen: list[Observation] = []

    def observe(self, obs: Observation) -> None:
        self.seen.append(obs)

    def read(self) -> TeleopCommand:
        if not self.seen:
            return TeleopCommand()
        return TeleopCommand(deadman=True, action=self.action.copy())

    def close(self) -> None:
        pass


def _nodes(ctx, cfg, device):
    node = Teleop(cfg, device=device, teleop=TeleopConfig(), context=ctx)
    probe = Node("probe", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(probe)
    return node, probe, ex


def test_a_base_is_observed_as_its_policy_sees_it_and_driven_by_twist(repo):
    cfg = load_config(repo / "configs/experiments/husky_go_to_goal.yaml", ["sim.cameras=[]"])
    device = ObservingFake(np.array([0.5, -0.2]))
    with ros_context() as ctx:
        node, probe, ex = _nodes(ctx, cfg, device)
        twists: list[Twist] = []
        probe.create_subscription(Twist, itf.CMD_VEL, twists.append, itf.COMMAND_QOS)
        pubs = {
            "odom": probe.create_publisher(Odometry, itf.ODOM, itf.SENSOR_QOS),
            "js": probe.create_publisher(JointState, itf.JOINT_STATES, itf.SENSOR_QOS),
            "goal": probe.create_publisher(
                PoseStamped, itf.object_pose_topic("goal"), itf.SENSOR_QOS
            ),
        }
        assert spin_until(ex, lambda: all(p.get_subscription_count() for p in pubs.values()))
        state = np.arange(len(node.spec.state_names), dtype=np.float32) * 0.1
        state[2] = 0.3  # yaw (odometry round-trips it through a quaternion)
        goal = np.array([3.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])
        pubs["goal"].publish(conv.pose_msg(goal, STAMP, "world"))
        pubs["odom"].publish(mb.base_odometry_msg(state[:5], STAMP))
        pubs["js"].publish(mb.wheel_joint_state_msg(state, STAMP, mb.wheel_joints(node.spec)))
        assert spin_until(ex, lambda: bool(device.seen) and len(twists) >= 2)
        obs = device.seen[-1]
        assert obs.stamp_ns == STAMP
        np.testing.assert_allclose(obs["state"], state, atol=1e-5)
        np.testing.assert_allclose(obs["env_state"], goal, atol=1e-6)
        assert (twists[-1].linear.x, twists[-1].angular.z) == pytest.approx((0.5, -0.2))
        for n in (probe, node):
            n.destroy_node()


def test_a_drone_device_action_goes_out_on_cmd_low_level_stamped(repo):
    cfg = load_config(repo / "configs/experiments/quad_pid_hover.yaml", ["sim.cameras=[]"])
    rpm = np.array([14000.0, 14100.0, 14200.0, 14300.0])
    device = ObservingFake(rpm)
    with ros_context() as ctx:
        node, probe, ex = _nodes(ctx, cfg, device)
        low: list[JointState] = []
        probe.create_subscription(JointState, itf.CMD_LOW_LEVEL, low.append, itf.COMMAND_QOS)
        odom = probe.create_publisher(Odometry, itf.ODOM, itf.SENSOR_QOS)
        target = probe.create_publisher(
            PoseStamped, itf.object_pose_topic("target"), itf.SENSOR_QOS
        )
        assert spin_until(
            ex, lambda: odom.get_subscription_count() and target.get_subscription_count()
        )
        state = np.zeros(13)
        state[:3], state[3] = (0.1, -0.2, 0.9), 1.0
        target.publish(conv.pose_msg(np.array([0, 0, 1.0, 1, 0, 0, 0]), STAMP, "odom"))
        odom.publish(conv.odometry_msg(state, STAMP, "odom", "base_link"))
        assert spin_until(ex, lambda: bool(device.seen) and bool(low))
        np.testing.assert_allclose(device.seen[-1]["state"], state, atol=1e-6)
        mode, values, stamp = conv.low_level_to_command(low[-1])
        assert mode == node.spec.action.mode == "rotor_rpm"
        np.testing.assert_allclose(values, rpm)
        assert stamp == STAMP  # it answers the observation it was computed from
        for n in (probe, node):
            n.destroy_node()
