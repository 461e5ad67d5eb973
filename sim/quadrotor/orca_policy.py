"""The ``swarm_orca`` policy: PID to the goal + reciprocal collision avoidance (ORCA).

Optimal Reciprocal Collision Avoidance (van den Berg, Guy, Lin, Manocha, "Reciprocal
n-body collision avoidance", ISRR 2011), in the horizontal plane: each drone is a vertical
cylinder of radius ``radius``, and every drone within ``vertical_clearance`` in height adds
one half-plane of allowed velocities (the drone takes half of the change that
leaves their velocity obstacle for ``time_horizon``), and the new velocity is the allowed
one closest to the preferred velocity (the PID's: ``pos_p`` x the goal error, at most
``max_speed``, turned ``keep_right`` clockwise against symmetric deadlocks), within the
speed disk. The small 2-D program is solved exactly by
enumerating its candidate optima (the preferred velocity, its projections on each line,
the lines' pairwise intersections, where lines cross the speed circle); when no velocity
satisfies every half-plane (a dense crowd), the candidate with the least worst violation
is taken, as RVO2's third linear program does. The vertical velocity is the PID's. Drones
farther apart in height pass over or under each other: with infinite cylinders, drones
crossing a circle jam in its middle (ORCA's known symmetric deadlock).

Reads ``state`` (13 N) and ``env_state`` (7 N: each drone's goal); answers in
velocity_setpoint mode (vx, vy, vz m/s world, yaw rate holding heading 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core.errors import ConfigError
from tether.core.spec import RobotSpec
from tether.core.types import NEIGHBOURS_KEY, ActionChunk, Observation
from tether.sim.quadrotor.config_quadrotor import SwarmOrcaConfig
from tether.sim.quadrotor.pid_policy import hold_heading

EPS = 1e-9


def orca_lines(
    p: np.ndarray,
    v: np.ndarray,
    i: int,
    radius: float,
    tau: float,
    dt: float,
    others: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Half-planes for drone i among planar positions p (N, 2) and velocities v (N, 2)
    (only the drones where ``others`` (N,) is true, default all but i): points (M, 2) and
    outward normals a (M, 2); allowed velocities u have a . (u - point) <= 0."""
    keep = np.ones(len(p), dtype=bool) if others is None else np.asarray(others, bool).copy()
    keep[i] = False
    rel_p = p[keep] - p[i]
    rel_v = v[i] - v[keep]
    r = 2.0 * radius
    points, normals = [], []
    for rp, rv in zip(rel_p, rel_v, strict=True):
        d2 = float(rp @ rp)
        if d2 > r * r:
            w = rv - rp / tau  # from the cut-off circle's centre to the relative velocity
            w2 = float(w @ w)
            dot1 = float(w @ rp)
            if dot1 < 0.0 and dot1 * dot1 > r * r * w2:
                # closest boundary point is on the cut-off circle
                wl = np.sqrt(w2)
                unit = w / max(wl, EPS)
                direction = np.array([unit[1], -unit[0]])
                u = (r / tau - wl) * unit
            else:
                # on one of the two legs of the cone
                leg = np.sqrt(d2 - r * r)
                if rp[0] * w[1] - rp[1] * w[0] > 0.0:  # left leg
                    direction = np.array([rp[0] * leg - rp[1] * r, rp[0] * r + rp[1] * leg]) / d2
                else:  # right leg
                    direction = -np.array([rp[0] * leg + rp[1] * r, -rp[0] * r + rp[1] * leg]) / d2
                u = float(rv @ direction) * direction - rv
        else:
            # already closer than 2 r: leave within one control period
            w = rv - rp / dt
            wl = np.sqrt(float(w @ w))
            unit = w / max(wl, EPS)
            direction = np.array([unit[1], -unit[0]])
            u = (r / dt - wl) * unit
        points.append(v[i] + 0.5 * u)
        # allowed side: left of ``direction`` (RVO2's convention)
        normals.append(np.array([direction[1], -direction[0]]))
    return np.asarray(points).reshape(-1, 2), np.asarray(normals).reshape(-1, 2)


def solve(points: np.ndarray, normals: np.ndarray, pref: np.ndarray, vmax: float) -> np.ndarray:
    """The velocity (2,) in the disk |u| <= vmax closest to ``pref`` with every
    a . (u - point) <= 0; the least worst violation when none satisfies all."""
    clipped = pref * min(1.0, vmax / max(float(np.linalg.norm(pref)), EPS))
    if len(points) == 0:
        return clipped
    a = normals / np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), EPS)
    b = np.einsum("ij,ij->i", a, points)  # allowed: a . u <= b
    cands = [clipped, np.zeros(2)]
    # projections of pref on each line, and where each line meets the circle
    t = a @ pref - b
    cands.extend(pref - t[:, None] * a)
    foot = a * b[:, None]
    along = np.stack([-a[:, 1], a[:, 0]], axis=1)
    half = np.sqrt(np.maximum(vmax * vmax - b * b, 0.0))
    cands.extend(foot + half[:, None] * along)
    cands.extend(foot - half[:, None] * along)
    # pairwise intersections
    m = len(a)
    if m > 1:
        ii, jj = np.triu_indices(m, 1)
        det = a[ii, 0] * a[jj, 1] - a[ii, 1] * a[jj, 0]
        ok = np.abs(det) > 1e-9
        ii, jj, det = ii[ok], jj[ok], det[ok]
        x = (b[ii] * a[jj, 1] - b[jj] * a[ii, 1]) / det
        y = (a[ii, 0] * b[jj] - a[jj, 0] * b[ii]) / det
        cands.extend(np.stack([x, y], axis=1))
    c = np.asarray(cands)
    c = c[np.linalg.norm(c, axis=1) <= vmax + 1e-6]
    violation = (c @ a.T - b).max(axis=1)
    feasible = violation <= 1e-7
    if np.any(feasible):
        f = c[feasible]
        return np.asarray(f[np.argmin(np.linalg.norm(f - pref, axis=1))])
    return np.asarray(c[np.argmin(violation)])


def orca_commands(
    state: np.ndarray, goal: np.ndarray, cfg: SwarmOrcaConfig, dt: float, drones: int | None = None
) -> np.ndarray:
    """velocity_setpoint commands (N, 4) for drones (N, 13) flying to goals (N, 3), each
    from the others' positions and velocities; only the first ``drones`` rows are computed
    (the rest stay zero)."""
    c = cfg
    pref = c.pos_p * (goal - state[:, 0:3])
    speed = np.linalg.norm(pref, axis=1, keepdims=True)
    pref *= np.minimum(1.0, c.max_speed / np.maximum(speed, EPS))
    c_, s_ = np.cos(-c.keep_right), np.sin(-c.keep_right)
    pref[:, 0:2] = pref[:, 0:2] @ np.array([[c_, s_], [-s_, c_]])
    p, v = state[:, 0:2], state[:, 7:9]
    n = len(state)
    out = np.zeros((n, 4))
    z = state[:, 2]
    for i in range(n if drones is None else drones):
        near = None
        if c.vertical_clearance is not None:
            near = np.abs(z - z[i]) < c.vertical_clearance
        points, normals = orca_lines(p, v, i, c.radius, c.time_horizon, dt, near)
        out[i, 0:2] = solve(points, normals, pref[i, 0:2], c.max_speed)
    out[:, 2] = pref[:, 2]
    out[:, 3] = hold_heading(state)
    return out


class SwarmOrcaPolicy:
    """ORCA for every drone of the world (``spec.action.dim // 4`` of them)."""

    def __init__(self, cfg: SwarmOrcaConfig, spec: RobotSpec, task: Any = None) -> None:
        if spec.action.mode != "velocity_setpoint":
            raise ConfigError(
                "the swarm_orca policy commands velocities: set "
                f"sim.quadrotor.action_mode: velocity_setpoint (the robot is in {spec.action.mode})"
            )
        self.cfg = cfg
        self.spec = spec
        self.n = spec.action.dim // 4

    def reset(self) -> None:
        pass

    def command(self, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """velocity_setpoint commands (N, 4) for states (N, 13) and goals (N, 3); fed more
        drones than it flies (a drone's server with its neighbours), only its own."""
        n = len(state)
        return orca_commands(state, goal, self.cfg, self.spec.dt, n if n == self.n else 1)

    def act(self, obs: Observation) -> ActionChunk:
        """Commands for every drone of the world; or, fed one drone's state followed by its
        neighbours' (a drone's policy server over ROS 2) and its own goal, for that drone."""
        state = np.asarray(obs["state"], np.float64).reshape(-1, 13)
        goal = np.asarray(obs["env_state"], np.float64).reshape(-1, 7)[:, 0:3]
        if len(goal) < len(state):  # the others' goals are unknown (and unused): own goal
            goal = np.concatenate([goal, np.repeat(goal[:1], len(state) - len(goal), 0)])
        a = self.command(state, goal).reshape(-1)[: self.spec.action.dim].astype(np.float32)
        a = np.clip(a, self.spec.action.low_array(), self.spec.action.high_array())
        return ActionChunk(np.repeat(a[None], self.cfg.horizon, 0), self.spec.dt, obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        return {
            "observation_keys": ["state", "env_state", NEIGHBOURS_KEY],
            "action_names": list(self.spec.action.names),
            "action_mode": self.spec.action.mode,
            "control_hz": self.spec.control_hz,
        }
