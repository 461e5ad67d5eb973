"""Go to goal: drive a mobile base to a goal point (a visual-only marker ``goal``)."""

from __future__ import annotations

import math

import numpy as np

from tether.core.protocols import SimBackend
from tether.sim.base_scene import BASE_BODY as BASE
from tether.sim.tasks.config_base_tasks import GoToGoalConfig, _BaseTaskConfig

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def goal_distance(sim: SimBackend) -> float:
    """Planar distance (m) from the base centre to the goal."""
    d = sim.body_pose(BASE)[0][:2] - sim.body_pose("goal")[0][:2]
    return float(np.hypot(*d))


def place_goal(sim: SimBackend, cfg: _BaseTaskConfig, rng: np.random.Generator) -> np.ndarray:
    """Put the goal at a distance and bearing drawn from ``cfg``'s ranges, relative to the
    base's start position; returns its (x, y) (m)."""
    start = sim.body_pose(BASE)[0][:2]
    dist = rng.uniform(*cfg.distance_range)
    bearing = rng.uniform(*cfg.bearing_range)
    goal = start + dist * np.array([math.cos(bearing), math.sin(bearing)])
    sim.set_body_pose("goal", np.array([goal[0], goal[1], 0.0]), IDENTITY)
    return goal


class PathTracker:
    """Per-episode path length of the base (the true pose, at the control rate): the
    ``track`` / ``metrics`` hooks of a mobile-base task (sim/scoring.py, SimRunner.summary)."""

    path_length = 0.0
    _last_xy: np.ndarray | None = None

    def start_path(self, sim: SimBackend) -> None:
        self.path_length = 0.0
        self._last_xy = sim.body_pose(BASE)[0][:2].copy()

    def track(self, sim: SimBackend) -> None:
        xy = sim.body_pose(BASE)[0][:2].copy()
        if self._last_xy is not None:
            self.path_length += float(np.hypot(*(xy - self._last_xy)))
        self._last_xy = xy

    def metrics(self) -> dict[str, float]:
        return {"path_length_m": round(self.path_length, 3)}


class GoToGoalTask(PathTracker):
    """Reads and writes state only through ``body_pose`` / ``set_body_pose``."""

    name = "go_to_goal"
    objects: tuple[str, ...] = ("goal",)

    def __init__(self, cfg: GoToGoalConfig | None = None) -> None:
        self.cfg = cfg or GoToGoalConfig()
        self.max_duration_s = self.cfg.max_duration_s

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        place_goal(sim, self.cfg, rng)
        self.start_path(sim)

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in (0, 1]: 1 - tanh(distance / 2 m); 1 at the goal, 0.76 at 2 m."""
        return float(1.0 - math.tanh(goal_distance(sim) / 2.0))

    def success(self, sim: SimBackend) -> bool:
        """Base centre within ``success_radius`` (0.5 m) of the goal."""
        return goal_distance(sim) <= self.cfg.success_radius
