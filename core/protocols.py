"""The interfaces between layers. SI units, REP-103 frames (x forward, y left, z up),
float32 arrays, quaternions as (w, x, y, z)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation, StepResult


@runtime_checkable
class SimBackend(Protocol):
    """A physics simulator of one robot plus task objects.

    A task (reward, success, reset distribution) is a separate object that reads and writes
    state only through ``body_pose`` / ``set_body_pose`` / ``ee_pose``, so one task runs on
    every backend.
    """

    spec: RobotSpec

    def reset(self, seed: int | None = None) -> Observation:
        """Reset robot and task objects; sim time restarts at 0."""
        ...

    def step(self, action: np.ndarray) -> StepResult:
        """Apply one control-rate action of shape ``spec.action.shape`` and advance dt."""
        ...

    def render(self, camera: str) -> np.ndarray:
        """Image of shape (H, W, 3) uint8 from a camera in ``spec.cameras``."""
        ...

    @property
    def sim_time(self) -> float:
        """Seconds since the last reset."""
        ...

    def observe(self) -> Observation:
        """The current observation without stepping."""
        ...

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a body: position (3,) m and quaternion (4,) wxyz."""
        ...

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        """Teleport a free body (task objects) and zero its velocity."""
        ...

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """End-effector (tool centre point) world pose: position (3,), quaternion (4,) wxyz."""
        ...

    def close(self) -> None: ...


class Task(Protocol):
    """Reward, success and reset distribution of a task; reads state through a SimBackend."""

    name: str
    # bodies whose poses form Observation["env_state"] (position + wxyz quaternion each)
    objects: tuple[str, ...]

    def reset(self, sim: SimBackend, rng: np.random.Generator) -> None: ...
    def reward(self, sim: SimBackend) -> float: ...
    def success(self, sim: SimBackend) -> bool: ...


@runtime_checkable
class Robot(Protocol):
    """Real hardware with the same observe/act shape as a SimBackend."""

    spec: RobotSpec

    def connect(self) -> None: ...
    def disconnect(self) -> None: ...
    def get_observation(self) -> Observation: ...
    def send_action(self, action: np.ndarray) -> None: ...


@runtime_checkable
class Policy(Protocol):
    """Maps observations to action chunks; ``contract`` is the I/O contract it was built with
    (observation keys and order, normalization, action scale, joint names, control rate)."""

    def reset(self) -> None: ...
    def act(self, obs: Observation) -> ActionChunk: ...
    @property
    def contract(self) -> dict[str, Any]: ...
