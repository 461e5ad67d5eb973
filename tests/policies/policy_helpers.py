"""Helpers for policy tests: a tiny synthetic LeRobot dataset and a tiny diffusion config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

IMG = 32  # tiny camera: fast to encode and to train on


def write_dataset(root: Path, episodes: int = 3, frames: int = 20, image: bool = False) -> Path:
    """Episodes where the action is a known function of the observation:
    action[:7] = state[:7] + 0.1 * sign(cube x), action[7] = 0.04 if cube x > 0 else 0."""
    from tether.core.data.lerobot import LeRobotWriter

    features: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32", "shape": [9]},
        "observation.environment_state": {"dtype": "float32", "shape": [7]},
        "action": {"dtype": "float32", "shape": [8]},
    }
    if image:
        features["observation.images.front"] = {"dtype": "video", "shape": [IMG, IMG, 3]}
    rng = np.random.default_rng(0)
    with LeRobotWriter(root, 30, features, "panda", video_codec="libx264") as w:
        for ep in range(episodes):
            w.start_episode("lift the cube")
            side = 1.0 if ep % 2 == 0 else -1.0
            q = rng.uniform(-0.5, 0.5, 9).astype(np.float32)
            for _ in range(frames):
                q[:7] += 0.01
                env = np.array([0.5 * side, 0.1, 0.02, 1, 0, 0, 0], np.float32)
                act = np.concatenate([q[:7] + 0.1 * side, [0.04 if side > 0 else 0.0]])
                frame = {
                    "observation.state": q.copy(),
                    "observation.environment_state": env,
                    "action": act.astype(np.float32),
                }
                if image:
                    img = np.zeros((IMG, IMG, 3), np.uint8)
                    img[:, : IMG // 2 if side > 0 else IMG] = 200
                    frame["observation.images.front"] = img
                w.add_frame(frame)
            w.save_episode()
    return root


TINY_MODEL = {
    "obs_keys": ["state", "env_state"],
    "obs_horizon": 2,
    "horizon": 4,
    "execute_steps": 2,
    "down_dims": [8, 16],
    "kernel_size": 3,
    "step_embed_dim": 8,
    "image_channels": [4, 8],
    "image_keypoints": 4,
    "num_train_timesteps": 20,
    "num_inference_steps": 5,
}


def experiment(dataset: Path, steps: int = 3, **model: Any) -> Any:
    """An ExperimentConfig training the tiny model on ``dataset`` for ``steps`` steps."""
    from tether.core.config import parse_experiment

    return parse_experiment(
        {
            "name": "tiny_diffusion",
            "robot": "panda",
            "sim": {"type": "mujoco", "control_hz": 100},
            "task": {"type": "lift"},
            "policy": {"type": "hold"},
            "train": {
                "type": "diffusion",
                "dataset": str(dataset),
                "model": {**TINY_MODEL, **model},
                "steps": steps,
                "batch_size": 16,
                "warmup_steps": 1,
                "checkpoint_every": 2,
                "image_shift": 2,
            },
        }
    )


# ---- a tiny language-conditioned policy (VLA, docs/vla.md) ------------------------------

LEFT, RIGHT = "move to the left", "move to the right"


def write_language_dataset(root: Path, episodes: int = 4, frames: int = 20) -> Path:
    """The same observations under two instructions: episodes 2k and 2k + 1 see the same
    states (from ``start_state(k)``), action[:7] = state[:7] + 0.1 * side, action[7] = 0.04
    if side > 0 else 0, with side +1 for LEFT (even episodes) and -1 for RIGHT."""
    from tether.core.data.lerobot import LeRobotWriter

    features: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32", "shape": [9]},
        "observation.images.front": {"dtype": "video", "shape": [IMG, IMG, 3]},
        "action": {"dtype": "float32", "shape": [8]},
    }
    with LeRobotWriter(root, 30, features, "panda", video_codec="libx264") as w:
        for ep in range(episodes):
            side = 1.0 if ep % 2 == 0 else -1.0
            w.start_episode(LEFT if side > 0 else RIGHT)
            q = start_state(ep // 2)
            for _ in range(frames):
                q[:7] += 0.01
                act = np.concatenate([q[:7] + 0.1 * side, [0.04 if side > 0 else 0.0]])
                w.add_frame(
                    {
                        "observation.state": q.copy(),
                        "observation.images.front": np.full((IMG, IMG, 3), 120, np.uint8),
                        "action": act.astype(np.float32),
                    }
                )
            w.save_episode()
    return root


def start_state(pair: int) -> np.ndarray:
    return np.random.default_rng(pair).uniform(-0.5, 0.5, 9).astype(np.float32)


def vla_experiment(dataset: Path, steps: int, **model: Any) -> Any:
    from tether.core.config import parse_experiment

    return parse_experiment(
        {
            "name": "tiny_vla",
            "robot": "panda",
            "sim": {"type": "mujoco", "control_hz": 100},
            "task": {"type": "lift"},
            "policy": {"type": "hold"},
            "train": {
                "type": "vla",
                "dataset": str(dataset),
                "model": {
                    **TINY_MODEL,
                    "obs_keys": ["state", "instruction"],
                    "obs_horizon": 1,
                    "objective": "flow",
                    "text_dim": 16,
                    **model,
                },
                "steps": steps,
                "batch_size": 32,
                "warmup_steps": 1,
                "lr": 3e-3,
                "ema_decay": 0.9,
                "checkpoint_every": steps,
            },
        }
    )


def tiny_vla(out: Path, steps: int = 600) -> Path:
    """A tiny VLA ([state, instruction] -> a flow-matching MLP head) trained on
    write_language_dataset for ``steps`` steps and exported; returns the model folder."""
    import contextlib
    import io

    from tether.policies.diffusion.export import export_checkpoint
    from tether.policies.diffusion.trainer import DiffusionTrainer

    data = write_language_dataset(out / "dataset")
    cfg = vla_experiment(
        data, steps, denoiser="mlp", mlp_width=64, mlp_blocks=2, num_inference_steps=8
    )
    with contextlib.redirect_stdout(io.StringIO()):
        DiffusionTrainer.train(cfg, out / "ckpt", resume=False)
        return export_checkpoint(out / "ckpt", "onnx", out / "model").parent


REACH_RESIDUAL = "configs/experiments/panda_reach_residual.yaml"


def reach_residual_folder(
    out: Path, cancel: bool = True, overrides: list[str] | None = None
) -> Path:
    """An exported base + residual folder (tether-residual/1, `tether export` of a residual
    checkpoint) for the reach case's biased base (configs/experiments/panda_reach_residual.yaml:
    the expert with shoulder and elbow offset), without training: the residual's last layer
    has zero weights and a bias that makes it a constant. ``cancel``: the constant is
    -base_offset, so base + residual is the unbiased expert (succeeds); else it is exactly
    zero, so the folder serves the biased base alone (fails). Needs torch and MuJoCo."""
    import torch

    from tether.core.config import dump_config, load_config
    from tether.policies.residual.checkpoint import as_list, save_checkpoint
    from tether.policies.residual.env import ResidualEnv
    from tether.policies.residual.export import export_checkpoint
    from tether.policies.residual.model import ResidualMLP
    from tether.policies.residual.trainer import base_description

    repo = Path(__file__).resolve().parents[2]
    cfg = load_config(repo / REACH_RESIDUAL, overrides)
    fcfg = cfg.finetune
    env = ResidualEnv(cfg, fcfg)
    spec = env.robot_spec
    low, high = spec.action.low_array(), spec.action.high_array()
    model = ResidualMLP(
        np.zeros(env.obs_dim), np.ones(env.obs_dim), low, high, fcfg.scale, (8,),
        last_layer_init=0.0,
    )  # fmt: skip
    if cancel:
        want = -np.asarray(fcfg.base_offset, np.float64) / model.limit.numpy()
        with torch.no_grad():
            model.linears[-1].bias.copy_(torch.as_tensor(np.arctanh(want), dtype=torch.float32))
    contract = {
        "algorithm": "ppo",
        "robot": cfg.robot,
        "action_names": list(spec.action.names),
        "action_low": as_list(low),
        "action_high": as_list(high),
        "control_hz": spec.control_hz,
        "observation_keys": env.keys,
        "observation_sizes": [int(np.asarray(env.obs[k]).size) for k in env.keys],
        "base": base_description(cfg, fcfg),
        "experiment": dump_config(cfg),
        "result": None,
    }
    env.close()
    ckpt = save_checkpoint(out / "checkpoint", model, contract)
    return export_checkpoint(ckpt, "onnx", out / "export").parent
