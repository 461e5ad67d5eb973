"""What a teleop device reports each control step, and the device protocol.

Frames: ``linear`` and ``angular`` are in the robot's command frame (REP-103: x forward,
y left, z up): the arm's base frame (panda_link0) for end-effector deltas, the body frame
for mobile bases and drones. Values are unit-less in [-1, 1], a fraction of the mapper's
maximum speed (``TeleopConfig.max_linear_speed`` m/s, ``max_angular_speed`` rad/s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

import numpy as np

from tether.core.types import Observation


class EpisodeEvent(StrEnum):
    """Episode control an operator can trigger from a device."""

    START = "start"
    STOP_SUCCESS = "stop_success"
    STOP_FAIL = "stop_fail"
    DISCARD = "discard"


def _vec3(v: np.ndarray | tuple[float, ...] | None) -> np.ndarray:
    out = np.zeros(3) if v is None else np.asarray(v, dtype=np.float64).reshape(3)
    return np.clip(np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), -1.0, 1.0)


@dataclass(frozen=True)
class TeleopCommand:
    """One reading of a teleop device.

    ``linear`` (3,), ``angular`` (3,): unit-less in [-1, 1] (clipped; NaN -> 0), command
    frame (see the module docstring). ``gripper_toggle``: open/close the gripper this step
    (an edge, not a level). ``deadman``: motion is allowed; while False nothing is sent and
    the bridge's watchdog holds. ``estop``: the e-stop is engaged (latched by the device).
    ``events``: episode events triggered this step. ``action``: a full action in the
    robot's action space, shape (action_dim,), that bypasses the mappers (scripted device).
    """

    linear: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular: np.ndarray = field(default_factory=lambda: np.zeros(3))
    gripper_toggle: bool = False
    deadman: bool = False
    estop: bool = False
    events: tuple[EpisodeEvent, ...] = ()
    action: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "linear", _vec3(self.linear))
        object.__setattr__(self, "angular", _vec3(self.angular))

    def to_json(self) -> dict[str, object]:
        """Plain-JSON form (for logs and tests)."""
        return {
            "linear": self.linear.tolist(),
            "angular": self.angular.tolist(),
            "gripper_toggle": self.gripper_toggle,
            "deadman": self.deadman,
            "estop": self.estop,
            "events": [str(e) for e in self.events],
            "action": None if self.action is None else np.asarray(self.action).tolist(),
        }


@runtime_checkable
class TeleopDevice(Protocol):
    """An input device polled once per control step; ``read`` never blocks."""

    name: str

    def read(self) -> TeleopCommand:
        """The command for this control step."""
        ...

    def close(self) -> None:
        """Release the device (restore the terminal, close the joystick)."""
        ...


@runtime_checkable
class ObservingDevice(TeleopDevice, Protocol):
    """A device that needs the robot's observation (the scripted expert).

    ``observation_keys``: which Observation keys it reads (``state``, ``env_state``).
    """

    observation_keys: tuple[str, ...]

    def observe(self, obs: Observation) -> None:
        """Give the device the latest observation before the next ``read``."""
        ...
