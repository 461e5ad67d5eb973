"""policy.type lerobot with LeRobot itself (`make lerobot-env`; `make test-lerobot` runs
these): `tether record` writes a dataset, `lerobot-train` trains a diffusion policy and an ACT
policy on it for a few steps, and Tether serves that checkpoint — in process with the chunks LeRobot's own
inference path gives, and over ROS 2 through the chunk executor and the safety filters to
the simulated Panda. Skipped where the LeRobot environment is not built (CI: it is a ~7 GB
download)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tether.core.errors import TetherError
from tether.policies.lerobot.policy import lerobot_python

pytestmark = [pytest.mark.lerobot, pytest.mark.slow, pytest.mark.mujoco]

REPO = Path(__file__).resolve().parents[2]
TETHER = [sys.executable, "-m", "tether.cli.main"]


@pytest.fixture(scope="module")
def lerobot_env() -> Path:
    try:
        return lerobot_python(None)
    except TetherError as exc:
        pytest.skip(str(exc))


# lerobot-train settings per policy type: small networks, ten steps, nothing downloaded
POLICIES = {
    "diffusion": [
        "--policy.down_dims=[32,64,128]",
        "--policy.num_inference_steps=10",
    ],
    "act": [
        "--policy.dim_model=64",
        "--policy.n_heads=2",
        "--policy.dim_feedforward=128",
        "--policy.n_encoder_layers=1",
        "--policy.n_decoder_layers=1",
        "--policy.chunk_size=20",
        "--policy.n_action_steps=20",
    ],
}
# rows of one served chunk: diffusion's n_action_steps (8 by default), ACT's chunk_size
ROWS = {"diffusion": 8, "act": 20}


@pytest.fixture(scope="module")
def dataset(lerobot_env: Path, tmp_path_factory) -> Path:
    """Three Panda lift episodes with the front camera, written by `tether record`."""
    pytest.importorskip("mujoco")
    out = tmp_path_factory.mktemp("lerobot") / "lift3"
    subprocess.run(
        [*TETHER, "record", str(REPO / "configs/experiments/panda_lift_expert.yaml")]
        + ["--episodes", "3", "--teleop", "scripted", "--out", str(out)],
        check=True,
        timeout=300,
    )
    return out


@pytest.fixture(scope="module", params=sorted(POLICIES))
def checkpoint(request, lerobot_env: Path, dataset: Path, tmp_path_factory) -> Path:
    """A LeRobot checkpoint of that type trained by lerobot-train on the recorded dataset."""
    out = tmp_path_factory.mktemp("train") / request.param
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    env.pop("PYTHONPATH", None)
    train = [
        str(lerobot_env.parent / "lerobot-train"),
        "--dataset.repo_id=local/lift3",
        f"--dataset.root={dataset}",
        "--dataset.video_backend=pyav",
        f"--policy.type={request.param}",
        "--policy.device=cpu",
        "--policy.push_to_hub=false",
        "--policy.pretrained_backbone_weights=null",  # nothing downloads
        *POLICIES[request.param],
        "--steps=10",
        "--batch_size=4",
        "--save_freq=10",
        "--eval_freq=0",
        "--num_workers=0",
        "--wandb.enable=false",
        f"--output_dir={out}",
    ]
    subprocess.run(train, check=True, timeout=900, env=env, cwd=out.parent)
    ckpt = out / "checkpoints" / "last" / "pretrained_model"
    assert json.loads((ckpt / "config.json").read_text())["type"] == request.param
    return ckpt


def test_served_chunks_are_lerobots_own(lerobot_env: Path, checkpoint: Path, tmp_path: Path):
    """The worker's chunk equals what LeRobot's predict_action (its record/eval inference
    path: select_action, one call per action) returns for the same frames, row by row:
    diffusion from its two-frame observation queue, ACT from one frame."""
    script = textwrap.dedent(
        f"""
        import sys, numpy as np, torch
        sys.path.insert(0, {str(REPO / "policies" / "lerobot")!r})
        from pathlib import Path
        from worker import LerobotRunner
        from lerobot.utils.control_utils import predict_action
        r = LerobotRunner(Path({str(checkpoint)!r}), "cpu")
        rng = np.random.default_rng(0)
        f = {{"observation.state": rng.normal(size=9).astype(np.float32),
              "observation.environment_state": rng.normal(size=7).astype(np.float32),
              "observation.images.front": rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)}}
        torch.manual_seed(0)
        mine = r.chunk({{k: np.stack([v] * r.n_obs_steps) for k, v in f.items()}}, "")
        r.reset(); torch.manual_seed(0)
        theirs = np.stack([predict_action(dict(f), r.policy, r.device, r.pre, r.post, False,
                           "").numpy().reshape(-1) for _ in range(len(mine))])
        print(r.cfg.type, len(mine), float(np.abs(mine - theirs).max()))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [str(lerobot_env), "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert res.returncode == 0, res.stderr[-3000:]
    kind, rows, diff = res.stdout.split()[-3:]
    assert int(rows) == ROWS[kind]
    assert float(diff) <= 1e-6


def test_a_lerobot_train_checkpoint_drives_the_panda_over_ros(checkpoint: Path, tmp_path: Path):
    pytest.importorskip("rclpy")
    from lerobot_helpers import FRONT, lerobot_experiment, serve_one_episode

    exp = lerobot_experiment(tmp_path, checkpoint, cameras=(FRONT,))
    # 5 s: the executor reports once a second, and the first second goes to the first chunk
    ep = serve_one_episode(exp, tmp_path, seconds=5.0)
    executor = ep["chunk_executor"]
    assert executor["chunks"] >= 3 and executor["executed"] >= 50, executor
    assert executor["safety"]["accepted"] >= 50, executor["safety"]
    assert ep["safety"]["accepted"] >= 100, ep["safety"]
    latency = executor["inference_latency_ms"]
    assert np.isfinite(latency["p50"])
