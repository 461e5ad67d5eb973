"""Teleop settings. Light: pydantic only."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TeleopConfig(BaseModel):
    """How device readings become robot commands."""

    model_config = ConfigDict(extra="forbid")
    # keyboard | gamepad | spacemouse | scripted (see tether.hardware.teleop.devices)
    device: str = "keyboard"
    # end-effector / body speed at full deflection (m/s) and rotation speed (rad/s)
    max_linear_speed: float = Field(0.10, gt=0, le=2.0)
    max_angular_speed: float = Field(0.8, gt=0, le=6.0)
    # fraction of each joint's velocity limit an arm command may use (safety filter: 1.0)
    joint_speed_scale: float = Field(0.8, gt=0, le=1.0)
    # mobile bases: allow sideways motion (omnidirectional base); otherwise linear.y = 0
    holonomic: bool = False
    # node whose Trigger services start/stop/discard episodes (relative: same namespace)
    episode_node: str = "sim_bridge"
