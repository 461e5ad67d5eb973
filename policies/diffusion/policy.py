"""The ``diffusion`` policy type: a torch checkpoint behind the Policy protocol."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tether.core.errors import TetherError
from tether.core.spec import RobotSpec
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation
from tether.policies.chunking import ChunkPlan, ObsHistory
from tether.policies.diffusion.checkpoint import load_net
from tether.policies.diffusion.config import TEXT_KEY, DiffusionPolicyConfig


class DiffusionPolicy:
    """Predicts a chunk of ``horizon`` actions (``action_dt`` apart) by DDIM from the last
    ``obs_horizon`` observations, executes ``execute_steps`` rows, then predicts again.

    Noise comes from a seeded numpy generator, like the onnx runtime's, so the two agree
    given the same seed.
    """

    def __init__(self, cfg: DiffusionPolicyConfig, spec: RobotSpec, task: Any = None) -> None:
        self.cfg = cfg
        self.spec = spec
        torch.set_num_threads(cfg.threads)
        self.net, self._contract = load_net(cfg.checkpoint)
        m = self.net.cfg
        if self.net.action_dim != spec.action.dim:
            raise TetherError(
                f"{cfg.checkpoint}: the policy outputs {self.net.action_dim} actions, robot "
                f"{spec.name} takes {spec.action.dim}"
            )
        self.steps = cfg.num_inference_steps or m.num_inference_steps
        action_dt = float(self._contract["action_dt"])
        self.language: Any = None
        if TEXT_KEY in m.obs_keys:  # a VLA: the instruction is an input (docs/vla.md)
            from pathlib import Path

            from tether.policies.vla.language import LanguageInput

            self.language = LanguageInput(self._contract, Path(cfg.checkpoint), cfg.text_anchor)
        keys = [k for k in m.obs_keys if k != TEXT_KEY]
        self.history = ObsHistory(keys, m.obs_horizon, action_dt)
        self.plan = ChunkPlan(action_dt, spec.dt, cfg.execute_steps or m.execute_steps)
        self.rng = np.random.default_rng(cfg.seed)
        self.inferences = 0

    def reset(self) -> None:
        self.history.reset()
        self.plan.reset()

    def replan(self) -> None:
        """Predict a fresh chunk at the next act() (a chunk executor asked for one)."""
        self.plan.reset()

    def observe(self, obs: Observation) -> None:
        """Keep an observation in the history without predicting (chunk mode: the policy
        server observes at the control rate and predicts only when a chunk is requested)."""
        self.history.push(obs)

    def predict(self, stacked: dict[str, np.ndarray], noise: np.ndarray) -> np.ndarray:
        """One chunk (horizon, action_dim) from observations {key: (To, ...)} and noise (H, D)."""
        obs = {k: torch.from_numpy(np.ascontiguousarray(v))[None] for k, v in stacked.items()}
        with torch.inference_mode():
            out = self.net.sample(obs, torch.from_numpy(noise)[None], self.steps)
        return out[0].numpy()

    def warm_up(self) -> None:
        """One inference on zero inputs of the contract's shapes, so the first real chunk
        does not pay torch's lazy start (the policy server calls it before it subscribes);
        draws no noise from the policy's generator."""
        m = self.net.cfg
        stacked = {
            k: np.zeros(
                (m.obs_horizon, *self._contract["obs_shapes"][k]),
                np.uint8 if k.startswith(IMAGE_PREFIX) else np.float32,
            )
            for k in m.obs_keys
        }
        self.predict(stacked, np.zeros((m.horizon, self.net.action_dim), np.float32))

    def act(self, obs: Observation) -> ActionChunk:
        self.history.push(obs)
        stacked_text = None
        if self.language is not None:
            emb, hold = self.language.gate(obs, self.spec, self.plan)
            if hold is not None:
                return hold
            stacked_text = np.repeat(emb[None], self.net.cfg.obs_horizon, 0)
        if self.plan.needs_plan(obs.stamp_ns):
            m = self.net.cfg
            noise = self.rng.standard_normal((m.horizon, self.net.action_dim)).astype(np.float32)
            noise *= np.float32(m.noise_scale)
            stacked = self.history.stacked()
            if stacked_text is not None:
                stacked[TEXT_KEY] = stacked_text
            self.plan.set(self.predict(stacked, noise), obs.stamp_ns)
            self.inferences += 1
        return self.plan.chunk_at(obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        return {**self._contract, "num_inference_steps": self.steps}
