"""Evaluate a planner in the batched world: one episode per base, per density level."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core import registry
from tether.core.robot_kinds import MobileBaseDescription
from tether.policies.nav.config import WORLD


def outcome_summary(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates of success / collision / timeout, and the mean time and path length of the
    successful episodes."""
    n = max(1, len(episodes))
    wins = [e for e in episodes if e["outcome"] == "success"]
    out: dict[str, Any] = {
        "episodes": len(episodes),
        **{
            f"{k}_rate": sum(e["outcome"] == k for e in episodes) / n
            for k in ("success", "collision", "timeout")
        },
    }
    if wins:
        out["mean_time_s"] = round(float(np.mean([e["time_s"] for e in wins])), 2)
        out["mean_path_length_m"] = round(float(np.mean([e["path_length_m"] for e in wins])), 2)
    return out


def evaluate_in_world(
    act: Callable[[np.ndarray], np.ndarray],
    cfg: Any,
    robot: MobileBaseDescription,
    control_hz: float,
    episodes: int,
    seed: int,
) -> dict[str, dict[str, Any]]:
    """``act``: features (B, F) -> twist (B, 2) in robot units. For each level of
    ``cfg.densities``: ``episodes`` bases, fresh layouts from ``seed``, each run to the end
    of its first episode (the domain randomisation as in training)."""
    result = {}
    for k, level in enumerate(cfg.densities):
        wcfg = cfg.model_copy(
            update={"densities": (level,), "density_weights": None, "layout_pool": 0}
        )
        world = registry.load("env", WORLD)(wcfg, robot, episodes, control_hz, seed=seed + k)
        scale = np.array([world.v_max, world.w_max])
        first: list[dict[str, Any] | None] = [None] * episodes
        obs = world.observe()
        while any(f is None for f in first):
            obs, _, _, _, infos = world.step(act(obs) / scale)
            for i, info in enumerate(infos):
                if "outcome" in info and first[i] is None:
                    first[i] = {key: info[key] for key in ("outcome", "time_s", "path_length_m")}
        result[level] = outcome_summary([f for f in first if f is not None])
    return result
