"""hardware_bridge on a mock ros2_control arm: the Panda lift experiment with `hardware:` in
place of `sim:` closes the loop through the driver's interface (JointTrajectory out on
/driver/joint_trajectory_controller/joint_trajectory, /driver/joint_states in), and a bad
command is rejected exactly as the sim bridge rejects it.

Nodes run in this process on their own rclpy context; waits spin until a condition holds.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros]

from hardware_helpers import spinning  # noqa: E402
from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.hardware_bridge import HardwareBridge  # noqa: E402
from tether_ros.mock_nodes import MockArmNode  # noqa: E402

MOCK = "configs/experiments/panda_lift_mock.yaml"
BAD_VALUE = 1.5  # no accepted command in these tests uses it for joint 1


def _cfg(repo, *overrides):
    return load_config(
        repo / MOCK, ["episodes.auto_reset=false", "task.max_duration_s=60", *overrides]
    )


def _trajectory(names, rows, dt_ns=10_000_000):
    msg = JointTrajectory()
    msg.joint_names = list(names)
    for i, row in enumerate(rows):
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in row]
        p.time_from_start.nanosec = i * dt_ns
        msg.points.append(p)
    return msg


def _bad(names):
    n = len(names)
    return [
        _trajectory(names[:-1] + ["elbow_of_doom"], [[BAD_VALUE] * n]),  # wrong name
        _trajectory(names, [[float("nan")] + [BAD_VALUE] * (n - 1)]),  # NaN
        _trajectory(names, [[BAD_VALUE] * (n - 2)]),  # too short
        _trajectory(names, [[BAD_VALUE] * (n + 3)]),  # too long
        _trajectory(names, [[float("inf")] * n]),  # inf
    ]


def _spy(bridge) -> list[np.ndarray]:
    """Every action the backend (simulator or robot) receives."""
    received: list[np.ndarray] = []
    real = bridge.io.runner.backend.step

    def spy(action):
        received.append(np.array(action, copy=True))
        return real(action)

    bridge.io.runner.backend.step = spy
    return received


def _reject_bad_commands(bridge, ctx, extra_nodes=()) -> tuple[list[str], np.ndarray]:
    """Publish the bad trajectories to ``bridge``; returns the logged rejections and every
    action the backend received meanwhile."""
    received = _spy(bridge)
    probe = Node("probe", context=ctx)
    logs: list[str] = []
    probe.create_subscription(Log, "/rosout", lambda m: logs.append(m.msg), 100)
    pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
    ex = SingleThreadedExecutor(context=ctx)
    for n in (bridge, probe, *extra_nodes):
        ex.add_node(n)
    assert spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(received) > 3, 20)
    # rejections are throttled in the log to one a second: publish one at a time
    for msg in _bad(list(bridge.spec.action.names)):
        n = bridge.rejected
        pub.publish(msg)
        assert spin_until(ex, lambda n=n: bridge.rejected > n, timeout_s=10)
        time.sleep(1.05)  # past the log throttle, so every reason is logged
    assert spin_until(ex, lambda: sum("rejected joint_trajectory" in m for m in logs) >= 5, 10)
    n = len(received)
    assert spin_until(ex, lambda: len(received) > n + 5, 10)  # it keeps stepping
    for node in (probe,):
        node.destroy_node()
    return [m for m in logs if "rejected joint_trajectory" in m], np.array(received)


@pytest.mark.slow
@pytest.mark.mujoco
def test_bad_commands_are_rejected_identically_by_sim_and_hardware_bridges(repo):
    pytest.importorskip("mujoco")
    from tether_ros.sim_bridge import SimBridge

    sim_cfg = load_config(
        repo / "configs/experiments/panda_lift_expert.yaml",
        ["sim.cameras=[]", "episodes.auto_reset=false", "task.max_duration_s=60"],
    )
    with ros_context() as ctx:
        sim = SimBridge(sim_cfg, context=ctx)
        sim_logs, sim_actions = _reject_bad_commands(sim, ctx)
        sim_rejected = sim.rejected
        sim.close()
        sim.destroy_node()
    hw_cfg = _cfg(repo)
    with ros_context() as ctx:
        mock = MockArmNode(hw_cfg, context=ctx, namespace="/driver")
        with spinning(mock):  # the driver: its own process on a robot
            hw = HardwareBridge(hw_cfg, context=ctx)
            hw_logs, hw_actions = _reject_bad_commands(hw, ctx)
            hw_rejected = hw.rejected
            q = mock.arm.q.copy()
            hw.destroy_node()
    assert sim_rejected == hw_rejected == 5
    assert hw_logs == sim_logs, (sim_logs, hw_logs)  # same reasons, same order
    for got in (sim_actions, hw_actions):
        assert np.isfinite(got).all() and not np.isclose(got[:, 0], BAD_VALUE).any()
    assert not np.isclose(q[0], BAD_VALUE)


@pytest.mark.slow
def test_policy_server_moves_the_mock_arm_through_the_driver_interface(repo):
    from tether_ros.policy_server import PolicyServer

    cfg = _cfg(repo)
    with ros_context() as ctx:
        mock = MockArmNode(cfg, context=ctx, namespace="/driver")
        stack = contextlib.ExitStack()
        stack.enter_context(spinning(mock))
        bridge = HardwareBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        probe = Node("probe", context=ctx)
        states: list[tuple[float, np.ndarray]] = []  # (wall s, bridge joint_states)
        driver: list[JointTrajectory] = []
        probe.create_subscription(
            JointState,
            itf.JOINT_STATES,
            lambda m: states.append((time.monotonic(), np.array(m.position))),
            itf.SENSOR_QOS,
        )
        probe.create_subscription(
            JointTrajectory,
            "/driver/joint_trajectory_controller/joint_trajectory",
            driver.append,
            itf.COMMAND_QOS,
        )
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server, probe):
            ex.add_node(n)
        arm = mock.arm
        home = arm.q.copy()
        assert spin_until(ex, lambda: np.abs(arm.q - home).max() > 0.1, timeout_s=60), arm.q - home
        assert server.infer_ms and driver, "the policy's commands never reached the driver"
        assert driver[-1].joint_names == list(bridge.spec.action.names)
        # joint limits hold in the mock, and Tether's joint_states follow the driver's state
        assert np.all(arm.q >= arm.lower - 1e-9) and np.all(arm.q <= arm.upper + 1e-9)
        assert spin_until(ex, lambda: np.abs(states[-1][1][:8] - arm.q).max() < 0.05, timeout_s=10)
        assert bridge.io.runner.rejected == 0 and bridge.rejected == 0
        stack.close()
        for n in (probe, server, bridge, mock):
            n.destroy_node()


def test_latency_is_visible(repo):
    """A step command reaches the joints no sooner than the mock's latency (0.2 s here)."""
    cfg = _cfg(repo, "hardware.mock_options={latency_s: 0.2}", "episodes.autostart=false")
    with ros_context() as ctx:
        mock = MockArmNode(cfg, context=ctx, namespace="/driver")
        stack = contextlib.ExitStack()
        stack.enter_context(spinning(mock))
        bridge = HardwareBridge(cfg, context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        robot = bridge.io.runner.backend.robot
        home = mock.arm.q.copy()
        target = home.copy()
        target[0] += 0.2
        assert spin_until(ex, lambda: mock.pub.get_subscription_count() > 0)
        sent = time.monotonic()
        robot.send_action(target[:8])
        assert spin_until(ex, lambda: abs(robot.get_observation()["state"][0] - home[0]) > 1e-3)
        lag = time.monotonic() - sent
        print(f"command -> first motion in joint_states: {lag * 1e3:.0f} ms (latency 200 ms)")
        assert lag >= 0.2
        stack.close()
        for n in (bridge, mock):
            n.destroy_node()
