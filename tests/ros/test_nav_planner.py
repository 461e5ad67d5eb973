"""The shipped learned local planner (models/husky_nav_planner, docs/base_planner.md) over
ROS 2: the policy server serves the exported graph (scan + odom + the goal in, cmd twist
out, one row per control step) to the sim bridge, whose safety filter sits in front of the
base, and the Husky reaches its goal on fixed obstacle-course seeds, as in-process."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros]

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context, spin_until  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

EXPERIMENT = "configs/experiments/husky_nav_ppo.yaml"
# sparse-course seeds the shipped planner solves in-process in MuJoCo
SEEDS = (1000, 1001)


def _cfg(repo, seed: int):  # type: ignore[no-untyped-def]
    return load_config(
        repo / EXPERIMENT,
        [
            "sim.type=mujoco",
            "sim.cameras=[]",
            "task.density=sparse",
            "ros.rate_mode=lockstep",
            "episodes.autostart=true",
            "episodes.auto_reset=false",
            f"episodes.seed={seed}",
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_shipped_planner_reaches_the_goal_over_ros(repo, seed: int) -> None:  # type: ignore[no-untyped-def]
    from tether.sim.loop import run_local_episode

    cfg = _cfg(repo, seed)
    local = run_local_episode(cfg)
    assert local["outcome"] == "success", local
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        assert set(server.inputs.state.extra) == {"scan"}  # odometry, not the true pose
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
        assert end["success"] and end["outcome"] == "success", end
        assert end["stale_steps"] < end["steps"] // 10  # the planner answered (lockstep)
        assert abs(end["steps"] - local["steps"]) <= local["steps"] // 10
        assert bridge.rejected == 0
        for node in (probe, server, bridge):
            node.destroy_node()
