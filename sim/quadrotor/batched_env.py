"""A minimal batched hover environment on the numpy dynamics: N drones, one call per step.

Episodes (all SI, world ENU):
    target      (0, 0, 1) m
    reset       position target + U(-0.5, 0.5) m per axis; roll, pitch U(-30, 30) deg, yaw
                U(-180, 180) deg; linear velocity U(-0.5, 0.5) m/s per axis (world); body
                rates U(-1, 1) rad/s per axis
    action      (N, 4) in [-1, 1]: rpm_i = hover_rpm * (1 + 0.5 a_i), so -1 is half the hover
                speed, 0 hovers and +1 is the max rpm (the Crazyflie's max is 1.5x hover)
    observation (N, 18) float32: position - target (3, m), rotation matrix world-from-body
                row-major (9), linear velocity (3, m/s, world), angular velocity (3, rad/s, body)
    reward      -|p - p*| - 0.1 |v| - 0.05 |w| per step, plus 1 for being alive
    termination |p - p*| > 2 m or the drone on the floor (crash); truncation at 15 s
    success     within 10 cm of the target for the last 10 s of the 15 s episode
Finished drones are reset in place (auto-reset); ``info`` carries their outcome.
"""

from __future__ import annotations

import numpy as np

from tether.core.errors import ConfigError
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MultirotorDescription, QuadrotorParams
from tether.robots.crazyflie.robot import CRAZYFLIE
from tether.sim.quadrotor.dynamics import (
    QuadrotorDynamics,
    clamp_to_floor,
    quat_from_euler,
    quat_to_rotmat,
)

OBS_DIM = 18
TARGET = (0.0, 0.0, 1.0)
# the reset distribution and success rule above, shared with the `hover` task
# (tether.sim.tasks.quad_tasks) so both run the same episodes on every simulator
POS_NOISE = 0.5  # m, half-width per axis around the target
TILT_NOISE = np.pi / 6  # rad, half-width of roll and pitch
VEL_NOISE = 0.5  # m/s, half-width per axis (world)
RATE_NOISE = 1.0  # rad/s, half-width per axis (body)
SUCCESS_RADIUS = 0.1  # m
SUCCESS_WINDOW_S = 10.0  # s, the last part of the episode spent within SUCCESS_RADIUS
EPISODE_S = 15.0  # s
CRASH_DISTANCE = 2.0  # m from the target: the episode ends as a failure


def sample_hover_states(
    rng: np.random.Generator, m: int, target: np.ndarray, params: QuadrotorParams = CRAZYFLIE
) -> tuple[np.ndarray, np.ndarray]:
    """m initial states (m, 13) around ``target`` (3,) or (m, 3) m and rotor speeds (m, 4)
    rpm, drawn from the documented distribution (in this order of draws)."""
    s = np.zeros((m, 13))
    s[:, 0:3] = target + rng.uniform(-POS_NOISE, POS_NOISE, (m, 3))
    tilt = rng.uniform(-TILT_NOISE, TILT_NOISE, (m, 2))
    s[:, 3:7] = quat_from_euler(tilt[:, 0], tilt[:, 1], rng.uniform(-np.pi, np.pi, m))
    s[:, 7:10] = rng.uniform(-VEL_NOISE, VEL_NOISE, (m, 3))
    s[:, 10:13] = rng.uniform(-RATE_NOISE, RATE_NOISE, (m, 3))
    # rotors already spinning at hover: the drone is thrown, not started from rest
    return s, np.full((m, 4), params.hover_rpm)


def hover_observation(state: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Observations (N, 18) float32 of states (N, 13) relative to targets (3,) or (N, 3) m:
    position - target (3), rotation matrix world-from-body row-major (9), linear velocity
    (3, world), angular velocity (3, body)."""
    rot = quat_to_rotmat(state[:, 3:7]).reshape(state.shape[0], 9)
    obs = np.concatenate([state[:, 0:3] - target, rot, state[:, 7:13]], axis=1)
    return obs.astype(np.float32)


def hover_reward(state: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per-step reward (N,): 1 - |p - p*| - 0.1 |v| - 0.05 |w| (SI units)."""
    dist = np.linalg.norm(state[:, 0:3] - target, axis=1)
    speed = np.linalg.norm(state[:, 7:10], axis=1)
    spin = np.linalg.norm(state[:, 10:13], axis=1)
    return np.asarray(1.0 - dist - 0.1 * speed - 0.05 * spin)


def action_to_rpm(action: np.ndarray, params: QuadrotorParams = CRAZYFLIE) -> np.ndarray:
    """Normalized actions (..., 4) in [-1, 1] (NaN -> 0) -> rotor commands (..., 4) rpm."""
    a = np.clip(np.nan_to_num(np.asarray(action, dtype=np.float64), nan=0.0), -1.0, 1.0)
    return params.hover_rpm * (1.0 + 0.5 * a)


def hover_success(
    distance: np.ndarray, dt: float, tolerance: float = 0.1, window_s: float = 10.0
) -> np.ndarray:
    """Success of whole episodes from their distance histories.

    distance: (T, N) m to the target at each control step of period dt (s). A drone succeeds
    when every one of its last ``window_s`` seconds of steps is within ``tolerance`` m.
    Shape: (N,) bool.
    """
    k = round(window_s / dt)
    if distance.shape[0] < k:
        return np.zeros(distance.shape[1], dtype=bool)
    return np.asarray(np.all(distance[-k:] <= tolerance, axis=0), dtype=bool)


class BatchedHoverEnv:
    """N drones learning to hover (a ``tether.core.protocols.BatchedEnv``); see the module
    docstring for the episode definition. ``params``: the drone (default: the Crazyflie)."""

    success_radius = SUCCESS_RADIUS

    def __init__(
        self,
        n: int,
        *,
        params: QuadrotorParams = CRAZYFLIE,
        control_hz: float = 100.0,
        physics_dt: float = 0.002,
        episode_s: float = EPISODE_S,
        seed: int | None = None,
    ) -> None:
        self.n = n
        self.params = params
        self.dynamics = QuadrotorDynamics(params)
        self.control_dt = 1.0 / control_hz
        self.substeps = max(1, round(self.control_dt / physics_dt))
        self.physics_dt = self.control_dt / self.substeps
        self.episode_steps = round(episode_s / self.control_dt)
        self.success_steps = round(SUCCESS_WINDOW_S / self.control_dt)
        self.target = np.asarray(TARGET)
        self._rng = np.random.default_rng(seed)
        self.state = np.zeros((n, 13))
        self.motor_rpm = np.zeros((n, 4))
        self.steps = np.zeros(n, dtype=np.int64)
        # consecutive control steps within 10 cm, ending now
        self.inside_steps = np.zeros(n, dtype=np.int64)

    def _sample(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Initial states (m, 13) and rotor speeds (m, 4) from the documented distribution."""
        return sample_hover_states(self._rng, m, self.target, self.params)

    def _reset_where(self, mask: np.ndarray) -> None:
        m = int(mask.sum())
        if m:
            self.state[mask], self.motor_rpm[mask] = self._sample(m)
            self.steps[mask] = 0
            self.inside_steps[mask] = 0

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Reset every drone. Returns observations (N, 18) float32."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._reset_where(np.ones(self.n, dtype=bool))
        return self.observe()

    def observe(self) -> np.ndarray:
        """Observations (N, 18) float32, layout in the module docstring."""
        return hover_observation(self.state, self.target)

    def action_to_rpm(self, action: np.ndarray) -> np.ndarray:
        """Normalized actions (N, 4) in [-1, 1] -> rotor commands (N, 4) rpm."""
        return action_to_rpm(action, self.params)

    def rpm_to_action(self, rpm: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`action_to_rpm` (unclipped). Shape: (N, 4)."""
        return (rpm / self.params.hover_rpm - 1.0) / 0.5

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Advance one control step. action: (N, 4) in [-1, 1].

        Returns obs (N, 18) float32, reward (N,) float32, terminated (N,), truncated (N,)
        bool and info: ``success`` (N,) bool, meaningful where truncated; ``final_obs``
        (N, 18), the observation before the auto-reset.
        """
        cmd = self.action_to_rpm(action)
        for _ in range(self.substeps):
            self.state, self.motor_rpm = self.dynamics.step(
                self.state, self.motor_rpm, cmd, self.physics_dt
            )
        self.state = clamp_to_floor(self.state)
        self.steps += 1
        dist = np.linalg.norm(self.state[:, 0:3] - self.target, axis=1)
        self.inside_steps = np.where(dist <= SUCCESS_RADIUS, self.inside_steps + 1, 0)
        reward = hover_reward(self.state, self.target)
        terminated = (dist > CRASH_DISTANCE) | (self.state[:, 2] <= 0.0)
        truncated = ~terminated & (self.steps >= self.episode_steps)
        success = truncated & (self.inside_steps >= self.success_steps)
        final_obs = self.observe()
        self._reset_where(terminated | truncated)
        info = {"success": success, "final_obs": final_obs, "distance": dist}
        return self.observe(), reward.astype(np.float32), terminated, truncated, info


def batched_hover_env(
    n: int,
    *,
    robot: RobotDescription,
    coarse: bool = False,
    seed: int | None = None,
    episode_s: float = EPISODE_S,
) -> BatchedHoverEnv:
    """The hover episode for ``n`` drones of ``robot`` (a multirotor description), on the
    reference model (2 ms RK4 steps) or with ``coarse`` on the training model (one 10 ms step
    per control step, ``coarse_env``). Registered as backend "batched/quadcopter": trainers
    get it through the registry."""
    if not isinstance(robot, MultirotorDescription):
        raise ConfigError(
            f"the batched hover simulator flies multirotors; robot '{robot.name}' is a {robot.kind}"
        )
    if coarse:
        from tether.sim.quadrotor.coarse_env import CoarseHoverEnv

        return CoarseHoverEnv(n, params=robot.params, episode_s=episode_s, seed=seed)
    return BatchedHoverEnv(n, params=robot.params, episode_s=episode_s, seed=seed)
