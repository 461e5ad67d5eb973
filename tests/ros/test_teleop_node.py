"""The teleop node in-process (own rclpy context) with a fake device: dead-man held -> a
JointTrajectory that moves the TCP; released -> nothing; e-stop -> Bool true on estop;
bases get a Twist on cmd_vel; episode keys call the sim bridge's services."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from geometry_msgs.msg import Twist  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import Bool  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.spec import ActionSpec, RobotSpec  # noqa: E402
from tether.hardware.teleop import EpisodeEvent, TeleopCommand, TeleopConfig  # noqa: E402
from tether.robots.panda.robot import HOME_ARM, HOME_FINGER, ROBOT  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.kinds.arm import HOLD_PERIODS  # noqa: E402
from tether_ros.teleop import Teleop  # noqa: E402

kin = ROBOT.kinematics

STAMP = 1_230_000_000


class FakeDevice:
    """A TeleopDevice whose reading the test sets."""

    name = "fake"

    def __init__(self) -> None:
        self.cmd = TeleopCommand()
        self.closed = False

    def read(self) -> TeleopCommand:
        cmd = self.cmd
        # edges (gripper toggle, events) are reported once; levels persist
        self.cmd = TeleopCommand(
            linear=cmd.linear, angular=cmd.angular, deadman=cmd.deadman, estop=cmd.estop
        )
        return cmd

    def close(self) -> None:
        self.closed = True


def _graph(ctx, cfg, spec=None):
    dev = FakeDevice()
    node = Teleop(cfg, device=dev, teleop=TeleopConfig(), spec=spec, context=ctx)
    probe = Node("probe", context=ctx)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    ex.add_node(probe)
    return dev, node, probe, ex


def test_teleop_arm_deadman_motion_and_estop(repo):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml", ["sim.cameras=[]"])
    with ros_context() as ctx:
        dev, node, probe, ex = _graph(ctx, cfg)
        trajs: list[JointTrajectory] = []
        estops: list[bool] = []
        probe.create_subscription(JointTrajectory, itf.JOINT_TRAJECTORY, trajs.append, 100)
        probe.create_subscription(Bool, itf.ESTOP, lambda m: estops.append(m.data), itf.COMMAND_QOS)
        pub_js = probe.create_publisher(type(conv.joint_state_msg(0, (), [])), "joint_states", 10)
        home = np.array([*HOME_ARM, HOME_FINGER, HOME_FINGER])
        js = conv.joint_state_msg(STAMP, node.spec.state_names, home)
        assert spin_until(ex, lambda: pub_js.get_subscription_count() > 0)
        pub_js.publish(js)
        assert spin_until(ex, lambda: node.state is not None)

        dev.cmd = TeleopCommand(linear=(1, 0, 0), deadman=True)  # +x at full speed
        assert spin_until(ex, lambda: len(trajs) >= 10)
        last = trajs[-1]
        assert conv.from_time(last.header.stamp) == STAMP and len(last.points) == HOLD_PERIODS
        assert list(last.joint_names) == list(node.spec.action.names)
        p0, _ = kin.fk(np.asarray(HOME_ARM))
        p1, _ = kin.fk(np.asarray(last.points[-1].positions[:7]))
        d = p1 - p0
        assert d[0] > 0.005 and abs(d[1]) < 1e-3 and abs(d[2]) < 1e-3, d

        dev.cmd = TeleopCommand(deadman=False)  # released: nothing is sent
        ex.spin_once(timeout_sec=0.05)
        n = len(trajs)
        t_end = time.monotonic() + 0.3
        while time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.01)
        assert len(trajs) == n

        dev.cmd = TeleopCommand(linear=(1, 0, 0), deadman=True, estop=True)
        assert spin_until(ex, lambda: True in estops)
        n = len(trajs)
        t_end = time.monotonic() + 0.2
        while time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.01)
        assert len(trajs) == n  # no motion while e-stopped
        node.close()
        assert dev.closed
        for x in (probe, node):
            x.destroy_node()


def test_teleop_arm_restarts_from_the_robot_after_a_reset(repo):
    """A sim reset (the joint_states clock goes back) while the dead-man is held: the next
    command starts from where the robot is now, not from the last episode's target (which
    would drag the hand back to where the previous episode ended)."""
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml", ["sim.cameras=[]"])
    with ros_context() as ctx:
        dev, node, probe, ex = _graph(ctx, cfg)
        trajs: list[JointTrajectory] = []
        probe.create_subscription(JointTrajectory, itf.JOINT_TRAJECTORY, trajs.append, 100)
        pub_js = probe.create_publisher(type(conv.joint_state_msg(0, (), [])), "joint_states", 10)
        home = np.array([*HOME_ARM, HOME_FINGER, HOME_FINGER])
        assert spin_until(ex, lambda: pub_js.get_subscription_count() > 0)
        pub_js.publish(conv.joint_state_msg(STAMP, node.spec.state_names, home))
        assert spin_until(ex, lambda: node.state is not None)
        dev.cmd = TeleopCommand(linear=(1, 0, 0), deadman=True)  # drive the target +x
        assert spin_until(ex, lambda: len(trajs) >= 30)
        p0, _ = kin.fk(np.asarray(HOME_ARM))
        p_far, _ = kin.fk(np.asarray(trajs[-1].points[-1].positions[:7]))
        assert p_far[0] - p0[0] > 0.01  # the episode's target moved away from home

        # reset: the robot is at home again, its clock starts over; no key pressed
        dev.cmd = TeleopCommand(deadman=True)
        pub_js.publish(conv.joint_state_msg(1_000_000, node.spec.state_names, home))
        assert spin_until(ex, lambda: node.stamp == 1_000_000)
        n = len(trajs)
        assert spin_until(ex, lambda: len(trajs) >= n + 5)
        p_after, _ = kin.fk(np.asarray(trajs[-1].points[-1].positions[:7]))
        assert np.linalg.norm(p_after - p0) < 2e-3, p_after - p0
        node.close()
        for x in (probe, node):
            x.destroy_node()


def test_teleop_base_twist_and_episode_services(repo):
    cfg = load_config(repo / "configs/experiments/panda_lift_expert.yaml", ["sim.cameras=[]"])
    base = RobotSpec(
        name="base",
        kind="mobile_base",
        control_hz=50,
        action=ActionSpec(mode="twist", names=("vx", "wz"), low=(-1, -2), high=(1, 2)),
    )
    with ros_context() as ctx:
        dev, node, probe, ex = _graph(ctx, cfg, spec=base)
        twists: list[Twist] = []
        calls: list[str] = []
        probe.create_subscription(Twist, itf.CMD_VEL, twists.append, 10)

        def srv(name):
            def cb(_req, resp):
                calls.append(name)
                resp.success = True
                return resp

            return cb

        probe.create_service(Trigger, "sim_bridge/start_episode", srv("start"))
        probe.create_service(Trigger, "sim_bridge/stop_episode", srv("stop"))
        dev.cmd = TeleopCommand(linear=(1, 1, 0), angular=(0, 0, -1), deadman=True)
        assert spin_until(ex, lambda: len(twists) >= 3)
        t = twists[-1]
        assert t.linear.x == pytest.approx(0.1) and t.linear.y == 0.0
        assert t.angular.z == pytest.approx(-0.8)
        assert spin_until(
            ex,
            lambda: all(
                c.service_is_ready()
                for c in node._episode_clients.values()
                if c.srv_name.endswith(("start_episode", "stop_episode"))
            ),
        )
        dev.cmd = TeleopCommand(deadman=True, events=(EpisodeEvent.START,))
        assert spin_until(ex, lambda: calls == ["start"])
        dev.cmd = TeleopCommand(deadman=True, events=(EpisodeEvent.STOP_SUCCESS,))
        assert spin_until(ex, lambda: calls == ["start", "stop"])
        for x in (probe, node):
            x.destroy_node()
