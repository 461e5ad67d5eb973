"""`tether eval <folder>` tells an exported base + residual (tether-residual/1) from a plain
ONNX policy folder and builds the evaluation experiment for each (no simulator: the episode
runner is a stand-in that keeps what it was handed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tether.cli.train import EvalOptions, run_eval

REPO = Path(__file__).resolve().parents[2]
LIFT = REPO / "models" / "panda_lift_diffusion"


class Keep:
    """An episode runner that runs nothing and keeps the experiment."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def __call__(self, data: dict[str, Any], checkpoint: Path, options: Any, source: str):
        self.data = data
        return {"episodes": 0, "per_episode": []}


def _residual_folder(tmp_path: Path) -> Path:
    """A residual folder's model.json as `tether export` writes it (the experiment: the lift
    model's, which serves its diffusion base in chunks)."""
    folder = tmp_path / "reach_residual"
    folder.mkdir()
    experiment = json.loads((LIFT / "model.json").read_text())["experiment"]
    assert experiment["ros"]["chunked"] is True
    meta = {"format": "tether-residual/1", "base": {"model": "base"}, "experiment": experiment}
    (folder / "model.json").write_text(json.dumps(meta))
    return folder


def _eval(folder: Path, tmp_path: Path, overrides: list[str] | None = None) -> dict[str, Any]:
    keep = Keep()
    opts = EvalOptions(
        episodes=3, seed=1000, out=tmp_path / "eval", ros=True, video=False,
        overrides=overrides or [], runner=keep,
    )  # fmt: skip
    assert run_eval(str(folder), opts) == 0
    return keep.data


def test_residual_folder_evaluates_with_residual_onnx_per_observation(tmp_path: Path) -> None:
    folder = _residual_folder(tmp_path)
    data = _eval(folder, tmp_path)
    assert data["policy"] == {"type": "residual_onnx", "model": str(folder.resolve())}
    assert data["episodes"]["count"] == 3 and data["episodes"]["seed"] == 1000
    assert data["task"]["type"] == "lift"
    # served per observation over ROS 2, whatever the base's experiment said
    assert data["ros"]["chunked"] is False
    # a user's override still reaches it (the graph then refuses it: tests/ros)
    assert _eval(folder, tmp_path, ["ros.chunked=true"])["ros"]["chunked"] is True


def test_plain_onnx_folder_still_evaluates_with_onnx(tmp_path: Path) -> None:
    data = _eval(LIFT, tmp_path)
    assert data["policy"] == {"type": "onnx", "model": str((LIFT / "model.onnx").resolve())}
    assert data["ros"]["chunked"] is True  # the lift model's own serving is untouched
