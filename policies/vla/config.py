"""Config of the ``vla`` trainer (a light import: no torch): the diffusion trainer's pipeline
with a language input and a flow-matching action head (docs/vla.md)."""

from __future__ import annotations

from pydantic import Field

from tether.policies.diffusion.config import DiffusionModelConfig, DiffusionTrainConfig


def vla_model() -> DiffusionModelConfig:
    """The VLA defaults: proprioception, the wrist and front cameras and the instruction in;
    flow matching over chunks, 10 Euler steps; the image encoders FiLM-modulated by the
    instruction."""
    return DiffusionModelConfig(
        obs_keys=["state", "images/wrist", "images/front", "instruction"],
        obs_horizon=1,
        objective="flow",
        num_inference_steps=10,
        noise_scale=1.0,
        text_dim=64,
        text_film=True,
    )


class VlaTrainConfig(DiffusionTrainConfig):
    """``train:`` section with ``type: vla``."""

    type: str = "vla"
    model: DiffusionModelConfig = Field(default_factory=vla_model)
