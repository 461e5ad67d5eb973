"""rclpy integration: sim_bridge + policy_server close the loop; bad commands never reach the sim.

Nodes run in this process on their own rclpy context (no ROS install, no sleeps: every wait
spins until a condition holds or a deadline passes).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import Bool, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402


def _cfg(repo, *overrides):
    return load_config(
        repo / "configs/experiments/panda_lift_expert.yaml", ["sim.cameras=[]", *overrides]
    )


def _realtime_cfg(repo, *overrides):
    """A bridge that keeps stepping on the wall clock (commands or not) for a minute."""
    return _cfg(
        repo,
        "ros.rate_mode=realtime",
        "episodes.autostart=true",
        "episodes.auto_reset=false",
        "task.max_duration_s=60",
        *overrides,
    )


def _spy_on_sim(bridge) -> list[np.ndarray]:
    """Record every action the simulator receives."""
    received: list[np.ndarray] = []
    real_step = bridge.io.runner.backend.step

    def spy(action):
        received.append(np.array(action, copy=True))
        return real_step(action)

    bridge.io.runner.backend.step = spy
    return received


def test_sim_bridge_and_policy_server_lift_the_cube(repo):
    cfg = _cfg(
        repo, "ros.rate_mode=lockstep", "episodes.autostart=true", "episodes.auto_reset=false"
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        events: list[dict] = []
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server):
            ex.add_node(n)
        from rclpy.node import Node

        probe = Node("probe", context=ctx)
        probe.create_subscription(
            String, itf.EPISODE_STATUS, lambda m: events.append(json.loads(m.data)), itf.EVENT_QOS
        )
        ex.add_node(probe)
        z0 = float(bridge.io.runner.backend.body_pose("cube")[0][2])
        assert spin_until(ex, lambda: any(e["event"] == "end" for e in events), timeout_s=120)
        end = next(e for e in events if e["event"] == "end")
        z1 = float(bridge.io.runner.backend.body_pose("cube")[0][2])
        assert end["success"], end
        assert z1 - z0 > 0.08, (z0, z1)  # the cube really is in the air
        assert end["rejected"] == 0 and len(end["latency_ms"]) == end["steps"]
        assert server.infer_ms, "the policy server never ran the policy"
        for n in (probe, server, bridge):
            n.destroy_node()


def _trajectory(names, positions_rows, dt_ns=10_000_000):
    msg = JointTrajectory()
    msg.joint_names = list(names)
    for i, row in enumerate(positions_rows):
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in row]
        p.time_from_start.nanosec = i * dt_ns
        msg.points.append(p)
    return msg


def test_bad_trajectories_are_rejected_logged_and_never_reach_the_sim(repo):
    cfg = _realtime_cfg(repo)
    with ros_context() as ctx:
        from rclpy.node import Node

        bridge = SimBridge(cfg, context=ctx)
        received = _spy_on_sim(bridge)
        probe = Node("probe", context=ctx)
        logs: list[str] = []
        probe.create_subscription(Log, "/rosout", lambda m: logs.append(m.msg), 100)
        pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        ex.add_node(probe)
        names = list(bridge.spec.action.names)
        home = bridge.io.runner.measured(bridge.io.runner.obs).copy()
        assert spin_until(ex, lambda: pub.get_subscription_count() > 0 and len(received) > 3)

        bad_value = 1.5  # a value no accepted command in this test uses for joint 1
        bad = [
            _trajectory(names[:-1] + ["elbow_of_doom"], [[bad_value] * len(names)]),  # wrong name
            _trajectory(names, [[float("nan")] + [bad_value] * (len(names) - 1)]),  # NaN
            _trajectory(names, [[bad_value] * (len(names) - 2)]),  # too short
            _trajectory(names, [[bad_value] * (len(names) + 3)]),  # too long
            _trajectory(names, [[float("inf")] * len(names)]),  # inf
        ]
        for msg in bad:
            msg.header.stamp = probe.get_clock().now().to_msg()
            pub.publish(msg)
        assert spin_until(ex, lambda: bridge.rejected >= len(bad), timeout_s=10), bridge.rejected
        assert spin_until(
            ex, lambda: any("rejected joint_trajectory" in m for m in logs), timeout_s=5
        )
        n_before = len(received)
        assert spin_until(ex, lambda: len(received) > n_before + 5)  # the node keeps stepping
        got = np.array(received)
        assert np.isfinite(got).all()
        assert not np.isclose(got[:, 0], bad_value).any()
        np.testing.assert_allclose(got[-1], home, atol=1e-5)  # the watchdog holds position

        # a good command after all that still goes through (events come back over ROS)
        target = home.copy()
        target[0] += 0.01
        obs_stamp = bridge.io.runner.obs.stamp_ns

        good = _trajectory(names, [target] * 200)  # 2 s of the same target, from sim time now
        good.header.stamp.sec, good.header.stamp.nanosec = divmod(obs_stamp, 1_000_000_000)
        pub.publish(good)
        assert spin_until(
            ex, lambda: np.isclose(received[-1][0], target[0], atol=1e-6), timeout_s=10
        )
        assert bridge.io.runner.obs.stamp_ns > obs_stamp
        for n in (probe, bridge):
            n.destroy_node()


def test_estop_latches_hold_until_the_reset_service(repo):
    cfg = _realtime_cfg(repo, "safety.watchdog_s=10")
    with ros_context() as ctx:
        from rclpy.node import Node

        bridge = SimBridge(cfg, context=ctx)
        received = _spy_on_sim(bridge)
        probe = Node("probe", context=ctx)
        estop = probe.create_publisher(Bool, itf.ESTOP, itf.COMMAND_QOS)
        pub = probe.create_publisher(JointTrajectory, itf.JOINT_TRAJECTORY, itf.COMMAND_QOS)
        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(bridge)
        ex.add_node(probe)
        assert spin_until(ex, lambda: estop.get_subscription_count() > 0)
        names = list(bridge.spec.action.names)
        home = bridge.io.runner.measured(bridge.io.runner.obs).copy()

        def command_offset(offset: float) -> None:
            target = home.copy()
            target[0] += offset
            msg = _trajectory(names, [target] * 300)  # 3 s from sim time now
            t = bridge.io.runner.obs.stamp_ns
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(t, 1_000_000_000)
            pub.publish(msg)

        estop.publish(Bool(data=True))
        assert spin_until(ex, lambda: bridge.io.runner.safety.estopped)
        n = len(received)
        command_offset(0.01)  # ignored while the e-stop is latched
        assert spin_until(ex, lambda: len(received) > n + 20)
        assert all(abs(a[0] - home[0]) < 1e-3 for a in received[n:])
        estop.publish(Bool(data=False))  # a false alone does not release the latch
        n = len(received)
        assert spin_until(ex, lambda: len(received) > n + 20)
        assert bridge.io.runner.safety.estopped
        reset = probe.create_client(Trigger, "/sim_bridge/reset_estop")
        assert spin_until(ex, reset.service_is_ready)
        future = reset.call_async(Trigger.Request())
        assert spin_until(ex, future.done) and future.result().success
        assert not bridge.io.runner.safety.estopped
        command_offset(0.01)  # accepted again after the reset
        assert spin_until(ex, lambda: np.isclose(received[-1][0], home[0] + 0.01, atol=1e-6))
        for node in (probe, bridge):
            node.destroy_node()
