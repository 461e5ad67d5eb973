"""Teleoperation devices (keyboard, gamepad, SpaceMouse, scripted expert) and the mappers
that turn their readings into arm joint targets, base twists or drone velocity setpoints."""

from tether.hardware.teleop.command import EpisodeEvent, TeleopCommand, TeleopDevice
from tether.hardware.teleop.config_teleop import TeleopConfig

__all__ = ["EpisodeEvent", "TeleopCommand", "TeleopConfig", "TeleopDevice"]
