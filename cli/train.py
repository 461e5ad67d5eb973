"""`tether train`, `tether eval`, `tether export`: dispatch to the experiment's trainer.

An experiment's optional ``train:`` section names a registered trainer (registry kind
``trainer``). A trainer is a class with three class methods::

    train(cfg: ExperimentConfig, out: Path, resume: bool) -> dict      # writes a checkpoint
    evaluate(checkpoint: Path, options: EvalOptions) -> dict           # writes summary.json
    export(checkpoint: Path, fmt: str, out: Path | None) -> Path       # writes model.onnx ...

A trainer that evaluates closed-loop hands its experiment to ``options.runner`` (in-process
or over ROS 2, tether.cli.evaluate), so the policies layer never imports a simulator or ROS.

Every checkpoint directory holds ``contract.json`` whose ``"trainer"`` names the trainer
that wrote it, so `eval` and `export` find their way back from a checkpoint alone.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.cli.evaluate import run_evaluation
from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import TetherError
from tether.core.paths import find_given
from tether.policies.checkpoint_io import CONTRACT
from tether.policies.evaluation import EpisodeRunner


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
    # the experiment to evaluate an exported model folder in (default: its model.json's)
    config: str | None = None
    # runs the evaluation experiment's episodes (tether.policies.evaluation.EpisodeRunner)
    runner: EpisodeRunner = run_evaluation


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


def exported_model(path: str | Path) -> Path | None:
    """The folder of an exported model (model.onnx + model.json, no contract.json), or None."""
    p = find_given(path)
    folder = p.parent if p.is_file() else p
    if (folder / CONTRACT).is_file() or not (folder / "model.json").is_file():
        return None
    return folder


def run_eval(checkpoint: str, options: EvalOptions) -> int:
    model = exported_model(checkpoint)
    if model is not None:  # an exported model (models/...): onnxruntime in its experiment
        from tether.policies.evaluation import evaluate_model

        options.out = options.out or default_out(f"eval-{model.name}")
        summary = evaluate_model(model, options)
        print(json.dumps({k: v for k, v in summary.items() if k != "per_episode"}, indent=2))
        return 0
    if options.config:
        raise TetherError("--config applies to exported model folders (a checkpoint has its own)")
    path, trainer = trainer_of_checkpoint(checkpoint)
    if options.out is None:
        options.out = default_out(f"eval-{path.name}")
    result = trainer.evaluate(path, options)
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_export(checkpoint: str, fmt: str, out: str | None, fp16: bool = True) -> int:
    """`tether export`: a checkpoint's ONNX graph + model.json; ``fmt`` tensorrt then builds
    a TensorRT engine from it on this machine's GPU (also for an already exported folder)."""

    model = exported_model(checkpoint)
    if model is not None:
        return _export_exported(model, fmt, Path(out) if out else None, fp16)
    path, trainer = trainer_of_checkpoint(checkpoint)
    written = Path(trainer.export(path, "onnx", Path(out) if out else None))
    print(f"exported onnx -> {written}")
    if fmt == "tensorrt":
        _tensorrt(written.parent if written.suffix == ".onnx" else written, fp16)
    return 0


def _tensorrt(model: Path, fp16: bool) -> None:
    """Build the TensorRT engine of an exported folder (tether.policies.tensorrt)."""
    from tether.policies.residual.serve import residual_format
    from tether.policies.runtime import MODEL_FILE
    from tether.policies.tensorrt import export_tensorrt

    if residual_format(model):
        raise TetherError(
            f"{model} is an exported base + residual folder (residual.onnx, base/): a "
            "TensorRT build of its graphs is not supported yet; serve it with "
            "`--provider tensorrt` (onnxruntime's TensorRT provider runs its base graph)"
        )
    print(f"exported tensorrt -> {export_tensorrt(model / MODEL_FILE, fp16)}")


def _export_exported(model: Path, fmt: str, out: Path | None, fp16: bool = True) -> int:
    """`tether export` of an already exported folder: a TensorRT engine from its ONNX file
    (on the target GPU); ONNX is what it already is (copied to ``out`` when one is given)."""
    from tether.policies.residual.serve import residual_format
    from tether.policies.runtime import MODEL_FILE, read_contract

    if residual_format(model):
        raise TetherError(
            f"{model} is an exported base + residual folder (residual.onnx, base/): it is "
            "already what `tether export` makes of a finetune checkpoint; serve it with "
            "policy type residual_onnx (a TensorRT build of its graphs is not supported yet)"
        )
    read_contract(model / MODEL_FILE)  # a clear error if it is not a Tether model
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for f in model.iterdir():
            if f.is_file():
                shutil.copy2(f, out / f.name)
        model = out
    if fmt == "tensorrt":
        _tensorrt(model, fp16)
        return 0
    if out is None:
        print(f"{model} is already an exported ONNX model: {model / MODEL_FILE}")
        return 0
    print(f"exported onnx -> {model / MODEL_FILE}")
    return 0
