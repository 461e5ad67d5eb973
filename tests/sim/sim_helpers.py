"""Test helpers shared by the backend tests."""

from __future__ import annotations

from typing import Any


def expert_episode(sim: Any, expert: Any, seed: int) -> bool:
    """Run one seeded episode of ``expert`` on ``sim`` in-process; True if it succeeded."""
    obs = sim.reset(seed)
    expert.reset()
    while True:
        chunk = expert.act(obs)
        assert chunk.actions.shape == (1, sim.spec.action.dim) and chunk.t0_ns == obs.stamp_ns
        result = sim.step(chunk.actions[0])
        obs = result.observation
        if result.terminated:
            return True
        if result.truncated:
            return False
