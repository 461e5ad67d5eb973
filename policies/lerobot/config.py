"""Config of the ``lerobot`` policy type (a light import: no torch, no LeRobot)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tether.core.config import ComponentConfig


class LerobotPolicyConfig(ComponentConfig):
    """Serve a LeRobot checkpoint (any policy LeRobot can load: ACT, diffusion, SmolVLA, pi0)
    from the LeRobot environment, in a worker process behind Tether's chunk protocol
    (docs/lerobot.md)."""

    type: str = "lerobot"
    # a LeRobot ``pretrained_model`` folder (config.json, model.safetensors and the
    # policy_preprocessor / policy_postprocessor files lerobot-train saves)
    checkpoint: Path
    # the LeRobot environment's interpreter; None: $TETHER_LEROBOT_PYTHON, else the
    # .venv-lerobot that `make lerobot-env` builds in the checkout
    python: Path | None = None
    # torch device in the worker (cpu, cuda, cuda:1, mps)
    device: str = "cpu"
    # torch intra-op threads in the worker (0: torch's default)
    threads: int = Field(1, ge=0)
    # frames per second of the dataset the checkpoint was trained on (one chunk row per
    # frame); None: the dataset's meta/info.json named in the checkpoint's train_config.json
    fps: float | None = Field(None, gt=0)
    # rows of a chunk executed before the next inference; None: the checkpoint's n_action_steps
    execute_steps: int | None = Field(None, ge=1)
    # seconds the worker may take to import LeRobot and load the checkpoint
    start_timeout_s: float = Field(180.0, gt=0)
    # seconds one chunk may take before the policy gives up (the robot holds meanwhile)
    infer_timeout_s: float = Field(30.0, gt=0)
