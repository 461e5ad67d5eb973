"""Gamepad teleop through pygame's joystick API (SDL2). Default layout: an Xbox-style pad
on Linux; change ``GamepadLayout`` for others.

Mapping (command frame: x forward, y left, z up)::

    LB (hold)        dead-man: motion only while held
    left stick       x (up = forward), y (left = +y)
    right stick      z (up = +z), yaw (left = +yaw)
    d-pad            pitch (up / down), roll (left / right)
    A                toggle the gripper
    B                E-STOP (latched)         right-stick click   release the e-stop
    Start            start an episode         Y / X   stop: success / failure
    Back             discard the episode
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from tether.core.errors import MissingDependency, TetherError
from tether.hardware.teleop.command import EpisodeEvent, TeleopCommand


@dataclass(frozen=True)
class GamepadLayout:
    """Axis / button / hat indices as pygame reports them (SDL2, Xbox pad on Linux)."""

    axis_left_x: int = 0
    axis_left_y: int = 1
    axis_right_x: int = 3
    axis_right_y: int = 4
    hat: int = 0
    deadman: int = 4  # LB
    gripper: int = 0  # A
    estop: int = 1  # B
    estop_release: int = 10  # right-stick click
    start: int = 7  # Start
    stop_success: int = 3  # Y
    stop_fail: int = 2  # X
    discard: int = 6  # Back
    deadzone: float = 0.1


def _dz(v: float, deadzone: float) -> float:
    """Dead zone with rescaling, so the output still reaches +-1."""
    if abs(v) < deadzone:
        return 0.0
    return float(np.sign(v) * (abs(v) - deadzone) / (1.0 - deadzone))


class GamepadState:
    """Turns raw pad readings into TeleopCommands: edges for buttons, latched e-stop.

    Axes in [-1, 1] (SDL: stick down / right positive), buttons 0/1, hats (x, y) in
    {-1, 0, 1} (y up positive). Pure: unit-testable without a pad.
    """

    def __init__(self, layout: GamepadLayout | None = None) -> None:
        self.layout = layout or GamepadLayout()
        self.estop = False
        self._prev: tuple[int, ...] = ()

    def update(
        self, axes: list[float], buttons: list[int], hats: list[tuple[int, int]]
    ) -> TeleopCommand:
        L = self.layout

        def ax(i: int) -> float:
            return _dz(float(axes[i]), L.deadzone) if i < len(axes) else 0.0

        def held(i: int) -> bool:
            return i < len(buttons) and bool(buttons[i])

        def pressed(i: int) -> bool:
            return held(i) and not (i < len(self._prev) and self._prev[i])

        hx, hy = hats[L.hat] if L.hat < len(hats) else (0, 0)
        if pressed(L.estop):
            self.estop = True
        elif pressed(L.estop_release):
            self.estop = False
        events = tuple(
            ev
            for i, ev in (
                (L.start, EpisodeEvent.START),
                (L.stop_success, EpisodeEvent.STOP_SUCCESS),
                (L.stop_fail, EpisodeEvent.STOP_FAIL),
                (L.discard, EpisodeEvent.DISCARD),
            )
            if pressed(i)
        )
        deadman = held(L.deadman) and not self.estop
        cmd = TeleopCommand(
            linear=np.array([-ax(L.axis_left_y), -ax(L.axis_left_x), -ax(L.axis_right_y)])
            if deadman
            else None,
            angular=np.array([-float(hx), float(hy), -ax(L.axis_right_x)]) if deadman else None,
            gripper_toggle=deadman and pressed(L.gripper),
            deadman=deadman,
            estop=self.estop,
            events=events,
        )
        self._prev = tuple(int(b) for b in buttons)
        return cmd


class GamepadDevice:
    """The first joystick pygame finds (``index`` to pick another)."""

    name = "gamepad"

    def __init__(self, index: int = 0, layout: GamepadLayout | None = None) -> None:
        try:
            os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
            os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
            import pygame
        except ImportError:
            raise MissingDependency("pygame", "teleop", "the gamepad teleop device") from None
        self._pg: Any = pygame
        pygame.init()
        pygame.joystick.init()
        count = pygame.joystick.get_count()
        if count <= index:
            pygame.quit()
            raise TetherError(
                f"no gamepad found (pygame sees {count} joystick(s), wanted #{index}): "
                "connect one, or use device:=keyboard."
            )
        self.js = pygame.joystick.Joystick(index)
        self.js.init()
        self.state = GamepadState(layout)

    def read(self) -> TeleopCommand:
        self._pg.event.pump()
        js = self.js
        axes = [js.get_axis(i) for i in range(js.get_numaxes())]
        buttons = [js.get_button(i) for i in range(js.get_numbuttons())]
        hats = [js.get_hat(i) for i in range(js.get_numhats())]
        return self.state.update(axes, buttons, hats)

    def release_estop(self) -> None:
        """Release the latched e-stop (the node's ~/release_estop service)."""
        self.state.estop = False

    def close(self) -> None:
        self._pg.quit()
