"""A stand-in for the LeRobot worker, for the machines without the LeRobot environment (CI).

Run by a fake "LeRobot Python" (tests/policies/test_lerobot_policy.py writes one) in place
of ``policies/lerobot/worker.py``: the same protocol and the same ``serve`` loop, with a numpy
runner instead of LeRobot. Its checkpoint's config.json says what it reads and does:

- ``input_features`` / ``output_features`` / ``n_obs_steps`` / ``n_action_steps``: as
  LeRobot's config.json;
- ``mode``: ``ramp`` (row j = oldest state + j * (newest - oldest): shows which frames
  came), ``hold`` (every row = the newest state, optionally with ``push`` = {index: value}
  written into every row), ``fail`` (an error reply at start), ``crash`` (exit 3 at start),
  ``error`` (an error reply to every inference).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "policies" / "lerobot"))
import protocol  # noqa: E402
import worker  # noqa: E402


class StandinRunner:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.dim = int(cfg["output_features"]["action"]["shape"][0])

    def describe(self) -> dict:
        keys = ("input_features", "output_features", "n_obs_steps", "n_action_steps")
        out = {k: self.cfg[k] for k in keys}
        return {
            **out,
            "policy_type": "standin",
            "lerobot": "standin",
            "torch": "-",
            "device": "cpu",
        }

    def reset(self) -> None:
        pass

    def chunk(self, arrays: dict, task: str) -> np.ndarray:
        if self.cfg["mode"] == "error":
            raise ValueError(f"stand-in refuses (task '{task}')")
        state = arrays["observation.state"][:, : self.dim].astype(np.float32)
        rows = int(self.cfg.get("rows", 8))
        if self.cfg["mode"] == "ramp":
            return state[0] + np.arange(rows, dtype=np.float32)[:, None] * (state[-1] - state[0])
        out = np.repeat(state[-1:], rows, 0)
        for index, value in self.cfg.get("push", {}).items():
            out[:, int(index)] = value
        return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    cfg = json.loads((args.checkpoint / "config.json").read_text())
    requests, replies = worker._protocol_streams()
    print("stand-in LeRobot worker: a line on stdout goes to stderr")  # must not corrupt replies
    if cfg["mode"] == "crash":
        return 3
    if cfg["mode"] == "fail":
        protocol.send(replies, {"op": "error", "message": "no such policy type 'standin'"})
        return 1
    runner = StandinRunner(cfg)
    protocol.send(replies, {"op": "ready", "format": protocol.FORMAT, **runner.describe()})
    return worker.serve(runner, requests, replies)


if __name__ == "__main__":
    sys.exit(main())
