"""Teleop device registry: ``TeleopConfig.device`` -> implementation, imported lazily so a
missing optional package (pygame, pyspacemouse) only matters for the device that needs it."""

from __future__ import annotations

import importlib
from typing import Any

from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.spec import RobotSpec
from tether.hardware.teleop.command import TeleopDevice

DEVICES = {
    "keyboard": "tether.hardware.teleop.keyboard:KeyboardDevice",
    "gamepad": "tether.hardware.teleop.gamepad:GamepadDevice",
    "spacemouse": "tether.hardware.teleop.spacemouse:SpaceMouseDevice",
    "scripted": "tether.hardware.teleop.scripted:ScriptedDevice",
}


def available() -> list[str]:
    return sorted(DEVICES)


def build_device(name: str, cfg: ExperimentConfig, spec: RobotSpec) -> TeleopDevice:
    """Open the device called ``name``. Raises ConfigError for an unknown name and
    TetherError (one sentence) when its package or hardware is missing."""
    if name not in DEVICES:
        raise ConfigError(f"unknown teleop device '{name}' (available: {', '.join(available())})")
    module, _, attr = DEVICES[name].partition(":")
    cls: Any = getattr(importlib.import_module(module), attr)
    if name == "scripted":
        device: TeleopDevice = cls.from_experiment(cfg, spec)
        return device
    device = cls()
    return device
