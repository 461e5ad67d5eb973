"""Off-policy residual learning in the manner of ResFiT: SAC with a high update-to-data
ratio, n-step returns, LayerNorm critics and the replay buffer warm-started with the base's
own rollouts (zero residual).

What comes from stable-baselines3: SAC itself (twin critics, target networks, entropy
tuning), the n-step replay buffer (``NStepReplayBuffer`` via ``n_steps``), the update loop
(``gradient_steps`` = UTD x envs per collection step). What is written here, and why:

- ``LayerNormCritic``: SB3's ``ContinuousCritic`` has no option for normalisation layers;
  ResFiT's stability at high UTD comes from LayerNorm in the critics, so the Q networks are
  rebuilt with SB3's own ``create_mlp(post_linear_modules=[nn.LayerNorm])``.
- the buffer warm start: SB3's ``learning_starts`` fills the buffer with *uniformly random*
  actions, which for a residual means random corrections of full size; ResFiT fills it with
  the base's behaviour, i.e. zero residual, so those transitions are added by hand.
- the actor's last layer (``mu``) starts at zero and its log-std head at ``init_std``, so
  base + residual starts as the base with modest exploration (SB3 initialises both as
  ordinary linear layers).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from tether.policies.residual.config import FinetuneConfig
from tether.policies.residual.model import ACTIVATIONS, ResidualMLP
from tether.policies.residual.ppo import copy_actor


def _critic_classes() -> tuple[type, type]:
    from stable_baselines3.common.policies import ContinuousCritic
    from stable_baselines3.common.preprocessing import get_action_dim
    from stable_baselines3.common.torch_layers import create_mlp
    from stable_baselines3.sac.policies import SACPolicy

    class LayerNormCritic(ContinuousCritic):  # type: ignore[misc]
        """SB3's twin Q networks with LayerNorm after every hidden linear layer."""

        def __init__(self, **kwargs: Any) -> None:
            # SACPolicy.make_critic passes keyword arguments only
            super().__init__(**kwargs)
            net_arch: list[int] = kwargs["net_arch"]
            features_dim: int = kwargs["features_dim"]
            act = kwargs.get("activation_fn", nn.ReLU)
            action_dim = get_action_dim(self.action_space)
            self.q_networks = []
            for idx in range(self.n_critics):
                layers = create_mlp(
                    features_dim + action_dim,
                    1,
                    net_arch,
                    act,
                    post_linear_modules=[nn.LayerNorm],
                )
                q_net = nn.Sequential(*layers)
                self.add_module(f"qf{idx}", q_net)
                self.q_networks.append(q_net)

    class ResidualSACPolicy(SACPolicy):  # type: ignore[misc]
        """SACPolicy whose critics are LayerNormCritic."""

        def make_critic(self, features_extractor: Any = None) -> Any:
            kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
            return LayerNormCritic(**kwargs).to(self.device)

    return LayerNormCritic, ResidualSACPolicy


def _actor_linears(policy: Any) -> list[nn.Linear]:
    layers = [m for m in policy.actor.latent_pi if isinstance(m, nn.Linear)]
    return [*layers, policy.actor.mu]


def make_sac(venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> Any:
    """An SB3 SAC on ``venv`` (actions in [-1, 1], the env does not squash again)."""
    from stable_baselines3 import SAC

    o = fcfg.offpolicy
    policy_cls: Any = _critic_classes()[1] if o.layer_norm else "MlpPolicy"
    dim = int(venv.action_space.shape[0])
    algo = SAC(
        policy_cls,
        venv,
        learning_rate=o.lr,
        buffer_size=o.buffer_size,
        learning_starts=0,
        batch_size=o.batch_size,
        tau=o.tau,
        gamma=o.gamma,
        train_freq=1,
        gradient_steps=o.utd * venv.num_envs,
        n_steps=o.n_step,
        ent_coef=o.ent_coef if o.ent_coef != "auto" else f"auto_{o.init_ent_coef}",
        target_entropy=o.target_entropy_per_dim * dim,
        seed=fcfg.seed,
        device="cpu",
        verbose=0,
        policy_kwargs={
            "net_arch": list(fcfg.hidden),
            "activation_fn": ACTIVATIONS[fcfg.activation],
        },
    )
    copy_actor(model.linears, _actor_linears(algo.policy))
    with torch.no_grad():  # exploration noise std (pre-tanh) starts at init_std
        log_std: Any = algo.policy.actor.log_std  # a Linear head without gSDE
        log_std.weight.zero_()
        log_std.bias.fill_(math.log(o.init_std))
    return algo


def warm_start(algo: Any, venv: Any, steps: int) -> int:
    """Put ``steps`` env steps of base-only rollouts (zero residual) into the replay
    buffer, as SB3's ``_store_transition`` stores them; returns the control steps taken
    (``steps`` counts learner steps)."""
    if steps <= 0:
        return 0
    n = venv.num_envs
    zeros = np.zeros((n, *venv.action_space.shape), np.float32)
    obs = venv.reset()
    taken = 0
    while taken < steps:
        new_obs, rewards, dones, infos = venv.step(zeros)
        next_obs = new_obs.copy()
        for i, done in enumerate(dones):
            if done and infos[i].get("terminal_observation") is not None:
                next_obs[i] = infos[i]["terminal_observation"]
        algo.replay_buffer.add(obs, next_obs, zeros, rewards, dones, infos)
        obs = new_obs
        taken += sum(int(info.get("control_steps", 1)) for info in infos)
    return taken


def actor_to_model(algo: Any, model: ResidualMLP) -> ResidualMLP:
    """Copy the SAC actor's mean path (latent_pi + mu) into ``model`` (in place)."""
    copy_actor(_actor_linears(algo.policy), model.linears)
    return model


def optimizers(algo: Any) -> dict[str, torch.optim.Optimizer]:
    out = {"actor": algo.actor.optimizer, "critic": algo.critic.optimizer}
    if algo.ent_coef_optimizer is not None:
        out["ent_coef"] = algo.ent_coef_optimizer
    return out


def extra_tensors(algo: Any) -> dict[str, torch.Tensor]:
    if algo.ent_coef_optimizer is None:
        return {}
    return {"log_ent_coef": algo.log_ent_coef.detach().clone()}


def load_extra(algo: Any, tensors: dict[str, torch.Tensor]) -> None:
    if "log_ent_coef" in tensors and algo.ent_coef_optimizer is not None:
        with torch.no_grad():
            algo.log_ent_coef.copy_(tensors["log_ent_coef"])
