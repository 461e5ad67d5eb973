"""Obstacle course: reach a goal ahead through static cylinders (``obstacle_<i>``)."""

from __future__ import annotations

import math

import numpy as np

from tether.core.errors import ConfigError
from tether.core.protocols import SimBackend
from tether.core.robot_kinds import MobileBaseDescription
from tether.sim.base_scene import OBSTACLE_RADIUS
from tether.sim.robots.diff_drive import yaw_of
from tether.sim.tasks.config_base_tasks import ObstacleCourseConfig
from tether.sim.tasks.go_to_goal import BASE, IDENTITY, PathTracker, goal_distance, place_goal

# tries per obstacle before the rejection sampler gives up on placing it
MAX_TRIES = 200
# the base touches an obstacle when its outline is nearer than this (m)
TOUCH = 0.01


def base_outline(sim: SimBackend) -> np.ndarray:
    """Half-extents (2,) m of the base's outline seen from above (its description's
    ``footprint``: chassis length, outer wheel faces)."""
    desc = getattr(sim, "robot", None)
    if not isinstance(desc, MobileBaseDescription):
        raise ConfigError("the obstacle course needs a mobile-base backend (sim.robot)")
    return np.asarray(desc.footprint, dtype=np.float64)


class ObstacleCourseTask(PathTracker):
    """Goal ahead, ``n_obstacles`` cylinders between the start and the goal, at least
    ``min_gap`` apart. Reads and writes state only through ``body_pose`` / ``set_body_pose``.
    """

    name = "obstacle_course"

    def __init__(self, cfg: ObstacleCourseConfig | None = None) -> None:
        self.cfg = cfg or ObstacleCourseConfig()
        self.max_duration_s = self.cfg.max_duration_s
        self.obstacles = tuple(f"obstacle_{i}" for i in range(self.cfg.n_obstacles))
        self.objects: tuple[str, ...] = ("goal", *self.obstacles)
        self.min_clearance = math.inf
        # (backend, sim time, clearance) of the step in progress (_clearance_now)
        self._cached: tuple[SimBackend, float, float] | None = None

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        """Goal from the distance/bearing ranges, then obstacles by rejection sampling in the
        corridor; obstacles that do not fit stay parked out of the way."""
        c = self.cfg
        start = sim.body_pose(BASE)[0][:2]
        goal = place_goal(sim, c, rng)
        line = goal - start
        length = float(np.linalg.norm(line))
        u = line / length
        n = np.array([-u[1], u[0]])
        r = OBSTACLE_RADIUS
        # the circle around the base's outline stays free of obstacles at the start
        base_radius = float(np.linalg.norm(base_outline(sim)))
        placed: list[np.ndarray] = []
        for i, name in enumerate(self.obstacles):
            for _ in range(MAX_TRIES):
                along = rng.uniform(*c.along_range) * length
                half = 0.3 if (i == 0 and c.block_line) else c.corridor_half_width
                p = start + along * u + rng.uniform(-half, half) * n
                if np.linalg.norm(p - start) < r + c.min_gap + base_radius:
                    continue
                if np.linalg.norm(p - goal) < r + c.min_gap:
                    continue
                if any(np.linalg.norm(p - q) < 2 * r + c.min_gap for q in placed):
                    continue
                placed.append(p)
                sim.set_body_pose(name, np.array([p[0], p[1], 0.0]), IDENTITY)
                break
        self.start_path(sim)
        self._cached = None
        self.min_clearance = self.clearance(sim)

    def clearance(self, sim: SimBackend) -> float:
        """Distance (m) from the base's outline (chassis and wheels; the Husky's is
        1.01 x 0.69 m) to the nearest obstacle surface (<= 0: touching); inf without
        obstacles."""
        half = base_outline(sim)
        pos, quat = sim.body_pose(BASE)
        yaw = yaw_of(quat)
        rot = np.array([[math.cos(yaw), math.sin(yaw)], [-math.sin(yaw), math.cos(yaw)]])
        gaps = []
        for o in self.obstacles:
            local = rot @ (sim.body_pose(o)[0][:2] - pos[:2])  # obstacle centre, base frame
            outside = np.maximum(np.abs(local) - half, 0.0)
            gaps.append(float(np.linalg.norm(outside)) - OBSTACLE_RADIUS)
        return min(gaps) if gaps else math.inf

    def _clearance_now(self, sim: SimBackend) -> float:
        """clearance(sim), computed once per step: track(), reward() and failure() all read
        it (a backend's step calls the three at one sim time)."""
        t = getattr(sim, "sim_time", None)
        cached = self._cached
        if t is not None and cached is not None and cached[0] is sim and cached[1] == t:
            return cached[2]
        value = self.clearance(sim)
        self._cached = None if t is None else (sim, t, value)
        return value

    def track(self, sim: SimBackend) -> None:
        """Path length and the least clearance of the episode so far."""
        super().track(sim)
        self.min_clearance = min(self.min_clearance, self._clearance_now(sim))

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "min_clearance_m": round(self.min_clearance, 4)}

    def reward(self, sim: SimBackend) -> float:
        """1 - tanh(distance to goal / 2 m), minus ``collision_penalty`` while the base
        touches an obstacle (clearance under 1 cm)."""
        r = 1.0 - math.tanh(goal_distance(sim) / 2.0)
        if self._clearance_now(sim) < TOUCH:
            r -= self.cfg.collision_penalty
        return float(r)

    def failure(self, sim: SimBackend) -> str | None:
        """ "collision" once the base touches an obstacle, with ``end_on_collision``."""
        if self.cfg.end_on_collision and self._clearance_now(sim) < TOUCH:
            return "collision"
        return None

    def success(self, sim: SimBackend) -> bool:
        """Base centre within ``success_radius`` (0.5 m) of the goal."""
        return goal_distance(sim) <= self.cfg.success_radius
