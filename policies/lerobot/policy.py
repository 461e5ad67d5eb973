"""The ``lerobot`` policy type: a LeRobot checkpoint served in a worker process.

LeRobot pins its own torch, so it runs in an environment of its own (``make lerobot-env``
builds ``.venv-lerobot``); this module, in Tether's environment, starts ``worker.py`` with
that environment's Python and talks to it over a pipe (protocol.py: framed JSON +
safetensors; no pickle, no gRPC). Torch-free: it runs wherever the onnxruntime policies run.

Tether keeps the observation history and the chunk schedule (policies.chunking), exactly as
for an exported diffusion policy, so the policy server, the chunk executor and the safety
filter downstream cannot tell the two apart. Observation keys map to LeRobot features the
way ``tether record`` writes them: ``state`` -> observation.state, ``env_state`` ->
observation.environment_state, ``images/<cam>`` -> observation.images.<cam>, and the
instruction -> the ``task`` string.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import ConfigError, TetherError
from tether.core.paths import data_dirs
from tether.core.spec import RobotSpec
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation
from tether.policies.chunking import ChunkPlan, ObsHistory
from tether.policies.diffusion.config import DATASET_FEATURES, IMAGE_FEATURE_PREFIX
from tether.policies.lerobot import protocol
from tether.policies.lerobot.config import LerobotPolicyConfig

WORKER = Path(__file__).with_name("worker.py")
ENV_PYTHON = "TETHER_LEROBOT_PYTHON"
VENV = ".venv-lerobot"
ACTION = "action"
BUILD_HINT = (
    "`make lerobot-env` builds .venv-lerobot (LeRobot 0.4.4 with its own torch), or set "
    f"policy.python (or ${ENV_PYTHON}) to a Python that has LeRobot"
)


def observation_key(feature: str) -> str:
    """The Tether observation key that feeds LeRobot input ``feature``."""
    for key, name in DATASET_FEATURES.items():
        if feature == name:
            return key
    if feature.startswith(IMAGE_FEATURE_PREFIX):
        return IMAGE_PREFIX + feature[len(IMAGE_FEATURE_PREFIX) :]
    raise TetherError(
        f"the LeRobot checkpoint reads '{feature}', which no Tether observation provides "
        "(Tether gives observation.state, observation.environment_state and "
        "observation.images.<camera>, as `tether record` writes them)"
    )


def lerobot_python(configured: Path | None) -> Path:
    """The LeRobot environment's interpreter (see LerobotPolicyConfig.python)."""
    if configured is not None:
        candidates = [configured]
    elif os.environ.get(ENV_PYTHON):
        candidates = [Path(os.environ[ENV_PYTHON])]
    else:
        candidates = [base / VENV / "bin" / "python" for base in data_dirs()]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    where = ", ".join(str(c) for c in candidates) or f"{VENV} in the checkout"
    raise TetherError(f"the LeRobot environment is not built (no Python at {where}): {BUILD_HINT}")


def checkpoint_dir(path: Path) -> Path:
    """A LeRobot ``pretrained_model`` folder: ``path`` itself, or its pretrained_model
    (a checkpoint step folder such as outputs/train/<run>/checkpoints/last)."""
    for p in (path, path / "pretrained_model"):
        if (p / "config.json").is_file() and (p / "model.safetensors").is_file():
            return p
    raise TetherError(
        f"{path}: not a LeRobot checkpoint (expected config.json and model.safetensors, as "
        "lerobot-train saves in outputs/train/<run>/checkpoints/<step>/pretrained_model)"
    )


def dataset_fps(checkpoint: Path) -> float:
    """The frame rate of the dataset a checkpoint was trained on, from train_config.json."""
    hint = "set policy.fps to the frame rate of the dataset it was trained on"
    try:
        train = json.loads((checkpoint / "train_config.json").read_text())
        root = (train.get("dataset") or {}).get("root")
        if not root:
            raise ValueError("its dataset has no local root")
        info = json.loads((Path(root) / "meta" / "info.json").read_text())
        return float(info["fps"])
    except (OSError, TypeError, KeyError, ValueError) as exc:
        raise TetherError(
            f"{checkpoint}: cannot tell the training dataset's frame rate ({exc}): {hint}"
        ) from None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker exits at EOF
            proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()


class LerobotWorker:
    """The worker process: ``ready`` info after start, ``chunk(arrays, task)`` per request."""

    def __init__(self, cfg: LerobotPolicyConfig, checkpoint: Path) -> None:
        self.python = lerobot_python(cfg.python)
        self.checkpoint = checkpoint
        cmd = [str(self.python), str(WORKER), "--checkpoint", str(checkpoint)]
        cmd += ["--device", cfg.device, "--threads", str(cfg.threads)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
        env.pop("PYTHONPATH", None)  # Tether's paths (ROS wheels, the venv) are not its own
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0
        )
        self._finalizer = weakref.finalize(self, _stop, self.proc)
        self.timeout_s = cfg.infer_timeout_s
        self.info = self._expect("ready", cfg.start_timeout_s, "start")[0]
        self.inferences = 0
        self.last_ms = 0.0

    def _expect(self, op: str, timeout_s: float, doing: str) -> tuple[dict, dict]:
        try:
            header, arrays = protocol.receive(self.proc.stdout, timeout_s)
        except protocol.ProtocolError as exc:
            try:  # a closed pipe: the worker is exiting
                code = self.proc.wait(2) if "closed" in str(exc) else self.proc.poll()
            except subprocess.TimeoutExpired:
                code = None
            self.close()
            if code is not None:
                raise TetherError(
                    f"the LeRobot worker ({self.python}) exited with code {code} during {doing} "
                    f"of {self.checkpoint} (its log above says why)"
                ) from None
            raise TetherError(f"the LeRobot worker failed during {doing}: {exc}") from None
        if header["op"] == "error":
            raise TetherError(f"LeRobot ({doing} of {self.checkpoint}): {header.get('message')}")
        if header["op"] != op:
            self.close()
            raise TetherError(f"the LeRobot worker answered '{header['op']}' to {doing}")
        return header, arrays

    def chunk(self, arrays: dict[str, np.ndarray], task: str) -> np.ndarray:
        self._send({"op": "infer", "task": task}, arrays)
        header, out = self._expect("chunk", self.timeout_s, "inference")
        self.inferences += 1
        self.last_ms = float(header.get("ms", 0.0))
        return np.asarray(out[ACTION], np.float32)

    def reset(self) -> None:
        self._send({"op": "reset"})
        self._expect("ok", self.timeout_s, "reset")

    def _send(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
        if self.proc.poll() is not None:
            raise TetherError(f"the LeRobot worker has exited (code {self.proc.returncode})")
        try:
            protocol.send(self.proc.stdin, header, arrays)
        except (BrokenPipeError, OSError) as exc:
            raise TetherError(f"the LeRobot worker is gone ({exc})") from None

    def close(self) -> None:
        self._finalizer()


class LerobotPolicy:
    """The ``lerobot`` policy type: chunks from a LeRobot checkpoint (docs/lerobot.md)."""

    def __init__(self, cfg: LerobotPolicyConfig, spec: RobotSpec, task: Any = None) -> None:
        self.cfg = cfg
        self.spec = spec
        checkpoint = checkpoint_dir(cfg.checkpoint)
        fps = cfg.fps or dataset_fps(checkpoint)
        self.worker = LerobotWorker(cfg, checkpoint)
        info = self.worker.info
        self.info = info
        try:
            out = info["output_features"][ACTION]["shape"]
        except KeyError:
            self.worker.close()
            raise TetherError(f"{checkpoint}: the checkpoint has no '{ACTION}' output") from None
        if int(out[-1]) != spec.action.dim:
            self.worker.close()
            raise ConfigError(
                f"{checkpoint}: the LeRobot policy outputs {out[-1]} actions, robot {spec.name} "
                f"takes {spec.action.dim} ({', '.join(spec.action.names)})"
            )
        self.features = {f: observation_key(f) for f in info["input_features"]}
        self.shapes = {f: tuple(v["shape"]) for f, v in info["input_features"].items()}
        self.obs_keys = list(dict.fromkeys(self.features.values()))
        self.history = ObsHistory(self.obs_keys, int(info["n_obs_steps"]), 1.0 / fps)
        execute = cfg.execute_steps or int(info["n_action_steps"])
        self.plan = ChunkPlan(1.0 / fps, spec.dt, execute)
        self.fps = fps
        print(
            f"lerobot: {info['policy_type']} from {checkpoint} (LeRobot {info['lerobot']}, torch "
            f"{info['torch']}, {info['device']}); reads {', '.join(self.features)}; "
            f"{info['n_obs_steps']} observation step(s) at {fps:g} fps, {execute} rows "
            "executed per chunk",
            file=sys.stderr,
        )

    @property
    def inferences(self) -> int:
        return self.worker.inferences

    def reset(self) -> None:
        self.history.reset()
        self.plan.reset()
        self.worker.reset()

    def replan(self) -> None:
        """Predict a fresh chunk at the next act() (a chunk executor asked for one)."""
        self.plan.reset()

    def observe(self, obs: Observation) -> None:
        self.history.push(obs)

    def _arrays(self) -> dict[str, np.ndarray]:
        stacked = self.history.stacked()
        out = {}
        for feature, key in self.features.items():
            value = stacked[key]
            want = self.shapes[feature]
            if key.startswith(IMAGE_PREFIX):
                value = np.asarray(value, np.uint8)
                got = (value.shape[-1], *value.shape[1:-1])  # HWC -> CHW, as LeRobot reads it
            else:
                value = np.asarray(value, np.float32)
                got = tuple(value.shape[1:])
            if got != want:
                raise TetherError(
                    f"observation '{key}' has shape {got}, the LeRobot checkpoint's {feature} "
                    f"expects {want} (record and serve with the same robot and cameras)"
                )
            out[feature] = value
        return out

    def act(self, obs: Observation) -> ActionChunk:
        self.history.push(obs)
        if self.plan.needs_plan(obs.stamp_ns):
            actions = self.worker.chunk(self._arrays(), obs.instruction or "")
            self.plan.set(actions, obs.stamp_ns)
        return self.plan.chunk_at(obs.stamp_ns)

    def close(self) -> None:
        self.worker.close()

    @property
    def contract(self) -> dict[str, Any]:
        return {
            "format": protocol.FORMAT,
            "observation_keys": self.obs_keys,
            "action_names": list(self.spec.action.names),
            "joint_names": list(self.spec.action.names),
            "control_hz": self.spec.control_hz,
            "action_dt": 1.0 / self.fps,
            "lerobot": self.info,
        }
