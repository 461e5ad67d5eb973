"""Config of the ``onnx`` policy type (a light import: no onnxruntime, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig

Provider = Literal["cpu", "cuda", "tensorrt"]


class OnnxPolicyConfig(ComponentConfig):
    """Serve an exported ``model.onnx`` + ``model.json`` (docs/model_json.md) with onnxruntime."""

    type: str = "onnx"
    # path to model.onnx; its I/O contract is model.json (or <stem>.json) beside it
    model: Path
    # onnxruntime intra-op threads; 1 keeps a real-time loop's latency predictable
    threads: int = Field(1, ge=1)
    # execution providers in order of preference; cpu is always appended as the fallback
    providers: list[Provider] = Field(default_factory=lambda: list[Provider](["cpu"]))
    # seed of the generator that fills the graph's ``noise`` input (diffusion policies)
    seed: int = 0
    # rows of a chunk executed before the next inference; None: model.json's execute_steps
    execute_steps: int | None = Field(None, ge=1)
