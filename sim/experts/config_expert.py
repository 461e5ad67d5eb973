"""Config of the scripted expert. Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig


class ScriptedExpertConfig(ComponentConfig):
    """A Cartesian waypoint follower with numpy IK for the reach and lift tasks, for any arm
    (robot facts come from its description)."""

    type: Literal["scripted_expert"] = "scripted_expert"
    # TCP speed and acceleration limits of the commanded motion (m/s, m/s^2)
    max_speed: float = Field(0.35, gt=0)
    max_accel: float = Field(2.0, gt=0)
    # TCP rotation speed limit (rad/s)
    max_ang_speed: float = Field(1.5, gt=0)
    # fraction of each joint's velocity limit the commands may use (the safety filter clips
    # at 1.0; staying below keeps the commands exactly as planned)
    joint_speed_scale: float = Field(0.8, gt=0, le=1.0)
    # lift: pre-grasp TCP height above the cube centre (m)
    approach_height: float = Field(0.10, gt=0)
    # lift: TCP height relative to the cube centre when closing the fingers (m); None: the
    # robot's own (its description's grasp_offset)
    grasp_offset: float | None = Field(None, ge=-0.01, le=0.02)
    # lift: time the fingers get to close before lifting (s)
    close_time_s: float = Field(0.3, gt=0)
    # lift: how high to carry the cube above where it was grasped (m)
    lift_height: float = Field(0.15, gt=0)
    # position tolerance to call a waypoint reached (m)
    tolerance: float = Field(0.008, gt=0)
