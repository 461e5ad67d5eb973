"""The learned local planner's pieces (issue #20, docs/base_planner.md): features, the
batched kinematic world (motion, slip, latency, outcomes, its lidar against the engines'),
the SB3 VecEnv, training, export and serving through the generic onnx policy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tether.core import registry
from tether.sim.base_scene import OBSTACLE_RADIUS, PARKING
from tether.sim.config_nav_world import NavWorldConfig
from tether.sim.nav_features import FEATURES, GOAL_CAP, RANGE_CAP, SECTORS, features, sectors
from tether.sim.nav_world import BatchedNavWorld, Layout, layout_field

HUSKY = registry.load("robot", "husky")
HZ = 20.0
# no randomisation: the nominal base
EXACT = NavWorldConfig(
    lidar_noise=(0.0, 0.0),
    lidar_dropout=(0.0, 0.0),
    latency_steps=(0, 0),
    lin_gain=(1.0, 1.0),
    yaw_gain=(1.0, 1.0),
    accel_scale=(1.0, 1.0),
    start_noise=0.0,
    layout_pool=2,
)


def world(n: int = 1, cfg: NavWorldConfig = EXACT, seed: int = 0) -> BatchedNavWorld:
    return BatchedNavWorld(cfg, HUSKY, n, HZ, seed=seed)


def clear_scene(w: BatchedNavWorld, goal: tuple[float, float] = (6.0, 0.0)) -> None:
    w.obstacles[:] = PARKING[0]
    w.goal[:] = goal
    w.dist[:] = np.hypot(*(w.goal - w.pose[:, :2]).T)


def test_features_layout() -> None:
    scan = np.full(64, 9.0)
    scan[10] = 1.0  # beam 10 -> sector 5
    f = features(
        scan,
        np.array([1.0, 1.0, math.pi / 2]),
        np.array([1.0, 4.0]),
        np.array([0.5, -1.0]),
        1.0,
        2.0,
    )
    assert f.shape == (FEATURES,) and f.dtype == np.float32
    lidar = f[:SECTORS]
    assert lidar[5] == pytest.approx(1.0 / RANGE_CAP) and np.all(np.delete(lidar, 5) == 1.0)
    # the goal 3 m straight ahead of a base facing +y
    assert f[SECTORS] == pytest.approx(3.0 / GOAL_CAP)
    assert f[SECTORS + 1] == pytest.approx(1.0) and f[SECTORS + 2] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(f[SECTORS + 3 :], [0.5, -0.5])
    with pytest.raises(ValueError, match="sectors"):
        sectors(np.ones(30))


def test_world_motion_slip_odometry_and_latency() -> None:
    """Full forward speed for 2 s: the base follows the acceleration ramp (3 m/s^2) and
    travels about 1.83 m; with a yaw gain of 0.6 a commanded turn turns the true base 0.6
    as far as its odometry says; a 2-step latency delays the command by 2 steps."""
    w = world()
    clear_scene(w, (50.0, 0.0))
    for _ in range(40):
        w.step(np.array([[1.0, 0.0]]))
    ramp = 1.0 / 3.0  # s to full speed
    expected = 0.5 * 3.0 * ramp**2 + (2.0 - ramp) * 1.0
    assert w.pose[0, 0] == pytest.approx(expected, abs=0.06)
    np.testing.assert_allclose(w.odom[0], w.pose[0], atol=1e-9)

    slip = world(cfg=EXACT.model_copy(update={"yaw_gain": (0.6, 0.6)}))
    clear_scene(slip, (50.0, 0.0))
    for _ in range(10):
        slip.step(np.array([[0.0, 0.5]]))
    assert slip.pose[0, 2] == pytest.approx(0.6 * slip.odom[0, 2], rel=1e-6)
    assert slip.odom[0, 2] > 0.3

    # a centre of rotation 0.15 m behind the centre: a turn in place slides the base
    # sideways (left for a left turn) at 0.15 x the yaw rate; odometry does not see it
    shifted = world(cfg=EXACT.model_copy(update={"rotation_offset": (0.15, 0.15)}))
    clear_scene(shifted, (50.0, 0.0))
    for _ in range(5):
        shifted.step(np.array([[0.0, 0.5]]))
    w_z = shifted.vel[0, 1]
    assert w_z > 0.5 and shifted.pose[0, 1] > 0.0
    turned = shifted.pose[0, 2]
    # the slide is an arc of radius 0.15 m about the offset centre: its chord
    assert math.hypot(*shifted.pose[0, :2]) == pytest.approx(
        2 * 0.15 * math.sin(turned / 2), rel=0.02
    )
    assert np.allclose(shifted.odom[0, :2], 0.0)

    late = world(cfg=EXACT.model_copy(update={"latency_steps": (2, 2)}))
    clear_scene(late, (50.0, 0.0))
    late.step(np.array([[1.0, 0.0]]))
    late.step(np.array([[1.0, 0.0]]))
    assert late.vel[0, 0] == 0.0
    late.step(np.array([[1.0, 0.0]]))
    assert late.vel[0, 0] == pytest.approx(3.0 / HZ)


def test_world_imu_heading_does_not_slip() -> None:
    """heading "imu": the odometry's heading integrates the gyro, so a turn with a yaw gain
    of 0.6 leaves it on the true heading (the wheels' heading is off by 0.4 of the turn);
    standing still, a gyro bias drifts it by at most bias x time."""
    cfg = EXACT.model_copy(
        update={"yaw_gain": (0.6, 0.6), "heading": "imu", "gyro_bias": 0.0, "gyro_noise": 0.0}
    )
    w = world(cfg=cfg)
    clear_scene(w, (50.0, 0.0))
    for _ in range(10):
        w.step(np.array([[0.0, 0.5]]))
    for _ in range(20):
        w.step(np.array([[1.0, 0.0]]))
    assert w.pose[0, 2] > 0.2
    np.testing.assert_allclose(w.odom[0], w.pose[0], atol=1e-9)
    wheels = world(cfg=cfg.model_copy(update={"heading": "wheels"}))
    clear_scene(wheels, (50.0, 0.0))
    for _ in range(10):
        wheels.step(np.array([[0.0, 0.5]]))
    assert abs(wheels.odom[0, 2] - wheels.pose[0, 2]) > 0.1

    biased = world(cfg=cfg.model_copy(update={"gyro_bias": 0.01}))
    clear_scene(biased, (50.0, 0.0))
    for _ in range(200):  # 10 s
        biased.step(np.zeros((1, 2)))
    drift = abs(biased.odom[0, 2] - biased.pose[0, 2])
    assert 0.0 < drift <= 0.1 + 1e-9
    assert drift == pytest.approx(abs(biased.gyro_bias[0]) * 10.0, rel=1e-6)


def test_world_velocity_caps() -> None:
    """max_speed / max_yaw_rate: an action of 1 commands the cap, and the velocity features
    are divided by it."""
    cfg = EXACT.model_copy(update={"max_speed": 0.5, "max_yaw_rate": 1.0})
    w = world(cfg=cfg)
    clear_scene(w, (50.0, 0.0))
    for _ in range(20):
        obs, *_ = w.step(np.array([[1.0, 0.0]]))
    assert (w.v_max, w.w_max) == (0.5, 1.0)
    assert w.vel[0, 0] == pytest.approx(0.5)
    assert obs[0, SECTORS + 3] == pytest.approx(1.0)


def cup(goal: tuple[float, float] = (6.0, 0.0)) -> Layout:
    """A dead end around the straight line to the goal: a wall of posts across it at x = 2
    m and two side walls back to x = 0.5 m (no gap the base fits through)."""
    posts = [(2.0, y) for y in np.arange(-1.5, 1.6, 0.5)]
    posts += [(x, s * 1.5) for x in (0.5, 1.0, 1.5) for s in (-1, 1)]
    return Layout(np.array(goal), np.array(posts))


def test_world_geodesic_progress_punishes_a_dead_end() -> None:
    """progress "geodesic": driving into a dead end that points at the goal earns negative
    progress (the navigation function of the true layout rises), where the straight-line
    distance pays for it; driving out of it and round pays."""
    rewards = {}
    for progress in ("euclidean", "geodesic"):
        cfg = EXACT.model_copy(
            update={"progress": progress, "time_penalty": 0.0, "proximity_penalty": 0.0}
        )
        w = world(cfg=cfg)
        layout = cup()
        layout.field = layout_field(layout, cfg, float(w.half[1]))
        clear_scene(w, tuple(layout.goal))
        w.obstacles[0, : len(layout.obstacles)] = layout.obstacles
        if progress == "geodesic":
            w.set_field(0, layout.field)
            w.flip[0] = 1.0
            w.phi[0] = w.potential()[0]
        total = 0.0
        for _ in range(24):  # ~0.9 m straight into the cup
            _, r, term, _, _ = w.step(np.array([[0.6, 0.0]]))
            assert not term[0]
            total += float(r[0])
        rewards[progress] = total
    assert rewards["euclidean"] > 0.5
    assert rewards["geodesic"] < -0.3
    # the field itself: lower outside the cup's mouth than at its bottom, finite in free
    # space, infinite on a post
    layout = cup()
    phi = layout_field(layout, EXACT, 0.335)
    assert phi.at(np.array([1.5, 0.0])) > phi.at(np.array([0.0, 0.0])) + 1.0
    assert np.isinf(phi.at(layout.obstacles[0]))
    assert phi.at(np.array([5.5, 0.0])) < 1.0


def test_world_potential_table_matches_each_field() -> None:
    """The batched lookup of every base's navigation function (one flat table) gives what
    each layout's own Potential gives, on mirrored layouts too, through resets; and a field
    set after the pools is the one used."""
    cfg = NavWorldConfig(progress="geodesic", layout_pool=3)
    w = world(n=24, cfg=cfg, seed=3)
    rng = np.random.default_rng(0)
    own = {id(lay.field): lay.field for pool in w.pools.values() for lay in pool}
    by_index = {w._table.index_of(f): f for f in own.values()}
    flips = set()
    for _ in range(120):
        a = rng.uniform(-1.0, 1.0, (w.n, 2))
        a[:, 0] = np.abs(a[:, 0])
        w.step(a)
        flips.update(w.flip.tolist())
        want = [
            by_index[int(f)].at(w.pose[i, :2] * (1.0, w.flip[i])) for i, f in enumerate(w.field_id)
        ]
        np.testing.assert_array_equal(w.potential(), np.array(want, np.float64))
    assert flips == {1.0, -1.0} and np.isfinite(w.potential()).any()
    layout = w.pools["dense"][0]
    extra = layout_field(Layout(layout.goal * 0.5, layout.obstacles), cfg, float(w.half[1]))
    w.set_field(0, extra)
    assert float(w.potential(np.array([0]))[0]) == float(extra.at(w.pose[0, :2] * (1.0, w.flip[0])))


def test_world_outcomes_collision_success_timeout() -> None:
    """Straight at a post: "collision" when the outline comes within 1 cm, the episode
    restarts and the info carries the terminal observation; straight at a free goal:
    "success" within the success radius; standing still: "timeout" at the time limit."""
    w = world()
    clear_scene(w)
    w.obstacles[0, 0] = (2.0, 0.0)
    outcome = None
    for _ in range(200):
        _, reward, term, trunc, infos = w.step(np.array([[0.5, 0.0]]))
        if "outcome" in infos[0]:
            outcome = infos[0]
            break
    assert outcome is not None and outcome["outcome"] == "collision" and term[0] and not trunc[0]
    assert reward[0] < -4.0  # the collision penalty
    assert outcome["terminal_observation"].shape == (FEATURES,)
    assert w.steps[0] == 0  # restarted

    w = world()
    clear_scene(w, (3.0, 0.0))
    for _ in range(200):
        _, reward, term, _, infos = w.step(np.array([[0.8, 0.0]]))
        if "outcome" in infos[0]:
            break
    assert infos[0]["outcome"] == "success" and term[0] and reward[0] > 4.0
    assert infos[0]["path_length_m"] == pytest.approx(2.5, abs=0.1)

    # collision_margin: the same drive ends earlier, farther from the post
    ends = {}
    for margin in (0.0, 0.1):
        w = world(cfg=EXACT.model_copy(update={"collision_margin": margin}))
        clear_scene(w)
        w.obstacles[0, 0] = (2.0, 0.0)
        for k in range(200):
            if "outcome" in w.step(np.array([[0.5, 0.0]]))[4][0]:
                ends[margin] = k
                break
    assert ends[0.1] < ends[0.0] - 3  # 0.1 m at 0.5 m/s: 4 steps

    w = world(cfg=EXACT.model_copy(update={"max_duration_s": 1.0}))
    clear_scene(w)
    for _ in range(20):
        _, _, term, trunc, infos = w.step(np.zeros((1, 2)))
    assert infos[0]["outcome"] == "timeout" and trunc[0] and not term[0]


def test_world_layouts_are_the_obstacle_course_levels() -> None:
    """Each base's scene is the obstacle course's own at its level: gaps respected, the
    dense level crowded, mirrored layouts as valid as drawn ones; "open" is go_to_goal's
    (2-5 m in any direction, no obstacles)."""
    from tether.sim.tasks.config_base_tasks import ObstacleCourseConfig

    open_world = world(20, EXACT.model_copy(update={"densities": ("open",)}), seed=2)
    assert np.all(open_world.obstacles[:, :, 0] > 50)  # no obstacles
    dist = np.hypot(*open_world.goal.T)
    assert dist.min() >= 2.0 - 1e-9 and dist.max() <= 5.0 + 1e-9
    assert (open_world.goal[:, 0] < 0).any()  # goals behind the start too
    for level in ("sparse", "dense"):
        cfg = EXACT.model_copy(update={"densities": (level,), "layout_pool": 4})
        w = world(40, cfg, seed=1)
        gap = ObstacleCourseConfig(density=level).min_gap
        counts = []
        for i in range(40):
            pts = w.obstacles[i][w.obstacles[i, :, 0] < 50]
            counts.append(len(pts))
            for a in range(len(pts)):
                for b in range(a + 1, len(pts)):
                    assert np.linalg.norm(pts[a] - pts[b]) >= 2 * OBSTACLE_RADIUS + gap - 1e-9
            assert np.linalg.norm(w.goal[i]) >= 6.0 - 1e-9
        if level == "dense":
            assert np.mean(counts) >= 9


@pytest.mark.mujoco
def test_world_lidar_matches_the_engine_lidar(repo: Path) -> None:
    """The kinematic world's lidar (exact rays to circles) reads what MuJoCo's ray casts
    read for the same layout and pose, within 2 cm on every beam."""
    pytest.importorskip("mujoco")
    from tether.core.config import load_config
    from tether.sim.runner import SimRunner

    cfg = load_config(
        repo / "configs/experiments/husky_obstacle_course.yaml",
        [
            "sim.type=mujoco",
            "sim.cameras=[]",
            "sim.reset_noise=0.0",
            "sim.mobile_base.lidar.noise_std=0.0",
        ],
    )
    runner = SimRunner(cfg)
    try:
        obs = runner.reset()
        b = runner.backend
        w = world()
        names = [f"obstacle_{i}" for i in range(6)]
        w.obstacles[0, :] = PARKING[0]
        w.obstacles[0, :6] = [b.body_pose(n)[0][:2] for n in names]
        pos, quat = b.body_pose("base_footprint")
        from tether.sim.robots.diff_drive import yaw_of

        w.pose[0] = (pos[0], pos[1], yaw_of(quat))
        engine = np.asarray(obs["scan"], np.float64)
        mine = w.scan()[0]
    finally:
        runner.backend.close()
    assert (engine < 9.9).sum() >= 5  # the scan sees obstacles
    np.testing.assert_allclose(mine, engine, atol=0.02)


def test_vec_env_auto_resets_like_dummy_vec_env() -> None:
    pytest.importorskip("stable_baselines3")
    from tether.policies.nav.vec_env import NavVecEnv

    venv = NavVecEnv(world(3))
    obs = venv.reset()
    assert obs.shape == (3, FEATURES) and venv.observation_space.shape == (FEATURES,)
    venv.world.obstacles[1, 0] = (1.2, 0.0)  # base 1 will hit it
    ended = False
    for _ in range(100):
        obs, rew, done, infos = venv.step(np.tile([[0.6, 0.0]], (3, 1)).astype(np.float32))
        if done[1]:
            assert infos[1]["outcome"] == "collision"
            assert not np.array_equal(infos[1]["terminal_observation"], obs[1])
            ended = True
            break
    assert ended
    assert venv.env_is_wrapped(object) == [False] * 3


@pytest.mark.slow
def test_train_export_and_serve(repo: Path, tmp_path: Path) -> None:
    """A short nav_ppo run writes the checkpoint, curve and evaluations; the export runs in
    onnxruntime with the numpy features + actor's twist (parity < 1e-5) and is served by
    the generic onnx policy, which reads the goal through the input's slice."""
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("onnxruntime")
    from tether.cli.main import main
    from tether.core.config import load_config
    from tether.core.types import Observation
    from tether.policies.config_onnx import OnnxPolicyConfig
    from tether.policies.nav.model import numpy_actor
    from tether.policies.nav.trainer import load_actor, state_numpy
    from tether.policies.runtime import OnnxPolicy

    out = tmp_path / "nav"
    args = [
        "train",
        str(repo / "configs/experiments/husky_nav_ppo.yaml"),
        "--out",
        str(out),
        "train.total_steps=8000",
        "train.num_envs=16",
        "train.ppo.n_steps=64",
        "train.ppo.batch_size=256",
        "train.eval_every_steps=4000",
        "train.eval_episodes=3",
        "train.world.layout_pool=3",
    ]
    assert main(args) == 0
    result = json.loads((out / "train.json").read_text())
    assert result["env_steps"] >= 8000 and len(result["evaluations"]) >= 2
    assert set(result["best"]["levels"]) == {"open", "sparse", "medium", "dense"}
    assert (out / "training_curve.png").stat().st_size > 1000
    assert main(["export", str(out), "--format", "onnx"]) == 0
    meta = json.loads((out / "onnx/model.json").read_text())
    assert meta["parity"] < 1e-5 and meta["format"] == "tether-onnx/1"

    cfg = load_config(repo / "configs/experiments/husky_nav_ppo.yaml")
    spec = registry.load("robot", "husky").spec(control_hz=HZ, cameras=())
    policy = OnnxPolicy(OnnxPolicyConfig(model=out / "onnx/model.onnx"), spec)
    actor, contract = load_actor(out)
    act = numpy_actor(state_numpy(actor))
    # the yaml bounds the planner's twist inside the robot's
    v_max, w_max = contract["velocity_bounds"]
    assert (v_max, w_max) == (cfg.train.world.max_speed, cfg.train.world.max_yaw_rate)
    rng = np.random.default_rng(0)
    for k in range(5):
        state = np.zeros(13, np.float32)
        state[:5] = rng.uniform([-2, -2, -3, -1, -2], [2, 2, 3, 1, 2])
        env = rng.uniform(-6, 6, 7 * 7).astype(np.float32)  # the goal, then 6 obstacles
        scan = rng.uniform(0.2, 10.0, 64).astype(np.float32)
        twist = policy.act(
            Observation({"state": state, "env_state": env, "scan": scan}, stamp_ns=k * 50_000_000)
        )
        f = features(scan, state[:3].astype(np.float64), env[:2], state[3:5], v_max, w_max)
        np.testing.assert_allclose(twist.actions[0], act(f[None])[0], atol=1e-5)
        assert abs(twist.actions[0][0]) <= v_max + 1e-6 and abs(twist.actions[0][1]) <= w_max + 1e-6
