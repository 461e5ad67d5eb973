"""Drone tasks: hover, waypoints, figure_eight, for one or several Crazyflies.

A drone task reads and writes the world through a quadrotor backend
(``tether.sim.quadrotor.world.QuadrotorWorld``: ``num_drones``, ``offsets``,
``target_names``, ``drone_states()``, ``set_drone_states()``, ``set_body_pose()``,
``sim_time``, ``control_dt``), so it runs unchanged on PyBullet and MuJoCo. Besides the Task
protocol it has ``update(sim)`` (the backend calls it after every control step, before
``reward``/``success``: it moves the ``target`` markers and keeps the score), ``failed(sim)``
(a crash: the episode is over without success), ``feedforward(t)`` (reference velocity and
acceleration, for the PID policy) and ``success_terminates`` (whether success ends the
episode early, as for the arm tasks, or is judged at the time limit).

Every drone flies the single-drone task shifted by its formation offset; reward is the
mean over drones, success needs every drone, one crash fails the episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.sim.quadrotor import batched_env as hover_def
from tether.sim.quadrotor.control import figure_eight
from tether.sim.quadrotor.dynamics import hover_state
from tether.sim.tasks.config_quad_tasks import FigureEightConfig, HoverConfig, WaypointsConfig

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
# a drone whose centre is this low (m) is on the floor: a crash. The engines' floors hold
# the Crazyflie's collision cylinder with its centre at 0.015 m (the numpy env's clamp: 0 m)
FLOOR_Z = 0.03


class _DroneTask:
    """Shared bookkeeping: targets per drone, crash test, mean reward."""

    name = "drone"
    objects: tuple[str, ...] = ("target",)
    success_terminates = False
    max_duration_s: float

    def _set_targets(self, sim: Any, targets: np.ndarray) -> None:
        """Place every drone's target marker; targets (N, 3) m, world."""
        self.targets = np.asarray(targets, dtype=np.float64)
        for name, pos in zip(sim.target_names, self.targets, strict=True):
            sim.set_body_pose(name, pos, IDENTITY)

    def distance(self, sim: Any) -> np.ndarray:
        """Per-drone distance (N,) m to its current target."""
        return np.asarray(np.linalg.norm(sim.drone_states()[:, 0:3] - self.targets, axis=1))

    def failed(self, sim: Any) -> bool:
        """Some drone is on the floor."""
        return bool(np.any(sim.drone_states()[:, 2] <= FLOOR_Z))

    def reward(self, sim: Any) -> float:
        """Mean over drones of 1 - distance (m) to the target."""
        return float(np.mean(1.0 - self.distance(sim)))

    def feedforward(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Reference velocity (3,) m/s and acceleration (3,) m/s^2 at time t (s)."""
        return np.zeros(3), np.zeros(3)

    def update(self, sim: Any) -> None:
        pass


class HoverTask(_DroneTask):
    """BatchedHoverEnv's episode on a full-physics backend (module docstring of
    tether.sim.quadrotor.batched_env): same reset distribution, reward, crash rule
    (distance > 2 m, or on the floor) and success rule (within 10 cm for the last 10 s)."""

    name = "hover"

    def __init__(self, cfg: HoverConfig | None = None) -> None:
        self.cfg = cfg or HoverConfig()
        self.max_duration_s = self.cfg.max_duration_s
        self.inside_steps = np.zeros(0, dtype=np.int64)
        self._window_steps = 0
        self._dist = np.zeros(0)

    def reset(self, sim: Any, rng: np.random.Generator) -> None:
        """Targets at cfg.target + offsets; drones thrown from hover_def.sample_hover_states."""
        n = sim.num_drones
        self._set_targets(sim, np.asarray(self.cfg.target) + sim.offsets)
        if self.cfg.random_start:
            states, rpm = hover_def.sample_hover_states(rng, n, self.targets, sim.params)
        else:
            states, rpm = hover_state(n), None
            states[:, 0:3] = self.targets
        sim.set_drone_states(states, rpm)
        self.inside_steps = np.zeros(n, dtype=np.int64)
        self._window_steps = round(self.cfg.success_window_s / sim.control_dt)
        self._dist = self.distance(sim)

    def update(self, sim: Any) -> None:
        """Count each drone's consecutive control steps within success_radius."""
        self._dist = self.distance(sim)
        inside = self._dist <= self.cfg.success_radius
        self.inside_steps = np.where(inside, self.inside_steps + 1, 0)

    def reward(self, sim: Any) -> float:
        """Mean over drones of BatchedHoverEnv's reward: 1 - |p - p*| - 0.1 |v| - 0.05 |w|."""
        return float(np.mean(hover_def.hover_reward(sim.drone_states(), self.targets)))

    def failed(self, sim: Any) -> bool:
        return bool(np.any(self._dist > hover_def.CRASH_DISTANCE)) or super().failed(sim)

    def success(self, sim: Any) -> bool:
        """At the time limit, every drone has been within success_radius for the window."""
        at_end = sim.sim_time >= self.max_duration_s - 1e-9
        return bool(at_end and np.all(self.inside_steps >= self._window_steps))


class WaypointsTask(_DroneTask):
    """Fly through ``cfg.waypoints`` in order; success when every drone has held the last."""

    name = "waypoints"
    success_terminates = True

    def __init__(self, cfg: WaypointsConfig | None = None) -> None:
        self.cfg = cfg or WaypointsConfig()
        self.max_duration_s = self.cfg.max_duration_s
        self._points = np.asarray(self.cfg.waypoints, dtype=np.float64)
        self.index = np.zeros(0, dtype=np.int64)
        self.hold = np.zeros(0, dtype=np.int64)
        self._offsets = np.zeros((0, 3))

    def reset(self, sim: Any, rng: np.random.Generator) -> None:
        n = sim.num_drones
        self._offsets = np.asarray(sim.offsets, dtype=np.float64)
        states = hover_state(n)
        states[:, 0:3] = np.asarray(self.cfg.start) + self._offsets
        sim.set_drone_states(states)
        self.index = np.zeros(n, dtype=np.int64)
        self.hold = np.zeros(n, dtype=np.int64)
        self._hold_steps = max(1, round(self.cfg.hold_s / sim.control_dt))
        self._set_targets(sim, self._points[self.index] + self._offsets)

    def update(self, sim: Any) -> None:
        """Advance a drone to its next waypoint once it has held the current one."""
        last = len(self._points) - 1
        inside = self.distance(sim) <= self.cfg.radius
        self.hold = np.where(inside, self.hold + 1, 0)
        advance = (self.hold >= self._hold_steps) & (self.index < last)
        if np.any(advance):
            self.index = self.index + advance
            self.hold[advance] = 0
            self._set_targets(sim, self._points[self.index] + self._offsets)

    def success(self, sim: Any) -> bool:
        last = len(self._points) - 1
        return bool(np.all((self.index == last) & (self.hold >= self._hold_steps)))


class FigureEightTask(_DroneTask):
    """Track the figure-eight reference; success when the RMS position error from
    ``settle_s`` to the time limit is within ``rms_tolerance`` for every drone."""

    name = "figure_eight"

    def __init__(self, cfg: FigureEightConfig | None = None) -> None:
        self.cfg = cfg or FigureEightConfig()
        self.max_duration_s = self.cfg.max_duration_s
        self._sq_sum = np.zeros(0)
        self._count = 0
        self._offsets = np.zeros((0, 3))

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Position, velocity, acceleration (3,) each of the single-drone reference at t s."""
        c = self.cfg
        pos, vel, acc = figure_eight(t, c.size, c.period, c.center)
        return pos[0], vel[0], acc[0]

    def feedforward(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        _, vel, acc = self.reference(t)
        return vel, acc

    def reset(self, sim: Any, rng: np.random.Generator) -> None:
        n = sim.num_drones
        self._offsets = np.asarray(sim.offsets, dtype=np.float64)
        states = hover_state(n)
        states[:, 0:3] = self.reference(0.0)[0] + self._offsets
        sim.set_drone_states(states)
        self._sq_sum = np.zeros(n)
        self._count = 0
        self._set_targets(sim, self.reference(0.0)[0] + self._offsets)

    def update(self, sim: Any) -> None:
        """Score the drones against the reference at the current time, then move the
        markers on (they show the reference the drones chase)."""
        t = sim.sim_time
        self._set_targets(sim, self.reference(t)[0] + self._offsets)
        if t >= self.cfg.settle_s - 1e-9:
            self._sq_sum += self.distance(sim) ** 2
            self._count += 1

    def rms_error(self) -> np.ndarray:
        """Per-drone RMS position error (N,) m since settle_s (NaN before any sample)."""
        if self._count == 0:
            return np.full(self._sq_sum.shape, np.nan)
        return np.asarray(np.sqrt(self._sq_sum / self._count))

    def success(self, sim: Any) -> bool:
        at_end = sim.sim_time >= self.max_duration_s - 1e-9
        return bool(
            at_end and self._count > 0 and np.all(self.rms_error() <= self.cfg.rms_tolerance)
        )
