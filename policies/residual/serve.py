"""Serve an exported base + residual folder (format tether-residual/1) with onnxruntime.

What runs onboard: no torch import here (a test checks it). The base's row for each
step comes from tether.policies.residual.base_executor, on the schedule it was fine-tuned
with (model.json ``base_replan``); the residual graph runs on the latest observation and
that row at every control step, or every ``hold_steps`` steps with the residual held in
between (model.json ``hold_steps``). ``act`` answers with a one-row chunk, so the policy
server serves it per observation at the control rate (lockstep or realtime); ``ros.chunked`` is
refused for it (a chunk executor runs rows planned earlier, without the latest observation:
tether_ros.graph). The safety filter stays where it is (sim bridge, hardware bridge).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tether.core import registry
from tether.core.errors import TetherError
from tether.core.protocols import Policy
from tether.core.spec import RobotSpec
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation
from tether.policies.config_onnx import OnnxPolicyConfig
from tether.policies.residual.base_executor import BaseExecutor
from tether.policies.residual.config import ResidualOnnxConfig
from tether.policies.residual.space import space_from_meta
from tether.policies.runtime import OnnxPolicy, open_session

FORMAT = "tether-residual/1"


def residual_format(model: Path) -> bool:
    """Whether ``model`` (a folder or a file in it) is an exported base + residual: its
    model.json says format tether-residual/1."""
    folder = model.parent if model.is_file() else model
    try:
        meta = json.loads((folder / "model.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == FORMAT


def read_residual_contract(model: Path) -> tuple[Path, dict[str, Any]]:
    """The folder and model.json of an exported base + residual."""
    folder = model.parent if model.is_file() else model
    path = folder / "model.json"
    if not path.is_file():
        raise TetherError(f"{folder}: no model.json (export a finetune checkpoint first)")
    meta: dict[str, Any] = json.loads(path.read_text())
    if meta.get("format") != FORMAT:
        raise TetherError(f"{path}: format is {meta.get('format')!r}, expected {FORMAT!r}")
    return folder, meta


class ResidualOnnxPolicy:
    """The ``residual_onnx`` policy type (see the module docstring)."""

    def __init__(self, cfg: ResidualOnnxConfig, spec: RobotSpec, task: Any = None) -> None:
        self.cfg = cfg
        self.spec = spec
        self.folder, self.meta = read_residual_contract(Path(cfg.model))
        base = self.meta["base"]
        if "model" in base:
            bcfg = OnnxPolicyConfig(
                model=self.folder / base["model"],
                threads=cfg.threads,
                seed=cfg.seed,
                runtime=cfg.runtime,
            )
            self.base: Policy = OnnxPolicy(bcfg, spec, task)
        else:
            section = base["policy"]
            pcfg = registry.config_class("policy", section["type"]).model_validate(section)
            self.base = registry.build("policy", pcfg, spec, task)
        res = self.meta["residual"]
        # the residual is a few small layers per step: the CPU serves it in microseconds
        # (docs/residual_rl.md), a GPU round trip would cost more than it saves
        self.session, _ = open_session(self.folder / res["model"], cfg.threads)
        self.keys = [i["key"] for i in res["inputs"] if i["key"] != "base_action"]
        self.executor = BaseExecutor(self.base, self.meta.get("base_replan", "policy"))
        # the residual graph runs every hold_steps observations; in between, the residual
        # it gave (its action minus that step's base row) is added to each new base row
        self.hold_steps = int(self.meta.get("hold_steps", 1))
        self._calls = 0
        self._held = np.zeros(len(self.meta["action_names"]), np.float32)
        # tcp space: the graph outputs the TCP motion; it is held, and mapped to the joints
        # at each step's base row (space.py), as in training
        self.space = space_from_meta(spec, res.get("space"))
        offset = res.get("base_offset")
        self.offset = np.zeros(len(self.meta["action_names"]), np.float32)
        if offset:
            self.offset = np.asarray(offset, np.float32)

    @property
    def runtime_report(self) -> dict[str, Any] | None:
        """Where the base graph runs (the residual graph runs on the CPU)."""
        report = getattr(self.base, "runtime_report", None)
        return None if report is None else {**report, "residual": "cpu"}

    def reset(self) -> None:
        self.executor.reset()
        self._calls = 0

    def warm_up(self) -> None:
        """The base's warm-up, and one run of the residual graph on zeros."""
        warm = getattr(self.base, "warm_up", None)
        if warm is not None:
            warm()
        self.session.run(
            None,
            {
                i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
                for i in self.session.get_inputs()
            },
        )

    def act(self, obs: Observation) -> ActionChunk:
        row = self.executor.row(obs)
        decide = self._calls % self.hold_steps == 0
        self._calls += 1
        if decide:
            feeds = {k: np.asarray(obs[k], np.float32).reshape(1, -1) for k in self.keys}
            feeds["base_action"] = row[None]
            out = self.session.run(None, feeds)[0]
            if self.space.space == "joint":
                self._held = out[0] - row
                return ActionChunk(out, self.spec.dt, obs.stamp_ns)
            self._held = out[0]
        if self.space.space == "joint":
            action = row + self._held
        else:
            base = row + self.offset
            action = base + self.space.to_joint(base, self._held).astype(np.float32)
        return ActionChunk(action[None], self.spec.dt, obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        keys = list(self.base.contract.get("observation_keys", ["state"]))
        keys += [k for k in self.keys if k not in keys]
        return {
            "observation_keys": [k for k in keys if not k.startswith(IMAGE_PREFIX)]
            + [k for k in keys if k.startswith(IMAGE_PREFIX)],
            "action_names": self.meta["action_names"],
            "joint_names": self.meta["action_names"],
            "control_hz": self.meta["control_hz"],
            "residual": self.meta["residual"],
        }
