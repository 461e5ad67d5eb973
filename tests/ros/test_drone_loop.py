"""rclpy integration: sim_bridge + policy_server fly a drone policy over ROS 2 (odom and the
target pose in, cmd_low_level / cmd_vel out), one policy server per drone namespace."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet, pytest.mark.slow]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402

from tether.core.config import parse_experiment  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402


def _cfg(mode: str, num_drones: int = 1, rate_mode: str = "lockstep"):
    return parse_experiment(
        {
            "name": "drone_loop",
            "robot": "crazyflie",
            "sim": {
                "type": "pybullet",
                "control_hz": 100,
                "cameras": [],
                "quadrotor": {"action_mode": mode, "num_drones": num_drones},
            },
            "task": {"type": "hover", "max_duration_s": 600},  # thrown start around (0, 0, 1)
            "policy": {"type": "quad_pid"},
            "safety": {"watchdog_s": 0.2, "on_stale": "land"},
            "ros": {"rate_mode": rate_mode, "lockstep_timeout_s": 2.0},
        },
        "drone_loop",
    )


def _one_drone(cfg):
    """The experiment as one drone's policy server sees it (tether up's per-drone override)."""
    sim = cfg.sim.model_copy(
        update={"quadrotor": cfg.sim.quadrotor.model_copy(update={"num_drones": 1})}
    )
    return cfg.model_copy(update={"sim": sim})


@pytest.mark.parametrize("mode", ["rotor_rpm", "thrust_rates", "velocity_setpoint"])
def test_policy_server_recovers_a_thrown_drone_to_its_target(mode):
    cfg = _cfg(mode)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(_one_drone(cfg), context=ctx)
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, server):
            ex.add_node(n)
        fleet = bridge.io.fleet
        d = fleet.drones[0]
        start = np.linalg.norm(d.state[:3] - d.target[:3])
        assert spin_until(ex, lambda: fleet.now_s >= 6.0, 240), fleet.now_s
        err = np.linalg.norm(d.state[:3] - d.target[:3])
        assert d.phase == "command"  # the policy flew it, not the bridge's hover hold
        assert err < 0.1, (start, err)
        assert bridge.io.rejected == 0
        # lockstep: every step after the first answer waited for the policy's command
        assert fleet.drones[0].safety.stats.accepted >= fleet.steps - 5
        # stamped commands: the bridge matched each to the observation it answers
        assert len(bridge.io.latency[""].samples_ms) > 100
        assert len(server.infer_ms) >= fleet.steps - 5
        for n in (server, bridge):
            n.destroy_node()


def test_two_drones_two_policy_servers_each_in_its_namespace():
    cfg = _cfg("rotor_rpm", num_drones=2)
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        servers = [
            PolicyServer(_one_drone(cfg), namespace=ns, context=ctx) for ns in ("cf0", "cf1")
        ]
        ex = SingleThreadedExecutor(context=ctx)
        for n in (bridge, *servers):
            ex.add_node(n)
        fleet = bridge.io.fleet
        assert spin_until(ex, lambda: fleet.now_s >= 6.0, 300), fleet.now_s
        for d in fleet.drones:
            assert d.phase == "command"
            assert np.linalg.norm(d.state[:3] - d.target[:3]) < 0.1, d.name
        # each flew to its own target, 1 m apart
        assert fleet.drones[1].target[1] - fleet.drones[0].target[1] == pytest.approx(1.0)
        for n in (*servers, bridge):
            n.destroy_node()
