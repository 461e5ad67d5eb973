"""A LeRobot checkpoint behind Tether's chunk protocol: the process ``policy.type: lerobot``
starts in the LeRobot environment (``make lerobot-env``), not in Tether's.

    <lerobot python> worker.py --checkpoint <pretrained_model folder> [--device cpu]

LeRobot pins its own torch, so it cannot share Tether's venv; this script imports only
LeRobot, torch, numpy, safetensors and ``protocol.py`` beside it (Tether is not installed
there). It reads requests on stdin and answers on stdout (protocol.py: framed JSON +
safetensors); anything else that prints (LeRobot, torch) goes to stderr. It exits when
its stdin closes, so it never outlives the node that started it.

Each ``infer`` carries every input feature stacked over the checkpoint's observation
steps (oldest first, images HWC uint8 as Tether's cameras give them); the answer is the
policy's unnormalised chunk. What it does with them is LeRobot's own inference path
(``lerobot.utils.control_utils.predict_action``): ``prepare_observation_for_inference``,
the checkpoint's pre-processor, ``predict_action_chunk``, the post-processor. Policies that
read an observation history from their queues (diffusion) get the frames pushed the way
their ``select_action`` does; the others (ACT, SmolVLA, pi0, ...) read one frame.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import protocol  # beside this file (sys.path[0] when run as a script)


def _protocol_streams() -> tuple[Any, Any]:
    """stdin/stdout for messages; fd 1 goes to stderr, so stray prints cannot corrupt them."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


class LerobotRunner:
    """A loaded LeRobot policy with its processors; ``chunk(frames, task)`` -> (T, D)."""

    def __init__(self, checkpoint: Path, device: str) -> None:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
        from lerobot.policies.utils import populate_queues, prepare_observation_for_inference

        self.torch = torch
        self._prepare = prepare_observation_for_inference
        self._populate = populate_queues
        self.cfg = PreTrainedConfig.from_pretrained(str(checkpoint))
        self.cfg.device = device
        self.device = torch.device(device)
        self.policy = get_policy_class(self.cfg.type).from_pretrained(
            str(checkpoint), config=self.cfg
        )
        self.policy.to(self.device).eval()
        self.pre, self.post = make_pre_post_processors(
            self.cfg,
            pretrained_path=str(checkpoint),
            preprocessor_overrides={"device_processor": {"device": device}},
        )
        self.n_obs_steps = int(getattr(self.cfg, "n_obs_steps", 1) or 1)
        # diffusion's predict_action_chunk stacks its observation queues (filled by
        # select_action); the others predict from the batch they are given
        self.queued = self.cfg.type == "diffusion"

    def describe(self) -> dict[str, Any]:
        import lerobot

        def feats(d: dict[str, Any]) -> dict[str, Any]:
            return {k: {"type": str(v.type.value), "shape": list(v.shape)} for k, v in d.items()}

        return {
            "policy_type": self.cfg.type,
            "input_features": feats(self.cfg.input_features),
            "output_features": feats(self.cfg.output_features),
            "n_obs_steps": self.n_obs_steps,
            "n_action_steps": int(getattr(self.cfg, "n_action_steps", 1) or 1),
            "lerobot": getattr(lerobot, "__version__", "?"),
            "torch": self.torch.__version__,
            "device": str(self.device),
        }

    def reset(self) -> None:
        self.policy.reset()

    def _batch(self, frame: dict[str, np.ndarray], task: str) -> dict[str, Any]:
        batch = self.pre(self._prepare(dict(frame), self.device, task))
        batch.pop("action", None)  # the pipeline's empty action slot (select_action drops it)
        return batch

    def chunk(self, stacked: dict[str, np.ndarray], task: str) -> np.ndarray:
        torch = self.torch
        steps = {len(v) for v in stacked.values()}
        if steps != {self.n_obs_steps}:
            raise ValueError(f"expected {self.n_obs_steps} observation steps, got {sorted(steps)}")
        frames = [{k: v[i] for k, v in stacked.items()} for i in range(self.n_obs_steps)]
        with torch.inference_mode():
            self.policy.reset()
            if self.queued:
                images = list(getattr(self.cfg, "image_features", {}) or {})
                for frame in frames:
                    batch = self._batch(frame, task)
                    if images:
                        batch["observation.images"] = torch.stack([batch[k] for k in images], -4)
                    self.policy._queues = self._populate(self.policy._queues, batch)
            else:
                batch = self._batch(frames[-1], task)
            actions = self.policy.predict_action_chunk(batch)
            actions = self.post(actions)
        out = actions.detach().to("cpu").float().numpy()
        return out.reshape(-1, out.shape[-1])


def serve(runner: Any, requests: Any, replies: Any) -> int:
    """Answer requests until ``close`` or EOF. An error in one request is reported, not fatal."""
    while True:
        try:
            header, arrays = protocol.receive(requests)
        except protocol.ProtocolError:
            return 0  # Tether closed the pipe: it is gone or done
        op = header["op"]
        try:
            if op == "infer":
                t0 = time.perf_counter()
                chunk = runner.chunk(arrays, str(header.get("task") or ""))
                ms = (time.perf_counter() - t0) * 1e3
                protocol.send(replies, {"op": "chunk", "ms": ms}, {"action": chunk})
            elif op == "reset":
                runner.reset()
                protocol.send(replies, {"op": "ok"})
            elif op == "close":
                protocol.send(replies, {"op": "ok"})
                return 0
            else:
                protocol.send(replies, {"op": "error", "message": f"unknown request '{op}'"})
        except Exception as exc:  # noqa: BLE001 (reported to Tether, which decides)
            traceback.print_exc()
            protocol.send(replies, {"op": "error", "message": f"{type(exc).__name__}: {exc}"})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's)")
    args = ap.parse_args(argv)
    requests, replies = _protocol_streams()
    try:
        import torch

        if args.threads > 0:
            torch.set_num_threads(args.threads)
        runner = LerobotRunner(args.checkpoint, args.device)
    except Exception as exc:  # noqa: BLE001 (one sentence for Tether to show)
        traceback.print_exc()
        protocol.send(replies, {"op": "error", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    protocol.send(replies, {"op": "ready", "format": protocol.FORMAT, **runner.describe()})
    return serve(runner, requests, replies)


if __name__ == "__main__":
    sys.exit(main())
