"""Residual RL on peg-in-hole (issue #14): the shipped behaviour-cloned base against the
shipped base + residual, as a user evaluates them, plus the fine-tuning runs' budgets and
the deployed model's latency.

In one run, on seeds no training or tuning used (1000 on):
- success of ``models/panda_insert_diffusion`` (the base) and ``models/panda_insert_residual``
  (base + residual) in-process on 100 seeds each (`tether eval models/<name>`);
- success of base + residual over ROS 2 (the graph `tether up` runs, lockstep) on 20 seeds;
- the fine-tuning runs that made the shipped residual (``models/panda_insert_residual/
  train.json`` and, when present, ``finetune_runs.json`` there: each algorithm's evaluation
  curve) -> env steps and wall-clock to 90 % and 95 %; those runs take up to an hour and
  are not repeated here;
- latency of the deployed model, one onnxruntime thread: the base graph per chunk, the
  residual graph per control step (p50 / p99), and the fused alternative.

Writes benchmarks/results/residual_rl.json.

    python benchmarks/residual_rl.py [--episodes N] [--ros-episodes N]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from common import write_result  # noqa: E402

from tether.cli.train import EvalOptions  # noqa: E402
from tether.policies.evaluation import evaluate_model  # noqa: E402
from tether.policies.residual.latency import measure  # noqa: E402

SEED = 1000
BASE = REPO / "models" / "panda_insert_diffusion"
RESIDUAL = REPO / "models" / "panda_insert_residual"


def first_reaching(evals: list[list[float]], target: float) -> dict[str, float] | None:
    """The first evaluation (env steps, wall s, success, ...) at or above ``target``."""
    for e in evals:
        if e[2] >= target:
            return {"env_steps": int(e[0]), "wall_s": round(float(e[1]), 1)}
    return None


def training_runs(folder: Path) -> list[dict[str, Any]]:
    """The fine-tuning runs recorded beside the shipped residual: steps / wall to 90 and 95 %."""
    runs = []
    path = folder / "finetune_runs.json"
    recorded = json.loads(path.read_text())["runs"] if path.is_file() else []
    for run in recorded:
        evals = run["evals"]
        runs.append(
            {
                "run": run["run"],
                "what": run.get("what", ""),
                "base": run.get("base", ""),
                "on_shipped_base": str(run.get("base", "")).startswith(
                    "models/panda_insert_diffusion"
                ),
                "algorithm": run["algorithm"],
                "reward": run["reward"],
                "command": run["command"],
                "env_steps": run["env_steps"],
                "wall_s": run["wall_s"],
                "base_success": run["base_success"],
                "best_eval_success": max((e[2] for e in evals), default=0.0),
                "eval_episodes": run["eval_episodes"],
                "to_90": first_reaching(evals, 0.9),
                "to_95": first_reaching(evals, 0.95),
                "shipped": run.get("shipped", False),
            }
        )
    return runs


def evaluate(model: Path, episodes: int, ros: bool) -> dict[str, Any]:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        opts = EvalOptions(episodes=episodes, seed=SEED, out=Path(out), video=False, ros=ros)
        summary = evaluate_model(model, opts)
    return {
        "model": str(model.relative_to(REPO)),
        "mode": "ros2" if ros else "in_process",
        "episodes": summary["episodes"],
        "seeds": [SEED, SEED + episodes - 1],
        "successes": summary["successes"],
        "success_rate": summary["success_rate"],
        "failed_seeds": [e["seed"] for e in summary["per_episode"] if not e["success"]],
        "wall_s": round(time.monotonic() - t0, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=100, help="in-process episodes per model")
    ap.add_argument("--ros-episodes", type=int, default=20, help="episodes over ROS 2")
    args = ap.parse_args()
    cases = []
    for model in (BASE, RESIDUAL):
        cases.append(evaluate(model, args.episodes, ros=False))
        print(f"{model.name} in-process: {cases[-1]['successes']}/{args.episodes}", flush=True)
    if args.ros_episodes:
        cases.append(evaluate(RESIDUAL, args.ros_episodes, ros=True))
        print(f"{RESIDUAL.name} over ROS 2: {cases[-1]['successes']}/{args.ros_episodes}")
    latency = measure(RESIDUAL, steps=400)
    meta = json.loads((RESIDUAL / "model.json").read_text())
    write_result(
        "residual_rl",
        {
            "how": "tether eval models/<name> --episodes N --seed 1000 [--ros]; latency: "
            "tether.policies.residual.latency.measure (one onnxruntime thread)",
            "task": meta["experiment"]["task"],
            "cases": cases,
            "training": training_runs(RESIDUAL),
            "latency_ms": latency,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
