"""The Dynamic Window Approach planner (policy ``dwa``) and its navigation function: the
window it samples, the arcs it rejects, the cost-to-goal around obstacles, and closed loops
in a kinematic world (exact, fast) and on both engines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether.core.types import Observation
from tether.robots.husky import robot as husky
from tether.sim.base_scene import OBSTACLE_RADIUS
from tether.sim.experts.config_base_expert import DWAConfig
from tether.sim.experts.dwa import DWAPlanner
from tether.sim.experts.navfn import potential
from tether.sim.robots.diff_drive import beam_angles, yaw_quat
from tether.sim.tasks.config_base_tasks import ObstacleCourseConfig

HZ = 20.0
N_BEAMS, FOV, RANGE_MAX = 64, 270.0, 10.0


def planner(**cfg: object) -> DWAPlanner:
    spec = husky.husky_spec(control_hz=HZ)
    return DWAPlanner(DWAConfig(**cfg), spec, ObstacleCourseConfig())  # type: ignore[arg-type]


def scan_of(pose: np.ndarray, posts: np.ndarray) -> np.ndarray:
    """Exact lidar ranges (N_BEAMS,) from the base pose (x, y, yaw) to circular posts
    (M, 2) of OBSTACLE_RADIUS (the lidar sits over the base centre)."""
    ang = beam_angles(N_BEAMS, FOV) + pose[2]
    d = np.stack([np.cos(ang), np.sin(ang)], 1)  # (B, 2)
    rel = posts[None, :, :] - pose[None, None, :2]  # (1, M, 2)
    along = (d[:, None, :] * rel).sum(-1)  # (B, M)
    perp2 = (rel**2).sum(-1) - along**2
    inside = OBSTACLE_RADIUS**2 - perp2
    hit = (along > 0) & (inside > 0)
    r = np.where(hit, along - np.sqrt(np.maximum(inside, 0.0)), RANGE_MAX)
    return r.min(axis=1).astype(np.float32) if len(posts) else np.full(N_BEAMS, RANGE_MAX)


def observe(pose: np.ndarray, goal: tuple[float, float], posts: np.ndarray) -> Observation:
    base_pose = np.concatenate([[pose[0], pose[1], 0.0], yaw_quat(pose[2])]).astype(np.float32)
    env = np.array([goal[0], goal[1], 0.0, 1.0, 0.0, 0.0, 0.0], np.float32)
    return Observation(
        {"base_pose": base_pose, "env_state": env, "scan": scan_of(pose, posts)},
        stamp_ns=0,
    )


def clearance(pose: np.ndarray, posts: np.ndarray) -> float:
    """Distance (m) from the Husky's outline at ``pose`` to the nearest post's surface."""
    half = np.asarray(husky.ROBOT.footprint)
    c, s = math.cos(pose[2]), math.sin(pose[2])
    local = (posts - pose[:2]) @ np.array([[c, -s], [s, c]])
    outside = np.maximum(np.abs(local) - half, 0.0)
    return float(np.min(np.hypot(*outside.T)) - OBSTACLE_RADIUS) if len(posts) else math.inf


def drive(
    p: DWAPlanner, goal: tuple[float, float], posts: np.ndarray, seconds: float
) -> tuple[bool, float, list[np.ndarray]]:
    """A kinematic unicycle following the planner's twists exactly: (reached within 0.5 m,
    least clearance, commands)."""
    pose = np.zeros(3)
    p.reset()
    commands, least = [], math.inf
    for _ in range(round(seconds * HZ)):
        v, w = p.act(observe(pose, goal, posts)).actions[0].astype(np.float64)
        commands.append(np.array([v, w]))
        pose = pose + np.array([v * math.cos(pose[2]), v * math.sin(pose[2]), w]) / HZ
        least = min(least, clearance(pose, posts))
        if math.hypot(goal[0] - pose[0], goal[1] - pose[1]) < 0.5:
            return True, least, commands
    return False, least, commands


def test_registered_and_refuses_other_tasks_and_robots() -> None:
    assert registry.config_class("policy", "dwa") is DWAConfig
    spec = husky.husky_spec(control_hz=HZ)
    with pytest.raises(ConfigError, match="not 'lift'"):
        DWAPlanner(DWAConfig(), spec, registry.config_class("task", "lift")())
    panda = registry.load("robot", "panda").spec()
    with pytest.raises(ConfigError, match="twist"):
        DWAPlanner(DWAConfig(), panda, ObstacleCourseConfig())


def test_never_commands_outside_the_dynamic_window() -> None:
    """Every command lies within one control period's acceleration of the previous one and
    inside the velocity bounds, whatever the scene (random posts, goals, poses) and from
    every previous command, including ones outside the bounds."""
    p = planner()
    rng = np.random.default_rng(0)
    dv, dw = (a / HZ for a in p.accel)
    (v_lo, v_hi), (w_lo, w_hi) = p.v_bounds, p.w_bounds
    for episode in range(30):
        posts = rng.uniform([0.5, -3.0], [6.0, 3.0], (int(rng.integers(0, 8)), 2))
        goal = tuple(rng.uniform([2.0, -4.0], [8.0, 4.0]))
        p.reset()
        p.last = rng.uniform([-1.0, -2.0], [1.0, 2.0])  # any previous command
        for _ in range(15):
            pose = rng.uniform([-0.5, -0.5, -math.pi], [0.5, 0.5, math.pi])
            prev = p.last.copy()
            v, w = p.act(observe(pose, goal, posts)).actions[0].astype(np.float64)
            nearest_v = min(max(prev[0], v_lo), v_hi)
            nearest_w = min(max(prev[1], w_lo), w_hi)
            assert v_lo - 1e-6 <= v <= v_hi + 1e-6 and w_lo - 1e-6 <= w <= w_hi + 1e-6
            assert abs(v - nearest_v) <= dv + 1e-6, (episode, prev, v)
            assert abs(w - nearest_w) <= dw + 1e-6, (episode, prev, w)


def test_arcs_that_meet_an_obstacle_are_inadmissible() -> None:
    """A post 0.4 m ahead of the bumper: every forward arc that stays straight meets it
    within the rolled-out time; standing still and turning away are admissible."""
    p = planner(global_plan=False)
    front = husky.ROBOT.footprint[0]
    post = np.array([[front + 0.4 + OBSTACLE_RADIUS, 0.0]])
    pts = p._points(scan_of(np.zeros(3), post), 0.0, 0.0, 0.0)
    v = np.array([0.0, 0.3, 0.8, 0.3, 0.0])
    w = np.array([0.0, 0.0, 0.0, 1.2, 1.2])
    ok, _ = p.scores(pts, np.array([5.0, 0.0]), v, w)
    assert ok.tolist() == [True, False, False, True, True]


def test_navigation_function_leads_around_a_wall() -> None:
    """A 4 m wall between the base and the goal: the cost to the goal from the base is the
    way around it (longer than the straight 6 m), cells at the wall are lethal, and the
    descent path from the base turns to a wall's end, not into it."""
    ys = np.arange(-2.0, 2.01, 0.05)
    wall = np.stack([np.full_like(ys, 3.0), ys], 1)
    f = potential(wall, np.array([6.0, 0.0]), np.zeros((1, 2)), 0.1, 0.29, 0.9, 3.0, 2.0)
    at_base = float(f.at(np.zeros(2)))
    assert 2 * math.hypot(3.0, 2.3) * 0.95 < at_base < 10.0
    assert not np.isfinite(f.at(np.array([3.0, 0.5])))
    carrot = f.descend(np.zeros(2), 1.0)
    assert abs(carrot[1]) > 0.4 and carrot[0] < 1.5, carrot
    # with the wall gone, the cost is the straight distance
    free = potential(
        np.zeros((0, 2)), np.array([6.0, 0.0]), np.zeros((1, 2)), 0.1, 0.29, 0.9, 3.0, 2.0
    )
    assert float(free.at(np.zeros(2))) == pytest.approx(6.0, abs=0.15)


def test_the_navigation_function_gets_it_past_a_wall_that_traps_plain_dwa() -> None:
    """Posts in a 3.4 m wall across the straight line to the goal: Fox et al.'s DWA (the
    straight line for heading and progress) stops in front of it; with the navigation
    function it drives round and reaches the goal. Neither touches a post."""
    ys = np.arange(-1.7, 1.71, 0.5)
    posts = np.stack([np.full_like(ys, 2.5), ys], 1)
    reached, least, _ = drive(planner(global_plan=False), (6.0, 0.0), posts, 30.0)
    assert not reached and least > 0.0
    reached, least, commands = drive(planner(), (6.0, 0.0), posts, 30.0)
    assert reached and least > 0.0
    assert min(c[0] for c in commands) >= 0.0  # forward only (min_speed 0)


ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_dwa_drives_the_medium_course_without_touching(repo, engine: str) -> None:  # type: ignore[no-untyped-def]
    """On the medium obstacle course (end at the first touch), 5 seeds: at least 4 reach the
    goal and none collides."""
    pytest.importorskip(engine)
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(
        repo / "configs/experiments/husky_obstacle_course.yaml",
        [
            f"sim.type={engine}",
            "sim.cameras=[]",
            "policy.type=dwa",
            "task.density=medium",
            "task.end_on_collision=true",
            "episodes.seed=1000",
        ],
    )
    runner = SimRunner(cfg)
    try:
        results = [run_local_episode(cfg, runner) for _ in range(5)]
    finally:
        runner.backend.close()
    outcomes = [r["outcome"] for r in results]
    assert "collision" not in outcomes and outcomes.count("success") >= 4, outcomes
