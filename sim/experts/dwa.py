"""A Dynamic Window Approach local planner for a twist-commanded mobile base (Fox, Burgard
and Thrun 1997; the family of Nav2's default DWB controller), pure numpy.

Each control period: the dynamic window is the (v, w) the base reaches from its last command
within one period at its accelerations, inside the velocity bounds; a grid of samples across
it is rolled out as constant-twist arcs for ``sim_time_s``; an arc is admissible when the
base, braking at its accelerations, stops before the first point where its footprint
(plus ``margin``) meets a lidar point; the admissible arc with the best weighted score of
heading (the goal's bearing from the arc's end), progress towards the goal, clearance
(nearest lidar point along it) and speed wins. Reads the pose as base_expert does (``base_pose`` or wheel odometry),
``env_state`` (the goal first) and ``scan``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ComponentConfig
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.sim.experts.base_expert import check_planner, planar_pose, planner_contract
from tether.sim.experts.config_base_expert import DWAConfig
from tether.sim.experts.navfn import ObstacleMap, Potential, potential
from tether.sim.robots.diff_drive import beam_angles

# remembered points behind the base: within this distance (m), at most this many
REMEMBER, MEMORY_POINTS = 1.5, 256


def _arcs(v: np.ndarray, w: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Poses (x, y, yaw), each (S, K), of constant twists (v, w) (S,) at times t (K,), from
    the origin facing +x; exact for any w, including 0."""
    a = w[:, None] * t[None, :]  # heading change
    s = v[:, None] * t[None, :]  # arc length (signed)
    # x = s sin(a)/a, y = s (1 - cos a)/a = s (a/2) (sin(a/2)/(a/2))^2; np.sinc(x) = sin(pi x)/(pi x)
    x = s * np.sinc(a / np.pi)
    y = s * (a / 2) * np.sinc(a / (2 * np.pi)) ** 2
    return x, y, a


def _signed(lx: np.ndarray, ly: np.ndarray) -> np.ndarray:
    """Signed distance (m) of points to a rectangle, from their offsets beyond its half
    extents along each axis (|x| - hx, |y| - hy): negative inside."""
    return np.hypot(np.maximum(lx, 0.0), np.maximum(ly, 0.0)) + np.minimum(np.maximum(lx, ly), 0.0)


class DWAPlanner:
    """Policy ``dwa`` for ``go_to_goal`` and ``obstacle_course`` on a ``twist`` mobile base.

    Output: chunks of horizon 1, action (2,) = (vx m/s, wz rad/s), always inside the dynamic
    window around the previous command (``window()``)."""

    def __init__(self, cfg: DWAConfig, spec: RobotSpec, task: ComponentConfig) -> None:
        check_planner("dwa planner", spec, task)
        desc = registry.load("robot", spec.name)
        self.cfg, self.spec, self.task = cfg, spec, task
        self.dt = spec.dt
        low, high = spec.action.low_array(), spec.action.high_array()
        self.v_bounds = (max(cfg.min_speed, float(low[0])), min(cfg.max_speed, float(high[0])))
        self.w_bounds = (
            max(-cfg.max_yaw_rate, float(low[1])),
            min(cfg.max_yaw_rate, float(high[1])),
        )
        self.accel = (
            cfg.linear_accel or float(desc.max_linear_accel),
            cfg.angular_accel or float(desc.max_angular_accel),
        )
        self.half = (desc.footprint[0] + cfg.margin, desc.footprint[1] + cfg.margin)
        self.lidar_xy = np.asarray(desc.lidar_xyz[:2], np.float64)
        k = max(1, math.ceil(cfg.sim_time_s / cfg.sim_dt_s - 1e-9))
        self.times = cfg.sim_dt_s * np.arange(1, k + 1)
        self._angles: np.ndarray | None = None
        self.map = ObstacleMap(cfg.plan_resolution)
        # the navigation function's lethal radius: the base's half width less the margin,
        # so that a gap the base fits through stays open on the grid
        self.lethal_radius = (
            cfg.lethal_radius if cfg.lethal_radius is not None else desc.footprint[1] - 0.05
        )
        self.reset()

    def reset(self) -> None:
        self.last = np.zeros(2)  # the previous command (v m/s, w rad/s)
        # lidar points seen before (world frame, m) that have left the scan's field of
        # view: a rolling memory of what is behind the base, as a local costmap keeps it
        self._behind = np.zeros((0, 2))
        self._seen = np.zeros((0, 2))  # the last scan's points (world frame)
        self.map.clear()
        self.plan: Potential | None = None
        self._steps = 0

    # ---- the window ------------------------------------------------------------------

    def window(self) -> tuple[float, float, float, float]:
        """(v_lo, v_hi, w_lo, w_hi): what one control period at the accelerations reaches
        from the previous command, inside the velocity bounds."""
        out = []
        for prev, (lo, hi), acc in zip(
            self.last, (self.v_bounds, self.w_bounds), self.accel, strict=True
        ):
            step = acc * self.dt
            a, b = max(lo, prev - step), min(hi, prev + step)
            if a > b:  # the previous command lies outside the bounds: the nearest reachable
                a = b = min(max(prev, lo), hi)
            out += [a, b]
        return out[0], out[1], out[2], out[3]

    # ---- acting ----------------------------------------------------------------------

    def act(self, obs: Observation) -> ActionChunk:
        x, y, yaw = self._pose(obs)
        goal = np.asarray(obs["env_state"], dtype=np.float64)[:2]
        scan = np.asarray(obs["scan"], dtype=np.float64)
        v_lo, v_hi, w_lo, w_hi = self.window()
        c, s = math.cos(yaw), math.sin(yaw)
        rot = np.array([[c, -s], [s, c]])  # base frame -> world frame
        pts = self._points(scan, x, y, yaw)
        # the goal in the base frame
        g = (goal - (x, y)) @ rot
        dist = float(np.hypot(*g))
        field = None
        if self.cfg.global_plan:
            self.map.add(self._seen)  # this scan's hits, world frame (_points)
            if self._steps % self.cfg.replan_every == 0 or self.plan is None:
                self.plan = self._plan(goal, np.array([x, y]))
            self._steps += 1
            plan = self.plan

            def field(p: np.ndarray) -> np.ndarray:
                return plan.at(p @ rot.T + (x, y))

            # steer for a point on the descent path, not straight at the goal
            carrot = plan.descend(np.array([x, y]), self.cfg.carrot_distance)
            target = (carrot - (x, y)) @ rot
        else:
            target = g
        if dist < self.cfg.goal_tolerance:
            cmd = (min(max(0.0, v_lo), v_hi), min(max(0.0, w_lo), w_hi))
        else:
            cmd = self._choose(pts, g, target, field, dist, (v_lo, v_hi, w_lo, w_hi))
        self.last = np.asarray(cmd, np.float64)
        a = np.asarray(cmd, np.float32)
        return ActionChunk(a[None], self.dt, obs.stamp_ns)

    def scores(
        self,
        pts: np.ndarray,
        goal: np.ndarray,
        v: np.ndarray,
        w: np.ndarray,
        target: np.ndarray | None = None,
        field: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """For twists (v, w) (S,): whether each is admissible and its score (S,), given the
        obstacle points ``pts`` (N, 2) and the goal ``goal`` (2,) in the base frame. With a
        navigation function ``field`` (base-frame points (..., 2) -> cost to the goal),
        progress is how much an arc lowers it and heading aims at ``target`` (a point on its
        descent path); without, both use the straight line to the goal (Fox et al.). Public
        for tests and plots."""
        cfg = self.cfg
        target = goal if target is None else target
        ax, ay, ath = _arcs(v, w, self.times)  # (S, K)
        # lidar points in each arc pose's frame, and their distance to the footprint rectangle
        ddx = pts[None, None, :, 0] - ax[..., None]
        ddy = pts[None, None, :, 1] - ay[..., None]
        cth, sth = np.cos(ath)[..., None], np.sin(ath)[..., None]
        lx = np.abs(cth * ddx + sth * ddy) - self.half[0]
        ly = np.abs(-sth * ddx + cth * ddy) - self.half[1]
        # signed distance of each point to the footprint + margin (< 0: inside), per arc
        # pose and now; inside the margin already, a point that gets no nearer is no hit
        sd = _signed(lx, ly)  # (S, K, N)
        px, py = np.abs(pts[:, 0]) - self.half[0], np.abs(pts[:, 1]) - self.half[1]
        now = np.minimum(_signed(px, py), 0.0) - 1e-3  # (N,)
        hit = ((sd <= 0.0) & (sd < now)).any(axis=2)  # (S, K)
        gap = np.maximum(sd.min(axis=2), 0.0) if len(pts) else np.full(ax.shape, np.inf)
        # admissible: no hit along the whole rolled-out arc (DWB rejects a colliding
        # trajectory), standing still always (Fox et al.'s braking test alone, stopping
        # before the hit, let the base drive at an obstacle until too late to steer round it)
        moving = (np.abs(v) > 1e-9) | (np.abs(w) > 1e-9)
        ok = ~moving | ~hit.any(axis=1)
        # the arc's end, or its pose nearest the goal when it passes the goal
        gd = np.hypot(goal[0] - ax, goal[1] - ay)  # (S, K)
        j = np.argmin(gd, axis=1)
        rows = np.arange(len(v))
        end = np.where(gd[rows, j] < cfg.goal_tolerance, j, len(self.times) - 1)
        ex, ey, eth = ax[rows, end], ay[rows, end], ath[rows, end]
        # heading: the target's bearing from the arc's end
        bearing = np.arctan2(target[1] - ey, target[0] - ex) - eth
        bearing = np.abs((bearing + np.pi) % (2 * np.pi) - np.pi)
        heading = 1.0 - bearing / np.pi
        reach = max(self.v_bounds[1], 1e-9) * self.times[-1]
        if field is None:
            progress = (float(np.hypot(*goal)) - gd[rows, end]) / reach
        else:
            here = float(field(np.zeros(2)))
            there = field(np.stack([ex, ey], axis=1))
            # an arc ending in a lethal cell (or off the grid) makes the least progress
            fin = np.isfinite(there)
            if math.isfinite(here):
                progress = np.where(fin, here - np.where(fin, there, 0.0), -reach) / reach
            else:  # the base itself in a lethal cell: any way out is progress
                progress = np.where(fin, 1.0, -1.0)
        clearance = np.minimum(gap.min(axis=1), cfg.clearance_cap) / cfg.clearance_cap
        speed = np.maximum(v, 0.0) / max(self.v_bounds[1], 1e-9)
        score = (
            cfg.heading_weight * heading
            + cfg.progress_weight * progress
            + cfg.clearance_weight * clearance
            + cfg.speed_weight * speed
        )
        return ok, score

    @property
    def contract(self) -> dict[str, Any]:
        return planner_contract(self.cfg.pose_source, self.spec, self.task)

    # ---- internals ---------------------------------------------------------------------

    def _points(self, scan: np.ndarray, x: float, y: float, yaw: float) -> np.ndarray:
        """Obstacle points (N, 2) in the base frame: the scan's hits, plus the points seen
        before that are now outside its field of view and within REMEMBER metres (what a
        local costmap keeps behind the base)."""
        ang = self._beam_angles(len(scan))
        near = scan < scan.max() - 1e-6  # beams that hit something (not range_max)
        seen = self.lidar_xy + scan[near, None] * np.stack(
            [np.cos(ang[near]), np.sin(ang[near])], 1
        )
        c, s = math.cos(yaw), math.sin(yaw)
        rot = np.array([[c, -s], [s, c]])
        # what was seen or remembered before, from where the base is now
        before = np.concatenate([self._behind, self._seen])
        local = (before - (x, y)) @ rot
        rel = local - self.lidar_xy
        bearing = np.abs(np.arctan2(rel[:, 1], rel[:, 0]))
        keep = (np.hypot(*local.T) < REMEMBER) & (
            bearing > math.radians(self.cfg.lidar_fov_deg) / 2
        )
        self._behind = before[keep][-MEMORY_POINTS:]
        self._seen = seen @ rot.T + (x, y)
        return np.concatenate([seen, local[keep][-MEMORY_POINTS:]])

    def _plan(self, goal: np.ndarray, base: np.ndarray) -> Potential:
        """The navigation function from the obstacles mapped so far (navfn.potential)."""
        c = self.cfg
        return potential(
            self.map.points(),
            goal,
            base[None],
            c.plan_resolution,
            self.lethal_radius,
            c.inflation_radius,
            c.cost_scale,
            c.inflation_weight,
        )

    def _choose(
        self,
        pts: np.ndarray,
        goal: np.ndarray,
        target: np.ndarray,
        field: Callable[[np.ndarray], np.ndarray] | None,
        dist: float,
        win: tuple[float, ...],
    ) -> tuple[float, float]:
        cfg = self.cfg
        v_lo, v_hi, w_lo, w_hi = win
        # slow down near the goal, as fast as the window allows
        v_hi = max(v_lo, min(v_hi, cfg.approach_gain * dist + 0.05))
        vs = np.linspace(v_lo, v_hi, cfg.v_samples)
        ws = np.linspace(w_lo, w_hi, cfg.w_samples)
        # the straight arc and standing still, when the window holds them
        if w_lo <= 0.0 <= w_hi:
            ws = np.append(ws, 0.0)
        if v_lo <= 0.0 <= v_hi:
            vs = np.append(vs, 0.0)
        v, w = (a.ravel() for a in np.meshgrid(vs, ws, indexing="ij"))
        ok, score = self.scores(pts, goal, v, w, target, field)
        if not ok.any():  # brake as hard as the window allows
            return min(max(0.0, v_lo), v_hi), min(max(0.0, w_lo), w_hi)
        i = int(np.argmax(np.where(ok, score, -np.inf)))
        return float(v[i]), float(w[i])

    def _pose(self, obs: Observation) -> tuple[float, float, float]:
        return planar_pose(obs, self.cfg.pose_source)

    def _beam_angles(self, n: int) -> np.ndarray:
        if self._angles is None or len(self._angles) != n:
            self._angles = beam_angles(n, self.cfg.lidar_fov_deg)
        return self._angles
