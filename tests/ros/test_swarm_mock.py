"""A hardware swarm on mock autopilots (docs/swarm.md): configs/experiments/
swarm_mavlink_mock.yaml's fleet of two PX4-like drones over real MAVLink (UDP loopback),
each with its hardware bridge (own DroneSafety gate) and its policy server in its namespace
(/cf0, /cf1); the drones take off, a mission node publishes swapped goals, and PID + ORCA
flies each past the other to its goal in the shared frame without coming close."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pymavlink")
pytestmark = [pytest.mark.ros, pytest.mark.slow]

from geometry_msgs.msg import PoseStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.hardware.mock.autopilot import MockAutopilot, MockAutopilotConfig  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.hardware_bridge import HardwareBridge  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402

EXPERIMENT = "configs/experiments/swarm_mavlink_mock.yaml"


def test_two_mock_drones_swap_over_mavlink(repo):  # type: ignore[no-untyped-def]
    fleet = load_config(repo / EXPERIMENT)
    assert fleet.hardware is not None and len(fleet.hardware.fleet) == 2
    pilots = [
        MockAutopilot(MockAutopilotConfig(heartbeat_hz=5.0, link_timeout_s=5.0)).start()
        for _ in fleet.hardware.fleet
    ]
    members = []
    for i, pilot in enumerate(pilots):
        cfg = load_config(
            repo / EXPERIMENT,
            [*fleet.hardware.member_overrides(i), f"hardware.device.url={pilot.client_url}"],
        )
        members.append((fleet.hardware.fleet[i], cfg))
    origins = np.array([m.origin for m, _ in members])
    height = fleet.drones.takeoff_height
    goals = origins[::-1] + [0.0, 0.0, height]  # they trade places
    try:
        with ros_context() as ctx:
            nodes: list[Node] = []
            for m, cfg in members:
                nodes.append(HardwareBridge(cfg, namespace=m.namespace, context=ctx))
                nodes.append(PolicyServer(cfg, namespace=m.namespace, context=ctx))
            probe = Node("mission", context=ctx)
            pos: dict[str, list[np.ndarray]] = {m.namespace: [] for m, _ in members}
            for ns in pos:
                probe.create_subscription(
                    Odometry,
                    f"/{ns}/odom",
                    lambda msg, ns=ns: pos[ns].append(conv.odometry_to_state(msg)[0:3]),
                    itf.SENSOR_QOS,
                )
            goal_pubs = [
                probe.create_publisher(PoseStamped, f"/{m.namespace}/objects/target/pose", 10)
                for m, _ in members
            ]
            ex = SingleThreadedExecutor(context=ctx)
            for n in (*nodes, probe):
                ex.add_node(n)
            assert spin_until(ex, lambda: all(len(p) > 5 for p in pos.values()), 30)
            # odom is in the shared frame: each drone on the ground at its origin
            for (m, _), p in zip(members, pos.values(), strict=True):
                np.testing.assert_allclose(p[-1], m.origin, atol=0.05)
            for m, _ in members:
                client = probe.create_client(Trigger, f"/{m.namespace}/{itf.TAKEOFF}")
                assert client.wait_for_service(timeout_sec=5.0)
                fut = client.call_async(Trigger.Request())
                assert spin_until(ex, fut.done, 20) and fut.result().success, fut.result()
            assert spin_until(ex, lambda: all(p[-1][2] > height - 0.1 for p in pos.values()), 30)
            start = [len(p) for p in pos.values()]
            for pub, g in zip(goal_pubs, goals, strict=True):
                pub.publish(conv.pose_msg(np.array([*g, 1.0, 0.0, 0.0, 0.0]), 0, "world"))

            def arrived() -> bool:
                for pub, g in zip(goal_pubs, goals, strict=True):  # a mission node re-sends
                    pub.publish(conv.pose_msg(np.array([*g, 1.0, 0.0, 0.0, 0.0]), 0, "world"))
                return all(
                    np.linalg.norm(p[-1] - g) < 0.15
                    for p, g in zip(pos.values(), goals, strict=True)
                )

            assert spin_until(ex, arrived, 60), [p[-1] for p in pos.values()]
            a, b = (np.array(p[s:]) for p, s in zip(pos.values(), start, strict=True))
            k = min(len(a), len(b))
            closest = float(np.min(np.linalg.norm(a[-k:] - b[-k:], axis=1)))
            assert closest > 0.2, closest  # ORCA kept them apart (two radii: 0.24 m)
            assert all(n.io.rejected == 0 for n in nodes if isinstance(n, HardwareBridge))
            for n in (probe, *nodes):
                n.destroy_node()
    finally:
        for pilot in pilots:
            pilot.close()
