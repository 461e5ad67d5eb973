"""3Dconnexion SpaceMouse teleop through pyspacemouse (HID).

The spring-return cap is the dead-man: letting go (all axes inside the dead zone) sends
nothing and the bridge's watchdog holds. Mapping (command frame: x forward, y left, z up)::

    push cap forward / left / up      +x / +y / +z
    tilt / twist the cap              roll, pitch, yaw
    left button                       toggle the gripper
    both buttons                      E-STOP (latched; release with the teleop node's
                                      ~/release_estop service)

The axis signs follow pyspacemouse's documentation; they are untested on hardware here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core.errors import MissingDependency, TetherError
from tether.hardware.teleop.command import TeleopCommand


class SpaceMouseState:
    """Raw pyspacemouse readings (axes in [-1, 1], buttons 0/1) -> TeleopCommand. Pure."""

    def __init__(self, deadzone: float = 0.05) -> None:
        self.deadzone = deadzone
        self.estop = False
        self._prev = (0, 0)

    def update(
        self, x: float, y: float, z: float, roll: float, pitch: float, yaw: float, buttons: Any
    ) -> TeleopCommand:
        b = (int(buttons[0]) if len(buttons) > 0 else 0, int(buttons[1]) if len(buttons) > 1 else 0)
        if b[0] and b[1]:
            self.estop = True
        lin = np.array([y, -x, z], np.float64)
        ang = np.array([-pitch, roll, -yaw], np.float64)  # pyspacemouse: pitch about x
        lin[np.abs(lin) < self.deadzone] = 0.0
        ang[np.abs(ang) < self.deadzone] = 0.0
        moving = bool(np.any(lin) or np.any(ang))
        toggle = bool(b[0] and not self._prev[0] and not b[1])
        self._prev = b
        deadman = (moving or toggle) and not self.estop
        return TeleopCommand(
            linear=lin if deadman else None,
            angular=ang if deadman else None,
            gripper_toggle=toggle and deadman,
            deadman=deadman,
            estop=self.estop,
        )


class SpaceMouseDevice:
    """The first SpaceMouse pyspacemouse finds."""

    name = "spacemouse"

    def __init__(self, deadzone: float = 0.05) -> None:
        try:
            import pyspacemouse
        except ImportError:
            raise MissingDependency(
                "pyspacemouse", "teleop", "the SpaceMouse teleop device"
            ) from None
        self._sm: Any = pyspacemouse
        try:
            ok = pyspacemouse.open()
        except Exception as exc:  # HID back ends raise their own error types
            raise TetherError(f"could not open a SpaceMouse: {exc}") from None
        if not ok:
            raise TetherError(
                "no SpaceMouse found: connect one (and allow access to its hidraw device)."
            )
        self.state = SpaceMouseState(deadzone)

    def read(self) -> TeleopCommand:
        s = self._sm.read()
        return self.state.update(s.x, s.y, s.z, s.roll, s.pitch, s.yaw, s.buttons)

    def release_estop(self) -> None:
        """Release the latched e-stop (the node's ~/release_estop service)."""
        self.state.estop = False

    def close(self) -> None:
        close = getattr(self._sm, "close", None)
        if close is not None:
            close()
