"""The per-kind ROS 2 adapters (tether_ros.kinds): every registered robot's kind has one that
implements the interface the nodes use, an unknown kind fails with one sentence, and a
second arm (the UR5e) runs through the unchanged nodes: its driver's controller and joint
names come from its description, teleop moves its TCP through its own kinematics."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from hardware_helpers import spinning  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from tether.core import registry  # noqa: E402
from tether.core.config import load_config  # noqa: E402
from tether.core.errors import ConfigError  # noqa: E402
from tether.core.experiment import robot_spec  # noqa: E402
from tether.core.types import ActionChunk  # noqa: E402
from tether.hardware.teleop import TeleopCommand, TeleopConfig  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.drivers.jtc_arm import driver_names  # noqa: E402
from tether_ros.kinds import KindIO, kind_io  # noqa: E402

MOCK = "configs/experiments/panda_lift_mock.yaml"
INTERFACE = [
    name for name in dir(KindIO) if not name.startswith("_") and callable(getattr(KindIO, name))
]


@pytest.mark.parametrize("robot", registry.available("robot"))
def test_every_robot_kind_has_an_adapter(robot):
    kind = registry.load("robot", robot).kind
    io = kind_io(kind)
    assert io.kind == kind and isinstance(io.chunked, bool)
    assert {"sim_bridge", "hardware_bridge", "policy_servers", "teleop"} <= set(INTERFACE)
    for name in INTERFACE:
        assert callable(getattr(io, name, None)), f"the {kind} adapter lacks {name}()"


def test_an_unknown_kind_is_one_sentence():
    with pytest.raises(ConfigError, match="no ROS 2 I/O for robot kind 'submarine'"):
        kind_io("submarine")


def _ur5e(repo, *overrides):
    if "ur5e" not in registry.available("robot"):
        pytest.skip("robots/ur5e is not there")
    return load_config(
        repo / MOCK,
        ["robot=ur5e", "hardware.controller=null", "episodes.autostart=false", *overrides],
    )


def test_driver_names_come_from_the_hardware_section_else_the_robot(repo):
    cfg = _ur5e(repo)
    spec = robot_spec(cfg)
    controller, joints = driver_names(cfg.hardware, spec)
    assert controller == "scaled_joint_trajectory_controller"  # as ur_robot_driver names it
    assert joints == list(spec.action.names)
    own = cfg.hardware.model_copy(update={"controller": "mine", "joints": list("abcdefg")})
    assert driver_names(own, spec) == ("mine", list("abcdefg"))
    panda = load_config(repo / MOCK)
    assert driver_names(panda.hardware, robot_spec(panda))[0] == "joint_trajectory_controller"


def test_a_ur5e_runs_on_its_mock_driver_through_the_unchanged_bridge(repo):
    from tether_ros.hardware_bridge import HardwareBridge
    from tether_ros.mock_nodes import MockArmNode

    cfg = _ur5e(repo, "episodes.autostart=true", "episodes.auto_reset=false")
    with ros_context() as ctx:
        mock = MockArmNode(cfg, context=ctx, namespace="/driver")
        stack = contextlib.ExitStack()
        stack.enter_context(spinning(mock))
        bridge = HardwareBridge(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        states: list[JointState] = []
        driver: list[JointTrajectory] = []
        probe.create_subscription(JointState, itf.JOINT_STATES, states.append, itf.SENSOR_QOS)
        probe.create_subscription(
            JointTrajectory,
            "/driver/scaled_joint_trajectory_controller/joint_trajectory",
            driver.append,
            itf.COMMAND_QOS,
        )
        pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, probe):
            ex.add_node(n)
        assert spin_until(ex, lambda: len(states) > 2 and pub.get_subscription_count() > 0, 20)
        assert list(states[-1].name) == list(bridge.spec.state_names)
        assert states[-1].name[0] == "shoulder_pan_joint"
        # a chunk for the current observation reaches the driver's scaled controller
        home = mock.arm.q.copy()
        target = bridge.io.runner.measured(bridge.io.runner.obs).astype(np.float64)
        target[0] += 0.1
        stamp = bridge.io.runner.obs.stamp_ns
        chunk = ActionChunk(np.repeat(target[None], 100, 0), bridge.spec.dt, stamp)
        pub.publish(conv.chunk_to_trajectory(chunk, bridge.spec.action.names))
        assert spin_until(ex, lambda: mock.arm.q[0] - home[0] > 0.05, 20), mock.arm.q - home
        assert driver and list(driver[-1].joint_names) == list(bridge.spec.action.names)
        assert bridge.rejected == 0
        bridge.close()
        stack.close()
        for n in (probe, bridge, mock):
            n.destroy_node()


class _Device:
    name = "fake"

    def __init__(self, cmd: TeleopCommand) -> None:
        self.cmd = cmd

    def read(self) -> TeleopCommand:
        return self.cmd

    def close(self) -> None:
        pass


def test_teleop_moves_the_ur5e_tcp_with_its_own_kinematics(repo):
    from tether_ros.teleop import Teleop

    cfg = _ur5e(repo)
    robot = registry.load("robot", "ur5e")
    with ros_context() as ctx:
        device = _Device(TeleopCommand(linear=(0, 0, 1), deadman=True))  # +z at full speed
        node = Teleop(cfg, device=device, teleop=TeleopConfig(), context=ctx)
        probe = Node("probe", context=ctx)
        trajs: list[JointTrajectory] = []
        probe.create_subscription(JointTrajectory, itf.JOINT_TRAJECTORY, trajs.append, 100)
        pub = probe.create_publisher(JointState, itf.JOINT_STATES, itf.SENSOR_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (node, probe):
            ex.add_node(n)
        home = np.array([*robot.home, robot.gripper.home, robot.gripper.home])
        assert spin_until(ex, lambda: pub.get_subscription_count() > 0)
        pub.publish(conv.joint_state_msg(1_000_000, node.spec.state_names, home))
        assert spin_until(ex, lambda: len(trajs) >= 10)
        assert list(trajs[-1].joint_names) == list(node.spec.action.names)
        kin = robot.kinematics
        p0, _ = kin.fk(np.asarray(robot.home))
        p1, _ = kin.fk(np.asarray(trajs[-1].points[-1].positions[: robot.dof]))
        d = p1 - p0
        assert d[2] > 0.005 and abs(d[0]) < 1e-3 and abs(d[1]) < 1e-3, d
        for n in (probe, node):
            n.destroy_node()


def test_a_driver_in_the_bridges_own_namespace_is_one_sentence(repo):
    from tether_ros.hardware_bridge import HardwareBridge

    cfg = load_config(repo / MOCK, ["hardware.mock=false"])
    with (
        ros_context() as ctx,
        pytest.raises(ConfigError, match="'/driver' is the bridge's own namespace"),
    ):
        HardwareBridge(cfg, context=ctx, namespace="/driver")
