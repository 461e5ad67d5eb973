"""A drone swarm over ROS 2 (docs/swarm.md): one policy server per drone in its namespace
(/cf0 ... /cf3), each reading its own odom and, found by topic discovery, its neighbours';
the drone safety gate per drone in the sim bridge; four drones swap places without a
collision, with PID + ORCA and with the shipped learned policy."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("pybullet")
pytestmark = [pytest.mark.ros, pytest.mark.pybullet]

from ros_helpers import episode_end, ros_context  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether_ros.policy_server import PolicyServer  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

N = 4


def _cfg(repo, experiment: str, seed: int):  # type: ignore[no-untyped-def]
    return load_config(
        repo / "configs" / "experiments" / experiment,
        [
            f"sim.quadrotor.num_drones={N}",
            "sim.cameras=[]",
            "ros.rate_mode=lockstep",
            "ros.lockstep_timeout_s=2.0",
            "episodes.autostart=true",
            "episodes.auto_reset=false",
            f"episodes.seed={seed}",
        ],
    )


def _one_drone(cfg):  # type: ignore[no-untyped-def]
    """The experiment as one drone's policy server sees it (tether up's per-drone override)."""
    sim = cfg.sim.model_copy(
        update={"quadrotor": cfg.sim.quadrotor.model_copy(update={"num_drones": 1})}
    )
    return cfg.model_copy(update={"sim": sim})


def _swap_over_ros(cfg) -> dict:  # type: ignore[no-untyped-def]
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        servers = [PolicyServer(_one_drone(cfg), namespace=f"cf{i}", context=ctx) for i in range(N)]
        end = episode_end(ctx, [bridge, *servers])
        # every server found the other three drones
        seen = [sorted(s.inputs.state._latest) for s in servers]
    assert seen == [sorted(f"/cf{j}" for j in range(N) if j != i) for i in range(N)], seen
    return end


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["swarm_orca.yaml", "swarm_ppo.yaml"])
def test_four_namespaced_drones_swap_without_collision(repo, experiment: str) -> None:  # type: ignore[no-untyped-def]
    from tether.sim.loop import run_local_episode

    for seed in (1000, 1001):
        cfg = _cfg(repo, experiment, seed)
        local = run_local_episode(cfg)
        assert local["outcome"] == "success", local
        end = _swap_over_ros(cfg)
        assert end["outcome"] == "success" and end["success"], end
        assert end["metrics"]["collisions"] == 0 and end["metrics"]["min_separation_m"] > 0.15
        assert end["rejected"] == 0, end  # every command passed its drone's safety gate


@pytest.mark.slow
def test_one_batched_server_flies_the_whole_swarm(repo) -> None:  # type: ignore[no-untyped-def]
    """drones.policy_servers: batched: one policy server in the robot's namespace reads every
    drone's odom and goal and answers every drone's cmd_low_level; the learned swap as the
    per-drone servers fly it, same outcome."""
    from tether_ros.graph import plan_graph

    exp = repo / "configs" / "experiments" / "swarm_ppo.yaml"
    nodes = plan_graph(exp, [f"sim.quadrotor.num_drones={N}", "drones.policy_servers=batched"])
    assert [(n.name, n.namespace) for n in nodes] == [("sim_bridge", ""), ("policy_server", "")]
    cfg = _cfg(repo, "swarm_ppo.yaml", 1000)
    cfg = cfg.model_copy(
        update={"drones": cfg.drones.model_copy(update={"policy_servers": "batched"})}
    )
    with ros_context() as ctx:
        bridge = SimBridge(cfg, context=ctx)
        server = PolicyServer(cfg, context=ctx)
        assert server.spec.action.dim == 4 * N
        end = episode_end(ctx, [bridge, server])
    assert end["outcome"] == "success" and end["metrics"]["collisions"] == 0, end
    assert end["rejected"] == 0
    per_drone = _swap_over_ros(
        cfg.model_copy(
            update={"drones": cfg.drones.model_copy(update={"policy_servers": "per_drone"})}
        )
    )
    assert abs(end["steps"] - per_drone["steps"]) <= 10, (end["steps"], per_drone["steps"])
