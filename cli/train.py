"""`tether train`, `tether eval`, `tether export`: dispatch to the experiment's trainer.

An experiment's optional ``train:`` section names a registered trainer (registry kind
``trainer``). A trainer is a class with three class methods::

    train(cfg: ExperimentConfig, out: Path, resume: bool) -> dict      # writes a checkpoint
    evaluate(checkpoint: Path, options: EvalOptions) -> dict           # writes summary.json
    export(checkpoint: Path, fmt: str, out: Path | None) -> Path       # writes model.onnx ...

Every checkpoint directory holds ``contract.json`` whose ``"trainer"`` names the trainer
that wrote it, so `eval` and `export` find their way back from a checkpoint alone.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import TetherError

CONTRACT = "contract.json"


@dataclass
class EvalOptions:
    """What `tether eval` was asked for; trainers ignore what does not apply to them."""

    episodes: int = 10
    seed: int = 0
    out: Path | None = None
    ros: bool = False
    video: bool = True
    # simulator override (e.g. "mujoco" to evaluate a policy trained on pybullet)
    sim: str | None = None
    overrides: list[str] = field(default_factory=list)


def trainer_of_checkpoint(checkpoint: str | Path) -> tuple[Path, Any]:
    """The checkpoint directory and its trainer class, from its contract.json."""
    path = Path(checkpoint)
    if path.is_file():
        path = path.parent
    contract = path / CONTRACT
    if not contract.is_file():
        raise TetherError(f"{path}: not a checkpoint (no {CONTRACT}); pass a checkpoint directory")
    try:
        kind = json.loads(contract.read_text())["trainer"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise TetherError(f"{contract}: unreadable contract ({exc})") from None
    return path, registry.load("trainer", kind)


def default_out(prefix: str) -> Path:
    return Path("runs") / time.strftime(f"{prefix}-%Y%m%d-%H%M%S")


def run_train(config: str, overrides: list[str], out: str | None, resume: bool) -> int:
    cfg = load_config(config, overrides)
    if cfg.train is None:
        known = ", ".join(registry.available("trainer")) or "none registered"
        raise TetherError(f"{config}: no train: section (trainers: {known})")
    trainer = registry.load("trainer", cfg.train.type)
    result = trainer.train(cfg, Path(out) if out else default_out(f"train-{cfg.name}"), resume)
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_eval(checkpoint: str, options: EvalOptions) -> int:
    path, trainer = trainer_of_checkpoint(checkpoint)
    if options.out is None:
        options.out = default_out(f"eval-{path.name}")
    result = trainer.evaluate(path, options)
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_export(checkpoint: str, fmt: str, out: str | None) -> int:
    path, trainer = trainer_of_checkpoint(checkpoint)
    written = trainer.export(path, fmt, Path(out) if out else None)
    print(f"exported {fmt} -> {written}")
    return 0
