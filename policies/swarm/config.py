"""Config of the ``swarm_ppo`` trainer (the experiment's ``train:`` section). Light import."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from tether.core import registry
from tether.core.config import ComponentConfig
from tether.policies.nav.config import NavPPOConfig

# the batched training world (tether.sim.quadrotor.swarm_world), a registry target
WORLD = "batched/swarm"


class SwarmTrainConfig(ComponentConfig):
    """`tether train` for the swarm policy: SB3 PPO over every drone of the batched swarm
    world (one shared actor, each drone an agent), evaluated in it every
    ``eval_every_steps``; the best evaluation's actor is the checkpoint."""

    type: Literal["swarm_ppo"] = "swarm_ppo"
    seed: int = 0
    # stop at whichever comes first (steps: agent decisions)
    total_steps: int = Field(30_000_000, ge=1)
    time_budget_s: float = Field(1500.0, gt=0)
    hidden: tuple[int, ...] = (128, 128)
    # evaluation: this many worlds per swarm size (every scenario), deterministic actor
    eval_every_steps: int = Field(1_000_000, ge=1)
    eval_episodes: int = Field(24, ge=1)
    eval_sizes: tuple[int, ...] = (4, 8, 16)
    threads: int = Field(1, ge=1)
    # imitation before PPO (0: none): DAgger rounds of this many agent decisions each,
    # labelled by PID + ORCA (the world's expert_actions), the first round flown by the
    # expert, the others by the learner; then PPO starts from that actor with its std at
    # exp(imitation_log_std) and trains the critic alone for critic_warmup_rollouts
    imitation_decisions: int = Field(0, ge=0)
    imitation_rounds: int = Field(4, ge=1)
    imitation_epochs: int = Field(30, ge=1)
    imitation_log_std: float = -1.6
    # the rare close encounters decide collisions: a sample whose nearest neighbour is d m
    # away weighs 1 + imitation_close_weight * max(0, 1 - d / 0.6 m) in the imitation loss
    imitation_close_weight: float = Field(0.0, ge=0)
    critic_warmup_rollouts: int = Field(10, ge=0)
    # start PPO from this swarm_ppo checkpoint's actor (as after imitation: its std at
    # exp(imitation_log_std), the critic warmed up first) instead of imitating again
    start_from: str | None = None
    # the batched world (sim/quadrotor/config_swarm_world.py: SwarmWorldConfig), validated
    # through the registry's env "batched/swarm"
    world: Any = Field(default_factory=dict, validate_default=True)
    ppo: NavPPOConfig = Field(
        default_factory=lambda: NavPPOConfig(n_steps=64, batch_size=4096, log_std_init=-0.7)
    )

    @field_validator("world", mode="before")
    @classmethod
    def _world(cls, value: Any) -> Any:
        world_cfg = registry.config_class("env", WORLD)
        return value if isinstance(value, world_cfg) else world_cfg.model_validate(value or {})
