"""The frozen base's action for each control step, from the chunks it returns. Torch-free
(the exported policy runs it onboard).

Two schedules (``finetune.base_replan``):

- ``policy`` (default): the base is asked at every step with the latest observation, as the
  in-process loop asks it (tether.sim.loop); a chunked base decides itself when to plan
  again (the ``onnx`` policy after ``execute_steps`` rows) and otherwise answers with the
  rest of its plan. The base then behaves exactly as when it was evaluated alone.
- ``chunk_end``: each chunk runs to its last row, as a chunk executor runs it; between
  chunks the base only observes (when it has ``observe``), and a new chunk is asked for
  when the current one has no row for now.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import numpy as np

from tether.core.errors import ConfigError
from tether.core.protocols import Policy
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation

Replan = Literal["policy", "chunk_end"]


class BaseExecutor:
    """``row(obs)`` -> the base's action (A,) float32 for ``obs.stamp_ns``."""

    def __init__(self, base: Policy, replan: Replan = "policy") -> None:
        self.base = base
        self.replan = replan
        self.chunk: ActionChunk | None = None
        # chunks the base was asked for since the start (not reset)
        self.queries = 0
        # a base that observes cameras (a VLA) gets them; others get the arrays only
        keys = base.contract.get("observation_keys", [])
        self._images = any(str(k).startswith(IMAGE_PREFIX) for k in keys)

    def reset(self) -> None:
        self.base.reset()
        self.chunk = None

    def state(self) -> dict[str, Any]:
        """The chunk in force and the base's episode state (its ``state()``: the ``onnx``
        policy's history, plan and noise generator), for ResidualEnv.snapshot."""
        save = getattr(self.base, "state", None)
        if save is None:
            raise ConfigError(
                f"the base ({type(self.base).__name__}) cannot save its episode state: "
                "snapshots need an exported base (finetune.base_model, the onnx policy)"
            )
        return {"chunk": copy.deepcopy(self.chunk), "base": save()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.chunk = copy.deepcopy(state["chunk"])
        self.base.load_state(state["base"])  # type: ignore[attr-defined]

    def row(self, obs: Observation) -> np.ndarray:
        seen = obs
        if not self._images:
            data = {k: obs[k] for k in obs if not k.startswith(IMAGE_PREFIX)}
            seen = Observation(data, stamp_ns=obs.stamp_ns, instruction=obs.instruction)
        row = None
        if self.replan == "chunk_end" and self.chunk is not None:
            row = self.chunk.action_at(obs.stamp_ns)
            if row is not None and hasattr(self.base, "observe"):
                self.base.observe(seen)  # keep its observation history current
        if row is None:
            chunk = self.base.act(seen)
            chunk.t0_ns = obs.stamp_ns
            self.chunk = chunk
            self.queries += 1
            row = chunk.action_at(obs.stamp_ns)
            assert row is not None, "the base returned a chunk with no row for now"
        return np.asarray(row, np.float32)
