"""Config of the ``nav_ppo`` trainer (the experiment's ``train:`` section) of the learned local
planner. Light import."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tether.core import registry
from tether.core.config import ComponentConfig

# the batched training world (tether.sim.nav_world), a registry target
WORLD = "batched/mobile_base"


class NavPPOConfig(BaseModel):
    """Stable-Baselines3 PPO's settings (its names)."""

    model_config = ConfigDict(extra="forbid")
    n_steps: int = Field(128, ge=1)
    batch_size: int = Field(4096, ge=1)
    n_epochs: int = Field(5, ge=1)
    learning_rate: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, gt=0, le=1)
    clip_range: float = Field(0.2, gt=0)
    ent_coef: float = Field(0.0, ge=0)
    # the Gaussian's initial log std (SB3's log_std_init)
    log_std_init: float = Field(-0.5)


class NavTrainConfig(ComponentConfig):
    """`tether train` for the learned local planner (docs/base_planner.md): SB3 PPO on the
    batched kinematic world, evaluated in it every ``eval_every_steps``; the best
    evaluation's actor is the checkpoint."""

    type: Literal["nav_ppo"] = "nav_ppo"
    seed: int = 0
    num_envs: int = Field(128, ge=1)
    # stop at whichever comes first
    total_steps: int = Field(20_000_000, ge=1)
    time_budget_s: float = Field(1500.0, gt=0)
    # hidden layers of the actor and of the critic (tanh)
    hidden: tuple[int, ...] = (128, 128)
    # evaluation: this many episodes per density level, deterministic actor, own seeds
    eval_every_steps: int = Field(1_000_000, ge=1)
    eval_episodes: int = Field(50, ge=1)
    threads: int = Field(1, ge=1)
    # the batched world's settings (sim/config_nav_world.py: NavWorldConfig, validated here
    # through the registry's env "batched/mobile_base")
    world: Any = Field(default_factory=dict, validate_default=True)
    ppo: NavPPOConfig = Field(default_factory=NavPPOConfig)

    @field_validator("world", mode="before")
    @classmethod
    def _world(cls, value: Any) -> Any:
        world_cfg = registry.config_class("env", WORLD)
        return value if isinstance(value, world_cfg) else world_cfg.model_validate(value or {})
