"""The task-dependent part of a backend's step(), shared by every backend."""

from __future__ import annotations

from typing import Any

from tether.core.types import Observation, StepResult


def score_step(sim: Any, obs: Observation, max_duration_s: float | None) -> StepResult:
    """StepResult for ``obs`` after a step: reward and success from ``sim.task`` (if any),
    truncated once ``sim.sim_time`` reaches the task's time limit."""
    reward, success = 0.0, False
    if sim.task is not None:
        reward = float(sim.task.reward(sim))
        success = bool(sim.task.success(sim))
    truncated = max_duration_s is not None and sim.sim_time >= max_duration_s - 1e-9
    return StepResult(obs, reward, success, bool(truncated), {"is_success": success})
