"""The planner's actor: an MLP (tanh) from features to the mean command in [-1, 1], and its
numpy form (evaluation without torch, the same weights)."""

from __future__ import annotations

from typing import Any

import numpy as np


def torch_actor(hidden: tuple[int, ...], features: int, scale: tuple[float, ...]) -> Any:
    """A torch module: features (B, F) -> command (B, len(scale)) in robot units
    (clip(mean, -1, 1) x ``scale``: a planner's velocity bounds, a drone's speed)."""
    import torch
    from torch import nn

    class NavActor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            last = features
            for h in hidden:
                layers += [nn.Linear(last, h), nn.Tanh()]
                last = h
            layers.append(nn.Linear(last, len(scale)))
            self.net = nn.Sequential(*layers)
            self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.clamp(self.net(x), -1.0, 1.0) * self.scale

    return NavActor()


def _linears(actor: Any, policy: Any) -> tuple[list[Any], list[Any]]:
    """The Linear layers of ``actor`` and of an SB3 ``MlpPolicy``'s actor (policy_net +
    action_net), in order."""
    from torch import nn

    ours = [m for m in actor.net if isinstance(m, nn.Linear)]
    sb3 = [m for m in policy.mlp_extractor.policy_net if isinstance(m, nn.Linear)]
    return ours, [*sb3, policy.action_net]


def copy_weights(actor: Any, policy: Any, to_sb3: bool = False) -> None:
    """Copy an SB3 ``MlpPolicy``'s actor into ``actor``, or the reverse with ``to_sb3``
    (``--resume``: PPO restarts from a checkpoint's actor)."""
    import torch

    ours, sb3 = _linears(actor, policy)
    pairs = zip(sb3, ours, strict=True) if to_sb3 else zip(ours, sb3, strict=True)
    with torch.no_grad():
        for dst, src in pairs:
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)


def numpy_actor(state: dict[str, np.ndarray]) -> Any:
    """features (B, F) -> twist (B, 2), from a NavActor's state dict (as numpy arrays)."""
    n = sum(1 for k in state if k.endswith(".weight"))
    layers = [
        (state[f"net.{2 * i}.weight"].astype(np.float64), state[f"net.{2 * i}.bias"])
        for i in range(n)
    ]
    scale = np.asarray(state["scale"], np.float64)

    def act(x: np.ndarray) -> np.ndarray:
        h = np.asarray(x, np.float64)
        for k, (w, b) in enumerate(layers):
            h = h @ w.T + b
            if k < len(layers) - 1:
                h = np.tanh(h)
        return np.clip(h, -1.0, 1.0) * scale

    return act
