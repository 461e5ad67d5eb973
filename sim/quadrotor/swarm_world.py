"""Batched swarm world: many worlds of N Crazyflies each, in numpy, for RL.

The same physics as the engines' drone worlds (``QuadrotorDynamics``: rotors with lag,
drag, ground effect; ``CascadedPID``'s velocity loop at the control rate and rate loop at
every physics step, as in velocity_setpoint mode; ``downwash_forces`` between the drones of
a world), the ``swarm`` task's scenarios, collision distance and success rule
(tether.sim.quadrotor.swarm). Every drone is one agent: it sees ``swarm_features`` (its
goal, velocity, height and its K nearest neighbours, with observation noise) and commands
a velocity in [-1, 1]^3 x v_max (yaw held at 0), held for ``hold_steps`` control steps.

Worlds of each size in ``cfg.sizes`` run side by side (``drones_per_size`` drones each), so
one policy learns for 4 to 16 neighbours at once. A world's episode ends when all its drones
have held their goals (success), when a drone hits the floor (crash), or at the time
limit; collisions are penalised and counted but do not end a training episode (the
outcome of the episode is "collision" if any happened before success).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core.robot_kinds import MultirotorDescription
from tether.sim.quadrotor.config_swarm_world import SwarmWorldConfig
from tether.sim.quadrotor.control import CascadedPID
from tether.sim.quadrotor.downwash import downwash_forces
from tether.sim.quadrotor.dynamics import QuadrotorDynamics, hover_state
from tether.sim.quadrotor.pid_policy import hold_heading
from tether.sim.quadrotor.swarm import pair_distances, sample_scenario, swarm_features

CRASH_Z = 0.1
# s: the coarsest physics step (config_swarm_world.physics_dt's bound)
COARSEST_DT = 0.005


class SwarmGroup:
    """``worlds`` worlds of ``n`` drones each (one swarm size)."""

    def __init__(
        self, cfg: SwarmWorldConfig, robot: MultirotorDescription, worlds: int, n: int, seed: int
    ) -> None:
        self.cfg, self.b, self.n = cfg, worlds, n
        self.rng = np.random.default_rng(seed)
        self.params = robot.params
        self.dyn = QuadrotorDynamics(self.params, drag=True, ground_effect=True)
        self.dyn.max_dt = COARSEST_DT
        self.pid = CascadedPID(worlds * n, self.params)
        self.control_dt = 1.0 / cfg.control_hz
        self.substeps = max(1, round(self.control_dt / cfg.physics_dt))
        self.physics_dt = self.control_dt / self.substeps
        self.state = hover_state(worlds * n)
        self.rpm = np.full((worlds * n, 4), self.params.hover_rpm)
        self.goal = np.zeros((worlds, n, 3))
        self.last_action = np.zeros((worlds * n, 3))
        self.steps = np.zeros(worlds, dtype=np.int64)
        self.hold = np.zeros(worlds, dtype=np.int64)
        self.collided = np.zeros(worlds, dtype=bool)
        self.min_sep = np.full(worlds, np.inf)
        self.scenario = ["swap"] * worlds
        self._hold_needed = max(1, round(cfg.hold_s / self.control_dt))
        self._max_steps = round(cfg.max_duration_s / self.control_dt)
        self.reset_worlds(np.ones(worlds, dtype=bool))

    def reset_worlds(self, mask: np.ndarray) -> None:
        """Draw a fresh scenario for every world where ``mask`` (B,) is true."""
        n = self.n
        for w in np.flatnonzero(mask):
            scenario = self.cfg.scenarios[int(self.rng.integers(len(self.cfg.scenarios)))]
            starts, goals = sample_scenario(self.rng, scenario, n)
            s = hover_state(n)
            s[:, 0:3] = starts
            rows = slice(w * n, (w + 1) * n)
            self.state[rows] = s
            self.rpm[rows] = self.params.hover_rpm
            self.goal[w] = goals
            self.last_action[rows] = 0.0
            self.scenario[w] = scenario
        drones = np.repeat(mask, n)
        self.pid.reset(drones)
        self.steps[mask] = 0
        self.hold[mask] = 0
        self.collided[mask] = False
        self.min_sep[mask] = np.inf

    def positions(self) -> np.ndarray:
        return self.state[:, 0:3].reshape(self.b, self.n, 3)

    def observe(self) -> np.ndarray:
        """Features (B N, F) with observation noise."""
        c = self.cfg
        pos = self.positions() + self.rng.normal(0.0, c.pos_noise, (self.b, self.n, 3))
        vel = self.state[:, 7:10].reshape(self.b, self.n, 3)
        vel = vel + self.rng.normal(0.0, c.vel_noise, vel.shape)
        f = swarm_features(pos, vel, self.goal, c.neighbours, c.v_max)
        return f.reshape(self.b * self.n, -1).astype(np.float32)

    def expert_actions(self) -> np.ndarray:
        """What PID + ORCA (the ``swarm_orca`` policy, default settings, at v_max) commands
        every drone now, as normalised actions (B N, 3) in [-1, 1]: labels for imitation."""
        from tether.sim.quadrotor.config_quadrotor import SwarmOrcaConfig
        from tether.sim.quadrotor.orca_policy import orca_commands

        v = self.cfg.v_max
        orca = SwarmOrcaConfig(max_speed=v)
        dt = self.control_dt * self.cfg.hold_steps
        out = np.zeros((self.b * self.n, 3))
        for w in range(self.b):
            rows = slice(w * self.n, (w + 1) * self.n)
            out[rows] = orca_commands(self.state[rows], self.goal[w], orca, dt)[:, 0:3] / v
        return np.clip(out, -1.0, 1.0)

    def distance_to_goal(self) -> np.ndarray:
        return np.asarray(np.linalg.norm(self.positions() - self.goal, axis=-1))  # (B, N)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """Actions (B N, 3) in [-1, 1] -> per-drone rewards (B N,), world done (B,), world
        truncated (B,), per-world outcome ("" while running)."""
        c, b, n = self.cfg, self.b, self.n
        a = np.clip(np.nan_to_num(np.asarray(action, np.float64)), -1.0, 1.0)
        cmd = np.zeros((b * n, 4))
        cmd[:, 0:3] = a * c.v_max
        before = self.distance_to_goal()
        close = np.zeros((b, n))  # worst proximity this decision, per drone
        hit = np.zeros((b, n), dtype=bool)
        mass = self.params.mass
        for _ in range(c.hold_steps):
            cmd[:, 3] = hold_heading(self.state)
            rates = self.pid.velocity_rates(self.state, cmd, self.control_dt)
            for _ in range(self.substeps):
                rpm_cmd = self.pid.thrust_rates(self.state, rates)
                force = None
                if c.downwash.enabled:
                    force = downwash_forces(self.positions(), mass, c.downwash).reshape(-1, 3)
                self.state, self.rpm = self.dyn.step(
                    self.state, self.rpm, rpm_cmd, self.physics_dt, force
                )
            self.steps += 1
            d = pair_distances(self.positions()).min(axis=-1)  # (B, N)
            hit |= d < c.collision_distance
            close = np.maximum(close, np.clip((c.proximity - d) / c.proximity, 0.0, 1.0))
            self.min_sep = np.minimum(self.min_sep, d.min(axis=-1))
            after = self.distance_to_goal()
            at_goal = np.all(after <= c.goal_radius, axis=-1)
            self.hold = np.where(at_goal, self.hold + 1, 0)
        self.collided |= hit.any(axis=-1)
        crashed = self.positions()[..., 2] < CRASH_Z
        success = self.hold >= self._hold_needed
        reward = (
            c.progress_reward * (before - after)
            + c.goal_reward * (after <= c.goal_radius)
            - c.collision_penalty * hit
            - c.proximity_penalty * close
            - c.crash_penalty * crashed
            + c.success_reward * success[:, None]
            - c.smooth_penalty * ((a - self.last_action) ** 2).sum(-1).reshape(b, n)
        )
        self.last_action = a
        crash = np.asarray(crashed.any(axis=-1))
        timeout = self.steps >= self._max_steps
        done = success | crash | timeout
        outcome = []
        for w in range(b):
            if not done[w]:
                outcome.append("")
            elif self.collided[w]:
                outcome.append("collision")
            elif success[w]:
                outcome.append("success")
            else:
                outcome.append("crash" if crash[w] else "timeout")
        truncated = timeout & ~success & ~crash
        return reward.reshape(-1), done, truncated, outcome


class BatchedSwarmWorld:
    """Every size's group side by side: ``n`` agents in all (registry env ``batched/swarm``)."""

    def __init__(self, cfg: SwarmWorldConfig, robot: MultirotorDescription, seed: int = 0) -> None:
        self.cfg = cfg
        self.groups = [
            SwarmGroup(cfg, robot, max(1, cfg.drones_per_size // size), size, seed + 1000 * k)
            for k, size in enumerate(cfg.sizes)
        ]
        self.n = sum(g.b * g.n for g in self.groups)
        self.episode_stats: list[dict[str, Any]] = []

    def feature_info(self) -> dict[str, Any]:
        from tether.sim.quadrotor.swarm import (
            COLLISION_DISTANCE,
            FEATURE_VERSION,
            GOAL_CAP,
            NEIGHBOUR_DIM,
            SELF_DIM,
            SENSE_RANGE,
            feature_dim,
        )

        c = self.cfg
        return {
            "version": FEATURE_VERSION,
            "dim": feature_dim(c.neighbours),
            # own features, then per neighbour (its last one: closeness)
            "self_dim": SELF_DIM,
            "neighbour_dim": NEIGHBOUR_DIM,
            "neighbours": c.neighbours,
            "v_max": c.v_max,
            "goal_cap": GOAL_CAP,
            "sense_range": SENSE_RANGE,
            "collision_distance": COLLISION_DISTANCE,
            "hold_steps": c.hold_steps,
        }

    def observe(self) -> np.ndarray:
        return np.concatenate([g.observe() for g in self.groups])

    def expert_actions(self) -> np.ndarray:
        """PID + ORCA's normalised commands for every agent (SwarmGroup.expert_actions)."""
        return np.concatenate([g.expert_actions() for g in self.groups])

    def reset_all(self) -> np.ndarray:
        for g in self.groups:
            g.reset_worlds(np.ones(g.b, dtype=bool))
        return self.observe()

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """SB3-style step over every agent: obs (after auto-reset), reward, terminated,
        truncated, infos (``terminal_observation`` and the world's outcome at an end)."""
        rewards, terms, truncs, infos = [], [], [], []
        start = 0
        for g in self.groups:
            m = g.b * g.n
            r, done, trunc, outcome = g.step(actions[start : start + m])
            start += m
            rewards.append(r)
            terms.append(np.repeat(done & ~trunc, g.n))
            truncs.append(np.repeat(trunc, g.n))
            info: list[dict[str, Any]] = [{} for _ in range(m)]
            if done.any():
                final = g.observe()
                for w in np.flatnonzero(done):
                    stat = {
                        "outcome": outcome[w],
                        "n": g.n,
                        "scenario": g.scenario[w],
                        "time_s": float(g.steps[w] * g.control_dt),
                        "min_separation_m": float(g.min_sep[w]),
                    }
                    self.episode_stats.append(stat)
                    for i in range(w * g.n, (w + 1) * g.n):
                        info[i] = {
                            "terminal_observation": final[i],
                            "TimeLimit.truncated": bool(trunc[w]),
                            "outcome": outcome[w],
                            "swarm_episode": stat,
                        }
                g.reset_worlds(done)
            infos.extend(info)
        obs = self.observe()
        return (
            obs,
            np.concatenate(rewards).astype(np.float32),
            np.concatenate(terms),
            np.concatenate(truncs),
            infos,
        )
