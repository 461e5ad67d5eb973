"""The ``diffusion`` trainer: `tether train` / `tether eval` / `tether export` for diffusion
policies. A checkpoint directory holds contract.json, model.safetensors (EMA weights),
train_state.* (for --resume), training_curve.png and train_log.json."""

from __future__ import annotations

import copy
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from tether.core.config import ExperimentConfig, dump_config
from tether.core.errors import ConfigError, TetherError
from tether.core.experiment import robot_spec
from tether.policies.diffusion.checkpoint import (
    CKPT_FORMAT,
    TRAIN_META,
    build_net,
    load_train_state,
    save_checkpoint,
)
from tether.policies.diffusion.config import (
    IMAGE_PREFIX,
    TEXT_KEY,
    DiffusionTrainConfig,
    low_dim,
)
from tether.policies.diffusion.dataset import WindowDataset, load_windows
from tether.policies.diffusion.model import DiffusionNet, PoseHead, text_norm_stats

#: the low-dim key train.aux_env_state predicts from the image features
AUX_KEY = "env_state"


def make_contract(cfg: ExperimentConfig, tc: DiffusionTrainConfig, ds: WindowDataset) -> dict:
    """The checkpoint's I/O contract: what the policy reads and writes, and how."""
    spec = robot_spec(cfg)
    m = tc.model
    shapes = {k: list(ds.obs[k].shape[1:]) for k in m.obs_keys}
    norm = {
        k: {"min": ds.stats[k][0].tolist(), "max": ds.stats[k][1].tolist()}
        for k in m.obs_keys
        if low_dim(k)
    }
    for k in m.obs_keys:
        if k.startswith(IMAGE_PREFIX):
            norm[k] = {"uint8_to": [-1.0, 1.0]}
    if TEXT_KEY in m.obs_keys and m.text_norm:
        norm[TEXT_KEY] = text_norm_stats(ds.text_table())
    lo, hi = ds.stats["action"]
    language: dict[str, Any] = {}
    if TEXT_KEY in m.obs_keys:
        # which encoder the instruction's embedding comes from (the runtime refuses another)
        # and what the policy was trained on (the runtime reports how far an instruction is)
        language = {"text_encoder": ds.text_encoder, "instructions": ds.instructions}
        if m.text_anchor is not None:
            language["text_anchor"] = m.text_anchor
    extra: dict[str, Any] = {}
    if m.pose_readout:
        if AUX_KEY not in ds.stats:
            raise ConfigError(
                "train.model.pose_readout learns the objects' poses: set train.aux_env_state "
                "(its loss weight, e.g. 1.0) and use a dataset with observation.environment_state"
            )
        plo, phi = ds.stats[AUX_KEY]
        extra["pose_readout"] = {"min": plo.tolist(), "max": phi.tolist()}
    if m.task_experts and ds.group_rows is not None:
        # the experts: each group's rows among the wordings (contract "instructions")
        language["instruction_groups"] = [g.tolist() for g in ds.group_rows]
    return {
        "format": CKPT_FORMAT,
        "trainer": "diffusion",
        "robot": spec.name,
        "action_mode": spec.action.mode,
        "action_names": list(spec.action.names),
        "joint_names": list(spec.joint_names),
        "control_hz": spec.control_hz,
        "action_dt": 1.0 / ds.fps,
        "observation_keys": list(m.obs_keys),
        "obs_shapes": shapes,
        "obs_horizon": m.obs_horizon,
        "horizon": m.horizon,
        "execute_steps": m.execute_steps,
        "normalization": norm,
        # actions leave the network in [-1, 1] and are mapped back onto [min, max]
        "action_scale": {"min": lo.tolist(), "max": hi.tolist()},
        "model": m.model_dump(mode="json"),
        "dataset": str(tc.dataset),
        "experiment": dump_config(cfg),
        **language,
        **extra,
    }


def _shift_images(x: np.ndarray, pad: int, rng: np.random.Generator) -> np.ndarray:
    """Random shift augmentation of (B, To, H, W, 3) images; one shift per sample."""
    if pad == 0:
        return x
    b, _, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    dx, dy = rng.integers(0, 2 * pad + 1, (2, b))
    return np.stack([padded[i, :, dy[i] : dy[i] + h, dx[i] : dx[i] + w] for i in range(b)])


def _jitter_text(x: np.ndarray, std: float, rng: np.random.Generator) -> torch.Tensor:
    """Instruction augmentation: (B, To, E) unit embeddings plus Gaussian noise (one draw per
    sample, the same for its frames), renormalised."""
    noisy = x + rng.normal(0.0, std, (x.shape[0], 1, x.shape[2])).astype(np.float32)
    return torch.from_numpy(noisy / np.linalg.norm(noisy, axis=-1, keepdims=True))


def load_paraphrases(path: Path | None) -> dict[str, list[str]] | None:
    """train.paraphrases: {group: [wording, ...]} from YAML, or None without a file."""
    if path is None:
        return None
    if not Path(path).is_file():
        raise TetherError(f"train.paraphrases: {path} does not exist")
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not all(
        isinstance(ws, list) and ws and all(isinstance(w, str) and w.strip() for w in ws)
        for ws in data.values()
    ):
        raise TetherError(
            f"train.paraphrases: {path} must map each group's name to a list of wordings"
        )
    return {str(g): list(ws) for g, ws in data.items()}


def _keep_scaling(contract: dict[str, Any], saved: dict[str, Any]) -> None:
    """On resume the network keeps the normalization it was trained with (its weights hold
    it): a dataset that grew since may span a wider range, and the contract must describe
    the weights, so the checkpoint's scaling is kept and the difference is said once."""
    for key in ("normalization", "action_scale", "pose_readout"):
        if key in saved and key in contract and saved[key] != contract[key]:
            wider = _widest_change(saved[key], contract[key])
            print(
                f"resume: the dataset's {key} differs from the checkpoint's (largest change "
                f"{wider:.3g}); the checkpoint's is kept, the weights were trained with it"
            )
            contract[key] = saved[key]


def _widest_change(a: Any, b: Any) -> float:
    """Largest absolute difference between two nested dicts / lists of numbers."""
    if isinstance(a, dict) and isinstance(b, dict):
        return max([_widest_change(a[k], b[k]) for k in a.keys() & b.keys()] or [0.0])
    try:
        x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    except (TypeError, ValueError):
        return 0.0
    return float(np.abs(x - y).max()) if x.shape == y.shape and x.size else 0.0


def _init_from(net: DiffusionNet, path: Path) -> None:
    """train.init_from: copy a checkpoint's weights into ``net`` wherever a name and shape
    match; a shared denoiser's weights seed every expert (denoiser.experts.<i>.*). The
    normalization buffers stay this run's (they follow its dataset)."""
    from safetensors.torch import load_file

    from tether.policies.diffusion.checkpoint import WEIGHTS

    if not (path / WEIGHTS).is_file():
        raise TetherError(f"train.init_from: {path} holds no {WEIGHTS}")
    old = load_file(str(path / WEIGHTS))
    state = net.state_dict()
    copied = 0
    for name, value in state.items():
        if "norm." in name or name.startswith("expert_"):
            continue
        src = name
        if name.startswith("denoiser.experts.") and name not in old:
            src = "denoiser." + name.split(".", 3)[3]
        if src in old and old[src].shape == value.shape:
            state[name] = old[src]
            copied += 1
    if not copied:
        raise TetherError(f"train.init_from: no weight of {path} fits this model")
    net.load_state_dict(state)
    print(f"init_from {path}: {copied} of {len(state)} tensors copied")


def _aux_head(tc: DiffusionTrainConfig, ds: WindowDataset, net: DiffusionNet) -> PoseHead | None:
    """train.aux_env_state's head, used only in training: every camera's features of the
    latest frame -> the objects' poses (None when off, or when model.pose_readout has its
    head inside the model)."""
    if not tc.aux_env_state or net.pose_head is not None:  # pose_readout: the model's head
        return None
    if not net.encoders:
        raise ConfigError("train.aux_env_state needs a camera among train.model.obs_keys")
    features = sum(int(e.out_dim) for e in net.encoders.values())  # type: ignore[misc]
    return PoseHead(features, *ds.stats[AUX_KEY])


def _lr(tc: DiffusionTrainConfig, step: int) -> float:
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    p = (step - tc.warmup_steps) / max(1, tc.steps - tc.warmup_steps)
    return tc.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))


@torch.no_grad()
def _ema_update(ema: DiffusionNet, net: DiffusionNet, decay: float) -> None:
    for pe, p in zip(ema.parameters(), net.parameters(), strict=True):
        pe.lerp_(p, 1.0 - decay)


def training_curve(losses: list[float], path: Path, title: str) -> Path:
    """PNG of the loss per step and its running mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = np.asarray(losses)
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(a, lw=0.5, alpha=0.4, label="loss")
    if len(a) >= 50:
        k = 50
        ax.plot(np.arange(k - 1, len(a)), np.convolve(a, np.ones(k) / k, "valid"), label="mean 50")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("denoiser MSE (noise, or velocity for flow)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


class DiffusionTrainer:
    """train / evaluate / export for ``train: {type: diffusion}`` (see tether.cli.train)."""

    @classmethod
    def train(cls, cfg: ExperimentConfig, out: Path, resume: bool) -> dict[str, Any]:
        tc = cfg.train
        if not isinstance(tc, DiffusionTrainConfig):
            raise ConfigError("train.type must be diffusion for the diffusion trainer")
        m = tc.model
        levels = 2 ** (len(m.down_dims) - 1)
        if m.denoiser == "unet" and m.horizon % levels:
            raise ConfigError(
                f"train.model.horizon: {m.horizon} must be a multiple of {levels} "
                f"(2 ** (len(down_dims) - 1))"
            )
        if m.denoiser == "unet" and any(d % m.norm_groups for d in m.down_dims):
            raise ConfigError(
                f"train.model.norm_groups: {m.norm_groups} must divide every down_dims entry "
                f"({m.down_dims})"
            )
        if m.execute_steps > m.horizon:
            raise ConfigError("train.model.execute_steps: must not exceed horizon")
        if not tc.dataset.exists():
            raise TetherError(f"train.dataset: {tc.dataset} does not exist")
        if out.exists() and (out / "contract.json").exists() and not resume:
            raise TetherError(f"{out} already holds a checkpoint: pass --resume or a new --out")
        torch.set_num_threads(tc.threads)
        torch.manual_seed(tc.seed)
        t_load = time.monotonic()
        ds = load_windows(
            tc.dataset,
            m,
            tc.max_episodes,
            tc.text_encoder,
            load_paraphrases(tc.paraphrases),
            (AUX_KEY,) if tc.aux_env_state else (),
        )
        print(
            f"tether train: {ds.episodes} episodes, {len(ds)} samples at {ds.fps:g} fps, "
            f"keys {m.obs_keys} ({time.monotonic() - t_load:.1f} s to load) -> {out}"
        )
        if ds.group_rows is not None and ds.instructions is not None:
            print(
                f"instructions: {len(ds.group_rows)} groups of {tc.paraphrases}, "
                f"{len(ds.instructions)} wordings drawn in training"
            )
        contract = make_contract(cfg, tc, ds)
        resuming = resume and (out / TRAIN_META).exists()
        if resuming:
            _keep_scaling(contract, json.loads((out / "contract.json").read_text()))
        net = build_net(contract)
        if net.n_experts and ds.wordings is not None:
            w = torch.from_numpy(ds.wordings)
            net.expert_wordings.copy_(w / w.norm(dim=-1, keepdim=True))
        if tc.init_from is not None and not resuming:
            _init_from(net, Path(tc.init_from))
        ema = copy.deepcopy(net).eval()
        for p in ema.parameters():
            p.requires_grad_(False)
        aux = _aux_head(tc, ds, net)
        params = [*net.parameters(), *(aux.parameters() if aux is not None else ())]
        opt = torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay)
        gen = torch.Generator().manual_seed(tc.seed)
        rng = np.random.default_rng(tc.seed)
        step, losses, aux_losses, train_s = 0, [], [], 0.0
        if resuming:
            meta = load_train_state(out, net, ema, opt, gen, rng, aux)
            step, losses, train_s = meta["step"], meta["losses"], meta["train_s"]
            aux_losses = meta.get("aux_losses", [])
            print(f"resumed from step {step}")
        n_params = sum(p.numel() for p in net.parameters())
        print(f"{n_params / 1e6:.2f} M parameters, {tc.steps} steps of batch {tc.batch_size}")

        def checkpoint() -> None:
            meta: dict[str, Any] = {"step": step, "losses": losses, "train_s": train_s}
            if aux is not None or net.pose_head is not None:
                meta["aux_losses"] = aux_losses
            save_checkpoint(out, {**contract, "step": step}, net, ema, opt, gen, rng, meta, aux)
            training_curve(losses, out / "training_curve.png", f"{cfg.name}: {step} steps")

        net.train()
        t0 = time.monotonic()
        start_step = step
        while step < tc.steps:
            idx = rng.integers(0, len(ds), tc.batch_size)
            obs_np, act_np = ds.batch(idx)
            obs = {
                k: torch.from_numpy(
                    _shift_images(v, tc.image_shift, rng) if k.startswith(IMAGE_PREFIX) else v
                )
                for k, v in obs_np.items()
            }
            if TEXT_KEY in obs and tc.paraphrases is not None:
                obs_np[TEXT_KEY] = ds.paraphrase(idx, rng)
                obs[TEXT_KEY] = torch.from_numpy(obs_np[TEXT_KEY])
            if TEXT_KEY in obs and tc.text_noise > 0:
                obs[TEXT_KEY] = _jitter_text(obs_np[TEXT_KEY], tc.text_noise, rng)
            for g in opt.param_groups:
                g["lr"] = _lr(tc, step)
            feats: list[torch.Tensor] = []
            poses: list[torch.Tensor] = []
            loss = net.loss(
                obs,
                torch.from_numpy(act_np),
                gen,
                feats if aux is not None else None,
                poses if net.pose_head is not None else None,
            )
            total = loss
            head = aux if aux is not None else net.pose_head
            if head is not None:
                estimate = aux(torch.cat(feats, -1)) if aux is not None else poses[0]
                aux_loss = head.loss(estimate, torch.from_numpy(obs_np[AUX_KEY][:, -1]))
                aux_losses.append(float(aux_loss.detach()))
                total = loss + tc.aux_env_state * aux_loss
            opt.zero_grad(set_to_none=True)
            total.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            if aux is not None:
                torch.nn.utils.clip_grad_norm_(aux.parameters(), 1.0)
            opt.step()
            _ema_update(ema, net, min(tc.ema_decay, (1 + step) / (10 + step)))
            losses.append(float(loss.detach()))
            step += 1
            elapsed = time.monotonic() - t0
            if step % 10 == 0 or step == tc.steps:
                rate = (step - start_step) / max(elapsed, 1e-9)
                eta = (tc.steps - step) / max(rate, 1e-9)
                done = int(30 * step / tc.steps)
                pose = f"  poses {np.mean(aux_losses[-50:]):.4f}" if aux_losses else ""
                sys.stdout.write(
                    f"\r  [{'#' * done}{' ' * (30 - done)}] {step}/{tc.steps}  "
                    f"loss {np.mean(losses[-50:]):.4f}{pose}  {rate:.1f} it/s  "
                    f"eta {eta:.0f} s   "
                )
                sys.stdout.flush()
            if step % tc.checkpoint_every == 0 or step == tc.steps:
                train_s_now = train_s + elapsed
                train_s, t0, start_step = train_s_now, time.monotonic(), step
                checkpoint()
        sys.stdout.write("\n")
        if step == 0 or not (out / "contract.json").exists():
            checkpoint()
        result = {
            "checkpoint": str(out),
            "steps": step,
            "final_loss": float(np.mean(losses[-50:])) if losses else None,
            "final_aux_env_state_loss": (float(np.mean(aux_losses[-50:])) if aux_losses else None),
            "train_s": round(train_s, 1),
            "episodes": ds.episodes,
            "samples": len(ds),
            "parameters": n_params,
        }
        (out / "train_log.json").write_text(json.dumps(result, indent=2))
        return result

    @classmethod
    def evaluate(cls, checkpoint: Path, options: Any) -> dict[str, Any]:
        """In-process or over ROS 2; ``policy.type=onnx`` among the overrides evaluates the
        exported graph (CKPT/onnx/model.onnx, exported first if missing) instead of torch."""
        from tether.policies.evaluation import evaluate_checkpoint

        policy: dict[str, Any] = {"type": "diffusion", "checkpoint": str(checkpoint.resolve())}
        if "policy.type=onnx" in options.overrides:
            options.overrides = [o for o in options.overrides if o != "policy.type=onnx"]
            model = checkpoint / "onnx" / "model.onnx"
            if not model.is_file():
                cls.export(checkpoint, "onnx", None)
            policy = {"type": "onnx", "model": str(model.resolve())}
        return evaluate_checkpoint(checkpoint, options, policy)

    @classmethod
    def export(cls, checkpoint: Path, fmt: str, out: Path | None) -> Path:
        from tether.policies.diffusion.export import export_checkpoint

        return export_checkpoint(checkpoint, fmt, out)
