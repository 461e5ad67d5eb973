"""The network: image encoder, conditional 1D temporal U-Net, normalization and the DDPM /
DDIM schedule, in plain torch (no torchvision, no diffusers).

Shapes: B batch, To obs_horizon, H chunk horizon, D action_dim. Observations enter raw (SI
units, uint8 images) and actions leave in robot units: normalization is part of the module
so the exported graph carries it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tether.core.errors import ConfigError
from tether.policies.diffusion.config import IMAGE_PREFIX, TEXT_KEY, DiffusionModelConfig

# ranges narrower than this are not stretched to [-1, 1] (a constant feature)
MIN_RANGE = 1e-4


def alphas_cumprod(cfg: DiffusionModelConfig) -> np.ndarray:
    """Cumulative product of (1 - beta_t), shape (num_train_timesteps,), float64."""
    n = cfg.num_train_timesteps
    if cfg.beta_schedule == "linear":
        betas = np.linspace(1e-4, 2e-2, n, dtype=np.float64)
    else:  # squaredcos_cap_v2 (Nichol & Dhariwal), as in diffusers
        f = lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
        betas = np.array([min(1 - f((i + 1) / n) / f(i / n), 0.999) for i in range(n)])
    return np.cumprod(1.0 - betas)


def ddim_timesteps(cfg: DiffusionModelConfig, steps: int) -> list[int]:
    """DDIM timesteps, descending ("leading" spacing as in diffusers)."""
    steps = min(steps, cfg.num_train_timesteps)
    ratio = cfg.num_train_timesteps // steps
    return [int(t) for t in (np.arange(steps) * ratio)[::-1]]


def flow_timesteps(cfg: DiffusionModelConfig, steps: int) -> list[float]:
    """The flow objective's Euler steps: tau = k / steps (k = 0 .. steps - 1, from noise to
    actions), scaled to the step embedding's range (num_train_timesteps)."""
    return [k / steps * cfg.num_train_timesteps for k in range(steps)]


class Affine(nn.Module):
    """x -> x * scale + offset per feature, fitted from min/max to map onto [-1, 1]."""

    scale: Tensor
    offset: Tensor

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        super().__init__()
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        rng = hi - lo
        wide = rng > MIN_RANGE
        scale = np.where(wide, 2.0 / np.where(wide, rng, 1.0), 1.0)
        offset = np.where(wide, -1.0 - lo * scale, -(lo + hi) / 2)
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))
        self.register_buffer("offset", torch.tensor(offset, dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale + self.offset

    def inverse(self, y: Tensor) -> Tensor:
        return (y - self.offset) / self.scale


class TextNorm(nn.Module):
    """e -> (e - mean) * scale: the instruction embedding centred on the training
    instructions' mean and scaled to unit RMS per element over them."""

    mean: Tensor
    scale: Tensor

    def __init__(self, mean: np.ndarray, scale: float) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(np.asarray(mean), dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(float(scale), dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) * self.scale


def text_norm_stats(embeddings: np.ndarray) -> dict[str, Any]:
    """TextNorm's statistics over the distinct rows of ``embeddings`` (N, E): each training
    instruction counts once, however many frames carry it. One instruction: centred only."""
    distinct = np.unique(
        np.asarray(embeddings, np.float64).reshape(-1, embeddings.shape[-1]), axis=0
    )
    mean = distinct.mean(0)
    rms = float(np.sqrt(((distinct - mean) ** 2).mean()))
    return {"mean": mean.tolist(), "scale": 1.0 / rms if rms > 1e-8 else 1.0}


class ResBlock2d(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        g = max(1, cout // 8)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.n1 = nn.GroupNorm(g, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.n2 = nn.GroupNorm(g, cout)
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(g, cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.n1(self.conv1(x)))
        return F.relu(self.n2(self.conv2(y)) + self.skip(x))


class SpatialSoftmax(nn.Module):
    """Feature map (B, C, h, w) -> expected image coordinates of K keypoints (B, 2K) in [-1, 1]."""

    grid: Tensor

    def __init__(self, channels: int, keypoints: int, h: int, w: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(channels, keypoints, 1)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
        self.register_buffer("grid", torch.stack([xs.reshape(-1), ys.reshape(-1)], 1))

    def forward(self, x: Tensor) -> Tensor:
        k = self.proj(x).flatten(2)  # (B, K, h*w)
        return (F.softmax(k, -1) @ self.grid).flatten(1)


class PoseHead(nn.Module):
    """Features (B, F) -> the objects' poses (B, P) scaled to [-1, 1] by their training range
    (``lo``, ``hi``): train.aux_env_state's training-only head and model.pose_readout's."""

    def __init__(self, features: int, lo: np.ndarray, hi: np.ndarray, width: int = 256) -> None:
        super().__init__()
        self.target = Affine(lo, hi)
        self.mlp = nn.Sequential(nn.Linear(features, width), nn.SiLU(), nn.Linear(width, len(lo)))

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x)

    def loss(self, estimate: Tensor, poses: Tensor) -> Tensor:
        """MSE of an estimate against the true poses (B, P) in world units."""
        return F.mse_loss(estimate, self.target(poses))


class ImageEncoder(nn.Module):
    """A small ResNet: uint8 (N, H, W, 3) -> features (N, 2 * keypoints)."""

    def __init__(
        self,
        height: int,
        width: int,
        channels: list[int],
        keypoints: int,
        strides: list[int] | None = None,
    ) -> None:
        super().__init__()
        c0 = channels[0]
        if strides is None:
            strides = [1] + [2] * (len(channels) - 1)
        if len(strides) != len(channels) or any(s not in (1, 2) for s in strides):
            raise ConfigError(
                f"train.model.image_strides {strides}: one stride, 1 or 2, per stage of "
                f"image_channels {channels}"
            )
        self.stem = nn.Sequential(
            nn.Conv2d(3, c0, 3, 2, 1, bias=False), nn.GroupNorm(max(1, c0 // 8), c0), nn.ReLU()
        )
        blocks, cin, h, w = [], c0, (height + 1) // 2, (width + 1) // 2
        for c, stride in zip(channels, strides, strict=True):
            blocks.append(ResBlock2d(cin, c, stride))
            cin = c
            if stride == 2:
                h, w = (h + 1) // 2, (w + 1) // 2
        self.blocks = nn.Sequential(*blocks)
        self.pool = SpatialSoftmax(cin, keypoints, h, w)
        self.out_dim = 2 * keypoints

    def forward(self, img: Tensor, film: Tensor | None = None) -> Tensor:
        # contiguous: channels-last views crash this torch's strided conv backward (heap
        # corruption in torch 2.13 CPU), and NCHW is what ONNX wants anyway
        x = img.permute(0, 3, 1, 2).contiguous().float() * (2.0 / 255.0) - 1.0
        return self.pool(self.blocks(self.stem(x)))


class FilmImageEncoder(ImageEncoder):
    """ImageEncoder whose stem and stages are FiLM-modulated by a conditioning vector (the
    instruction's embedding): x -> x * (1 + gamma) + beta per channel after each, as in
    RT-1's FiLM EfficientNet. The FiLM layers start at zero: an identity at first."""

    def __init__(
        self,
        height: int,
        width: int,
        channels: list[int],
        keypoints: int,
        cond_dim: int,
        strides: list[int] | None = None,
    ) -> None:
        super().__init__(height, width, channels, keypoints, strides)
        widths = [channels[0], *channels]
        self.films = nn.ModuleList(nn.Linear(cond_dim, 2 * c) for c in widths)
        for film in self.films:
            nn.init.zeros_(film.weight)
            nn.init.zeros_(film.bias)

    def forward(self, img: Tensor, film: Tensor | None = None) -> Tensor:
        assert film is not None, "a FiLM image encoder needs its conditioning vector"
        x = img.permute(0, 3, 1, 2).contiguous().float() * (2.0 / 255.0) - 1.0
        stages = [self.stem, *self.blocks]
        for stage, lin in zip(stages, self.films, strict=True):
            x = stage(x)
            gamma, beta = lin(film)[:, :, None, None].chunk(2, 1)
            x = x * (1.0 + gamma) + beta
        return self.pool(x)


def step_embedding(t: Tensor, dim: int) -> Tensor:
    """Sinusoidal embedding of diffusion steps t (B,) -> (B, dim)."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, device=t.device) * (-math.log(10000.0) / (half - 1)))
    arg = t.float()[:, None] * freq[None]
    return torch.cat([arg.sin(), arg.cos()], -1)


def make_activation(name: str) -> nn.Module:
    """The U-Net activation: ``mish`` or ``silu``."""
    return nn.SiLU() if name == "silu" else nn.Mish()


class Conv1dBlock(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int, groups: int = 8, act: str = "mish") -> None:
        super().__init__(
            nn.Conv1d(cin, cout, k, padding=k // 2),
            nn.GroupNorm(groups, cout),
            make_activation(act),
        )


class CondResBlock1d(nn.Module):
    """Two conv blocks with FiLM (per-channel scale and bias) from the conditioning vector."""

    def __init__(
        self, cin: int, cout: int, cond_dim: int, k: int, groups: int = 8, act: str = "mish"
    ) -> None:
        super().__init__()
        self.b1 = Conv1dBlock(cin, cout, k, groups, act)
        self.b2 = Conv1dBlock(cout, cout, k, groups, act)
        self.film = nn.Sequential(make_activation(act), nn.Linear(cond_dim, 2 * cout))
        self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()
        self.cout = cout

    def forward(self, x: Tensor, cond: Tensor) -> Tensor:
        scale, bias = self.film(cond)[:, :, None].chunk(2, 1)
        y = self.b1(x) * scale + bias
        return self.b2(y) + self.skip(x)


class ConditionalUnet1d(nn.Module):
    """Noise predictor: noisy actions (B, H, D), step (B,), condition (B, C) -> (B, H, D)."""

    def __init__(
        self,
        action_dim: int,
        cond_dim: int,
        down_dims: list[int],
        k: int,
        step_dim: int,
        groups: int = 8,
        act: str = "mish",
        res_blocks: int = 2,
        mid_blocks: int | None = None,
    ) -> None:
        super().__init__()
        self.step_mlp = nn.Sequential(
            nn.Linear(step_dim, 4 * step_dim),
            make_activation(act),
            nn.Linear(4 * step_dim, step_dim),
        )
        self.step_dim = step_dim
        c = cond_dim + step_dim
        blk = lambda i, o: CondResBlock1d(i, o, c, k, groups, act)  # noqa: E731
        dims = [action_dim, *down_dims]
        self.down = nn.ModuleList()
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            last = i == len(down_dims) - 1
            self.down.append(
                nn.ModuleList(
                    [
                        blk(cin, cout),
                        *(blk(cout, cout) for _ in range(res_blocks - 1)),
                        nn.Conv1d(cout, cout, 3, 2, 1) if not last else nn.Identity(),
                    ]
                )
            )
        mid = down_dims[-1]
        n_mid = res_blocks if mid_blocks is None else mid_blocks
        self.mid = nn.ModuleList([blk(mid, mid) for _ in range(n_mid)])
        self.up = nn.ModuleList()
        rev = list(reversed(down_dims))
        for cout, cin in zip(rev[1:], rev[:-1], strict=True):
            self.up.append(
                nn.ModuleList(
                    [
                        blk(2 * cin, cout),
                        *(blk(cout, cout) for _ in range(res_blocks - 1)),
                        nn.ConvTranspose1d(cout, cout, 4, 2, 1),
                    ]
                )
            )
        self.final = nn.Sequential(
            Conv1dBlock(down_dims[0], down_dims[0], k, groups, act),
            nn.Conv1d(down_dims[0], action_dim, 1),
        )

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        g = torch.cat([self.step_mlp(step_embedding(t, self.step_dim)), cond], -1)
        h = x.transpose(1, 2)
        skips = []
        blocks: Any
        for blocks in self.down:
            for r in blocks[:-1]:
                h = r(h, g)
            skips.append(h)
            h = blocks[-1](h)
        for r in self.mid:
            h = r(h, g)
        for blocks in self.up:
            h = torch.cat([h, skips.pop()], 1)
            for r in blocks[:-1]:
                h = r(h, g)
            h = blocks[-1](h)
        return self.final(h).transpose(1, 2)


class MlpDenoiser(nn.Module):
    """Noise predictor as a residual MLP over the flattened chunk: (B, H, D), (B,), (B, C) ->
    (B, H, D). Far fewer graph nodes than the U-Net: the choice for tight CPU budgets."""

    def __init__(
        self, action_dim: int, horizon: int, cond_dim: int, width: int, blocks: int, step_dim: int
    ) -> None:
        super().__init__()
        self.step_mlp = nn.Sequential(
            nn.Linear(step_dim, 4 * step_dim), nn.Mish(), nn.Linear(4 * step_dim, step_dim)
        )
        self.step_dim = step_dim
        self.inp = nn.Linear(horizon * action_dim + step_dim + cond_dim, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.LayerNorm(width), nn.Linear(width, width), nn.Mish(), nn.Linear(width, width)
            )
            for _ in range(blocks)
        )
        self.out = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, horizon * action_dim))

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        step = self.step_mlp(step_embedding(t, self.step_dim))
        h = self.inp(torch.cat([x.flatten(1), step, cond], -1))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h).reshape(x.shape)


def mix_experts(gate: Tensor, outs: list[Tensor]) -> Tensor:
    """sum_i gate[:, i] * outs[i]: (B, K) weights over K same-shaped (B, ...) predictions."""
    g = gate.reshape(*gate.shape, *[1] * (outs[0].dim() - 1))
    out = g[:, 0] * outs[0]
    for i in range(1, len(outs)):
        out = out + g[:, i] * outs[i]
    return out


class ExpertDenoiser(nn.Module):
    """K denoisers mixed per sample: the last K columns of the conditioning are the mixing
    weights (the instruction's gate, DiffusionNet.encode), the rest conditions each expert."""

    def __init__(self, experts: list[nn.Module]) -> None:
        super().__init__()
        self.experts = nn.ModuleList(experts)

    def forward(self, x: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        k = len(self.experts)
        gate, c = cond[:, -k:], cond[:, :-k]
        if self.training:  # each expert only on the samples it weighs in (a training
            # wording gives its own group nearly all the weight): about one expert's compute
            out = torch.zeros_like(x)
            for i, expert in enumerate(self.experts):
                idx = torch.nonzero(gate[:, i] > 1e-3).flatten()
                if len(idx):
                    y = expert(x[idx], t[idx], c[idx]) * gate[idx, i, None, None]
                    out = out.index_add(0, idx, y)
            return out
        return mix_experts(gate, [expert(x, t, c) for expert in self.experts])


class DiffusionNet(nn.Module):
    """Observation encoder + noise predictor + normalization + noise schedule.

    ``low_dims``: low-dim observation key -> (min, max) arrays from the dataset stats;
    ``images``: image key -> (height, width); ``action_range``: (min, max) of the actions;
    ``action_names``: their names (needed when ``cfg.binary_actions`` names some).
    """

    alphas_cumprod: Tensor
    binary_mask: Tensor

    def __init__(
        self,
        cfg: DiffusionModelConfig,
        low_dims: dict[str, tuple[np.ndarray, np.ndarray]],
        images: dict[str, tuple[int, int]],
        action_range: tuple[np.ndarray, np.ndarray],
        action_names: list[str] | None = None,
        text_in: int | None = None,
        text_stats: dict[str, Any] | None = None,
        groups: list[list[int]] | None = None,
        pose_range: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.obs_keys = list(cfg.obs_keys)
        self.norm = nn.ModuleDict({_mod(k): Affine(*low_dims[k]) for k in low_dims})
        # language: the instruction's embedding (text_in wide) projected to cfg.text_dim
        self.text = TEXT_KEY in self.obs_keys
        if self.text and not text_in:
            raise ConfigError(f"observation key '{TEXT_KEY}' needs the text embedding's width")
        if self.text and cfg.text_norm and text_stats is None:
            raise ConfigError("model.text_norm needs the training instructions' statistics")
        self.text_norm = (
            TextNorm(np.asarray(text_stats["mean"]), float(text_stats["scale"]))
            if self.text and cfg.text_norm and text_stats is not None
            else None
        )
        self.text_proj = (
            nn.Sequential(nn.Linear(int(text_in or 0), cfg.text_dim), nn.SiLU())
            if self.text
            else None
        )
        film = self.text and cfg.text_film
        self.encoders = nn.ModuleDict(
            {
                _mod(k): (
                    FilmImageEncoder(
                        h,
                        w,
                        cfg.image_channels,
                        cfg.image_keypoints,
                        int(text_in),
                        cfg.image_strides,
                    )
                    if film
                    else ImageEncoder(
                        h, w, cfg.image_channels, cfg.image_keypoints, cfg.image_strides
                    )
                )
                for k, (h, w) in images.items()
            }
        )
        self.action_norm = Affine(*action_range)
        self.action_dim = len(action_range[0])
        names = list(action_names or [])
        unknown = [n for n in cfg.binary_actions if n not in names]
        if unknown:
            raise ConfigError(
                f"model.binary_actions: {unknown} not among the actions {names or '(unnamed)'}"
            )
        mask = torch.tensor([n in cfg.binary_actions for n in names] or [False] * self.action_dim)
        # not in the state dict: it follows from the config (older checkpoints load as is)
        self.register_buffer("binary_mask", mask, persistent=False)
        per_step = sum(len(v[0]) for v in low_dims.values()) + sum(
            e.out_dim  # type: ignore[misc]
            for e in self.encoders.values()
        )
        cond_dim = per_step * cfg.obs_horizon + (cfg.text_dim if self.text else 0)
        # model.pose_readout: cameras' keypoints and joint state (latest frame) -> the
        # objects' poses scaled to [-1, 1], appended to the conditioning
        self.pose_head: PoseHead | None = None
        if cfg.pose_readout:
            if pose_range is None or not len(self.encoders):
                raise ConfigError(
                    "model.pose_readout reads the cameras and learns the objects' poses: it "
                    "needs a camera among obs_keys and the dataset's environment_state"
                )
            reads = sum(e.out_dim for e in self.encoders.values())  # type: ignore[misc]
            reads += len(low_dims["state"][0]) if "state" in low_dims else 0
            self.pose_head = PoseHead(reads, *pose_range)
            cond_dim += len(pose_range[0])
        # per-task experts: the training wordings' unit embeddings (filled by the trainer,
        # then saved with the weights) and which group each belongs to
        self.n_experts = 0
        if cfg.task_experts:
            if not self.text or not groups:
                raise ConfigError(
                    "model.task_experts needs the instruction input and train.paraphrases "
                    "(its groups are the experts)"
                )
            rows = sum(len(g) for g in groups)
            member = torch.zeros(rows, len(groups))
            for i, g in enumerate(groups):
                member[list(g), i] = 1.0
            self.n_experts = len(groups)
            self.register_buffer("expert_wordings", torch.zeros(rows, int(text_in or 0)))
            self.register_buffer("expert_member", member)

        def make() -> nn.Module:
            if cfg.denoiser == "mlp":
                return MlpDenoiser(
                    self.action_dim,
                    cfg.horizon,
                    cond_dim,
                    cfg.mlp_width,
                    cfg.mlp_blocks,
                    cfg.step_embed_dim,
                )
            return ConditionalUnet1d(
                self.action_dim,
                cond_dim,
                cfg.down_dims,
                cfg.kernel_size,
                cfg.step_embed_dim,
                cfg.norm_groups,
                cfg.activation,
                cfg.res_blocks,
                cfg.mid_blocks,
            )

        self.denoiser: nn.Module = (
            ExpertDenoiser([make() for _ in range(self.n_experts)]) if self.n_experts else make()
        )
        self.register_buffer(
            "alphas_cumprod", torch.tensor(alphas_cumprod(cfg), dtype=torch.float32)
        )

    def encode(
        self,
        obs: dict[str, Tensor],
        keep_text: Tensor | bool = True,
        image_feats: list[Tensor] | None = None,
        poses: list[Tensor] | None = None,
    ) -> Tensor:
        """Raw observations, each (B, To, ...) -> conditioning vector (B, cond_dim). The
        instruction's embedding (B, To, E) counts once, from the latest frame.
        ``keep_text``: False (or a (B,) mask, False where) the instruction is the null one,
        zeros after text_norm (guidance, text_dropout). ``image_feats``: a list that gets
        each camera's features of the latest frame (B, F) (train.aux_env_state's input).
        ``poses``: a list that gets model.pose_readout's estimate (B, P), scaled."""
        feats = []
        readout: list[Tensor] = []
        text = obs[TEXT_KEY][:, -1] if self.text else None
        gate = self.expert_gate(text) if text is not None and self.n_experts else None
        if text is not None and self.text_norm is not None:
            text = self.text_norm(text)
        if text is not None and keep_text is not True:
            keep = keep_text if isinstance(keep_text, Tensor) else torch.zeros(text.shape[0])
            text = text * keep.to(text.dtype)[:, None]
        for key in self.obs_keys:
            if key == TEXT_KEY:
                continue
            x = obs[key]
            b, to = x.shape[0], x.shape[1]
            if key.startswith(IMAGE_PREFIX):
                film = text.repeat_interleave(to, 0) if text is not None else None
                f = self.encoders[_mod(key)](x.reshape(b * to, *x.shape[2:]), film)
                feats.append(f.reshape(b, to, -1))
                if image_feats is not None:
                    image_feats.append(feats[-1][:, -1])
                if self.pose_head is not None:
                    readout.append(feats[-1][:, -1])
            else:
                feats.append(self.norm[_mod(key)](x))
                if key == "state" and self.pose_head is not None:
                    readout.append(feats[-1][:, -1])
        cond = torch.cat(feats, -1).flatten(1)
        if self.pose_head is not None:
            pose = self.pose_head(torch.cat(readout, -1))
            if poses is not None:
                poses.append(pose)
            cond = torch.cat([cond, pose.detach()], -1)
        if self.text_proj is not None:
            cond = torch.cat([cond, self.text_proj(text)], -1)
        if gate is not None:  # read off again by ExpertDenoiser
            cond = torch.cat([cond, gate], -1)
        return cond

    def expert_gate(self, text: Tensor) -> Tensor:
        """(B, E) instruction embeddings -> (B, K) expert weights: softmax(cosine /
        expert_temperature) over the training wordings, summed per group."""
        unit = text / text.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        w = F.softmax(unit @ self.expert_wordings.T / self.cfg.expert_temperature, -1)
        return w @ self.expert_member

    def loss(
        self,
        obs: dict[str, Tensor],
        actions: Tensor,
        gen: torch.Generator | None,
        image_feats: list[Tensor] | None = None,
        poses: list[Tensor] | None = None,
    ) -> Tensor:
        """DDPM epsilon-prediction loss of raw actions (B, H, D) given raw observations; for
        the flow objective, the flow-matching loss: at tau ~ U(0, 1) on the straight path
        x_tau = (1 - tau) noise + tau actions, the velocity (actions - noise).
        ``image_feats``, ``poses``: as in :meth:`encode`."""
        x0 = self.action_norm(actions)
        b = x0.shape[0]
        keep: Tensor | bool = True
        if self.text and self.cfg.text_dropout > 0:
            keep = torch.rand((b,), generator=gen) >= self.cfg.text_dropout
        cond = self.encode(obs, keep, image_feats, poses)
        if self.cfg.objective == "flow":
            tau = torch.rand((b,), generator=gen)
            noise = torch.randn(x0.shape, generator=gen)
            xt = (1 - tau)[:, None, None] * noise + tau[:, None, None] * x0
            v = self.denoiser(xt, tau * self.cfg.num_train_timesteps, cond)
            return F.mse_loss(v, x0 - noise)
        t = torch.randint(0, self.cfg.num_train_timesteps, (b,), generator=gen)
        eps = torch.randn(x0.shape, generator=gen)
        ab = self.alphas_cumprod[t][:, None, None]
        xt = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
        return F.mse_loss(self.denoiser(xt, t, cond), eps)

    @property
    def guided(self) -> bool:
        """Whether sampling predicts twice per step (instruction guidance, cfg.guidance)."""
        return self.text and self.cfg.guidance != 1.0

    def guide(self, with_text: Tensor, null: Tensor) -> Tensor:
        """null + guidance * (with_text - null): one guided prediction."""
        return null + self.cfg.guidance * (with_text - null)

    def sample(self, obs: dict[str, Tensor], noise: Tensor, steps: int) -> Tensor:
        """DDIM (eta 0) from ``noise`` (B, H, D) in ``steps`` steps -> actions in robot units.

        The loop is plain Python over a fixed list of timesteps, so tracing it for ONNX
        unrolls it into one graph.
        """
        cond = self.encode(obs)
        null = self.encode(obs, False) if self.guided else None

        def predict(x: Tensor, t: Tensor) -> Tensor:
            out = self.denoiser(x, t, cond)
            return out if null is None else self.guide(out, self.denoiser(x, t, null))

        if self.cfg.objective == "flow":
            x = noise
            for t in flow_timesteps(self.cfg, steps):
                x = x + predict(x, torch.full((noise.shape[0],), t)) / steps
            return self.to_actions(x.clamp(-1.0, 1.0))
        ab = alphas_cumprod(self.cfg)
        ts = ddim_timesteps(self.cfg, steps)
        ratio = self.cfg.num_train_timesteps // len(ts)
        x = noise
        tvec = torch.ones(noise.shape[0], dtype=torch.float32)
        for t in ts:
            a_t = float(ab[t])
            a_prev = float(ab[t - ratio]) if t - ratio >= 0 else 1.0
            eps = predict(x, tvec * t)
            x0 = ((x - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)).clamp(-1.0, 1.0)
            x = math.sqrt(a_prev) * x0 + math.sqrt(1 - a_prev) * eps
        return self.to_actions(x)

    def to_actions(self, x: Tensor) -> Tensor:
        """Sampled normalized actions (B, H, D) -> robot units; binary actions snap to the
        nearer end of their range (-1 or 1 before scaling)."""
        if self.cfg.binary_actions:
            x = torch.where(self.binary_mask, torch.where(x > 0, 1.0, -1.0), x)
        return self.action_norm.inverse(x)


def _mod(key: str) -> str:
    """A ModuleDict name for an observation key (no dots or slashes)."""
    return key.replace("/", "__").replace(".", "_")
