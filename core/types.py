"""Runtime data: observations, action chunks, step results. float32 arrays, SI units."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

IMAGE_PREFIX = "images/"
# the language input of a policy's observation keys: Observation.instruction (a dataset's
# per-episode task string), fed to a VLA as its text encoder's embedding (docs/vla.md)
TEXT_KEY = "instruction"
# in a policy's observation keys: the policy flies one robot of a swarm and reads the other
# robots' states too, after its own in ``state`` (a drone's policy server subscribes to its
# neighbours' odometry; docs/swarm.md)
NEIGHBOURS_KEY = "neighbour_states"


def normalise_instruction(text: str) -> str:
    """An instruction as wordings are compared: lower case, single spaces, no final
    punctuation (a task's phrasings, a training paraphrase file's groups)."""
    return " ".join(text.lower().split()).rstrip(".!?").strip()


@dataclass
class Observation(Mapping[str, np.ndarray]):
    """Named arrays observed at one instant.

    Keys: ``state`` (robot proprioception, shape (state_dim,)), ``env_state`` (task objects,
    e.g. cube position + wxyz quaternion), ``images/<cam>`` ((H, W, 3) uint8). ``stamp_ns`` is
    the time of the observation in ns (sim time in simulation, monotonic on hardware).
    """

    data: dict[str, np.ndarray]
    stamp_ns: int = 0
    instruction: str | None = None

    def __getitem__(self, key: str) -> np.ndarray:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    @property
    def stamp_s(self) -> float:
        return self.stamp_ns * 1e-9

    @property
    def images(self) -> dict[str, np.ndarray]:
        """Camera images keyed by camera name."""
        n = len(IMAGE_PREFIX)
        return {k[n:]: v for k, v in self.data.items() if k.startswith(IMAGE_PREFIX)}


@dataclass
class ActionChunk:
    """A policy's output: ``actions`` of shape (horizon, dim), one row every ``dt`` seconds.

    Row i is meant for time ``t0_ns + i * dt``; t0 is normally the stamp of the observation
    the chunk answers.
    """

    actions: np.ndarray
    dt: float
    t0_ns: int = 0

    def __post_init__(self) -> None:
        self.actions = np.asarray(self.actions, dtype=np.float32)
        if self.actions.ndim == 1:
            self.actions = self.actions[None, :]
        if self.actions.ndim != 2 or self.actions.shape[0] == 0:
            raise ValueError(f"actions must have shape (horizon, dim), got {self.actions.shape}")
        if not self.dt > 0:
            raise ValueError(f"dt must be > 0, got {self.dt}")

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[0])

    @property
    def dim(self) -> int:
        return int(self.actions.shape[1])

    def time_of(self, i: int) -> int:
        """Time in ns at which row i applies."""
        return self.t0_ns + round(i * self.dt * 1e9)

    def end_ns(self) -> int:
        """Time in ns after which the chunk has no action left."""
        return self.time_of(self.horizon)

    def action_at(self, t_ns: int) -> np.ndarray | None:
        """The row in force at time t (zero-order hold), or None when t is outside the chunk.

        A small tolerance (1 % of dt) absorbs float rounding of stamps.
        """
        # (plain float arithmetic: asked at every control step, twice in the sim bridge)
        step = self.dt * 1e9
        tol = 0.01 * self.dt * 1e9
        t0, n = self.t0_ns, self.actions.shape[0]
        if t_ns < t0 - tol or t_ns >= t0 + round(n * self.dt * 1e9) - tol:
            return None
        i = math.floor((t_ns - t0 + tol) / step)
        return self.actions[min(max(i, 0), n - 1)]

    def shifted(self, delta: np.ndarray) -> ActionChunk:
        """This chunk plus ``delta`` (broadcast to (horizon, dim)): residual composition."""
        return ActionChunk(self.actions + np.asarray(delta, np.float32), self.dt, self.t0_ns)


@dataclass
class StepResult:
    """What one control step returns. ``reward`` and flags come from the task, if any."""

    observation: Observation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
