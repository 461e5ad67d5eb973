"""Policies with no dependencies beyond numpy: used by tests and benchmarks."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from tether.core.config import ComponentConfig
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation


class HoldPolicyConfig(ComponentConfig):
    type: str = "hold"
    horizon: int = Field(1, ge=1)
    # cameras the policy subscribes to (it ignores the pixels): makes image transport part of
    # a benchmark's loop
    cameras: list[str] = Field(default_factory=list)


class HoldPolicy:
    """Commands the current joint positions (first ``action.dim`` state entries): a
    zero-compute policy to measure the transport alone."""

    def __init__(self, cfg: HoldPolicyConfig, spec: RobotSpec, task: Any = None) -> None:
        self.cfg = cfg
        self.spec = spec

    def reset(self) -> None:
        pass

    def act(self, obs: Observation) -> ActionChunk:
        a = np.asarray(obs["state"][: self.spec.action.dim], np.float32)
        return ActionChunk(np.repeat(a[None], self.cfg.horizon, 0), self.spec.dt, obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        keys = ["state", *(f"images/{c}" for c in self.cfg.cameras)]
        return {
            "observation_keys": keys,
            "action_names": list(self.spec.action.names),
            "control_hz": self.spec.control_hz,
        }
