"""The hover actor-critic (torch) and its export module (raw state in, rotor rpm out).

Features (18, the observation of the batched hover simulator): position - target
(m), world-from-body rotation matrix row-major, linear velocity (m/s, world), angular
velocity (rad/s, body). The networks see them multiplied by ``FEATURE_SCALE``. Actions are
normalized: rpm_i = hover_rpm * (1 + 0.5 a_i), a_i in [-1, 1].
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tether.core.robot_kinds import QuadrotorParams
from tether.robots.crazyflie.robot import CRAZYFLIE

OBS_DIM = 18
ACTION_DIM = 4
STATE_DIM = 13
ENV_STATE_DIM = 7
# fixed feature scaling (baked into the exported graph): positions in ~0.5 m, rates in ~4 rad/s
FEATURE_SCALE = (2.0,) * 3 + (1.0,) * 9 + (1.0,) * 3 + (0.25,) * 3


def hover_features(state: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The 18 features from states (B, 13) and target positions (B, 3). Shape: (B, 18).

    The quaternion is normalized first, so a slightly denormalized float32 input is harmless.
    """
    q = state[:, 3:7]
    q = q / torch.sqrt((q * q).sum(dim=1, keepdim=True) + 1e-12)
    w, x, y, z = q[:, 0:1], q[:, 1:2], q[:, 2:3], q[:, 3:4]
    rot = torch.cat(
        [
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        ],
        dim=1,
    )
    return torch.cat([state[:, 0:3] - target, rot, state[:, 7:13]], dim=1)


def mlp(sizes: tuple[int, ...], out_gain: float) -> nn.Sequential:
    """tanh MLP; orthogonal init, the last layer scaled by ``out_gain``."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        last = i == len(sizes) - 2
        nn.init.orthogonal_(lin.weight, out_gain if last else math.sqrt(2.0))
        nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


class HoverActor(nn.Module):
    """The deterministic hover policy on features: (B, 18) -> normalized actions (B, 4).

    Layers: ``actor`` = Linear-Tanh-...-Linear (the layout of an SB3 ``MlpPolicy`` actor, so
    SB3-trained weights load into it).
    """

    def __init__(self, hidden: tuple[int, ...] = (64, 64)) -> None:
        super().__init__()
        self.hidden = tuple(hidden)
        self.register_buffer("feature_scale", torch.tensor(FEATURE_SCALE))
        # small last layer: the untrained policy commands ~hover rpm on every rotor
        self.actor = mlp((OBS_DIM, *self.hidden, ACTION_DIM), 0.01)

    def mean(self, features: torch.Tensor) -> torch.Tensor:
        """Normalized action (B, 4), unclipped (the env and the export clip to [-1, 1])."""
        scale: torch.Tensor = self.feature_scale  # type: ignore[assignment]
        out: torch.Tensor = self.actor(features * scale)
        return out

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.mean(features)


class HoverExport(nn.Module):
    """What runs onboard: state (B, 13) and env_state (B, 7, target pose) -> rpm (B, 1, 4).

    Feature computation, scaling, the actor and the action-to-rpm map are all in the graph.
    """

    def __init__(self, policy: HoverActor, params: QuadrotorParams = CRAZYFLIE) -> None:
        super().__init__()
        self.policy = policy
        self.hover_rpm = float(params.hover_rpm)

    def forward(self, state: torch.Tensor, env_state: torch.Tensor) -> torch.Tensor:
        feats = hover_features(state, env_state[:, 0:3])
        a = torch.clamp(self.policy.mean(feats), -1.0, 1.0)
        return (self.hover_rpm * (1.0 + 0.5 * a)).unsqueeze(1)
