"""Configs of the table-top tasks. Light: pydantic only.

Positions are in the world frame (robot base at the origin on the table top, x forward,
z up), metres; angles in radians.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tether.core.config import ComponentConfig

Range = tuple[float, float]


class _TaskConfig(ComponentConfig):
    # episode time limit in simulated seconds: a backend reports truncated=True from then on
    max_duration_s: float = Field(8.0, gt=0)

    @model_validator(mode="after")
    def _ranges_ordered(self) -> _TaskConfig:
        for name, value in self:
            if name.endswith("_range") and value[0] > value[1]:
                raise ValueError(f"{name}: low must be <= high")
        return self


class ReachConfig(_TaskConfig):
    """Move the tool centre point to a target point drawn uniformly from a box."""

    type: Literal["reach"] = "reach"
    max_duration_s: float = Field(5.0, gt=0)
    # target position ranges (m), world frame
    x_range: Range = (0.35, 0.65)
    y_range: Range = (-0.25, 0.25)
    z_range: Range = (0.08, 0.40)
    # success when the TCP is within this distance of the target (m)
    success_radius: float = Field(0.02, gt=0)


class LiftConfig(_TaskConfig):
    """Grasp the 5 cm cube on the table and lift it."""

    type: Literal["lift"] = "lift"
    max_duration_s: float = Field(8.0, gt=0)
    # cube centre position ranges on the table (m), world frame
    x_range: Range = (0.40, 0.62)
    y_range: Range = (-0.18, 0.18)
    # cube yaw range about world z (rad); the cube is symmetric every 90 deg
    yaw_range: Range = (-0.785398, 0.785398)
    # height of the cube centre resting on the table (m): its half-size
    rest_z: float = Field(0.025, gt=0)
    # success when the cube centre is this far above rest_z (m)
    lift_height: float = Field(0.08, gt=0)
