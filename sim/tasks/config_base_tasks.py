"""Configs of the mobile-base tasks. Light: pydantic only.

Positions are in the world frame (the base starts at the origin facing +x), metres; angles
in radians.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tether.core.config import ComponentConfig

Range = tuple[float, float]


class _BaseTaskConfig(ComponentConfig):
    # episode time limit in simulated seconds: a backend reports truncated=True from then on
    max_duration_s: float = Field(30.0, gt=0)
    # distance (m) of the goal from the start and its bearing from +x (rad), drawn uniformly
    distance_range: Range = (2.0, 5.0)
    bearing_range: Range = (-3.14159, 3.14159)
    # success when the base centre (base_footprint) is within this distance of the goal (m);
    # the ground truth, so it must exceed the odometry drift of a policy that drives by odometry
    success_radius: float = Field(0.5, gt=0)

    @model_validator(mode="after")
    def _ranges_ordered(self) -> _BaseTaskConfig:
        for name, value in self:
            if name.endswith("_range") and value[0] > value[1]:
                raise ValueError(f"{name}: low must be <= high")
        return self


class GoToGoalConfig(_BaseTaskConfig):
    """Drive the base to a goal point on open ground."""

    type: Literal["go_to_goal"] = "go_to_goal"


class ObstacleCourseConfig(_BaseTaskConfig):
    """Drive to a goal ahead through static cylindrical obstacles (0.25 m radius, 1 m tall)
    scattered in a corridor between the start and the goal."""

    type: Literal["obstacle_course"] = "obstacle_course"
    max_duration_s: float = Field(40.0, gt=0)
    distance_range: Range = (6.0, 8.0)
    bearing_range: Range = (-0.5, 0.5)
    n_obstacles: int = Field(6, ge=0, le=32)
    # obstacles lie between these fractions of the start-goal line, at most
    # ``corridor_half_width`` (m) to either side of it
    along_range: Range = (0.2, 0.8)
    corridor_half_width: float = Field(1.5, gt=0)
    # least free space (m) between two obstacles' surfaces, and between an obstacle's surface
    # and the start or goal point, so the 0.69 m wide base can always pass
    min_gap: float = Field(1.2, gt=0)
    # put the first obstacle on the start-goal line, so driving straight collides
    block_line: bool = True
    # reward penalty per step while the base touches an obstacle
    collision_penalty: float = Field(1.0, ge=0)
    # end the episode at the first touch (outcome "collision"), as navigation benchmarks
    # count it; off, the base may push on (the reward penalises each step of contact)
    end_on_collision: bool = False
    # a difficulty level: sets n_obstacles, min_gap, corridor_half_width and along_range
    # (DENSITIES; fields given explicitly win): sparse 4 obstacles >= 1.5 m apart, medium 8
    # >= 1.1 m, dense 16 >= 0.8 m (narrower than the base's 1.22 m diagonal: a corner that
    # pivots in a gap touches); as many as fit, the rest parked
    density: Literal["sparse", "medium", "dense"] | None = None

    @model_validator(mode="after")
    def _density(self) -> ObstacleCourseConfig:
        if self.density is not None:
            for name, value in DENSITIES[self.density].items():
                if name not in self.model_fields_set:
                    setattr(self, name, value)
        return self


# obstacle course difficulty levels
DENSITIES: dict[str, dict[str, Any]] = {
    "sparse": {"n_obstacles": 4, "min_gap": 1.5, "corridor_half_width": 1.5},
    "medium": {
        "n_obstacles": 8,
        "min_gap": 1.1,
        "corridor_half_width": 2.0,
        "along_range": (0.15, 0.85),
    },
    "dense": {
        "n_obstacles": 16,
        "min_gap": 0.8,
        "corridor_half_width": 2.0,
        "along_range": (0.1, 0.9),
    },
}
