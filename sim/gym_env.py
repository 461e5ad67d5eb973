"""``make_env``: a ``gymnasium.Env`` over any SimBackend + Task (what SB3 trains on).

Spaces, for a backend whose spec is ``spec``:
    observation  Box (F,) float32: the backend's ``features(obs)`` when it is a
                 ``LearningView`` (tether.core.protocols; a drone world: BatchedHoverEnv's
                 observation drone by drone), else concat(state, env_state)
    action       Box [-1, 1]^(spec.action.dim) float32, mapped by the backend's
                 ``from_normalized`` when it is a LearningView (a drone world in
                 ``rotor_rpm``: rpm = hover_rpm (1 + 0.5 a)), else linearly onto the spec's
                 [low, high]. NaN -> 0, clipped to [-1, 1] before reaching the backend.
Episode: ``terminated`` = the task's ``failed`` (a crash), or success where success ends the
episode (``task.success_terminates``, true for arm tasks); ``truncated`` = the task's time
limit. ``info["is_success"]`` is the task's success at that step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from tether.core import registry
from tether.core.config import ComponentConfig, ExperimentConfig, load_config
from tether.core.errors import ConfigError
from tether.core.experiment import build_task, max_episode_steps
from tether.core.protocols import LearningView, SimBackend


class TetherEnv(gym.Env):  # type: ignore[misc]
    """Gymnasium view of one SimBackend and its task; see the module docstring."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, backend: SimBackend, task: Any, max_steps: int, render_mode: str | None = None
    ) -> None:
        self.backend = backend
        self.task = task
        self.spec_robot = backend.spec
        self.max_steps = max_steps
        self.render_mode = render_mode
        spec = backend.spec
        # the backend's own view for learners, when it has one (a drone world)
        self._view = backend if isinstance(backend, LearningView) else None
        self._low = spec.action.low_array().astype(np.float64)
        self._high = spec.action.high_array().astype(np.float64)
        self._success_terminates = bool(getattr(task, "success_terminates", True))
        dim = spec.action.dim
        self.action_space = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
        obs = self._observation(backend.observe())
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, obs.shape, np.float32)
        self._steps = 0
        self.metadata = {**self.metadata, "render_fps": spec.control_hz}

    def _observation(self, obs: Any) -> np.ndarray:
        if self._view is not None:
            return self._view.features(obs)
        parts = [obs["state"], obs["env_state"]] if "env_state" in obs else [obs["state"]]
        return np.concatenate(parts).astype(np.float32)

    def to_backend_action(self, action: np.ndarray) -> np.ndarray:
        """Normalized action (dim,) in [-1, 1] -> the backend's action (dim,) float64."""
        if self._view is not None:
            return self._view.from_normalized(action)
        a = np.clip(np.nan_to_num(np.asarray(action, np.float64), nan=0.0), -1.0, 1.0)
        return self._low + (a + 1.0) * 0.5 * (self._high - self._low)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``seed`` goes to the backend as is (the same episode as ``backend.reset(seed)``);
        without one, a seed is drawn from the env's generator."""
        super().reset(seed=seed)
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31 - 1))
        obs = self.backend.reset(episode_seed)
        self._steps = 0
        return self._observation(obs), {"seed": episode_seed}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        res = self.backend.step(self.to_backend_action(action))
        self._steps += 1
        success = bool(res.info.get("is_success", res.terminated))
        failed = bool(res.info.get("failed", False))
        terminated = failed or (success and self._success_terminates)
        truncated = not terminated and (bool(res.truncated) or self._steps >= self.max_steps)
        info = {"is_success": success, "failed": failed, "sim_time": self.backend.sim_time}
        return self._observation(res.observation), float(res.reward), terminated, truncated, info

    def render(self) -> np.ndarray | None:
        cams = self.backend.spec.cameras
        return self.backend.render(cams[0].name) if cams else None

    def close(self) -> None:
        self.backend.close()


def make_env(
    source: ExperimentConfig | str | Path | ComponentConfig,
    backend: SimBackend | None = None,
    *,
    overrides: list[str] | None = None,
    render_mode: str | None = None,
) -> TetherEnv:
    """A gymnasium.Env for an experiment (config, or YAML path + dotted ``overrides``), or for
    a task config on a given ``backend`` that can swap its task (``set_task``: drone worlds).

    ``backend``: use this backend instead of building ``source.sim``; with an experiment it
    must have been built with the experiment's task, with a task config the task is
    attached to it. The env owns the backend: ``close()`` closes it.
    """
    if isinstance(source, str | Path):
        source = load_config(source, overrides)
    if isinstance(source, ExperimentConfig):
        if backend is None:
            task = build_task(source)
            backend = registry.build("sim", source.sim, robot=source.robot, task=task)
        else:
            task = getattr(backend, "task", None)
        steps = max_episode_steps(source)
    elif isinstance(source, ComponentConfig):
        if backend is None or not hasattr(backend, "set_task"):
            raise ConfigError(
                "make_env(task_config, backend) needs a backend that can swap its task "
                "(set_task: drone worlds); for other robots pass an experiment config"
            )
        task = registry.build("task", source)
        backend.set_task(task)  # type: ignore[attr-defined]
        backend.reset(0)
        steps = max(1, round(float(task.max_duration_s) * backend.spec.control_hz))
    else:
        raise ConfigError(f"make_env: expected an experiment or a task config, got {source!r}")
    return TetherEnv(backend, task, steps, render_mode)
