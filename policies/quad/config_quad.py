"""Config of the ``quad_hover`` trainer (the experiment's ``train:`` section). Light import."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.core.config import ComponentConfig


class BatchedConfig(BaseModel):
    """Analytic policy gradients through the differentiable batched simulator (path b)."""

    model_config = ConfigDict(extra="forbid")
    num_envs: int = Field(256, ge=2)
    # control steps (10 ms) differentiated through per update
    horizon: int = Field(100, ge=1)
    lr: float = Field(5e-3, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    # per-step factor on gradients flowing back through the simulated state (1 = exact)
    grad_decay: float = Field(1.0, gt=0, le=1)
    # a drone restarts from the initial-state distribution after this long (s); > 5 s, the
    # success rule's settling time, so restarts also measure the success proxy
    episode_s: float = Field(6.0, gt=5.0)
    # cost per step: distance (m) + speed_cost * speed (m/s) + rate_cost * body rate (rad/s)
    # + tilt_cost * (1 - cos tilt) + action_penalty * |a|^2 (the env's reward, negated, is
    # distance + 0.1 speed + 0.05 rate)
    speed_cost: float = Field(0.1, ge=0)
    rate_cost: float = Field(0.05, ge=0)
    tilt_cost: float = Field(0.0, ge=0)
    action_penalty: float = Field(0.01, ge=0)
    # at most one success evaluation per this many updates
    eval_every: int = Field(5, ge=1)


class SB3PPOConfig(BaseModel):
    """Stable-Baselines3 PPO on vectorized PyBullet envs (path a)."""

    model_config = ConfigDict(extra="forbid")
    num_envs: int = Field(4, ge=1)
    # SubprocVecEnv (one process per env) or DummyVecEnv (in process)
    vec_env: Literal["subproc", "dummy"] = "dummy"
    n_steps: int = Field(1024, ge=8)
    batch_size: int = Field(256, ge=8)
    epochs: int = Field(10, ge=1)
    lr: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, gt=0, le=1)
    init_std: float = Field(0.3, gt=0)
    # added to the task's per-step reward, floored at 0 (else PPO learns to crash early)
    alive_bonus: float = Field(1.0, ge=0)
    # env steps between success evaluations of the deterministic policy (batched numpy sim)
    eval_every_steps: int = Field(100_000, ge=1000)


class QuadHoverTrainConfig(ComponentConfig):
    """`tether train` for a quadrotor hover policy that commands the four rotor speeds."""

    type: str = "quad_hover"
    # batched: analytic policy gradients on the batched simulator (seconds); sb3_ppo: SB3
    # PPO on vectorized PyBullet envs (the familiar recipe, hours)
    path: Literal["batched", "sb3_ppo"] = "batched"
    seed: int = 0
    # stop when this fraction of eval_drones succeed (15 s episodes, hover_success)
    success_target: float = Field(0.95, gt=0, le=1)
    # wall-clock budget, s; training stops there even below the success target
    time_budget_s: float = Field(120.0, gt=0)
    # environment-step budget (all drones summed); 0 = unlimited
    max_env_steps: int = Field(0, ge=0)
    # drones in each success evaluation (batched numpy sim, 10 ms RK4 steps)
    eval_drones: int = Field(1000, ge=1)
    hidden: tuple[int, ...] = (64, 64)
    # torch intra-op threads; more than 1 thrashes when the cores are shared
    threads: int = Field(1, ge=1)
    batched: BatchedConfig = Field(default_factory=BatchedConfig)
    sb3: SB3PPOConfig = Field(default_factory=SB3PPOConfig)
