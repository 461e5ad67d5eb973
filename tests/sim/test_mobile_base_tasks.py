"""Mobile-base tasks (go_to_goal, obstacle_course) and the base expert: reset
distributions, success and reward rules on a fake backend, the planner on synthetic scans,
and the expert solving both tasks on both engines through the experiment YAMLs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether.core.types import Observation
from tether.robots.husky import robot as husky
from tether.sim.base_scene import OBSTACLE_RADIUS, PARKING
from tether.sim.experts.base_expert import BaseExpert
from tether.sim.experts.config_base_expert import BaseExpertConfig
from tether.sim.robots.diff_drive import beam_angles, yaw_quat
from tether.sim.tasks.config_base_tasks import GoToGoalConfig, ObstacleCourseConfig
from tether.sim.tasks.go_to_goal import GoToGoalTask
from tether.sim.tasks.obstacle_course import ObstacleCourseTask


class FakeBase:
    """Just the body_pose / set_body_pose part of a backend, and its robot's description."""

    robot = husky.ROBOT

    def __init__(self, x: float = 0.0, y: float = 0.0, yaw: float = 0.0) -> None:
        self.poses: dict[str, tuple[np.ndarray, np.ndarray]] = {
            "base_footprint": (np.array([x, y, 0.0]), yaw_quat(yaw))
        }

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name.startswith("obstacle_") and name not in self.poses:  # parked, as backends do
            return np.array([*PARKING, 0.5]), yaw_quat(0.0)
        return self.poses[name]

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        self.poses[name] = (np.asarray(pos, float).copy(), np.asarray(quat, float).copy())


def test_registered_with_configs() -> None:
    assert registry.config_class("task", "go_to_goal") is GoToGoalConfig
    assert registry.config_class("task", "obstacle_course") is ObstacleCourseConfig
    assert registry.config_class("policy", "base_expert") is BaseExpertConfig
    assert registry.load("robot", "husky").kind == "mobile_base"
    spec = registry.load("robot", "husky").spec(control_hz=10.0, cameras=())
    assert spec.dt == pytest.approx(0.1) and spec.action.high == (1.0, 2.0)
    with pytest.raises(ValidationError, match="distance_rnage"):
        GoToGoalConfig(distance_rnage=(1, 2))
    with pytest.raises(ValidationError, match="along_range"):
        ObstacleCourseConfig(along_range=(0.8, 0.2))


def test_go_to_goal_reset_success_reward() -> None:
    task = GoToGoalTask(GoToGoalConfig(distance_range=(2.0, 5.0)))
    sim = FakeBase(1.0, -1.0)
    goals = []
    for seed in range(20):
        task.reset(sim, np.random.default_rng(seed))  # type: ignore[arg-type]
        goal = sim.poses["goal"][0]
        assert 2.0 <= math.hypot(goal[0] - 1.0, goal[1] + 1.0) <= 5.0
        goals.append(goal)
    assert len({tuple(np.round(g, 6)) for g in goals}) == 20
    task.reset(sim, np.random.default_rng(3))  # type: ignore[arg-type]
    again = FakeBase(1.0, -1.0)
    task.reset(again, np.random.default_rng(3))  # type: ignore[arg-type]
    np.testing.assert_array_equal(sim.poses["goal"][0], again.poses["goal"][0])
    assert not task.success(sim)  # type: ignore[arg-type]
    far = task.reward(sim)  # type: ignore[arg-type]
    gx, gy, _ = sim.poses["goal"][0]
    sim.set_body_pose("base_footprint", np.array([gx + 0.4, gy, 0.0]), yaw_quat(0.0))
    assert task.success(sim)  # type: ignore[arg-type]
    assert task.reward(sim) > far  # type: ignore[arg-type]
    sim.set_body_pose("base_footprint", np.array([gx + 0.6, gy, 0.0]), yaw_quat(0.0))
    assert not task.success(sim)  # type: ignore[arg-type]


def test_obstacle_course_layout() -> None:
    cfg = ObstacleCourseConfig()
    task = ObstacleCourseTask(cfg)
    assert task.objects == ("goal", *(f"obstacle_{i}" for i in range(cfg.n_obstacles)))
    r = OBSTACLE_RADIUS
    for seed in range(30):
        sim = FakeBase()
        task.reset(sim, np.random.default_rng(seed))  # type: ignore[arg-type]
        goal = sim.poses["goal"][0][:2]
        placed = [sim.poses[o][0][:2] for o in task.obstacles if o in sim.poses]
        assert len(placed) >= 3
        for i, p in enumerate(placed):
            assert np.linalg.norm(p - goal) >= r + cfg.min_gap - 1e-9
            for q in placed[i + 1 :]:
                assert np.linalg.norm(p - q) >= 2 * r + cfg.min_gap - 1e-9
        # the first obstacle blocks the straight line to the goal
        u = goal / np.linalg.norm(goal)
        assert abs(u[0] * placed[0][1] - u[1] * placed[0][0]) <= 0.3 + 1e-9
        # nothing touches the base at the start
        assert task.clearance(sim) > 1.0  # type: ignore[arg-type]


def test_obstacle_course_collision_penalty() -> None:
    task = ObstacleCourseTask(ObstacleCourseConfig(n_obstacles=1, collision_penalty=1.0))
    sim = FakeBase()
    sim.set_body_pose("goal", np.array([5.0, 0.0, 0.0]), yaw_quat(0.0))
    # obstacle 0.3 m beyond the front of the chassis (0.504 m from the centre)
    sim.set_body_pose("obstacle_0", np.array([0.504 + r_plus(0.3), 0.0, 0.0]), yaw_quat(0.0))
    assert task.clearance(sim) == pytest.approx(0.3, abs=1e-3)  # type: ignore[arg-type]
    free = task.reward(sim)  # type: ignore[arg-type]
    sim.set_body_pose("obstacle_0", np.array([0.504 + r_plus(0.0), 0.0, 0.0]), yaw_quat(0.0))
    assert task.reward(sim) == pytest.approx(free - 1.0, abs=0.05)  # type: ignore[arg-type]
    # turned 90 deg, the same obstacle is off the narrower side: farther from the outline
    sim.set_body_pose("base_footprint", np.zeros(3), yaw_quat(math.pi / 2))
    assert task.clearance(sim) > 0.1  # type: ignore[arg-type]


def test_obstacle_course_reads_the_base_outline_from_its_description() -> None:
    """The outline is the robot's footprint (1.01 x 0.69 m for the Husky): a base twice as
    long is touched by an obstacle the Husky clears."""
    task = ObstacleCourseTask(ObstacleCourseConfig(n_obstacles=1))
    sim = FakeBase()
    sim.set_body_pose("obstacle_0", np.array([0.504 + r_plus(0.3), 0.0, 0.0]), yaw_quat(0.0))
    assert task.clearance(sim) == pytest.approx(0.3, abs=1e-3)  # type: ignore[arg-type]
    long = FakeBase()
    long.robot = husky.ROBOT.model_copy(update={"footprint": (1.008, 0.3427)})
    long.set_body_pose("obstacle_0", np.array([0.504 + r_plus(0.3), 0.0, 0.0]), yaw_quat(0.0))
    assert task.clearance(long) < 0.0  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="mobile-base backend"):
        task.clearance(object())  # type: ignore[arg-type]


def r_plus(gap: float) -> float:
    return OBSTACLE_RADIUS + gap


# ---- the expert on synthetic observations ---------------------------------------------


def expert(task: str = "go_to_goal", **cfg: object) -> BaseExpert:
    spec = husky.husky_spec(control_hz=20.0)
    task_cfg = registry.config_class("task", task)()
    return BaseExpert(BaseExpertConfig(**cfg), spec, task_cfg)  # type: ignore[arg-type]


def observation(goal: tuple[float, float], scan: np.ndarray, yaw: float = 0.0) -> Observation:
    pose = np.concatenate([[0.0, 0.0, 0.0], yaw_quat(yaw)]).astype(np.float32)
    env = np.array([goal[0], goal[1], 0.0, 1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    state = np.zeros(13, dtype=np.float32)
    state[2] = yaw
    return Observation({"state": state, "base_pose": pose, "env_state": env, "scan": scan})


def scan_with_post(x: float, y: float, n: int = 64, range_max: float = 10.0) -> np.ndarray:
    """Ranges (n,) to a 0.25 m post at (x, y) in the base frame (approximate: the centre
    distance minus the radius for the beams that pass within the radius)."""
    ang = beam_angles(n, 270.0)
    d = np.array([math.cos(a) * x + math.sin(a) * y for a in ang])
    lateral = np.abs([-math.sin(a) * x + math.cos(a) * y for a in ang])
    hit = (d > 0) & (lateral < OBSTACLE_RADIUS)
    return np.where(hit, d - OBSTACLE_RADIUS, range_max).astype(np.float32)


def test_expert_heads_for_a_free_goal() -> None:
    pol = expert()
    free = np.full(64, 10.0, dtype=np.float32)
    ahead = pol.act(observation((4.0, 0.0), free)).actions[0]
    assert ahead[0] > 0.5 and abs(ahead[1]) < 1e-6
    left = pol.act(observation((0.0, 4.0), free)).actions[0]
    assert left[1] > 0.5 and left[0] < 0.1  # turns towards it before driving
    pol.reset()
    at_goal = pol.act(observation((0.05, 0.0), free)).actions[0]
    np.testing.assert_array_equal(at_goal, [0.0, 0.0])


def test_expert_steers_around_an_obstacle() -> None:
    pol = expert()
    blocked = scan_with_post(1.5, 0.0)
    a = pol.act(observation((5.0, 0.0), blocked)).actions[0]
    assert abs(a[1]) > 0.3  # turns away from the straight line
    # a post right in front of the bumper: back off
    pol.reset()
    close = scan_with_post(0.75, 0.0)
    b = pol.act(observation((5.0, 0.0), close)).actions[0]
    assert b[0] < 0


def test_expert_rejects_other_tasks_and_robots() -> None:
    with pytest.raises(ConfigError, match="not 'lift'"):
        expert("lift")
    panda_spec = registry.load("robot", "panda").spec()
    with pytest.raises(ConfigError, match="twist"):
        BaseExpert(BaseExpertConfig(), panda_spec, GoToGoalConfig())


# ---- the expert in closed loop, through the experiment YAMLs ------------------------------

ENGINES = [
    pytest.param("pybullet", marks=pytest.mark.pybullet),
    pytest.param("mujoco", marks=pytest.mark.mujoco),
]


def run_episodes(repo, name: str, engine: str, n: int) -> list[dict]:  # type: ignore[no-untyped-def]
    pytest.importorskip(engine)
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(
        repo / f"configs/experiments/{name}.yaml", [f"sim.type={engine}", "sim.cameras=[]"]
    )
    runner = SimRunner(cfg)
    try:
        return [run_local_episode(cfg, runner) for _ in range(n)]
    finally:
        runner.backend.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_expert_solves_go_to_goal(repo, engine: str) -> None:  # type: ignore[no-untyped-def]
    results = run_episodes(repo, "husky_go_to_goal", engine, 3)
    assert [r["success"] for r in results] == [True] * 3, results
    assert all(r["stale_steps"] == 0 and r["rejected"] == 0 for r in results)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_expert_solves_obstacle_course(repo, engine: str) -> None:  # type: ignore[no-untyped-def]
    results = run_episodes(repo, "husky_obstacle_course", engine, 5)
    assert sum(r["success"] for r in results) >= 4, results


# ---- difficulty levels and outcomes -------------------------------------------------------


def test_density_levels_place_more_obstacles_closer() -> None:
    """sparse / medium / dense set the obstacle count, gap and corridor; explicit fields
    win; the dense level's gaps (0.8 m) are narrower than the base's diagonal (1.22 m)."""
    from tether.sim.tasks.config_base_tasks import DENSITIES

    placed = {}
    for level in ("sparse", "medium", "dense"):
        cfg = ObstacleCourseConfig(density=level)
        assert cfg.n_obstacles == DENSITIES[level]["n_obstacles"]
        assert cfg.min_gap == DENSITIES[level]["min_gap"]
        task = ObstacleCourseTask(cfg)
        counts = []
        for seed in range(20):
            sim = FakeBase()
            task.reset(sim, np.random.default_rng(seed))  # type: ignore[arg-type]
            pts = [sim.poses[o][0][:2] for o in task.obstacles if o in sim.poses]
            counts.append(len(pts))
            for i, p in enumerate(pts):
                for q in pts[i + 1 :]:
                    assert np.linalg.norm(p - q) >= 2 * OBSTACLE_RADIUS + cfg.min_gap - 1e-9
        placed[level] = float(np.mean(counts))
    assert placed["sparse"] < placed["medium"] < placed["dense"], placed
    assert placed["dense"] >= 9, placed
    diagonal = 2 * float(np.hypot(*husky.ROBOT.footprint))
    assert ObstacleCourseConfig(density="dense").min_gap < diagonal
    assert ObstacleCourseConfig(density="dense", n_obstacles=3).n_obstacles == 3
    with pytest.raises(ValidationError, match="density"):
        ObstacleCourseConfig(density="crowded")


class Constant:
    """A policy that commands one twist forever."""

    contract = {"observation_keys": ["state"]}

    def __init__(self, twist: tuple[float, float]) -> None:
        self.twist = np.array([twist], np.float32)

    def reset(self) -> None:
        pass

    def act(self, obs: Observation):  # type: ignore[no-untyped-def]
        from tether.core.types import ActionChunk

        return ActionChunk(self.twist, 0.05, obs.stamp_ns)


@pytest.mark.mujoco
@pytest.mark.parametrize("end", [True, False])
def test_collision_timeout_and_path_length_outcomes(repo, end: bool) -> None:  # type: ignore[no-untyped-def]
    """Driving straight at the post on the line to the goal: with ``end_on_collision`` the
    episode ends at the touch, outcome "collision"; without, the base pushes on until the
    time limit, outcome "timeout". The summary carries the path length driven (true pose)
    and the least clearance; a base that reaches the goal ends with outcome "success"."""
    pytest.importorskip("mujoco")
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = load_config(
        repo / "configs/experiments/husky_obstacle_course.yaml",
        [
            "sim.type=mujoco",
            "sim.cameras=[]",
            "sim.reset_noise=0.0",
            "task.bearing_range=[0.0,0.0]",
            "task.max_duration_s=8.0",
            f"task.end_on_collision={str(end).lower()}",
        ],
    )
    runner = SimRunner(cfg)
    try:
        # the first obstacle lies within 0.3 m of the start-goal line: straight ahead hits it
        for _ in range(10):
            s = run_local_episode(cfg, runner, Constant((0.6, 0.0)))
            y0 = runner.backend.body_pose("obstacle_0")[0][1]
            if abs(y0) < 0.2:
                break
        assert abs(y0) < 0.2
        x0 = runner.backend.body_pose("obstacle_0")[0][0]
        m = s["metrics"]
        if end:
            assert s["outcome"] == "collision" and not s["success"]
            assert s["sim_time_s"] < 8.0 - 0.5
            assert m["min_clearance_m"] < 0.01
        else:
            assert s["outcome"] == "timeout" and s["steps"] == 160
        # the base drove up to the post: about its distance less the radius and the front
        expected = x0 - OBSTACLE_RADIUS - husky.ROBOT.footprint[0]
        assert m["path_length_m"] == pytest.approx(expected, abs=0.15)
        # an empty course: straight to the goal, outcome success, path about the distance
        # less the success radius
        free = load_config(
            repo / "configs/experiments/husky_go_to_goal.yaml",
            [
                "sim.type=mujoco",
                "sim.cameras=[]",
                "sim.reset_noise=0.0",
                "task.bearing_range=[0.0,0.0]",
            ],
        )
        runner2 = SimRunner(free)
        try:
            s2 = run_local_episode(free, runner2, Constant((0.6, 0.0)))
            goal = runner2.backend.body_pose("goal")[0][0]
        finally:
            runner2.backend.close()
        assert s2["outcome"] == "success"
        assert s2["metrics"]["path_length_m"] == pytest.approx(goal - 0.5, abs=0.1)
    finally:
        runner.backend.close()
