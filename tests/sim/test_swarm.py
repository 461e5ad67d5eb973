"""Drone swarms (docs/swarm.md): scenarios, features, the ORCA solver, the swarm task's
outcomes in the engines, and the batched training world against the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.core.config import load_config
from tether.core.experiment import build_policy
from tether.sim.quadrotor.orca_policy import orca_lines, solve
from tether.sim.quadrotor.pid_policy import hold_heading
from tether.sim.quadrotor.swarm import (
    MIN_SPACING,
    SCENARIOS,
    feature_dim,
    min_separation,
    sample_scenario,
    swarm_features,
)

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "configs" / "experiments" / "swarm_orca.yaml"


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("n", [4, 5, 8, 16])
def test_scenarios_keep_drones_apart_and_are_seeded(scenario: str, n: int) -> None:
    for seed in range(10):
        starts, goals = sample_scenario(np.random.default_rng(seed), scenario, n)
        assert starts.shape == goals.shape == (n, 3)
        assert min_separation(starts[None])[0] >= MIN_SPACING - 1e-9
        assert min_separation(goals[None])[0] >= MIN_SPACING - 1e-9
        assert np.all((starts[:, 2] >= 0.8) & (starts[:, 2] <= 1.6))
        again = sample_scenario(np.random.default_rng(seed), scenario, n)
        np.testing.assert_array_equal(again[0], starts)
    if scenario == "swap":  # pairs trade places exactly
        half = (n + 1) // 2
        np.testing.assert_allclose(goals[half:], starts[: n - half])
        np.testing.assert_allclose(goals[: n - half], starts[half:])
    if scenario == "cross":  # antipodes through the centre, each at its own height
        np.testing.assert_allclose(goals[:, 0:2], -starts[:, 0:2])
        np.testing.assert_allclose(goals[:, 2], starts[:, 2])


def test_features_order_neighbours_and_pad_missing_ones() -> None:
    pos = np.array([[0.0, 0.0, 1.0], [0.5, 0.0, 1.0], [0.0, -0.3, 1.2], [5.0, 0.0, 1.0]])
    vel = np.array([[0.1, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]])
    goal = pos + np.array([[4.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    f = swarm_features(pos, vel, goal, k=4, v_max=1.0)
    assert f.shape == (4, feature_dim(4))
    own, nb = f[0, :7], f[0, 7:].reshape(4, 7)
    np.testing.assert_allclose(own[0:3], [1.0, 0.0, 0.0])  # 4 m away, capped at 2 m -> unit
    np.testing.assert_allclose(f[1, 0:3], [0.05, 0.0, 0.0])
    np.testing.assert_allclose(own[3:6], [0.1, 0.0, 0.0])
    # nearest first: drone 2 (0.36 m), drone 1 (0.5 m), drone 3 (5 m: capped, closeness 0)
    np.testing.assert_allclose(nb[0, 0:3], np.array([0.0, -0.3, 0.2]) / 2.0)
    np.testing.assert_allclose(nb[0, 3:6], np.array([-0.1, 0.5, 0.0]) / 2.0)
    assert nb[0, 6] == pytest.approx(1 - np.sqrt(0.13) / 2)
    np.testing.assert_allclose(nb[1, 0:3], [0.25, 0.0, 0.0])
    np.testing.assert_allclose(nb[2, 0:3], [1.0, 0.0, 0.0])
    assert nb[2, 6] == 0.0
    assert not np.any(nb[3])  # only three others: the fourth slot is empty
    # batched worlds give each world's features
    shift = np.array([3.0, -2.0, 0.0])  # a second world elsewhere (same heights)
    both = swarm_features(
        np.stack([pos, pos + shift]), np.stack([vel, vel]), np.stack([goal, goal + shift]), 4, 1.0
    )
    np.testing.assert_allclose(both[0], f)
    np.testing.assert_allclose(both[1], f)


def test_orca_solver_is_the_closest_allowed_velocity() -> None:
    """Against a fine grid over the speed disk, on random half-plane sets."""
    rng = np.random.default_rng(0)
    g = np.linspace(-1.0, 1.0, 401)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    grid = grid[np.linalg.norm(grid, axis=1) <= 1.0]
    checked = 0
    for _ in range(60):
        m = int(rng.integers(1, 6))
        normals = rng.normal(size=(m, 2))
        points = rng.uniform(-0.6, 0.6, (m, 2))
        pref = rng.uniform(-1.5, 1.5, 2)
        u = solve(points, normals, pref, 1.0)
        a = normals / np.linalg.norm(normals, axis=1, keepdims=True)
        ok = np.all((grid - points[:, None]) @ a.T <= 1e-9, axis=-1) if m == 1 else None
        allowed = np.all(
            np.einsum("gk,mk->gm", grid, a) <= np.einsum("mk,mk->m", a, points), axis=1
        )
        assert ok is None or np.array_equal(ok.reshape(-1), allowed)
        if not allowed.any():
            continue
        checked += 1
        assert np.linalg.norm(u) <= 1.0 + 1e-6
        assert np.all(a @ u - np.einsum("mk,mk->m", a, points) <= 1e-6)
        best = np.min(np.linalg.norm(grid[allowed] - pref, axis=1))
        assert np.linalg.norm(u - pref) <= best + 1e-6
    assert checked > 30


def test_orca_head_on_pair_turns_aside_reciprocally() -> None:
    p = np.array([[0.0, 0.0], [2.0, 0.0]])
    v = np.array([[1.0, 0.0], [-1.0, 0.0]])
    new = []
    for i, pref in ((0, np.array([1.0, 0.0])), (1, np.array([-1.0, 0.0]))):
        points, normals = orca_lines(p, v, i, radius=0.12, tau=2.0, dt=0.01)
        new.append(solve(points, normals, pref, 1.0))
    a, b = new
    assert abs(a[1]) > 0.05 and abs(b[1]) > 0.05  # both leave the line
    assert np.sign(a[1]) == -np.sign(b[1])  # to opposite sides: they pass each other
    assert np.allclose(a, -b, atol=1e-9)  # and share the change equally


def _episode(engine: str, policy: list[str], *overrides: str) -> dict[str, Any]:
    pytest.importorskip(engine)
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(EXPERIMENT, [f"sim.type={engine}", "sim.cameras=[]", *policy, *overrides])
    runner = SimRunner(cfg)
    try:
        return run_local_episode(cfg, runner, build_policy(cfg, runner.spec))
    finally:
        runner.backend.close()


ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]


@pytest.mark.parametrize("engine", ENGINES)
def test_pid_collides_where_orca_swaps_eight_drones(engine: str) -> None:
    for seed in (1000, 1001):
        pid = _episode(
            engine, ["policy.type=quad_pid", "policy.max_speed=1.0"], f"episodes.seed={seed}"
        )
        assert pid["outcome"] == "collision" and not pid["success"]
        assert pid["metrics"]["collisions"] >= 1 and pid["metrics"]["min_separation_m"] < 0.13
        orca = _episode(engine, [], f"episodes.seed={seed}")
        assert orca["outcome"] == "success", orca["metrics"]
        assert orca["metrics"]["min_separation_m"] > 0.2
        assert orca["metrics"]["all_at_goal_s"] < 8.0


def test_collisions_are_counted_when_the_episode_flies_on() -> None:
    s = _episode(
        "pybullet",
        ["policy.type=quad_pid", "policy.max_speed=1.0"],
        "task.end_on_collision=false",
        "task.max_duration_s=4",
        "sim.quadrotor.num_drones=4",
    )
    assert s["outcome"] != "collision" and s["metrics"]["collisions"] >= 1
    assert s["sim_time_s"] > 1.5  # flew on past the first touch


def test_orca_refuses_other_action_modes() -> None:
    from tether.core.errors import ConfigError

    with pytest.raises(ConfigError, match="velocity_setpoint"):
        _episode("pybullet", [], "sim.quadrotor.action_mode=rotor_rpm")


def test_batched_world_flies_like_the_engine() -> None:
    """The same commands from the same swap start: the numpy world (2 ms physics,
    downwash) and PyBullet end within 2 cm of each other after 2 s."""
    pytest.importorskip("pybullet")
    from tether.core import registry
    from tether.sim.factory import build_backend
    from tether.sim.quadrotor.config_swarm_world import SwarmWorldConfig
    from tether.sim.quadrotor.swarm_world import BatchedSwarmWorld

    cfg = load_config(EXPERIMENT, ["sim.quadrotor.num_drones=4", "sim.cameras=[]"])
    sim = build_backend(cfg.sim, "crazyflie", registry.build("task", cfg.task))
    robot = registry.load("robot", "crazyflie")
    world = BatchedSwarmWorld(
        SwarmWorldConfig(
            sizes=(4,), drones_per_size=4, physics_dt=0.002, hold_steps=1, pos_noise=0, vel_noise=0
        ),
        robot,
    )
    g = world.groups[0]
    try:
        sim.reset(1000)
        g.state[:] = sim.drone_states()
        rng = np.random.default_rng(0)
        for _ in range(200):
            a = rng.uniform(-1, 1, (4, 3))  # 1 m/s at most, as the world's v_max
            yaw_rate = hold_heading(sim.drone_states())  # the world's heading hold
            sim.step(np.concatenate([a, yaw_rate[:, None]], axis=1).reshape(-1))
            g.step(a)
        gap = np.linalg.norm(sim.drone_states()[:, 0:3] - g.state[:, 0:3], axis=1)
        assert np.all(gap < 0.02), gap
    finally:
        sim.close()
