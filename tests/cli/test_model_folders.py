"""The shipped models (exported folders: model.onnx + model.json) are what users download
and deploy: every command that takes a checkpoint takes one, from any directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PANDA = REPO / "models" / "panda_lift_diffusion"


def tether(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


@pytest.mark.mujoco
@pytest.mark.slow
def test_eval_takes_a_shipped_model_folder(tmp_path):
    """Seeds 1000-1001 lift with the shipped model (ONNX, fixed noise seed: deterministic;
    its 50-seed result is 94 %, the misses are 1004, 1012 and 1022)."""
    out = tmp_path / "eval"
    r = tether(
        "eval", "models/panda_lift_diffusion", "--episodes", "2", "--seed", "1000",
        "--no-video", "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["experiment"] == "panda_lift_diffusion"
    assert [e["seed"] for e in summary["per_episode"]] == [1000, 1001]
    assert summary["successes"] == 2, summary["per_episode"]


def test_a_model_folder_without_an_experiment_asks_for_one(tmp_path):
    model = tmp_path / "bare"
    model.mkdir()
    (model / "model.onnx").write_bytes((PANDA / "model.onnx").read_bytes())
    contract = json.loads((PANDA / "model.json").read_text())
    contract.pop("experiment")
    (model / "model.json").write_text(json.dumps(contract))
    r = tether("eval", str(model), "--episodes", "1", cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: {model}/model.json names no experiment to evaluate in: pass --config "
        "<experiment.yaml>"
    ]


def test_export_of_a_model_folder(tmp_path):
    r = tether("export", str(PANDA), "--format", "onnx", "--out", "copy", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "copy/model.onnx").read_bytes() == (PANDA / "model.onnx").read_bytes()
    assert (tmp_path / "copy/model.json").is_file()
    # TensorRT builds from the folder's ONNX file on a GPU; without it, one sentence
    r = tether("export", str(PANDA), "--tensorrt", "--out", "trt", cwd=tmp_path, timeout=120)
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: TensorRT is not installed"), lines
    else:
        assert r.returncode in (0, 2), r.stderr


def test_provider_that_is_missing_is_one_line_before_any_episode(tmp_path):
    """`tether eval --provider tensorrt` on a machine without it: one sentence naming the
    provider and the fallback switch, exit 2, no episode run."""
    import onnxruntime as ort

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has TensorRT")
    r = tether(
        "eval", str(PANDA), "--provider", "tensorrt", "--episodes", "1", "--no-video",
        "--out", "ev", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("error: onnxruntime has no TensorrtExecutionProvider"), lines
    assert "runtime.fallback" in lines[-1] and "Traceback" not in r.stderr
    assert not (tmp_path / "ev" / "eval.json").exists()


def test_not_a_model_nor_a_checkpoint(tmp_path):
    r = tether("eval", str(tmp_path), cwd=tmp_path, timeout=60)
    assert r.returncode == 2
    assert "not a checkpoint" in r.stderr and "Traceback" not in r.stderr
