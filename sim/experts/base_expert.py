"""A scripted expert for the mobile-base tasks: steer towards the goal along the heading
nearest to it whose corridor the lidar sees free (a follow-the-gap planner), pure numpy.

It reads the base pose (``obs["base_pose"]``: a localization estimate, in simulation the
true pose; or ``obs["state"]``: wheel odometry), ``obs["env_state"]`` (the goal position
first) and ``obs["scan"]`` (lidar ranges), so it runs beside a real robot as well as in
another process than the simulator.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tether.core.config import ComponentConfig
from tether.core.errors import ConfigError
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.sim.experts.config_base_expert import BaseExpertConfig
from tether.sim.robots.diff_drive import beam_angles, wrap_angle, yaw_of

TASKS = ("go_to_goal", "obstacle_course")
# candidate headings (rad, base frame) the planner scores, every 3 deg over +-135 deg
CANDIDATES = np.deg2rad(np.arange(-135.0, 135.1, 3.0))
# distance (m) from the base centre to the front bumper
FRONT = 0.5
# an obstacle nearer than this (m, from the lidar at the base centre) ahead means a corner
# would touch it when turning in place (the outline's corners are 0.61 m out): back off
# until it is BACKOFF away
TOO_CLOSE = 0.58
BACKOFF = 0.75


def check_planner(what: str, spec: RobotSpec, task: ComponentConfig) -> None:
    """A ConfigError unless ``task`` is one a base planner knows and ``spec`` a twist base."""
    if task.type not in TASKS:
        raise ConfigError(f"the {what} knows tasks {', '.join(TASKS)}, not '{task.type}'")
    if spec.action.mode != "twist":
        raise ConfigError(
            f"the {what} drives a twist-controlled base, not '{spec.name}' ({spec.action.mode})"
        )


def planar_pose(obs: Observation, pose_source: str) -> tuple[float, float, float]:
    """Planar pose (x m, y m, yaw rad): wheel odometry (``state``) or ``base_pose``."""
    if pose_source == "odometry":
        x, y, yaw = (float(v) for v in obs["state"][:3])
        return x, y, yaw
    p = np.asarray(obs["base_pose"], dtype=np.float64)
    return float(p[0]), float(p[1]), yaw_of(p[3:7])


def planner_contract(pose_source: str, spec: RobotSpec, task: ComponentConfig) -> dict[str, Any]:
    """The contract of a base planner that reads the pose, the goal and the scan."""
    return {
        "observation_keys": [
            "state" if pose_source == "odometry" else "base_pose",
            "env_state",
            "scan",
        ],
        "action_names": list(spec.action.names),
        "action_mode": spec.action.mode,
        "control_hz": spec.control_hz,
        "task": task.type,
    }


class BaseExpert:
    """Policy for ``go_to_goal`` and ``obstacle_course`` on a ``twist`` mobile base.

    Output: chunks of horizon 1, action (2,) = (vx m/s, wz rad/s).
    """

    def __init__(
        self,
        cfg: BaseExpertConfig,
        spec: RobotSpec,
        task: ComponentConfig,
    ) -> None:
        check_planner("base expert", spec, task)
        self.cfg = cfg
        self.spec = spec
        self.task = task
        self.dt = spec.dt
        self._low = spec.action.low_array()
        self._high = spec.action.high_array()
        self._angles: np.ndarray | None = None
        self.reset()

    def reset(self) -> None:
        self._heading: float | None = None  # last chosen heading, world frame (rad)
        self._backing = False

    def act(self, obs: Observation) -> ActionChunk:
        x, y, yaw = self._pose(obs)
        goal = np.asarray(obs["env_state"], dtype=np.float64)[:2]
        scan = np.asarray(obs["scan"], dtype=np.float64)
        to_goal = goal - np.array([x, y])
        dist = float(np.linalg.norm(to_goal))
        if dist < self.cfg.goal_tolerance:
            return self._chunk(0.0, 0.0, obs.stamp_ns)
        goal_dir = wrap_angle(math.atan2(to_goal[1], to_goal[0]) - yaw)
        # too close to turn in place without a corner touching: back away first
        ang = self._beam_angles(len(scan))
        ahead = np.abs(ang) < math.pi / 3
        if ahead.any() and scan[ahead].min() < (BACKOFF if self._backing else TOO_CLOSE):
            self._backing = True
            side = float(np.sign(ang[ahead][np.argmin(scan[ahead])]))
            return self._chunk(-0.3, 0.3 * side, obs.stamp_ns)
        self._backing = False
        heading, free = self._plan(scan, goal_dir, dist, yaw)
        self._heading = wrap_angle(heading + yaw)
        wz = float(
            np.clip(self.cfg.heading_gain * heading, -self.cfg.max_yaw_rate, self.cfg.max_yaw_rate)
        )
        # drive when roughly facing the heading; slow near obstacles and the goal
        v = self.cfg.max_speed * max(0.0, math.cos(heading)) ** 2
        v = min(v, 0.8 * dist + 0.05)
        v *= float(np.clip((free - FRONT - 0.1) / self.cfg.slow_distance, 0.0, 1.0))
        return self._chunk(v, wz, obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        return planner_contract(self.cfg.pose_source, self.spec, self.task)

    # ---- internals --------------------------------------------------------------------

    def _pose(self, obs: Observation) -> tuple[float, float, float]:
        return planar_pose(obs, self.cfg.pose_source)

    def _chunk(self, v: float, wz: float, stamp: int) -> ActionChunk:
        a = np.clip(np.array([v, wz], dtype=np.float32), self._low, self._high)
        return ActionChunk(a[None], self.dt, stamp)

    def _beam_angles(self, n: int) -> np.ndarray:
        if self._angles is None or len(self._angles) != n:
            self._angles = beam_angles(n, self.cfg.lidar_fov_deg)
        return self._angles

    def _plan(
        self, scan: np.ndarray, goal_dir: float, dist: float, yaw: float
    ) -> tuple[float, float]:
        """The heading (rad, base frame) to steer along and the free distance (m) along it."""
        c = self.cfg
        ang = self._beam_angles(len(scan))
        pts = scan[:, None] * np.stack([np.cos(ang), np.sin(ang)], axis=1)  # (n, 2) m
        # for each candidate heading: forward / lateral offsets of every scan point
        ch, sh = np.cos(CANDIDATES)[:, None], np.sin(CANDIDATES)[:, None]
        fwd = ch * pts[None, :, 0] + sh * pts[None, :, 1]
        lat = -sh * pts[None, :, 0] + ch * pts[None, :, 1]
        blocking = (np.abs(lat) < c.corridor_half_width) & (fwd > 0.0)
        free = np.where(blocking, fwd, np.inf).min(axis=1)  # (n_candidates,)
        need = min(c.lookahead, dist) + FRONT
        cost = np.abs(np.array([wrap_angle(h - goal_dir) for h in CANDIDATES]))
        if self._heading is not None:
            prev = wrap_angle(self._heading - yaw)
            cost = cost + c.switch_cost * np.abs(CANDIDATES - prev)
        feasible = free >= need
        if feasible.any():
            i = int(np.argmin(np.where(feasible, cost, np.inf)))
        else:
            i = int(np.argmax(free))
        # the goal itself, when it is free and within the candidates' span
        if abs(goal_dir) <= CANDIDATES[-1] and feasible[i]:
            j = int(np.argmin(np.abs(CANDIDATES - goal_dir)))
            if feasible[j] and cost[j] <= cost[i] + 1e-9:
                return goal_dir, float(free[j])
        return float(CANDIDATES[i]), float(min(free[i], 1e6))
