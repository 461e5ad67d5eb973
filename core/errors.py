"""Errors a user can cause. Each carries one sentence meant to be printed as it is."""

from __future__ import annotations


class TetherError(Exception):
    """Base class: the message is one clear sentence for the user."""


class ConfigError(TetherError):
    """A config file or override is missing, malformed or has a bad value."""


class InvalidCommand(TetherError):
    """A command (action, trajectory) was rejected before reaching the robot."""


class StaleCommand(InvalidCommand):
    """A command stamped in a timeline that has ended: sent before a reset (or a clock jump
    back) restarted time, and arriving after it. Expected after every reset (the previous
    episode's last chunk still in flight): dropped and counted, not a fault to warn about."""


class MissingDependency(TetherError):
    """An optional dependency is not installed; the message says what to install."""

    # extras that `make setup` installs (requirements/lock.txt); the others are opt-in
    IN_SETUP = ("mujoco", "pybullet", "media", "data", "torch")

    def __init__(self, package: str, extra: str, what: str) -> None:
        hint = " (or run `make setup`)" if extra in self.IN_SETUP else ""
        super().__init__(
            f"{what} needs the '{package}' package: pip install 'tether[{extra}]'{hint}."
        )
