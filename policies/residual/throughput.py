"""Env steps per second of the training envs, ``finetune.workers`` inline against local
workers (the numbers in docs/residual_rl.md "Parallel rollouts").

    python -m tether.policies.residual.throughput [EXPERIMENT] [--vec-steps 1000] \
        [--ppo-steps 8000] [--local-workers 2] [--eval-episodes 0] [--set finetune.n_envs=4 ...]

Measurements per setting, after the workers are up and one reset:
- ``step``: ``venv.step`` with zero residuals (the envs alone, as a rollout sees them);
- ``ppo``: ``PPO.learn`` for ``--ppo-steps`` env steps (rollouts + updates, the trainer's
  loop without evaluations), the experiment's PPO settings;
- ``eval`` (``--eval-episodes`` > 0): a run's evaluation of a fresh residual (torch seed 0)
  on that many seeds from ``finetune.eval_seed`` (evaluation.py): inline in one env of the
  trainer's process, with workers on the workers; its seconds and successes (the same
  successes in every setting: the same episodes).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.config import load_config
from tether.policies.residual.env import ResidualEnv, observation_stats
from tether.policies.residual.workers import make_venv, resolve_workers

REACH = Path(__file__).resolve().parents[2] / "configs/experiments/panda_reach_residual.yaml"


def measure(
    experiment: Path,
    workers: str,
    n_workers: int,
    vec_steps: int,
    ppo_steps: int,
    overrides: list[str] | None = None,
    eval_episodes: int = 0,
) -> dict[str, Any]:
    import torch

    from tether.policies.residual import ppo
    from tether.policies.residual.evaluation import evaluate
    from tether.policies.residual.model import NumpyNormaliser
    from tether.policies.residual.trainer import fresh_model

    torch.set_num_threads(1)
    extra = [f"finetune.workers={workers}", f"finetune.n_workers={n_workers}"]
    cfg = load_config(experiment, [*(overrides or []), *extra])
    fcfg = cfg.finetune
    probe = ResidualEnv(cfg, fcfg, None)
    offset, scale = observation_stats(probe, 1, 50_000, probe.base.contract)
    torch.manual_seed(0)
    model = fresh_model(probe, fcfg, offset, scale)
    probe.normaliser = NumpyNormaliser(model)
    t0 = time.perf_counter()
    venv = make_venv(cfg, fcfg, probe.normaliser, squash=True)
    start_s = time.perf_counter() - t0
    try:
        venv.seed(0)
        venv.reset()
        zeros = np.zeros((venv.num_envs, *venv.action_space.shape), np.float32)
        t0 = time.perf_counter()
        for _ in range(vec_steps):
            venv.step(zeros)
        step_rate = vec_steps * venv.num_envs / (time.perf_counter() - t0)
        ppo_rate = None
        if ppo_steps > 0:
            algo = ppo.make_ppo(venv, fcfg, model)
            t0 = time.perf_counter()
            algo.learn(total_timesteps=ppo_steps)
            ppo_rate = algo.num_timesteps / (time.perf_counter() - t0)
        evaluation = None
        if eval_episodes > 0:
            t0 = time.perf_counter()
            res = evaluate(probe, model, eval_episodes, fcfg.eval_seed, venv)
            evaluation = {
                "episodes": eval_episodes,
                "s": round(time.perf_counter() - t0, 2),
                "successes": round(res["success_rate"] * eval_episodes),
                "control_steps": res["env_steps"],
            }
    finally:
        venv.close()
        probe.close()
    n = resolve_workers(fcfg) if workers != "inline" else 0
    return {
        "workers": workers,
        "n_workers": n,
        "n_envs": fcfg.n_envs,
        "start_s": round(start_s, 2),
        "step_env_steps_per_s": round(step_rate),
        "ppo_env_steps_per_s": round(ppo_rate) if ppo_rate else None,
        "eval": evaluation,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", nargs="?", type=Path, default=REACH)
    parser.add_argument("--vec-steps", type=int, default=1000)
    parser.add_argument("--ppo-steps", type=int, default=8000)
    parser.add_argument("--local-workers", type=int, nargs="+", default=[2])
    parser.add_argument("--eval-episodes", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], help="config overrides (a.b=value)")
    args = parser.parse_args(argv)
    print(f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.1f}", flush=True)
    settings = [("inline", 0)] + [("local", w) for w in args.local_workers]
    for workers, n in settings:
        row = measure(
            args.experiment, workers, n, args.vec_steps, args.ppo_steps, args.set,
            args.eval_episodes,
        )  # fmt: skip
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
