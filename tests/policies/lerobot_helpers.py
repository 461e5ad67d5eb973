"""A stand-in LeRobot environment for tests: a fake interpreter that runs lerobot_standin.py
in place of the worker, and checkpoint folders that tell it what to do."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FRONT = {"name": "front", "width": 96, "height": 96, "fps": 30}
PANDA_FEATURES = {
    "observation.state": {"type": "STATE", "shape": [9]},
    "observation.environment_state": {"type": "ENV", "shape": [7]},
}


def standin_python(folder: Path) -> Path:
    """An executable that takes the worker's command line and runs the stand-in instead."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "python"
    exe.write_text(
        f'#!/bin/sh\nshift\nexec "{sys.executable}" "{HERE / "lerobot_standin.py"}" "$@"\n'
    )
    exe.chmod(0o755)
    return exe


def standin_checkpoint(
    folder: Path,
    mode: str = "hold",
    inputs: dict[str, Any] | None = None,
    action_dim: int = 8,
    n_obs_steps: int = 2,
    fps: float | None = 30.0,
    **extra: Any,
) -> Path:
    """A pretrained_model folder the stand-in reads (config.json; an empty model.safetensors);
    with ``fps``, a train_config.json naming a dataset with that frame rate."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "mode": mode,
        "input_features": inputs or PANDA_FEATURES,
        "output_features": {"action": {"type": "ACTION", "shape": [action_dim]}},
        "n_obs_steps": n_obs_steps,
        "n_action_steps": 4,
        **extra,
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors").write_bytes(b"")
    if fps is not None:
        dataset = folder / "dataset"
        (dataset / "meta").mkdir(parents=True, exist_ok=True)
        (dataset / "meta" / "info.json").write_text(json.dumps({"fps": fps}))
        train = {"dataset": {"repo_id": "local/x", "root": str(dataset)}}
        (folder / "train_config.json").write_text(json.dumps(train))
    return folder


def lerobot_experiment(
    folder: Path, checkpoint: Path, python: Path | None = None, cameras: tuple = ()
) -> Path:
    """panda_lift_expert with the policy a LeRobot checkpoint, served in chunks."""
    policy: dict[str, Any] = {"type": "lerobot", "checkpoint": str(checkpoint)}
    if python is not None:
        policy["python"] = str(python)
    cfg = {
        "extends": str(REPO / "configs" / "experiments" / "panda_lift_expert.yaml"),
        "name": "panda_lift_lerobot_test",
        "sim": {"cameras": list(cameras)},
        "policy": policy,
        "ros": {"chunked": True},
    }
    path = folder / "experiment.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def serve_one_episode(experiment: Path, folder: Path, seconds: float) -> dict[str, Any]:
    """One episode of ``experiment`` over ROS 2 (`tether demo`, in separate processes): its
    per-episode summary (the chunk executor's report under ``chunk_executor``)."""
    from tether.cli.demo import run_demo

    out = folder / "demo"
    overrides = ["episodes.count=1", f"task.max_duration_s={seconds}"]
    assert run_demo(str(experiment), overrides, str(out), False) == 0
    return json.loads((out / "summary.json").read_text())["per_episode"][0]
