"""The task-dependent part of a backend's step() and an arm's observation, shared by every
backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tether.core.types import IMAGE_PREFIX, Observation, StepResult


def arm_observation(
    sim: Any, state: np.ndarray, velocity: np.ndarray, objects: Sequence[str]
) -> Observation:
    """An arm backend's observation: ``state`` / ``velocity`` (arm + fingers), ``env_state``
    (7 per task object: position + wxyz quaternion, ``sim.body_pose``), ``ee_pose`` (7,,
    ``sim.ee_pose``), the cameras with ``sim.cfg.render_in_obs``, the task's instruction,
    stamped with ``sim.sim_time``."""
    env = [np.concatenate(sim.body_pose(name)) for name in objects]
    pos, quat = sim.ee_pose()
    return assemble_arm_observation(
        sim,
        {
            "state": np.asarray(state, np.float32),
            "velocity": np.asarray(velocity, np.float32),
            "env_state": (np.concatenate(env) if env else np.zeros(0)).astype(np.float32),
            "ee_pose": np.concatenate([pos, quat]).astype(np.float32),
        },
    )


def assemble_arm_observation(sim: Any, data: dict[str, np.ndarray]) -> Observation:
    """``data`` (the four float32 arrays of :func:`arm_observation`, fresh: the caller keeps
    no reference) plus the cameras, the instruction and the stamp: for a backend that reads
    its state faster than through ``body_pose`` / ``ee_pose``."""
    if sim.cfg.render_in_obs:
        for cam in sim.spec.cameras:
            data[IMAGE_PREFIX + cam.name] = sim.render(cam.name)
    # the sentence the task's episode asks for (a language-conditioned task), else None
    instruction = getattr(sim.task, "instruction", None)
    return Observation(data, stamp_ns=round(sim.sim_time * 1e9), instruction=instruction)


def score_step(sim: Any, obs: Observation, max_duration_s: float | None) -> StepResult:
    """StepResult for ``obs`` after a step: reward and success from ``sim.task`` (if any),
    truncated once ``sim.sim_time`` reaches the task's time limit.

    A task with ``score(sim) -> (reward, success)`` gives both from one pass over the state
    (what its ``reward`` and ``success`` return, computed once: the step's hot path).
    Optional hooks: ``track(sim)`` runs first at every step (per-episode bookkeeping: a
    base's path length); ``failure(sim) -> str | None`` names a failure that ends the
    episode (truncated, ``info["failure"]``: an obstacle course's "collision") unless the
    step succeeded."""
    reward, success = 0.0, False
    task = sim.task
    reason = None
    if task is not None:
        track = getattr(task, "track", None)
        if track is not None:
            track(sim)
        score = getattr(task, "score", None)
        if score is not None:
            r, s = score(sim)
            reward, success = float(r), bool(s)
        else:
            reward = float(task.reward(sim))
            success = bool(task.success(sim))
        failure = getattr(task, "failure", None)
        if failure is not None and not success:
            reason = failure(sim)
    truncated = max_duration_s is not None and sim.sim_time >= max_duration_s - 1e-9
    info: dict[str, Any] = {"is_success": success}
    if reason:
        info["failure"] = reason
    return StepResult(obs, reward, success, bool(truncated or reason), info)
