"""Lift: grasp the cube (free body ``cube``) on the table and raise it."""

from __future__ import annotations

import numpy as np

from tether.core.protocols import SimBackend
from tether.sim.tasks.arith import clip01, norm
from tether.sim.tasks.config_tasks import LiftConfig


class LiftTask:
    """Reads and writes state only through ``body_pose`` / ``set_body_pose`` / ``ee_pose``."""

    name = "lift"
    objects: tuple[str, ...] = ("cube",)

    def __init__(self, cfg: LiftConfig | None = None) -> None:
        self.cfg = cfg or LiftConfig()
        # episode time limit (s of sim time); backends report truncated from then on
        self.max_duration_s = self.cfg.max_duration_s

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None:
        """Put the cube at rest on the table: x, y and yaw uniform in the configured ranges."""
        c = self.cfg
        x = rng.uniform(*c.x_range)
        y = rng.uniform(*c.y_range)
        yaw = rng.uniform(*c.yaw_range)
        quat = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
        sim.set_body_pose("cube", np.array([x, y, c.rest_z]), quat)

    def height(self, sim: SimBackend) -> float:
        """Cube centre height above its resting height (m)."""
        return float(sim.body_pose("cube")[0][2] - self.cfg.rest_z)

    def reward(self, sim: SimBackend) -> float:
        """Dense reward in [0, 3]: reaching ``1 - tanh(10 * |tcp - cube|)`` plus lifting
        ``2 * clip(height / lift_height, 0, 1)``; the lift term only counts while the TCP is
        within 3 cm of the cube (so knocking it up does not pay)."""
        return self.score(sim)[0]

    def success(self, sim: SimBackend) -> bool:
        """Cube centre at least ``lift_height`` (8 cm) above its resting height."""
        return self.height(sim) >= self.cfg.lift_height

    def score(self, sim: SimBackend) -> tuple[float, bool]:
        """``(reward(sim), success(sim))`` from one read of the poses (a backend's step)."""
        cube = sim.body_pose("cube")[0]
        dist = norm(sim.ee_pose()[0] - cube)
        height = float(cube[2] - self.cfg.rest_z)
        reward = 1.0 - np.tanh(10.0 * dist)
        if dist < 0.03:
            reward += 2.0 * clip01(height / self.cfg.lift_height)
        return float(reward), height >= self.cfg.lift_height
