"""The batched world as a Stable-Baselines3 ``VecEnv`` (one process, no copies)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv


class NavVecEnv(VecEnv):  # type: ignore[misc]
    """SB3's view of a batched world (tether.sim.nav_world.BatchedNavWorld, or the swarm
    world tether.sim.quadrotor.swarm_world: one agent per drone): auto-reset,
    ``terminal_observation`` and ``TimeLimit.truncated`` in the infos as its DummyVecEnv
    gives them. Actions in [-1, 1]^action_dim."""

    def __init__(self, world: Any, action_dim: int = 2) -> None:
        self.world = world
        dim = int(world.feature_info()["dim"])
        obs_space = gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)
        act_space = gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)
        super().__init__(world.n, obs_space, act_space)
        self._actions = np.zeros((world.n, action_dim), np.float32)

    def reset(self) -> np.ndarray:
        reset_all = getattr(self.world, "reset_all", None)
        if reset_all is not None:
            return np.asarray(reset_all())
        for i in range(self.world.n):
            self.world._reset_one(i)
        return self.world.observe()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        obs, reward, terminated, truncated, infos = self.world.step(self._actions)
        return obs, reward, terminated | truncated, infos

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        value = getattr(self.world, attr_name, None)  # render_mode: None, no window
        return [value] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.world, attr_name, value)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kw: Any) -> list[Any]:
        raise NotImplementedError("the batched world has no per-env methods")

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def _indices(self, indices: Any) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)
