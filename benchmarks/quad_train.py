"""Learning to hover: the batched path (b) and SB3 PPO on PyBullet (a), side by side.

For each path: `tether train configs/experiments/quad_hover.yaml` (train.path=...) until the
policy keeps 95 % of 1000 fresh drones within 10 cm for the last 10 s of 15 s episodes (or
the path's time budget runs out), then the checkpoint is evaluated from the documented
initial-state distribution in the numpy reference model (1000 drones, 2 ms physics), PyBullet
and MuJoCo (``--episodes`` each). Reports wall clock to the bar, env steps, success rates.
Writes benchmarks/results/quad_train.json (checkpoints and plots under runs/bench_quad/).

    .venv/bin/python benchmarks/quad_train.py                 # both paths, 100 episodes
    .venv/bin/python benchmarks/quad_train.py --sb3-budget 0  # path b only
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("MUJOCO_GL", "egl")

from common import write_result  # noqa: E402

from tether.cli.train import EvalOptions  # noqa: E402
from tether.core.config import load_config  # noqa: E402

EXPERIMENT = str(REPO / "configs/experiments/quad_hover.yaml")
OUT = REPO / "runs" / "bench_quad"


def run_path(path: str, overrides: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from tether.policies.quad.trainer import QuadHoverTrainer

    out = OUT / path
    shutil.rmtree(out, ignore_errors=True)
    cfg = load_config(EXPERIMENT, [f"train.path={path}", f"train.seed={args.seed}", *overrides])
    train = QuadHoverTrainer.train(cfg, out, resume=False)
    result: dict[str, Any] = {
        "train": {
            "solved": train["solved"],
            "wall_s_to_bar": train["solved_at"]["wall_s"] if train["solved"] else None,
            "env_steps_to_bar": train["solved_at"]["env_steps"] if train["solved"] else None,
            "wall_s": train["wall_s"],
            "env_steps": train["env_steps"],
            "last_eval_success": train["last_eval_success"],
            "time_budget_s": cfg.train.time_budget_s,  # type: ignore[union-attr]
        },
        "success": {},
        "checkpoint": str(out.relative_to(REPO)),
    }
    # an unsolved policy gets a short look in the engines only
    episodes = args.episodes if train["solved"] else min(args.episodes, 10)
    for sim, n in (("batched", args.drones), ("pybullet", episodes), ("mujoco", episodes)):
        print(
            f"== {path}: evaluating in {sim} ({n} {'drones' if sim == 'batched' else 'episodes'})"
        )
        opts = EvalOptions(episodes=n, seed=args.seed + 1000, sim=sim, out=out / f"eval_{sim}")
        ev = QuadHoverTrainer.evaluate(out, opts)
        result["success"][sim] = {
            "success_rate": ev["success_rate"],
            "crash_rate": ev["crash_rate"],
            "episodes": ev.get("episodes", ev.get("drones")),
            "final_distance_m_median": ev["final_distance_m"]["median"],
            "eval_wall_s": ev["wall_s"],
        }
        print(f"   success {ev['success_rate']:.1%}")
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--episodes", type=int, default=100, help="episodes per engine (PyBullet, MuJoCo)"
    )
    p.add_argument("--drones", type=int, default=1000, help="drones in the numpy reference eval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batched-budget", type=float, default=300.0, help="s, path (b) time budget")
    p.add_argument("--sb3-budget", type=float, default=600.0, help="s, path (a) budget; 0 skips it")
    p.add_argument("--sb3-envs", type=int, default=2, help="PyBullet envs (SubprocVecEnv)")
    args = p.parse_args()
    results: dict[str, Any] = {
        "target": {
            "wall_s": 60.0,
            "success_pybullet": 0.9,
            "bar": "within 0.1 m of the target for the last 10 s of a 15 s episode, from "
            "+-0.5 m, +-30 deg roll/pitch, any yaw, +-0.5 m/s, +-1 rad/s (docs/quadrotor.md)",
        },
        "paths": {},
    }
    results["paths"]["batched"] = run_path(
        "batched", [f"train.time_budget_s={args.batched_budget}"], args
    )
    if args.sb3_budget > 0:
        results["paths"]["sb3_ppo"] = run_path(
            "sb3_ppo",
            [
                f"train.time_budget_s={args.sb3_budget}",
                f"train.sb3.num_envs={args.sb3_envs}",
                "train.sb3.vec_env=subproc",
            ],
            args,
        )
    write_result("quad_train", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
