"""Pieces the two PPO-on-a-batched-world trainers share (``nav_ppo``, ``swarm_ppo``): the
SB3 PPO they build and how `tether eval` serves their checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_ppo(venv: Any, ppo: Any, hidden: tuple[int, ...], seed: int) -> Any:
    """Stable-Baselines3 PPO with a tanh MlpPolicy of ``hidden`` layers for the actor and the
    critic, on the CPU, with the settings of ``ppo`` (NavPPOConfig: SB3's names)."""
    from stable_baselines3 import PPO
    from torch import nn

    return PPO(
        "MlpPolicy",
        venv,
        n_steps=ppo.n_steps,
        batch_size=ppo.batch_size,
        n_epochs=ppo.n_epochs,
        learning_rate=ppo.learning_rate,
        gamma=ppo.gamma,
        gae_lambda=ppo.gae_lambda,
        clip_range=ppo.clip_range,
        ent_coef=ppo.ent_coef,
        policy_kwargs={
            "net_arch": {"pi": list(hidden), "vf": list(hidden)},
            "activation_fn": nn.Tanh,
            "log_std_init": ppo.log_std_init,
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )


def evaluate_exported(trainer: Any, checkpoint: Path, options: Any) -> dict[str, Any]:
    """`tether eval CHECKPOINT`: the checkpoint exported (once, to CHECKPOINT/onnx) and served
    by the torch-free ``onnx`` policy."""
    from tether.policies.evaluation import evaluate_checkpoint

    model = checkpoint / "onnx" / "model.onnx"
    if not model.is_file():
        trainer.export(checkpoint, "onnx", None)
    return evaluate_checkpoint(checkpoint, options, {"type": "onnx", "model": str(model)})
