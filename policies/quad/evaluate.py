"""Evaluate a hover policy from the documented initial-state distribution.

``batched``: N drones at once in the numpy simulator (2 ms RK4 physics, the reference
model); ``pybullet`` / ``mujoco``: full physics through the gymnasium view of the
experiment (``simulators.engine_env``), one
episode per seed (``seed + k``), the same distribution and success rule (docs/quadrotor.md).
Writes ``summary.json`` and ``trajectories.png`` (distance to the target over time).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import TetherError
from tether.policies.quad.batched_eval import evaluate_batched
from tether.policies.quad.model import HoverActor
from tether.policies.quad.simulators import engine_env, hover_env

SIMS = ("batched", "pybullet", "mujoco")
DEFAULT_EXPERIMENT = "configs/experiments/quad_hover.yaml"


def numpy_policy(model: HoverActor) -> Callable[[np.ndarray], np.ndarray]:
    """The policy as numpy arithmetic (fast at batch 1): features (N, 18) -> actions (N, 4)."""
    layers = [m for m in model.actor if hasattr(m, "weight")]
    weights = [
        (m.weight.detach().numpy().T.astype(np.float64), m.bias.detach().numpy()) for m in layers
    ]
    scale = model.feature_scale.numpy().astype(np.float64)

    def act(obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float64) * scale
        for i, (w, b) in enumerate(weights):
            h = h @ w + b
            if i < len(weights) - 1:
                h = np.tanh(h)
        return h

    return act


def evaluate_engine(
    act: Callable[[np.ndarray], np.ndarray],
    sim: str,
    episodes: int,
    seed: int,
    experiment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Episodes of the ``hover`` task in PyBullet or MuJoCo through ``engine_env``."""
    from tether.core.config import apply_overrides, parse_experiment, read_yaml

    data = experiment if experiment is not None else read_yaml(DEFAULT_EXPERIMENT)
    data = apply_overrides(data, [f"sim.type={sim}", "sim.cameras=[]", "task.type=hover"])
    data.pop("train", None)
    cfg = parse_experiment(data, f"{sim} evaluation")
    env = engine_env(cfg)
    successes, crashes, finals, traces = [], [], [], []
    try:
        for k in range(episodes):
            obs, _ = env.reset(seed=seed + k)
            dist = [float(np.linalg.norm(obs[0:3]))]
            terminated = truncated = False
            info: dict[str, Any] = {}
            while not (terminated or truncated):
                action = act(obs[None, :])[0]
                obs, _, terminated, truncated, info = env.step(action.astype(np.float32))
                dist.append(float(np.linalg.norm(obs[0:3])))
            successes.append(bool(info.get("is_success")) and not info.get("failed", False))
            crashes.append(bool(info.get("failed", False)))
            finals.append(dist[-1])
            traces.append(np.asarray(dist, dtype=np.float32))
    finally:
        env.close()
    dt = 1.0 / float(cfg.sim.control_hz)  # type: ignore[attr-defined]
    return {
        "episodes": episodes,
        "success_rate": float(np.mean(successes)),
        "crash_rate": float(np.mean(crashes)),
        "final_distance_m": {
            "median": float(np.median(finals)),
            "p90": float(np.percentile(finals, 90)),
        },
        "per_episode": [
            {"seed": seed + k, "success": s, "crashed": c, "final_distance_m": round(f, 4)}
            for k, (s, c, f) in enumerate(zip(successes, crashes, finals, strict=True))
        ],
        "_dist": traces,
        "_dt": dt,
    }


def evaluate_policy(
    act: Callable[[np.ndarray], np.ndarray],
    sim: str,
    episodes: int,
    seed: int,
    out: Path | None,
    experiment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Success rate of ``act`` in ``sim`` (one of SIMS); writes summary.json + PNG to ``out``."""
    if sim not in SIMS:
        raise TetherError(
            f"unknown simulator '{sim}' for quad_hover (choose from {', '.join(SIMS)})"
        )
    start = time.perf_counter()
    if sim == "batched":
        env = hover_env(episodes, seed=seed)
        res = evaluate_batched(act, env, seed=seed, keep_traces=min(episodes, 50))
        traces = res.pop("traces")
        res.pop("time_s")
        res["_dist"] = list(np.linalg.norm(traces - env.target, axis=2).T)
        res["_dt"] = env.control_dt
    else:
        res = evaluate_engine(act, sim, episodes, seed, experiment)
    dist, dt = res.pop("_dist"), res.pop("_dt")
    res = {
        "sim": sim,
        "seed": seed,
        "success_rule": "within 0.1 m of the target for the last 10 s of a 15 s episode, no crash",
        "initial_states": "docs/quadrotor.md (hover): +-0.5 m, +-30 deg roll/pitch, any yaw, "
        "+-0.5 m/s, +-1 rad/s",
        **res,
        "wall_s": round(time.perf_counter() - start, 2),
    }
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(res, indent=2))
        plot_distances(
            dist, dt, out / "trajectories.png", f"{sim}: {res['success_rate']:.0%} success"
        )
    return res


def plot_distances(dist: list[np.ndarray], dt: float, path: Path, title: str) -> None:
    """Distance to the target (m) over time for each episode, log scale, with the 10 cm bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for d in dist[:100]:
        ax.plot(np.arange(len(d)) * dt, np.maximum(d, 1e-4), lw=0.6, alpha=0.6)
    ax.axhline(0.1, color="k", ls="--", lw=1, label="10 cm")
    ax.axvline(5.0, color="gray", ls=":", lw=1, label="success window starts")
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("distance to target (m)")
    ax.set_title(title)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
