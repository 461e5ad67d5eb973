"""The per-step residual policy in plain torch (what is trained, saved and exported).

Input: the latest observation's features (the base contract's observation keys, flattened
and concatenated, normalised as ``(x - obs_offset) / obs_scale``) and the base's action for
this step, normalised to [-1, 1] by the action range; with ``relative`` (pairs of start
indices of 3-vectors in the raw features), between the two also each pair's difference in
mm, ``sign(d) log(1 + |d|)`` (``finetune.relative_positions``). Output: a correction,
``tanh(net(input)) * limit`` with ``limit = scale * (high - low) / 2`` per action element
(``out_limit`` instead when given: a residual in another space, space.py), so
``|residual| <= limit`` always. The last layer starts near zero (exactly zero with
``last_layer_init=0``): base + residual starts as the base.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}


class ResidualMLP(nn.Module):
    """forward(obs (B, F) raw features, base_action (B, A) action units) -> residual
    (B, D): D = A in joint space."""

    # buffers (saved with the weights, constants of the exported graph)
    obs_offset: Tensor
    obs_scale: Tensor
    act_mid: Tensor
    act_half: Tensor
    limit: Tensor

    def __init__(
        self,
        obs_offset: np.ndarray,
        obs_scale: np.ndarray,
        action_low: np.ndarray,
        action_high: np.ndarray,
        scale: float,
        hidden: Sequence[int] = (256, 256),
        activation: str = "relu",
        last_layer_init: float = 1e-3,
        out_limit: np.ndarray | None = None,
        relative: Sequence[Sequence[int]] = (),
    ) -> None:
        super().__init__()
        self.relative = [(int(a), int(b)) for a, b in relative]
        f32 = torch.float32
        low = torch.as_tensor(np.asarray(action_low), dtype=f32)
        high = torch.as_tensor(np.asarray(action_high), dtype=f32)
        self.register_buffer("obs_offset", torch.as_tensor(np.asarray(obs_offset), dtype=f32))
        self.register_buffer("obs_scale", torch.as_tensor(np.asarray(obs_scale), dtype=f32))
        self.register_buffer("act_mid", (high + low) / 2)
        self.register_buffer("act_half", (high - low) / 2)
        limit = (
            scale * (high - low) / 2
            if out_limit is None
            else torch.as_tensor(np.asarray(out_limit), dtype=f32)
        )
        self.register_buffer("limit", limit)
        self.scale = float(scale)
        self.hidden = [int(h) for h in hidden]
        self.activation = activation
        self.obs_dim = int(self.obs_offset.shape[0])
        # the base action's elements (input) and the residual's (output)
        self.action_dim = int(low.shape[0])
        self.out_dim = int(limit.shape[0])
        layers: list[nn.Module] = []
        for a, b in self.relative:
            if min(a, b) < 0 or max(a, b) + 3 > self.obs_dim:
                raise ValueError(f"relative pair ({a}, {b}) is outside {self.obs_dim} features")
        # the network's input: normalised features, relative positions, base action
        self.in_dim = self.obs_dim + 3 * len(self.relative) + self.action_dim
        width = self.in_dim
        for h in self.hidden:
            layers += [nn.Linear(width, h), ACTIVATIONS[activation]()]
            width = h
        layers.append(nn.Linear(width, self.out_dim))
        self.net = nn.Sequential(*layers)
        self.init_last_layer(last_layer_init)

    @property
    def linears(self) -> list[nn.Linear]:
        return [m for m in self.net if isinstance(m, nn.Linear)]

    def init_last_layer(self, std: float) -> None:
        """Last layer weights ~ N(0, std), bias 0: the residual starts (near) zero."""
        last = self.linears[-1]
        with torch.no_grad():
            last.weight.normal_(0.0, std) if std > 0 else last.weight.zero_()
            last.bias.zero_()

    def features(self, obs: Tensor, base_action: Tensor) -> Tensor:
        """The network's input (B, F + A): normalised observation, normalised base action."""
        x = (obs - self.obs_offset) / self.obs_scale
        a = (base_action - self.act_mid) / self.act_half
        rel = [_symlog_mm(obs[..., i : i + 3] - obs[..., j : j + 3]) for i, j in self.relative]
        return torch.cat([x, *rel, a], dim=-1)

    def from_features(self, feats: Tensor) -> Tensor:
        """Residual (B, D) from the normalised input."""
        return torch.tanh(self.net(feats)) * self.limit

    def forward(self, obs: Tensor, base_action: Tensor) -> Tensor:
        return self.from_features(self.features(obs, base_action))

    def config(self) -> dict[str, object]:
        """Constructor arguments that are not tensors (saved in the contract)."""
        return {
            "scale": self.scale,
            "hidden": self.hidden,
            "activation": self.activation,
            "relative": [list(p) for p in self.relative],
        }


def _symlog_mm(d: Tensor) -> Tensor:
    """A difference of positions (m) in mm, squashed: sign(x) log(1 + |x|)."""
    mm = d * 1000.0
    return torch.sign(mm) * torch.log1p(torch.abs(mm))


class NumpyNormaliser:
    """The model's input normalisation in numpy (what the gym env hands the learner)."""

    def __init__(self, model: ResidualMLP) -> None:
        self.obs_offset = model.obs_offset.numpy().astype(np.float64)
        self.obs_scale = model.obs_scale.numpy().astype(np.float64)
        self.act_mid = model.act_mid.numpy().astype(np.float64)
        self.act_half = model.act_half.numpy().astype(np.float64)
        self.limit = model.limit.numpy().astype(np.float64)
        self.relative = list(model.relative)

    def features(self, obs: np.ndarray, base_action: np.ndarray) -> np.ndarray:
        raw = np.asarray(obs, np.float64)
        x = (raw - self.obs_offset) / self.obs_scale
        a = (np.asarray(base_action, np.float64) - self.act_mid) / self.act_half
        rel = []
        for i, j in self.relative:
            mm = (raw[i : i + 3] - raw[j : j + 3]) * 1000.0
            rel.append(np.sign(mm) * np.log1p(np.abs(mm)))
        return np.concatenate([x, *rel, a]).astype(np.float32)
