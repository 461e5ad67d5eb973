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


@runtime_checkable
class LearningView(Protocol):
    """How a backend presents itself to a learner (tether.sim.make_env), when the generic view
    (observation ``concat(state, env_state)``, actions linear on the spec's limits) is not
    the natural one. A multirotor world implements it: features relative to each drone's task
    reference, rotor speeds normalized around hover."""

    def features(self, obs: Observation) -> np.ndarray:
        """The learner's observation of ``obs``. Shape: (F,) float32."""
        ...

    def from_normalized(self, action: np.ndarray) -> np.ndarray:
        """A normalized action (spec.action.dim,) in [-1, 1] (NaN -> 0, clipped) -> the
        backend's action (spec.action.dim,) float64."""
        ...


@runtime_checkable
class BatchedEnv(Protocol):
    """A training simulator: N independent episodes of one reach-and-stay task (e.g. drones
    hovering at a target) stepped by one call, finished episodes restarting in place. SI
    units; observations float32, states float64. Trainers get one from the registry
    ("backend" entries whose option ``protocol`` names this class), never by importing sim.
    """

    # episodes stepped per call
    n: int
    # seconds per step
    control_dt: float
    # steps in one full episode
    episode_steps: int
    # an episode succeeds when its last ``success_steps`` steps end within
    # ``success_radius`` (m) of ``target`` (3,) m and it did not fail
    success_steps: int
    success_radius: float
    target: np.ndarray
    # the simulator state of every episode, shape (N, state_dim) float64 (a drone: 13)
    state: np.ndarray

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Restart every episode (draws from the task's initial-state distribution).
        Shape: (N, obs_dim) float32."""
        ...

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Advance every episode one step with normalized actions (N, action_dim) in [-1, 1].

        Returns obs (N, obs_dim) float32, reward (N,) float32, terminated (N,) bool (failed),
        truncated (N,) bool (time limit) and info: ``distance`` (N,) m to the target before
        any restart, ``final_obs`` (N, obs_dim) the observation before it, ``success`` (N,)
        bool where truncated.
        """
        ...
