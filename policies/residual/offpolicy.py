"""Off-policy residual learning in the manner of ResFiT: a high update-to-data ratio,
n-step returns, LayerNorm critics and the replay buffer warm-started with the base's own
behaviour; the actor is TD3's (deterministic, fixed Gaussian exploration, delayed updates,
``offpolicy.learner: td3``, the default) or SAC's (``learner: sac``).

What comes from stable-baselines3: TD3 and SAC themselves (twin critics, target networks,
target smoothing / entropy tuning), the n-step replay buffer (``NStepReplayBuffer`` via
``n_steps``), the update loop (``gradient_steps`` = UTD x envs per collection step). What is
written here, and why:

- ``LayerNormCritic``: SB3's ``ContinuousCritic`` has no option for normalisation layers;
  ResFiT's stability at high UTD comes from LayerNorm in the critics, so the Q networks are
  rebuilt with SB3's own ``create_mlp(post_linear_modules=[nn.LayerNorm])``.
- the buffer warm start: SB3's ``learning_starts`` fills the buffer with *uniformly random*
  actions, which for a residual means random corrections of full size; ResFiT fills it with
  the base's behaviour (zero residual, plus the TD3 exploration noise so the critics see
  how the outcome changes with the action), so those transitions are added by hand.
- the critic burn-in (``critic_warmup_steps``, TD3): SB3 updates the actor from the first
  gradient step, when the critic is still random and its action gradient walks the
  residual away from the base; Residual Policy Learning (Silver et al. 2018) and ResFiT
  train the critics alone on the base's transitions first. The loop is TD3's critic update
  (the same n-step target with target-policy smoothing) without the actor step.
- the actor's last layer starts at the residual model's (near zero), SAC's log-std head at
  ``init_std`` (SB3 initialises both as ordinary linear layers), TD3's target actor as the
  actor.
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


def _td3_policy_class() -> type:
    from stable_baselines3.td3.policies import TD3Policy

    layer_norm_critic = _critic_classes()[0]

    class ResidualTD3Policy(TD3Policy):  # type: ignore[misc]
        """TD3Policy whose critics are LayerNormCritic."""

        def make_critic(self, features_extractor: Any = None) -> Any:
            kwargs = self._update_features_extractor(self.critic_kwargs, features_extractor)
            return layer_norm_critic(**kwargs).to(self.device)

    return ResidualTD3Policy


def _actor_linears(policy: Any) -> list[nn.Linear]:
    """The actor's mean path as ResidualMLP.net's linear layers: SAC's latent_pi + mu,
    TD3's mu (Linear / activation ... Linear, Tanh)."""
    actor = policy.actor
    if hasattr(actor, "latent_pi"):
        layers = [m for m in actor.latent_pi if isinstance(m, nn.Linear)]
        return [*layers, actor.mu]
    return [m for m in actor.mu if isinstance(m, nn.Linear)]


def make_offpolicy(venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> Any:
    """The ``offpolicy.learner``'s SB3 algorithm on ``venv``, starting from ``model``."""
    if fcfg.offpolicy.learner == "sac":
        return make_sac(venv, fcfg, model)
    return make_td3(venv, fcfg, model)


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


def make_td3(venv: Any, fcfg: FinetuneConfig, model: ResidualMLP) -> Any:
    """An SB3 TD3 on ``venv`` (actions in [-1, 1]) whose actor and target actor start as
    ``model``, exploring with ``offpolicy.action_noise`` per element."""
    from stable_baselines3.common.noise import NormalActionNoise

    o = fcfg.offpolicy
    policy_cls: Any = _td3_policy_class() if o.layer_norm else "MlpPolicy"
    dim = int(venv.action_space.shape[0])
    noise = (
        NormalActionNoise(np.zeros(dim), np.full(dim, o.action_noise))
        if o.action_noise > 0
        else None
    )
    algo = _td3_class()(
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
        action_noise=noise,
        n_steps=o.n_step,
        policy_delay=o.policy_delay,
        target_policy_noise=o.target_policy_noise,
        target_noise_clip=o.target_noise_clip,
        seed=fcfg.seed,
        device="cpu",
        verbose=0,
        policy_kwargs={
            "net_arch": list(fcfg.hidden),
            "activation_fn": ACTIVATIONS[fcfg.activation],
        },
    )
    algo.actor_l2 = o.actor_l2
    copy_actor(model.linears, _actor_linears(algo.policy))
    algo.actor_target.load_state_dict(algo.actor.state_dict())
    return algo


def _critic_step(algo: Any, data: Any) -> float:
    """One TD3 critic update on a replay batch: the n-step target with target-policy
    smoothing and the min of the twin target critics; returns the loss."""
    import torch.nn.functional as F

    discounts = data.discounts if data.discounts is not None else algo.gamma
    with torch.no_grad():
        noise = data.actions.clone().normal_(0, algo.target_policy_noise)
        noise = noise.clamp(-algo.target_noise_clip, algo.target_noise_clip)
        next_a = (algo.actor_target(data.next_observations) + noise).clamp(-1, 1)
        next_q = torch.cat(algo.critic_target(data.next_observations, next_a), dim=1)
        target = data.rewards + (1 - data.dones) * discounts * next_q.min(1, keepdim=True)[0]
    current = algo.critic(data.observations, data.actions)
    loss: torch.Tensor = sum(F.mse_loss(q, target) for q in current)  # type: ignore[assignment]
    algo.critic.optimizer.zero_grad()
    loss.backward()
    algo.critic.optimizer.step()
    return float(loss.item())


def _soft_update(src: nn.Module, dst: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for p, t in zip(src.parameters(), dst.parameters(), strict=True):
            t.mul_(1 - tau).add_(p, alpha=tau)


def critic_warmup(algo: Any, steps: int) -> list[float]:
    """Train the critics alone for ``steps`` gradient steps on the replay buffer (TD3's
    critic update and target averaging, no actor step); returns the loss every 100 steps."""
    if steps <= 0 or not hasattr(algo, "actor_target"):
        return []
    algo.policy.set_training_mode(True)
    losses: list[float] = []
    for k in range(steps):
        data = algo.replay_buffer.sample(algo.batch_size, env=algo._vec_normalize_env)
        loss = _critic_step(algo, data)
        _soft_update(algo.critic, algo.critic_target, algo.tau)
        if k % 100 == 0:
            losses.append(loss)
    algo.policy.set_training_mode(False)
    return losses


def _td3_class() -> type:
    from stable_baselines3 import TD3

    class ResidualTD3(TD3):  # type: ignore[misc]
        """SB3's TD3 whose delayed actor step also pulls the residual towards zero:
        loss = -Q(s, pi(s)) / mean|Q| + actor_l2 * mean(pi(s)^2), TD3+BC's normalisation
        with the base (zero residual) as the behaviour. A critic that has seen only small
        residuals extrapolates optimistically to large ones, and the plain TD3 actor
        saturates within a few hundred updates (docs/residual_rl.md)."""

        actor_l2: float = 0.0

        def train(self, gradient_steps: int, batch_size: int = 100) -> None:
            self.policy.set_training_mode(True)
            self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])
            critic_losses, actor_losses = [], []
            for _ in range(gradient_steps):
                self._n_updates += 1
                data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
                critic_losses.append(_critic_step(self, data))
                if self._n_updates % self.policy_delay:
                    continue
                pi = self.actor(data.observations)
                q = self.critic.q1_forward(data.observations, pi)
                loss = -q.mean() / q.abs().mean().detach().clamp_min(1e-6)
                if self.actor_l2 > 0:
                    loss = loss + self.actor_l2 * pi.pow(2).mean()
                self.actor.optimizer.zero_grad()
                loss.backward()
                self.actor.optimizer.step()
                actor_losses.append(float(loss.item()))
                _soft_update(self.critic, self.critic_target, self.tau)
                _soft_update(self.actor, self.actor_target, self.tau)
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            self.logger.record("train/critic_loss", float(np.mean(critic_losses)))
            if actor_losses:
                self.logger.record("train/actor_loss", float(np.mean(actor_losses)))

    return ResidualTD3


def warm_start(algo: Any, venv: Any, steps: int, noise_std: float = 0.0) -> int:
    """Put ``steps`` learner steps of base rollouts into the replay buffer, as SB3's
    ``_store_transition`` stores them: zero residual, plus Gaussian noise of ``noise_std``
    per element (clipped to [-1, 1]) when given; returns the control steps taken."""
    if steps <= 0:
        return 0
    n = venv.num_envs
    shape = (n, *venv.action_space.shape)
    rng = np.random.default_rng(int(getattr(algo, "seed", 0) or 0))
    obs = venv.reset()
    taken = 0
    stored = 0
    while stored < steps:
        actions = np.zeros(shape, np.float32)
        if noise_std > 0:
            actions = np.clip(rng.normal(0.0, noise_std, shape), -1, 1).astype(np.float32)
        new_obs, rewards, dones, infos = venv.step(actions)
        next_obs = new_obs.copy()
        for i, done in enumerate(dones):
            if done and infos[i].get("terminal_observation") is not None:
                next_obs[i] = infos[i]["terminal_observation"]
        algo.replay_buffer.add(obs, next_obs, actions, rewards, dones, infos)
        obs = new_obs
        stored += n
        taken += sum(int(info.get("control_steps", 1)) for info in infos)
    return taken


def actor_to_model(algo: Any, model: ResidualMLP) -> ResidualMLP:
    """Copy the SAC actor's mean path (latent_pi + mu) into ``model`` (in place)."""
    copy_actor(_actor_linears(algo.policy), model.linears)
    return model


def optimizers(algo: Any) -> dict[str, torch.optim.Optimizer]:
    out = {"actor": algo.actor.optimizer, "critic": algo.critic.optimizer}
    if getattr(algo, "ent_coef_optimizer", None) is not None:
        out["ent_coef"] = algo.ent_coef_optimizer
    return out


def extra_tensors(algo: Any) -> dict[str, torch.Tensor]:
    if getattr(algo, "ent_coef_optimizer", None) is None:
        return {}
    return {"log_ent_coef": algo.log_ent_coef.detach().clone()}


def load_extra(algo: Any, tensors: dict[str, torch.Tensor]) -> None:
    if "log_ent_coef" in tensors and getattr(algo, "ent_coef_optimizer", None) is not None:
        with torch.no_grad():
            algo.log_ent_coef.copy_(tensors["log_ent_coef"])


# the trainer's entry point (trainer._algo)
make = make_offpolicy
