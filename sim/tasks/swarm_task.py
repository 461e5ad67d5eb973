"""The ``swarm`` task: N Crazyflies from their starts to their goals without touching
(scenarios in tether.sim.quadrotor.swarm; docs/swarm.md).

Each drone's target marker is its goal (``env_state``: drone i's goal pose), so the
``quad_pid`` policy flies the swarm straight to its goals with no avoidance (the baseline
that collides). Outcomes (SimRunner's summary): ``success`` (every drone within
``goal_radius`` for ``hold_s``), ``collision`` (two centres closer than
``collision_distance``: ends the episode with ``end_on_collision``), ``crash`` (a drone on
the floor), ``timeout``. Metrics: the least separation of the episode, when every drone
first was at its goal, the collisions counted (pairs, once each), the distance flown.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.sim.quadrotor.dynamics import hover_state
from tether.sim.quadrotor.swarm import pair_distances, sample_scenario
from tether.sim.tasks.config_quad_tasks import SwarmConfig
from tether.sim.tasks.quad_tasks import FLOOR_Z, _DroneTask


class SwarmTask(_DroneTask):
    name = "swarm"
    success_terminates = True

    def __init__(self, cfg: SwarmConfig | None = None) -> None:
        self.cfg = cfg or SwarmConfig()
        self.max_duration_s = self.cfg.max_duration_s
        self.starts = np.zeros((0, 3))
        self._reset_score(0)

    def _reset_score(self, n: int) -> None:
        self.min_separation = np.inf
        self.collided_pairs: set[tuple[int, int]] = set()
        self.collision_now = False
        self.hold = 0
        self.all_at_goal_s: float | None = None
        self.path_length = np.zeros(n)
        self._last = np.zeros((n, 3))

    def reset(self, sim: Any, rng: np.random.Generator) -> None:
        n = sim.num_drones
        self.starts, goals = sample_scenario(rng, self.cfg.scenario, n)
        states = hover_state(n)
        states[:, 0:3] = self.starts
        sim.set_drone_states(states)
        self._set_targets(sim, goals)
        self._hold_steps = max(1, round(self.cfg.hold_s / sim.control_dt))
        self._reset_score(n)
        self._last = self.starts.copy()

    def update(self, sim: Any) -> None:
        """Separations, collisions, distance flown and the all-at-goal hold, per step."""
        pos = sim.drone_states()[:, 0:3]
        self.path_length += np.linalg.norm(pos - self._last, axis=1)
        self._last = pos
        if len(pos) > 1:
            d = pair_distances(pos)
            self.min_separation = min(self.min_separation, float(d.min()))
            hit = np.argwhere(np.triu(d < self.cfg.collision_distance))
            self.collision_now = len(hit) > 0
            self.collided_pairs.update((int(i), int(j)) for i, j in hit)
        at_goal = bool(np.all(np.linalg.norm(pos - self.targets, axis=1) <= self.cfg.goal_radius))
        self.hold = self.hold + 1 if at_goal else 0
        if at_goal and self.all_at_goal_s is None:
            self.all_at_goal_s = float(sim.sim_time)

    def reward(self, sim: Any) -> float:
        """Mean over drones of -distance to the goal (m), -1 per colliding step."""
        return float(-np.mean(self.distance(sim)) - float(self.collision_now))

    def success(self, sim: Any) -> bool:
        return self.hold >= self._hold_steps

    def failure(self, sim: Any) -> str | None:
        """'collision' (with end_on_collision), 'crash' (a drone on the floor), else None."""
        if self.cfg.end_on_collision and self.collided_pairs:
            return "collision"
        if np.any(sim.drone_states()[:, 2] <= FLOOR_Z):
            return "crash"
        return None

    def failed(self, sim: Any) -> bool:
        return self.failure(sim) is not None

    def metrics(self) -> dict[str, Any]:
        return {
            "min_separation_m": round(float(self.min_separation), 4),
            "all_at_goal_s": self.all_at_goal_s,
            "collisions": len(self.collided_pairs),
            "mean_path_length_m": round(float(np.mean(self.path_length)), 3),
        }
