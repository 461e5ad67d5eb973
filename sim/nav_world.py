"""A batched kinematic world for training the learned planner: N differential-drive bases
on the obstacle course, stepped together in numpy (tens of thousands of control steps per
second on one core, where one physics engine runs about 1,500).

Per base and control step (``dt``):

1. the policy's command (v, w) waits ``latency`` steps (a queue), then is clipped to the
   robot's velocity bounds and ramped at its accelerations (times ``accel_scale``: a heavier
   or weaker base), as the simulators' ``limit_acceleration`` does;
2. the base moves as a unicycle by that twist times its slip gains (``lin_gain``,
   ``yaw_gain``): a skid-steer turns slower than its wheels say (docs/mobile_base.md);
3. wheel odometry integrates the unslipped twist, so it drifts from the true pose as the
   engines' odometry does;
4. the lidar casts ``n_beams`` rays from the base centre at the obstacles (exact circles),
   plus Gaussian noise and dropouts (a dropped beam reads range_max).

The layouts are the obstacle course's own (``ObstacleCourseTask.reset`` on a stand-in
backend), at the density each base draws. Outcomes as in the engines: success within the
task's success radius of the goal, collision when the outline comes within 1 cm of an
obstacle, timeout at the time limit. The domain randomisation (latency, slip, acceleration,
lidar noise and dropouts) is drawn per base at each reset from ``NavWorldConfig``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tether.core.robot_kinds import MobileBaseDescription
from tether.sim.base_scene import OBSTACLE_RADIUS, PARKING
from tether.sim.config_nav_world import NavWorldConfig
from tether.sim.experts.navfn import Potential, grid_cells, potential
from tether.sim.nav_features import FEATURES, GOAL_CAP, RANGE_CAP, SECTORS, features
from tether.sim.robots.diff_drive import beam_angles, yaw_quat
from tether.sim.tasks.config_base_tasks import GoToGoalConfig, ObstacleCourseConfig
from tether.sim.tasks.obstacle_course import TOUCH, ObstacleCourseTask


class LayoutSim:
    """The part of a backend the obstacle course's reset uses: poses in a dict, the robot's
    description; the base at the origin facing +x."""

    def __init__(self, robot: MobileBaseDescription) -> None:
        self.robot = robot
        self.poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def clear(self) -> None:
        self.poses = {"base_footprint": (np.zeros(3), yaw_quat(0.0))}

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self.poses:
            return np.array([*PARKING, 0.0]), yaw_quat(0.0)
        return self.poses[name]

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        self.poses[name] = (np.asarray(pos, float).copy(), np.asarray(quat, float).copy())


@dataclass
class Layout:
    """One episode's scene: the goal (2,) and the obstacle centres (M, 2) (parked ones far)."""

    goal: np.ndarray
    obstacles: np.ndarray
    # the navigation function towards the goal (geodesic progress only)
    field: Potential | None = None


def draw_layout(task: ObstacleCourseTask, sim: LayoutSim, rng: np.random.Generator) -> Layout:
    """The obstacle course's layout for one episode (its own rejection sampler)."""
    sim.clear()
    task.reset(sim, rng)  # type: ignore[arg-type]
    goal = sim.body_pose("goal")[0][:2]
    obstacles = np.array([sim.body_pose(o)[0][:2] for o in task.obstacles]).reshape(-1, 2)
    return Layout(goal, obstacles)


def layout_field(layout: Layout, cfg: NavWorldConfig, half_width: float) -> Potential:
    """The navigation function of a layout (``cfg.progress == "geodesic"``): lethal where the
    base's centre comes within its half width less 5 cm of an obstacle's surface (a gap it
    fits through stays open), inflated ``cfg.plan_inflation`` m beyond that."""
    real = layout.obstacles[np.hypot(*layout.obstacles.T) < 0.5 * abs(PARKING[0])]
    lethal = OBSTACLE_RADIUS + half_width - 0.05
    return potential(
        real,
        layout.goal,
        np.zeros((1, 2)),
        cfg.plan_resolution,
        lethal,
        lethal + cfg.plan_inflation,
        3.0,
        cfg.plan_inflation_weight,
    )


def scene_task(level: str, max_duration_s: float) -> ObstacleCourseTask:
    """The task whose reset draws a level's layouts: the obstacle course at that density, or
    for "open" one without obstacles and with go_to_goal's goal ranges."""
    if level == "open":
        free = GoToGoalConfig()
        cfg = ObstacleCourseConfig(
            n_obstacles=0,
            distance_range=free.distance_range,
            bearing_range=free.bearing_range,
            max_duration_s=max_duration_s,
        )
        return ObstacleCourseTask(cfg)
    return ObstacleCourseTask(ObstacleCourseConfig(density=level, max_duration_s=max_duration_s))


class BatchedNavWorld:
    """N bases stepped together (see the module docstring). ``step`` takes commands (N, 2)
    in [-1, 1] (times the velocity bounds) and returns features, rewards, terminated,
    truncated and each base's outcome; finished bases restart at once (``last_outcome``
    keeps how each ended)."""

    def __init__(
        self,
        cfg: NavWorldConfig,
        robot: MobileBaseDescription,
        n: int,
        control_hz: float,
        seed: int = 0,
    ) -> None:
        self.cfg, self.robot, self.n = cfg, robot, n
        self.dt = 1.0 / control_hz
        self.v_max = min(float(robot.max_linear), cfg.max_speed or math.inf)
        self.w_max = min(float(robot.max_angular), cfg.max_yaw_rate or math.inf)
        self.accel = np.array([robot.max_linear_accel, robot.max_angular_accel], np.float64)
        self.half = np.asarray(robot.footprint, np.float64)
        self.angles = beam_angles(cfg.n_beams, cfg.fov_deg)
        self.rng = np.random.default_rng(seed)
        w = np.asarray(cfg.density_weights or [1.0] * len(cfg.densities), np.float64)
        self._level_p = w / w.sum()
        self.tasks = {level: scene_task(level, cfg.max_duration_s) for level in cfg.densities}
        m = max(1, *(t.cfg.n_obstacles for t in self.tasks.values()))
        self.max_steps = round(cfg.max_duration_s * control_hz)
        self.success_radius = ObstacleCourseConfig().success_radius
        self._sim = LayoutSim(robot)
        # layouts drawn up front (the rejection sampler takes ~7 ms, a step of all bases
        # ~3 ms): a pool per level, each used as drawn or mirrored across the start-goal axis
        self.pools = {
            level: [self._draw(task) for _ in range(cfg.layout_pool)]
            for level, task in self.tasks.items()
        }
        # state per base
        self.pose = np.zeros((n, 3))  # true x, y, yaw
        self.odom = np.zeros((n, 3))
        self.vel = np.zeros((n, 2))  # the ramped command in force
        self.goal = np.zeros((n, 2))
        self.obstacles = np.full((n, m, 2), PARKING[0])
        self.steps = np.zeros(n, np.int64)
        self.dist = np.zeros(n)
        self.queue = np.zeros((n, cfg.latency_steps[1] + 1, 2))
        # domain randomisation per base
        self.latency = np.zeros(n, np.int64)
        self.gains = np.ones((n, 2))
        self.offset = np.zeros(n)
        self.accel_scale = np.ones(n)
        self.noise = np.zeros(n)
        self.dropout = np.zeros(n)
        self.level = np.zeros(n, np.int64)
        self.gyro_bias = np.zeros(n)
        # geodesic progress: each base's navigation function, its y sign (mirrored layouts
        # query the unmirrored function at (x, -y)) and the potential where it stands; the
        # pools' functions live in one table, each base holds its index (-1: none; OTHER: a
        # function outside the pools, in _other)
        self._table = _FieldTable([lay.field for pool in self.pools.values() for lay in pool])
        self.field_id = np.full(n, -1, np.int64)
        self._other: dict[int, Potential] = {}
        self.flip = np.ones(n)
        self.phi = np.zeros(n)
        self.last_outcome = [""] * n
        self.episode_stats: list[dict[str, Any]] = []
        self._path = np.zeros(n)
        for i in range(n):
            self._reset_one(i)

    # ---- episodes -----------------------------------------------------------------------

    def _draw(self, task: ObstacleCourseTask) -> Layout:
        layout = draw_layout(task, self._sim, self.rng)
        if self.cfg.progress == "geodesic":
            layout.field = layout_field(layout, self.cfg, float(self.half[1]))
        return layout

    def potential(self, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The navigation function (geodesic progress) at each base's true position; inf
        in a lethal cell."""
        ids = np.arange(self.n)[idx]
        fid = self.field_id[ids]
        xy = self.pose[ids, :2] * np.stack([np.ones(len(ids)), self.flip[ids]], 1)
        out = self._table.at(fid, xy)
        none = fid == -1  # no field: the straight-line distance
        out[none] = np.hypot(*(self.goal[ids[none]] - self.pose[ids[none], :2]).T)
        for k in np.flatnonzero(fid == OTHER):  # drawn at a reset (layout_pool 0), or set
            out[k] = float(self._other[int(ids[k])].at(xy[k]))
        return out

    def set_field(self, i: int, field: Potential | None) -> None:
        """Base i's navigation function from now on (unmirrored)."""
        self._other.pop(i, None)
        self.field_id[i] = self._table.index_of(field)
        if field is not None and self.field_id[i] < 0:
            self.field_id[i] = OTHER
            self._other[i] = field

    def _reset_one(self, i: int) -> None:
        c, rng = self.cfg, self.rng
        levels = list(self.tasks)
        if c.density_weights is None:
            self.level[i] = int(rng.integers(len(levels)))
        else:
            self.level[i] = int(rng.choice(len(levels), p=self._level_p))
        level = levels[self.level[i]]
        pool = self.pools[level]
        self.flip[i] = 1.0
        if pool:
            layout = pool[int(rng.integers(len(pool)))]
            if rng.random() < 0.5:  # mirrored: y -> -y
                flip = np.array([1.0, -1.0])
                layout = Layout(layout.goal * flip, layout.obstacles * flip, layout.field)
                self.flip[i] = -1.0
        else:
            layout = self._draw(self.tasks[level])
        self.set_field(i, layout.field)
        self.goal[i] = layout.goal
        self.obstacles[i] = PARKING[0]
        self.obstacles[i, : len(layout.obstacles)] = layout.obstacles
        noise = c.start_noise
        self.pose[i] = rng.uniform(-noise, noise, 3)
        self.odom[i] = self.pose[i]  # the odom frame starts at the true pose (the engines' too)
        self.vel[i] = 0.0
        self.queue[i] = 0.0
        self.steps[i] = 0
        self._path[i] = 0.0
        self.latency[i] = rng.integers(c.latency_steps[0], c.latency_steps[1] + 1)
        self.gains[i] = (rng.uniform(*c.lin_gain), rng.uniform(*c.yaw_gain))
        # drawn only when randomised (the runs before it existed keep their random stream)
        lo, hi = c.rotation_offset
        self.offset[i] = rng.uniform(lo, hi) if hi > lo else lo
        self.accel_scale[i] = rng.uniform(*c.accel_scale)
        self.noise[i] = rng.uniform(*c.lidar_noise)
        self.dropout[i] = rng.uniform(*c.lidar_dropout)
        self.gyro_bias[i] = rng.uniform(-c.gyro_bias, c.gyro_bias)
        self.dist[i] = float(np.hypot(*(self.goal[i] - self.pose[i, :2])))
        phi = float(self.potential(np.array([i]))[0])
        self.phi[i] = phi if math.isfinite(phi) else math.nan

    def feature_info(self) -> dict[str, Any]:
        """What the features are (a planner's contract carries it; nav_features.py)."""
        return {
            "dim": FEATURES,
            "sectors": SECTORS,
            "range_cap": RANGE_CAP,
            "goal_cap": GOAL_CAP,
            "n_beams": self.cfg.n_beams,
            "fov_deg": self.cfg.fov_deg,
            "layout": "lidar sectors (nearest return, / range_cap), goal distance / goal_cap, "
            "cos and sin of its bearing (odometry pose), odometry velocity / velocity bounds",
        }

    def observe(self, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Features (N, FEATURES) of every base, or of the bases ``idx`` (nav_features)."""
        return features(
            self.scan(idx), self.odom[idx], self.goal[idx], self.vel[idx], self.v_max, self.w_max
        )

    # ---- sensing ------------------------------------------------------------------------

    def scan(self, idx: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Lidar ranges (N, n_beams) m of every base, or of the bases ``idx``: exact rays
        against the obstacle circles, then noise and dropouts."""
        c = self.cfg
        pose = self.pose[idx]
        # float32 (half the time of float64; ranges within 2e-5 m of it): each beam's
        # direction (N, B, 1) against each obstacle's offset (N, 1, M); the perpendicular
        # distance from the cross product (no cancellation at grazing rays)
        ang = (self.angles[None, :] + pose[:, 2:3]).astype(np.float32)
        rel = (self.obstacles[idx] - pose[:, None, :2]).astype(np.float32)
        cos, sin = np.cos(ang)[:, :, None], np.sin(ang)[:, :, None]
        rx, ry = rel[:, None, :, 0], rel[:, None, :, 1]
        along = cos * rx + sin * ry
        perp = cos * ry - sin * rx
        half_chord = np.float32(OBSTACLE_RADIUS**2) - perp * perp
        hit = (along > 0) & (half_chord > 0)
        np.sqrt(np.maximum(half_chord, 0.0, out=half_chord), out=half_chord)
        along -= half_chord
        along[~hit] = c.range_max
        r = along.min(-1).astype(np.float64)
        r = r + self.rng.standard_normal(r.shape) * self.noise[idx, None]
        r = np.where(self.rng.random(r.shape) < self.dropout[idx, None], c.range_max, r)
        return np.clip(r, c.range_min, c.range_max)

    def clearance(self) -> np.ndarray:
        """Distance (N,) m from each outline to its nearest obstacle surface."""
        c, s = np.cos(self.pose[:, 2]), np.sin(self.pose[:, 2])
        rel = self.obstacles - self.pose[:, None, :2]
        lx = c[:, None] * rel[..., 0] + s[:, None] * rel[..., 1]
        ly = -s[:, None] * rel[..., 0] + c[:, None] * rel[..., 1]
        ox = np.maximum(np.abs(lx) - self.half[0], 0.0)
        oy = np.maximum(np.abs(ly) - self.half[1], 0.0)
        return (np.hypot(ox, oy) - OBSTACLE_RADIUS).min(-1)

    # ---- stepping -----------------------------------------------------------------------

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Commands (N, 2) in [-1, 1] -> (features of the next state, rewards, terminated,
        truncated, infos). A finished base's features are its next episode's first; its
        info holds ``terminal_observation``, ``outcome`` and ``is_success``."""
        c, dt, n = self.cfg, self.dt, self.n
        a = np.clip(np.nan_to_num(np.asarray(actions, np.float64)), -1.0, 1.0)
        cmd = a * np.array([self.v_max, self.w_max])
        # latency: the command leaves the queue latency steps later
        self.queue = np.roll(self.queue, 1, axis=1)
        self.queue[:, 0] = cmd
        applied = self.queue[np.arange(n), self.latency]
        # acceleration limits, scaled per base
        step = self.accel[None, :] * self.accel_scale[:, None] * dt
        self.vel = self.vel + np.clip(applied - self.vel, -step, step)
        # the true motion slips; odometry integrates the wheels' forward speed, and their yaw
        # rate or the gyro's
        v_true, w_true = (self.vel * self.gains).T
        mid = self.pose[:, 2] + 0.5 * w_true * dt
        self.pose = _integrate(self.pose, v_true, w_true, dt)
        # sideways slide about the shifted centre of rotation
        side = self.offset * w_true * dt
        self.pose[:, 0] -= side * np.sin(mid)
        self.pose[:, 1] += side * np.cos(mid)
        if c.heading == "imu":
            w_odom = w_true + self.gyro_bias + c.gyro_noise * self.rng.standard_normal(n)
        else:
            w_odom = self.vel[:, 1]
        self.odom = _integrate(self.odom, self.vel[:, 0], w_odom, dt)
        self.steps += 1
        self._path += np.abs(v_true) * dt
        dist = np.hypot(*(self.goal - self.pose[:, :2]).T)
        if c.progress == "geodesic":
            phi = self.potential()
            # no progress counted into or out of a lethal cell (where the outline all but
            # touches: nan)
            phi = np.where(np.isfinite(phi), phi, np.nan)
            progress = np.nan_to_num(self.phi - phi, nan=0.0)
            self.phi = phi
        else:
            progress = self.dist - dist
        self.dist = dist
        clear = self.clearance()
        success = dist <= self.success_radius
        collision = (clear < TOUCH + c.collision_margin) & ~success
        timeout = (self.steps >= self.max_steps) & ~success & ~collision
        reward = (
            c.progress_reward * progress
            - c.time_penalty
            + c.success_reward * success
            - c.collision_penalty * collision
            - c.proximity_penalty * np.clip((c.proximity - clear) / c.proximity, 0.0, 1.0)
        )
        terminated = success | collision
        done = terminated | timeout
        obs = self.observe()
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        for i in np.flatnonzero(done):
            outcome = "success" if success[i] else "collision" if collision[i] else "timeout"
            self.last_outcome[i] = outcome
            stats = {
                "outcome": outcome,
                "level": list(self.tasks)[self.level[i]],
                "time_s": round(float(self.steps[i] * dt), 3),
                "path_length_m": round(float(self._path[i]), 3),
            }
            self.episode_stats.append(stats)
            infos[i] = {
                **stats,
                "terminal_observation": obs[i].copy(),
                "is_success": bool(success[i]),
                "TimeLimit.truncated": bool(timeout[i]),
            }
            self._reset_one(int(i))
        if done.any():  # the restarted bases' first observations
            obs[done] = self.observe(done)
        return obs, reward.astype(np.float32), terminated, timeout, infos


# field_id of a base whose navigation function is not in the pools' table
OTHER = -2


class _FieldTable:
    """The pools' navigation functions in one flat array, so that the potential of every
    base is one gather (a Python loop over the bases took about a quarter of a step).
    Built once: a function from outside the pools is not added (index -1)."""

    def __init__(self, fields: list[Potential | None]) -> None:
        known = list({id(f): f for f in fields if f is not None}.values())
        self._ids = {id(f): k for k, f in enumerate(known)}
        self._keep = known  # the ids stay valid while the fields live
        shapes = np.array([f.values.shape for f in known], np.int64).reshape(-1, 2)
        sizes = shapes.prod(axis=1)
        self.offset = (np.cumsum(sizes) - sizes).astype(np.int64)
        self.h, self.w = shapes[:, 0], shapes[:, 1]
        self.origin = np.array([f.origin for f in known], np.float64).reshape(-1, 2)
        self.res = np.array([f.res for f in known], np.float64)
        self.values = np.concatenate([np.zeros(0), *(f.values.ravel() for f in known)])

    def index_of(self, field: Potential | None) -> int:
        """The field's index; -1 for None or a field outside the table."""
        return -1 if field is None else self._ids.get(id(field), -1)

    def at(self, fid: np.ndarray, xy: np.ndarray) -> np.ndarray:
        """The potential of fields ``fid`` (K,) at points (K, 2), as Potential.at (nearest
        cell, inf off the grid); nan where fid < 0 (the caller fills those)."""
        out = np.full(len(fid), np.nan)
        ok = fid >= 0
        if not ok.any():
            return out
        f = fid[ok]
        i, j, inside = grid_cells(xy[ok], self.origin[f], self.res[f], self.h[f], self.w[f])
        out[ok] = np.where(inside, self.values[self.offset[f] + i * self.w[f] + j], np.inf)
        return out


def _integrate(pose: np.ndarray, v: np.ndarray, w: np.ndarray, dt: float) -> np.ndarray:
    """Poses (N, 3) after a twist (v, w) held for dt (exact arcs; straight when w ~ 0)."""
    x, y, th = pose.T
    dth = w * dt
    small = np.abs(dth) < 1e-9
    safe = np.where(small, 1.0, dth)
    k = np.where(small, dt * v, v * dt * np.sin(safe / 2) / (safe / 2))
    mid = th + dth / 2
    return np.stack([x + k * np.cos(mid), y + k * np.sin(mid), _wrap(th + dth)], axis=1)


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + math.pi) % (2 * math.pi) - math.pi
