"""`tether eval` in-process: a checkpoint runs closed-loop in MuJoCo and leaves summary.json
and an MP4 of the first episode; `policy.type=onnx` evaluates the exported graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("mujoco")

from policy_helpers import experiment  # noqa: E402

pytestmark = [pytest.mark.mujoco, pytest.mark.slow, pytest.mark.usefixtures("torch_one_thread")]


def _eval(ckpt: Path, out: Path, overrides: list[str], video: bool) -> dict:
    from tether.cli.train import EvalOptions, run_eval

    opts = EvalOptions(
        episodes=2,
        seed=500,
        out=out,
        video=video,
        overrides=["task.max_duration_s=0.3", *overrides],
    )
    assert run_eval(str(ckpt), opts) == 0
    return json.loads((out / "summary.json").read_text())


def test_eval_writes_summary_and_video(tiny_dataset: Path, tmp_path: Path) -> None:
    import av

    from tether.policies.diffusion.trainer import DiffusionTrainer

    ckpt = tmp_path / "ckpt"
    DiffusionTrainer.train(experiment(tiny_dataset, steps=2), ckpt, resume=False)
    summary = _eval(ckpt, tmp_path / "eval", [], video=True)
    # 0.3 s cannot lift the cube 8 cm (the expert needs ~3 s): every episode is a failure
    # that ran to the time limit, and the summary counts exactly that
    assert summary["episodes"] == 2 and summary["successes"] == 0
    assert summary["success_rate"] == 0.0
    assert [e["success"] for e in summary["per_episode"]] == [False, False]
    assert all(e["sim_time_s"] == pytest.approx(0.3) for e in summary["per_episode"])
    assert [e["seed"] for e in summary["per_episode"]] == [500, 501]
    assert all(e["steps"] == 30 for e in summary["per_episode"])  # 0.3 s at 100 Hz
    assert summary["inferences"] >= 2  # one chunk per execute_steps rows, per episode
    with av.open(str(tmp_path / "eval" / "episode_000.mp4")) as f:
        assert sum(1 for _ in f.decode(video=0)) >= 5  # 0.3 s of a 30 fps camera

    onnx_summary = _eval(ckpt, tmp_path / "eval_onnx", ["policy.type=onnx"], video=False)
    assert (ckpt / "onnx" / "model.onnx").is_file()
    assert onnx_summary["episodes"] == 2 and onnx_summary["successes"] == 0
    # same net, same seeds: the ONNX graph drives the arm where torch did (both deterministic)
    for a, b in zip(summary["per_episode"], onnx_summary["per_episode"], strict=True):
        assert (a["seed"], a["steps"]) == (b["seed"], b["steps"])
        assert a["return"] == pytest.approx(b["return"], abs=1e-3)
    assert not (tmp_path / "eval_onnx" / "episode_000.mp4").exists()
