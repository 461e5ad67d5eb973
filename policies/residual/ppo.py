"""On-policy residual learning: stable-baselines3 PPO on the residual env (ResiP's recipe).

SB3's ``MlpPolicy`` actor is exactly the residual network (model.ResidualMLP.net): its
observation is the residual's normalised input and the env applies the tanh and the scale,
so the deterministic SB3 action maps to ``ResidualMLP.forward``. Nothing here is written by
hand beyond copying weights in and out: PPO, GAE, the rollout buffer and the vectorised
envs are SB3's.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tether.policies.residual.config import FinetuneConfig
from tether.policies.residual.model import ACTIVATIONS, ResidualMLP


def _sb3_actor_linears(policy: Any) -> list[nn.Linear]:
    layers = [m for m in policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)]
    return [*layers, policy.action_net]


def copy_actor(src: list[nn.Linear], dst: list[nn.Linear]) -> None:
    with torch.no_grad():
        for d, s in zip(dst, src, strict=True):
            d.weight.copy_(s.weight)
            d.bias.copy_(s.bias)


def make_ppo(venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> Any:
    """An SB3 PPO on ``venv`` whose actor starts as ``model`` (near-zero last layer)."""
    from stable_baselines3 import PPO

    p = fcfg.ppo
    algo = PPO(
        "MlpPolicy",
        venv,
        n_steps=p.n_steps,
        batch_size=p.batch_size,
        n_epochs=p.epochs,
        learning_rate=p.lr,
        gamma=p.gamma,
        gae_lambda=p.gae_lambda,
        clip_range=p.clip_range,
        ent_coef=p.ent_coef,
        normalize_advantage=p.normalize_advantage,
        target_kl=p.target_kl,
        use_sde=p.use_sde,
        sde_sample_freq=p.sde_sample_freq,
        seed=fcfg.seed,
        device="cpu",
        verbose=0,
        policy_kwargs={
            "net_arch": {"pi": list(fcfg.hidden), "vf": list(fcfg.hidden)},
            "activation_fn": ACTIVATIONS[fcfg.activation],
            "log_std_init": math.log(p.init_std),
        },
    )
    copy_actor(model.linears, _sb3_actor_linears(algo.policy))
    return algo


def actor_to_model(algo: Any, model: ResidualMLP) -> ResidualMLP:
    """Copy the PPO actor's weights into ``model`` (in place) and return it."""
    copy_actor(_sb3_actor_linears(algo.policy), model.linears)
    return model


def optimizers(algo: Any) -> dict[str, torch.optim.Optimizer]:
    """The optimizers whose state a checkpoint keeps (for --resume)."""
    return {"policy": algo.policy.optimizer}


def extra_tensors(algo: Any) -> dict[str, torch.Tensor]:
    return {}


def load_extra(algo: Any, tensors: dict[str, torch.Tensor]) -> None:
    return None


# the trainer's entry point (trainer._algo)
make = make_ppo
