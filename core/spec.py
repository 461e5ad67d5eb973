"""Robot and action specifications. SI units: metres, radians, seconds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

RobotKind = Literal["arm", "quadcopter", "mobile_base"]
ActionMode = Literal[
    "joint_position",
    "joint_velocity",
    "ee_delta",
    "twist",
    "rotor_rpm",
    "thrust_rates",
    "velocity_setpoint",
]


class CameraSpec(BaseModel):
    """An image stream: (height, width, 3) uint8 RGB at ``fps`` frames per second."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    fps: float = Field(30.0, gt=0)
    # vertical field of view in degrees (for CameraInfo intrinsics)
    fovy_deg: float = Field(45.0, gt=0, lt=180)

    def intrinsics(self) -> np.ndarray:
        """Pinhole matrix K, shape (3, 3), pixels."""
        f = 0.5 * self.height / np.tan(np.deg2rad(self.fovy_deg) / 2)
        return np.array(
            [[f, 0, self.width / 2], [0, f, self.height / 2], [0, 0, 1]], dtype=np.float64
        )


class ActionSpec(BaseModel):
    """What one control step's action is. Shape (dim,), bounds per element."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: ActionMode
    # element names, e.g. joint names for joint_position; len(names) == dim
    names: tuple[str, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    units: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> ActionSpec:
        n = len(self.names)
        if len(self.low) != n or len(self.high) != n:
            raise ValueError(f"low/high need {n} elements, one per name")
        if any(lo > hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ValueError("low must be <= high element-wise")
        if self.units and len(self.units) != n:
            raise ValueError(f"units needs {n} elements or none")
        return self

    @property
    def dim(self) -> int:
        return len(self.names)

    @property
    def shape(self) -> tuple[int]:
        return (self.dim,)

    def low_array(self) -> np.ndarray:
        return np.asarray(self.low, dtype=np.float32)

    def high_array(self) -> np.ndarray:
        return np.asarray(self.high, dtype=np.float32)


class JointSpec(BaseModel):
    """One joint: position limits (rad or m) and a velocity limit (rad/s or m/s)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    lower: float
    upper: float
    max_velocity: float = Field(gt=0)


class RobotSpec(BaseModel):
    """A robot as every layer sees it: joints, cameras, control rate, action spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: RobotKind
    joints: tuple[JointSpec, ...] = ()
    cameras: tuple[CameraSpec, ...] = ()
    control_hz: float = Field(gt=0)
    action: ActionSpec
    # names of the elements of Observation["state"], in order
    state_names: tuple[str, ...] = ()

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def dt(self) -> float:
        """Control period in seconds."""
        return 1.0 / self.control_hz

    def camera(self, name: str) -> CameraSpec:
        for cam in self.cameras:
            if cam.name == name:
                return cam
        known = ", ".join(c.name for c in self.cameras) or "none"
        raise KeyError(f"robot '{self.name}' has no camera '{name}' (cameras: {known})")


def cameras_due(
    cameras: Iterable[CameraSpec], stamp_ns: int, next_ns: dict[str, int]
) -> list[CameraSpec]:
    """Cameras whose next frame (at their fps, in sim time) is due at ``stamp_ns``; advances
    each due camera's entry of ``next_ns`` (ns, by name; a missing entry is due at once) to
    its first frame time after ``stamp_ns``."""
    due = []
    for cam in cameras:
        nxt = next_ns.get(cam.name, 0)
        if stamp_ns >= nxt:
            due.append(cam)
            period = round(1e9 / cam.fps)
            next_ns[cam.name] = nxt + period * max(1, (stamp_ns - nxt) // period + 1)
    return due
