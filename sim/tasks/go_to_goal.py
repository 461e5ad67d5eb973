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


class GoToGoalTask:
    """Reads and writes state only through ``body_pose`` / ``set_body_pose``."""

    name = "go_to_goal"
    objects: tuple[str, ...] = ("goal",)

    def __init__(self, cfg: GoToGoalConfig | None = None) -> None:
        self.cfg = cfg or GoToGoalConfig()
        self.max_duration_s = self.cfg.max_duration_s

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        place_goal(sim, self.cfg, rng)

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in (0, 1]: 1 - tanh(distance / 2 m); 1 at the goal, 0.76 at 2 m."""
        return float(1.0 - math.tanh(goal_distance(sim) / 2.0))

    def success(self, sim: SimBackend) -> bool:
        """Base centre within ``success_radius`` (0.5 m) of the goal."""
        return goal_distance(sim) <= self.cfg.success_radius
