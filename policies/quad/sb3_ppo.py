"""Path (a): Stable-Baselines3 PPO on vectorized PyBullet envs (``simulators.engine_env``).

The recipe most users know, for comparison with the batched path. SB3 saves with pickle, so
``model.save`` is never called: the actor's weights are copied into a ``HoverActor`` and
written as the same safetensors checkpoint as path (b); `tether eval` and `tether export`
serve both. Every ``sb3.eval_every_steps`` env steps the deterministic actor is evaluated on
``eval_drones`` drones of the batched simulator (the success bar); training stops when it
passes ``success_target`` or when ``time_budget_s`` / ``max_env_steps`` is spent.
``--resume`` restarts PPO from the checkpoint's actor (the critic and optimizer restart).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tether.core.config import dump_config
from tether.policies.quad.batched_eval import evaluate_batched
from tether.policies.quad.checkpoint import load_policy, save_checkpoint
from tether.policies.quad.config_quad import QuadHoverTrainConfig
from tether.policies.quad.evaluate import numpy_policy
from tether.policies.quad.model import HoverActor
from tether.policies.quad.simulators import engine_env, hover_env


def _env_factory(experiment: dict[str, Any], alive_bonus: float) -> Any:
    def make() -> Any:
        import gymnasium as gym

        from tether.core.config import parse_experiment

        class AliveBonus(gym.RewardWrapper):  # type: ignore[misc]
            """The hover reward (1 - distance - ...) turns negative far from the target,
            which teaches crashing early; a bonus per step and a floor at 0 prevent it."""

            def reward(self, reward: Any) -> float:
                return max(0.0, float(reward) + alive_bonus)

        return AliveBonus(engine_env(parse_experiment(experiment, "sb3 env")))

    return make


def actor_from_sb3(policy: Any, hidden: tuple[int, ...]) -> HoverActor:
    """Copy an SB3 ``MlpPolicy`` actor (policy_net + action_net) into a HoverActor.

    SB3 sees the unscaled observation, so the HoverActor's feature scale is set to 1.
    """
    actor = HoverActor(hidden)
    actor.feature_scale.fill_(1.0)
    src = [m for m in policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)]
    src.append(policy.action_net)
    dst = [m for m in actor.actor if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for d, s in zip(dst, src, strict=True):
            d.weight.copy_(s.weight)
            d.bias.copy_(s.bias)
    return actor.eval()


def _actor_into_sb3(actor: HoverActor, policy: Any) -> None:
    src = [m for m in actor.actor if isinstance(m, nn.Linear)]
    dst = [m for m in policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)]
    dst.append(policy.action_net)
    with torch.no_grad():
        for d, s in zip(dst, src, strict=True):
            d.weight.copy_(s.weight)
            d.bias.copy_(s.bias)


def train_sb3(cfg: Any, out: Path, resume: bool) -> dict[str, Any]:
    """Train with SB3 PPO; writes the checkpoint, training_curve.png and train.json to ``out``."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from tether.policies.progress import Progress
    from tether.policies.quad.trainer import plot_curve

    tcfg: QuadHoverTrainConfig = cfg.train
    p = tcfg.sb3
    experiment = dump_config(cfg)
    experiment.pop("train", None)
    fns = [_env_factory(experiment, p.alive_bonus) for _ in range(p.num_envs)]
    venv = SubprocVecEnv(fns) if p.vec_env == "subproc" and p.num_envs > 1 else DummyVecEnv(fns)
    venv.seed(tcfg.seed)
    n_hidden = list(tcfg.hidden)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=p.n_steps,
        batch_size=p.batch_size,
        n_epochs=p.epochs,
        learning_rate=p.lr,
        gamma=p.gamma,
        seed=tcfg.seed,
        device="cpu",
        verbose=0,
        policy_kwargs={
            "net_arch": {"pi": n_hidden, "vf": n_hidden},
            "activation_fn": nn.Tanh,
            "log_std_init": math.log(p.init_std),
        },
    )
    if resume:
        actor, _ = load_policy(out)
        _actor_into_sb3(actor, model.policy)
    progress = Progress("quad_hover sb3_ppo")
    history: list[list[float]] = []
    evals: list[list[float]] = []
    solved: dict[str, float] | None = None
    start = time.perf_counter()

    class Monitor(BaseCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.next_eval = p.eval_every_steps
            self.ep_returns: list[float] = []
            self.running = [0.0] * p.num_envs

        def _on_step(self) -> bool:
            nonlocal solved
            for i, (r, d) in enumerate(
                zip(self.locals["rewards"], self.locals["dones"], strict=True)
            ):
                self.running[i] += float(r)
                if d:
                    self.ep_returns.append(self.running[i])
                    self.running[i] = 0.0
            steps, wall = self.num_timesteps, time.perf_counter() - start
            if self.num_timesteps >= self.next_eval:
                self.next_eval += p.eval_every_steps
                recent = self.ep_returns[-50:]
                mean_ret = sum(recent) / len(recent) if recent else 0.0
                history.append([steps, wall, mean_ret])
                actor = actor_from_sb3(self.model.policy, tcfg.hidden)
                res = evaluate_batched(
                    numpy_policy(actor),
                    hover_env(tcfg.eval_drones, coarse=True, seed=tcfg.seed + 7),
                    seed=tcfg.seed + 7,
                    give_up_below=tcfg.success_target,
                )
                evals.append([steps, time.perf_counter() - start, res["success_rate"]])
                if res["success_rate"] >= tcfg.success_target:
                    solved = {"env_steps": steps, "wall_s": time.perf_counter() - start}
                progress.show(
                    f"{steps / 1e6:6.3f} M steps | {wall:7.1f} s | episode return {mean_ret:8.1f} "
                    f"| eval {'<=' if res['gave_up_at_s'] else ''}{res['success_rate']:.1%}"
                )
            if solved is not None or wall >= tcfg.time_budget_s:
                return False
            return not (tcfg.max_env_steps and steps >= tcfg.max_env_steps)

    monitor = Monitor()
    try:
        model.learn(total_timesteps=10**12, callback=monitor, progress_bar=False)
    finally:
        venv.close()
    wall = time.perf_counter() - start
    steps = int(model.num_timesteps)
    result = {
        "path": "sb3_ppo",
        "env_steps": steps,
        "wall_s": round(wall, 2),
        "solved": solved is not None,
        "solved_at": solved,
        "last_eval_success": evals[-1][2] if evals else None,
    }
    progress.show(
        f"{'solved' if solved else 'stopped'} after {steps / 1e6:.3f} M steps, {wall:.1f} s",
        final=True,
    )
    actor = actor_from_sb3(model.policy, tcfg.hidden)
    extra = {
        "path": "sb3_ppo",
        "experiment": dump_config(cfg),
        "train_state": {"env_steps": steps, "wall_s": wall, "history": history, "evals": evals},
        "result": result,
    }
    save_checkpoint(out, actor, extra)
    plot_curve(
        history,
        evals,
        out / "training_curve.png",
        "quad_hover, SB3 PPO on PyBullet",
        ylabel="mean episode return (higher is better)",
    )
    result["checkpoint"] = str(out)
    (out / "train.json").write_text(json.dumps(result, indent=2))
    return result
