"""Success of a hover policy on N drones of a batched simulator (one 15 s episode each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core.protocols import BatchedEnv

# obs (N, 18) float32 -> normalized actions (N, 4)
BatchPolicy = Callable[[np.ndarray], np.ndarray]


def evaluate_batched(
    act: BatchPolicy,
    env: BatchedEnv,
    seed: int = 0,
    *,
    give_up_below: float | None = None,
    keep_traces: int = 0,
) -> dict[str, Any]:
    """Run one episode of ``env.episode_steps`` control steps on every drone of ``env``.

    A drone succeeds when it never crashes and stays within ``env.success_radius`` (10 cm)
    for the last ``env.success_steps`` steps (10 s). ``give_up_below``: stop early once
    fewer than that fraction can still succeed; ``success_rate`` is then that fraction, an
    upper bound (``gave_up_at_s`` is set). ``keep_traces``: return the positions (T, k, 3) m of the first k drones.
    """
    obs = env.reset(seed)
    n, steps = env.n, env.episode_steps
    window = env.success_steps
    radius = env.success_radius
    dist = np.zeros((steps, n), dtype=np.float32)
    alive = np.ones(n, dtype=bool)
    traces = np.zeros((steps, keep_traces, 3), dtype=np.float32)
    done_steps = steps
    possible_rate = 1.0
    for t in range(steps):
        obs, _, terminated, _, info = env.step(act(obs))
        dist[t] = info["distance"]
        alive &= ~terminated
        if keep_traces:
            traces[t] = info["final_obs"][:keep_traces, 0:3] + env.target
        if give_up_below is not None and t >= steps - window:
            # drones outside the ball during the success window can no longer succeed
            possible = alive & np.all(dist[steps - window : t + 1] <= radius, axis=0)
            possible_rate = float(possible.mean())
            if possible_rate < give_up_below:
                done_steps = t + 1
                break
    if done_steps < steps:
        success_rate = possible_rate  # at most this many could still have succeeded
    else:
        held = np.all(dist[-window:] <= radius, axis=0) if steps >= window else False
        success_rate = float((alive & held).mean())
    final = dist[done_steps - 1]
    out: dict[str, Any] = {
        "drones": n,
        "episode_s": steps * env.control_dt,
        "success_rate": success_rate,
        "crash_rate": float(1.0 - alive.mean()),
        "final_distance_m": {
            "median": float(np.median(final)),
            "p90": float(np.percentile(final, 90)),
        },
        "gave_up_at_s": None if done_steps == steps else done_steps * env.control_dt,
    }
    if keep_traces:
        out["traces"] = traces[:done_steps]
        out["time_s"] = (np.arange(done_steps) + 1) * env.control_dt
    return out
