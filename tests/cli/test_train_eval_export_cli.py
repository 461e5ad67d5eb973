"""`tether train`, `tether eval` (in-process, in the other simulator, over ROS 2) and
`tether export` through the command-line parser, on a tiny diffusion case."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "policies"))
from policy_helpers import TINY_MODEL, write_dataset  # noqa: E402

from tether.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.mujoco, pytest.mark.slow]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tether train EXP.yaml train.steps=4 --out CKPT` on the policy tests' tiny dataset."""
    pytest.importorskip("mujoco")
    tmp = tmp_path_factory.mktemp("cli_train")
    dataset = write_dataset(tmp / "lift")
    experiment = {
        "name": "tiny_cli",
        "robot": "panda",
        "sim": {"type": "mujoco", "control_hz": 100},
        "task": {"type": "lift", "max_duration_s": 0.3},
        "policy": {"type": "hold"},
        "train": {
            "type": "diffusion",
            "dataset": str(dataset),
            "model": TINY_MODEL,
            "steps": 2,
            "batch_size": 8,
            "warmup_steps": 1,
        },
    }
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(experiment))
    out = tmp / "ckpt"
    assert main(["train", str(path), "train.steps=4", "--out", str(out)]) == 0
    return out


def test_train_writes_a_checkpoint(checkpoint: Path) -> None:
    log = json.loads((checkpoint / "train_log.json").read_text())
    assert log["steps"] == 4  # the override on the command line won over the YAML's 2
    assert log["episodes"] == 3 and log["samples"] == 60
    contract = json.loads((checkpoint / "contract.json").read_text())
    assert contract["trainer"] == "diffusion" and contract["experiment"]["name"] == "tiny_cli"


@pytest.mark.parametrize("sim", [None, "pybullet"])
def test_eval_in_process(
    checkpoint: Path, tmp_path: Path, sim: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    if sim == "pybullet":
        pytest.importorskip("pybullet")
    out = tmp_path / "eval"
    args = ["eval", str(checkpoint), "--episodes", "2", "--seed", "40", "--no-video"]
    args += ["--out", str(out), *(["--sim", sim] if sim else [])]
    assert main(args) == 0
    assert f"in-process {sim or 'mujoco'} -> {out}" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["mode"] == "in-process"
    assert [e["seed"] for e in summary["per_episode"]] == [40, 41]
    # the experiment's 0.3 s limit at 100 Hz; too short to lift: both fail
    assert [e["steps"] for e in summary["per_episode"]] == [30, 30]
    assert summary["successes"] == 0
    assert not (out / "episode_000.mp4").exists()


@pytest.mark.ros
def test_eval_over_ros(checkpoint: Path, tmp_path: Path) -> None:
    pytest.importorskip("rclpy")
    out = tmp_path / "eval_ros"
    args = ["eval", str(checkpoint), "--ros", "--episodes", "1", "--seed", "7", "--no-video"]
    # lockstep: the 0.3 s episode waits for the policy's chunks, so latency is measured however
    # loaded the machine (in realtime a loaded run ended before the first chunk: p50 nan)
    assert main([*args, "--out", str(out), "ros.rate_mode=lockstep"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 1 and summary["successes"] == 0
    # the ROS 2 loop's summary: rate mode, target rate, latency measured across processes
    assert summary["rate_mode"] == "lockstep" and summary["target_hz"] == 100.0
    assert summary["latency_ms"]["p50"] > 0
    assert [e["seed"] for e in summary["per_episode"]] == [7]
    assert summary["per_episode"][0]["sim_time_s"] == pytest.approx(0.3, abs=0.02)
    assert (out / "experiment.yaml").is_file()


def test_export_onnx(checkpoint: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    out = tmp_path / "export"
    assert main(["export", str(checkpoint), "--format", "onnx", "--out", str(out)]) == 0
    meta = json.loads((out / "model.json").read_text())
    assert meta["trainer"] == "diffusion" and meta["outputs"][0]["shape"] == [1, 4, 8]
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == [i["name"] for i in meta["inputs"]]
    g = np.random.default_rng(0)
    feeds = {i["name"]: g.standard_normal(i["shape"]).astype(np.float32) for i in meta["inputs"]}
    (actions,) = sess.run(None, feeds)
    assert actions.shape == (1, 4, 8) and np.all(np.isfinite(actions))
