"""The interfaces between layers. SI units, REP-103 frames (x forward, y left, z up),
float32 arrays, quaternions as (w, x, y, z)."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

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


@runtime_checkable
class Snapshotting(Protocol):
    """A SimBackend that saves its whole state in memory and goes back to it: branching
    several continuations from one moment of an episode (a learner's group of rollouts from
    the state that matters) without replaying the steps that led there.

    A snapshot is opaque, belongs to the backend that took it, and may be restored any
    number of times, into a later episode too. After ``restore`` the same actions give the
    same observations as after the snapshot was taken (the physics, the control targets,
    ``sim_time`` and the task's episode attributes all go back). Nothing is written to disk.
    """

    def snapshot(self) -> Any:
        """The current state, to give to ``restore``."""
        ...

    def restore(self, snapshot: Any) -> Observation:
        """Go back to ``snapshot``'s state; the observation there."""
        ...


def task_attributes(task: Task | None) -> dict[str, Any]:
    """A task's episode attributes for a snapshot (a shallow copy: tasks assign new values
    when they update, they do not change arrays in place)."""
    return dict(vars(task)) if task is not None else {}


def restore_task_attributes(task: Task | None, saved: dict[str, Any]) -> None:
    if task is not None:
        vars(task).clear()
        vars(task).update(saved)


class BodyShape(BaseModel):
    """One shape of a task body (collision and visual), placed in the body's frame.

    ``size`` follows MuJoCo's geom ``size``, which PyBullet's shapes take too: a box's
    half-extents (x, y, z), a cylinder's (radius, half-length along z), a sphere's
    (radius,). Metres.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    shape: Literal["box", "cylinder", "sphere"]
    size: tuple[float, ...]
    # the shape's centre in the body frame (m); its axes are the body's
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @model_validator(mode="after")
    def _size_fits_shape(self) -> BodyShape:
        n = {"box": 3, "cylinder": 2, "sphere": 1}[self.shape]
        if len(self.size) != n or min(self.size) <= 0:
            raise ValueError(f"a {self.shape} needs {n} positive size values, got {self.size}")
        return self


class TaskBody(BaseModel):
    """A body a task needs in the scene (a peg, a fixture), which every arm backend creates
    when the robot's scene lacks it, so no robot's scene file names it.

    mass > 0: a free body (MuJoCo: a free joint; PyBullet: a dynamic body) whose mass is
    spread over its shapes by volume; mass 0: fixed to the world, moved only by
    ``SimBackend.set_body_pose`` (MuJoCo: a mocap body; PyBullet: a static body).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    shapes: tuple[BodyShape, ...] = Field(min_length=1)
    # kg; 0 = fixed to the world
    mass: float = Field(0.0, ge=0)
    rgba: tuple[float, float, float, float] = (0.5, 0.5, 0.5, 1.0)
    # contact friction as MuJoCo's geom ``friction``: lateral (Coulomb), torsional (N m per
    # N), rolling
    friction: tuple[float, float, float] = (1.0, 0.005, 0.0001)
    # false: visual only (a marker), no contacts
    collide: bool = True
    # world position (m) before the task's reset moves it
    pos: tuple[float, float, float] = (0.5, 0.0, 0.0)


class Task(Protocol):
    """Reward, success and reset distribution of a task; reads state through a SimBackend.

    A task may also have ``bodies: tuple[TaskBody, ...]``: bodies it needs that a robot's
    scene need not contain (arm backends create them; see TaskBody). ``objects`` may name
    them.
    """

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
