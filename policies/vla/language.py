"""The instruction as a policy input, without torch (docs/vla.md): shared by the torch policy
(``diffusion`` type on a checkpoint) and the onnxruntime one (``onnx`` type on an exported
folder), so both read language the same way.

- The text encoder is the one the model was trained with (its record in the contract:
  name, width, file hashes): a folder's own ``text_encoder/`` first, else the one built at
  set-up; anything else is refused in one sentence when the policy is built, before any
  node moves the robot.
- Each new instruction is embedded once (the encoder caches it), never per step.
- An instruction unlike the training ones still drives the policy; :meth:`status` reports
  the cosine similarity to the nearest training instruction, and whether the text was
  truncated to the encoder's token limit.
- No instruction (None or blank): :meth:`embedding` returns None and the policy holds the
  arm where it is (:func:`hold_chunk`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.policies.vla.text_encoder import TextEncoder, encoders_root

# the folder name of a text encoder shipped inside a model folder
LOCAL_ENCODER = "text_encoder"
# what the text encoder record must agree on with the one the model was trained with
MATCH_KEYS = ("name", "dim", "graph_sha256", "tokenizer_sha256")
# a VLA contract's language entries, copied from a checkpoint into model.json
LANGUAGE_KEYS = ("text_encoder", "instructions", "text_anchor")


def expected_encoder(record: dict[str, Any]) -> dict[str, Any]:
    """What a text encoder folder must agree on with a model's ``text_encoder`` record."""
    return {k: record[k] for k in MATCH_KEYS if k in record}


class LanguageInput:
    """The instruction in force, its embedding, and how far it is from the training ones."""

    def __init__(
        self,
        contract: dict[str, Any],
        model_dir: Path | None = None,
        anchor: float | str | None = None,
    ) -> None:
        record = contract.get("text_encoder")
        if not isinstance(record, dict) or "name" not in record:
            raise ConfigError(
                "the model reads the instruction but its contract names no text encoder "
                "(train it again with this version of Tether)"
            )
        expect = expected_encoder(record)
        local = model_dir / LOCAL_ENCODER if model_dir is not None else None
        folder = local if local is not None and local.is_dir() else encoders_root() / record["name"]
        self.encoder = TextEncoder(folder, expect)
        self.trained = [str(t) for t in contract.get("instructions") or []]
        self._trained_emb = (
            np.stack([self.encoder.encode(t) for t in self.trained]) if self.trained else None
        )
        self.anchor = anchor_temperature(contract, anchor)
        if self.anchor is not None and self._trained_emb is None:
            raise ConfigError(
                "text_anchor: the model's contract lists no training instructions to anchor to"
            )
        self._anchored: dict[str, tuple[np.ndarray, float]] = {}
        self.instruction: str | None = None
        self._planned_for: str | None = None

    def state(self) -> tuple[str | None, str | None]:
        """The instruction in force and the one the plan was made for (OnnxPolicy.state)."""
        return self.instruction, self._planned_for

    def load_state(self, state: tuple[str | None, str | None]) -> None:
        self.instruction, self._planned_for = state

    def gate(
        self, obs: Observation, spec: RobotSpec, plan: Any
    ) -> tuple[np.ndarray | None, ActionChunk | None]:
        """Before a policy acts on ``obs``: (embedding, None) to act with, dropping the
        chunk ``plan`` holds when the instruction changed (the next action follows the new
        one); or (None, a hold chunk) while no instruction was ever given."""
        emb = self.embedding(obs)
        if emb is None:
            plan.reset()
            return None, hold_chunk(spec, obs)
        if self.instruction != self._planned_for:
            plan.reset()
            self._planned_for = self.instruction
        return emb, None

    def embedding(self, obs: Observation) -> np.ndarray | None:
        """The embedding (dim,) of the observation's instruction (the one in force when the
        observation has none); None while no instruction was ever given."""
        text = (obs.instruction or "").strip()
        if text:
            self.instruction = text
        if self.instruction is None:
            return None
        if self.anchor is None:
            return self.encoder.encode(self.instruction)
        return self._anchor(self.instruction)[0]

    def _anchor(self, text: str) -> tuple[np.ndarray, float]:
        """``text``'s anchored embedding and how many training wordings it blends (1 / sum
        of squared weights); once per new text (only with ``self.anchor`` set)."""
        if text not in self._anchored:
            assert self.anchor is not None and self._trained_emb is not None
            self._anchored[text] = anchored(
                self.encoder.encode(text), self._trained_emb, self.anchor
            )
        return self._anchored[text]

    def status(self, text: str | None = None) -> dict[str, Any]:
        """What a user should see of ``text`` (default: the instruction in force): the
        nearest training instruction and its cosine similarity, and whether the text was
        truncated."""
        text = self.instruction if text is None else text
        if text is None:
            return {"instruction": None, "waiting": "no instruction yet: holding"}
        out: dict[str, Any] = {"instruction": text}
        if self._trained_emb is not None:
            sims = self._trained_emb @ self.encoder.encode(text)
            best = int(np.argmax(sims))
            out["nearest_training_instruction"] = self.trained[best]
            out["similarity"] = round(float(sims[best]), 4)
        if self.anchor is not None:
            out["anchored_wordings"] = round(self._anchor(text)[1], 2)
        if text in self.encoder.truncated:
            out["truncated_to_tokens"] = self.encoder.max_tokens
        return out


def anchor_temperature(contract: dict[str, Any], override: float | str | None) -> float | None:
    """The anchoring temperature in force: ``override`` (a policy config's ``text_anchor``;
    ``raw`` turns it off) or else the contract's."""
    value = contract.get("text_anchor") if override is None else override
    if value is None or value == "raw":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"text_anchor: {value!r} is not a positive temperature or raw")
    return float(value)


def anchored(emb: np.ndarray, trained: np.ndarray, temperature: float) -> tuple[np.ndarray, float]:
    """The unit mean of the rows of ``trained`` (unit embeddings) weighted by
    softmax(cosine to ``emb`` / temperature), and the weights' effective count."""
    logits = (trained @ emb) / temperature
    w = np.exp(logits - logits.max())
    w /= w.sum()
    mix = w @ trained
    return (mix / np.linalg.norm(mix)).astype(np.float32), float(1.0 / np.sum(w * w))


def hold_chunk(spec: RobotSpec, obs: Observation) -> ActionChunk:
    """One action that holds a joint-position arm where it is (the first ``action.dim``
    state entries: the joints, then the first finger)."""
    if spec.action.mode != "joint_position":
        raise ConfigError(
            f"a language-conditioned policy can hold only a joint-position robot without an "
            f"instruction; {spec.name} takes {spec.action.mode} actions"
        )
    hold = np.asarray(obs["state"][: spec.action.dim], dtype=np.float32)
    return ActionChunk(hold[None], spec.dt, obs.stamp_ns)
