"""Evaluate a swarm policy in the batched swarm world: one episode per world, per size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core import registry
from tether.policies.swarm.config import WORLD


def swarm_summary(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates of success / collision / crash / timeout, mean least separation, mean time of
    the successful episodes."""
    n = max(1, len(episodes))
    out: dict[str, Any] = {
        "episodes": len(episodes),
        **{
            f"{k}_rate": sum(e["outcome"] == k for e in episodes) / n
            for k in ("success", "collision", "crash", "timeout")
        },
    }
    if episodes:
        out["mean_min_separation_m"] = round(
            float(np.mean([e["min_separation_m"] for e in episodes])), 3
        )
    wins = [e["time_s"] for e in episodes if e["outcome"] == "success"]
    if wins:
        out["mean_time_s"] = round(float(np.mean(wins)), 2)
    return out


def evaluate_in_world(
    act: Callable[[np.ndarray], np.ndarray],
    cfg: Any,
    robot: Any,
    sizes: tuple[int, ...],
    episodes: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """``act``: features (M, F) -> normalised velocity (M, 3). For each swarm size,
    ``episodes`` worlds (scenarios drawn from ``cfg.scenarios``), each run to the end of its
    first episode."""
    result = {}
    for k, n in enumerate(sizes):
        wcfg = cfg.model_copy(update={"sizes": (n,), "drones_per_size": n * episodes})
        world = registry.load("env", WORLD)(wcfg, robot, seed=seed + 7919 * k)
        first: list[dict[str, Any] | None] = [None] * world.groups[0].b
        obs = world.observe()
        while any(f is None for f in first):
            obs, _, _, _, infos = world.step(act(obs))
            for w in range(len(first)):
                episode = infos[w * n].get("swarm_episode")
                if episode is not None and first[w] is None:
                    first[w] = episode
        result[str(n)] = swarm_summary([f for f in first if f is not None])
    return result
