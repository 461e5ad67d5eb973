"""Config of the ``onnx`` policy type (a light import: no onnxruntime, no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig, RuntimeConfig


class OnnxPolicyConfig(ComponentConfig):
    """Serve an exported ``model.onnx`` + ``model.json`` (docs/model_json.md) with onnxruntime."""

    type: str = "onnx"
    # path to model.onnx; its I/O contract is model.json (or <stem>.json) beside it
    model: Path
    # onnxruntime intra-op threads; 1 keeps a real-time loop's latency predictable
    threads: int = Field(1, ge=1)
    # where the graph runs (provider, fallback, TensorRT cache); None: the experiment's
    # top-level ``runtime:`` section (tether.core.experiment.build_policy fills it in)
    runtime: RuntimeConfig | None = None
    # seed of the generator that fills the graph's ``noise`` input (diffusion policies)
    seed: int = 0
    # rows of a chunk executed before the next inference; None: model.json's execute_steps
    execute_steps: int | None = Field(None, ge=1)
    # a VLA's instruction anchoring (docs/vla.md, 'Anchoring the instruction'): None keeps
    # the model's own (its contract's text_anchor); a temperature replaces it; raw feeds the
    # text encoder's embedding as is
    text_anchor: float | Literal["raw"] | None = None
