"""Reach: bring the tool centre point to a target point (a visual-only body ``target``)."""

from __future__ import annotations

import numpy as np

from tether.core.protocols import SimBackend
from tether.sim.tasks.arith import norm
from tether.sim.tasks.config_tasks import ReachConfig

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


class ReachTask:
    """Reads and writes state only through ``body_pose`` / ``set_body_pose`` / ``ee_pose``."""

    name = "reach"
    objects: tuple[str, ...] = ("target",)

    def __init__(self, cfg: ReachConfig | None = None) -> None:
        self.cfg = cfg or ReachConfig()
        # episode time limit (s of sim time); backends report truncated from then on
        self.max_duration_s = self.cfg.max_duration_s

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        """Place the target uniformly in the configured box (world frame, m)."""
        c = self.cfg
        lo = np.array([c.x_range[0], c.y_range[0], c.z_range[0]])
        hi = np.array([c.x_range[1], c.y_range[1], c.z_range[1]])
        sim.set_body_pose("target", rng.uniform(lo, hi), IDENTITY)

    def distance(self, sim: SimBackend) -> float:
        """TCP-to-target distance (m)."""
        return norm(sim.ee_pose()[0] - sim.body_pose("target")[0])

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in [0, 1]: 1 - tanh(10 * distance (m)); 1 on target, 0.8 at 2 cm."""
        return self.score(sim)[0]

    def success(self, sim: SimBackend) -> bool:
        """TCP within ``success_radius`` (2 cm) of the target."""
        return self.distance(sim) <= self.cfg.success_radius

    def score(self, sim: SimBackend) -> tuple[float, bool]:
        """``(reward(sim), success(sim))`` from one distance (a backend's step)."""
        d = self.distance(sim)
        return float(1.0 - np.tanh(10.0 * d)), d <= self.cfg.success_radius
