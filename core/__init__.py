"""Tether contracts: specs, observations, actions, protocols, config, registry, safety.

Imports only numpy, pydantic and pyyaml; dataset I/O in ``tether.core.data`` imports its
heavy readers lazily. Nothing here imports rclpy, torch, mujoco or pybullet.
"""

from __future__ import annotations

from tether.core.errors import ConfigError, InvalidCommand, TetherError
from tether.core.protocols import Policy, Robot, SimBackend, Task
from tether.core.spec import ActionMode, ActionSpec, CameraSpec, RobotKind, RobotSpec
from tether.core.types import ActionChunk, Observation, StepResult

__all__ = [
    "ActionChunk",
    "ActionMode",
    "ActionSpec",
    "CameraSpec",
    "ConfigError",
    "InvalidCommand",
    "Observation",
    "Policy",
    "Robot",
    "RobotKind",
    "RobotSpec",
    "SimBackend",
    "StepResult",
    "Task",
    "TetherError",
]
