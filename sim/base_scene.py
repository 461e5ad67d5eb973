"""The mobile-base world both engines build around any base: a flat floor, a goal marker and
static cylindrical obstacles (what the go_to_goal and obstacle_course tasks place). Light:
no simulator imports."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.core.errors import ConfigError
from tether.core.robot import RobotDescription
from tether.core.robot_kinds import MobileBaseDescription

# the robot's body in body_pose / set_body_pose (REP-105's base_footprint, whatever base)
BASE_BODY = "base_footprint"
# task bodies: a goal marker (visual only) and static cylinders named obstacle_<i>;
# obstacles a task has not placed are parked far away
GOAL_RADIUS = 0.3  # m
OBSTACLE_RADIUS = 0.25  # m
OBSTACLE_HEIGHT = 1.0  # m
PARKING = (100.0, 100.0)  # m, x and y
# obstacles collide with the robot's outline, never with its wheels: a wheel simulated as a
# sphere of the wheel radius (one contact point, steady skid-steer) reaches a wheel radius
# sideways, far beyond the tyre's face. MuJoCo: obstacle geoms have contype = conaffinity =
# this bit, so a robot geom meets them only with the bit set (the chassis / outline box);
# PyBullet: the backend turns off each wheel link's contacts with each obstacle
OBSTACLE_CONTACT_BIT = 2
OBJECT_NAME = re.compile(r"^(goal|obstacle_\d+)$")


def check_objects(objects: Sequence[str], engine: str) -> None:
    """Raise ConfigError unless every task object is ``goal`` or ``obstacle_<i>``."""
    bad = [o for o in objects if not OBJECT_NAME.match(o)]
    if bad:
        raise ConfigError(
            f"the {engine} mobile-base scene has no task object(s) {bad} "
            "(available: goal, obstacle_<i>)"
        )


def mobile_base(robot: RobotDescription, engine: str) -> MobileBaseDescription:
    """``robot`` as a mobile-base description, or a one-line ConfigError."""
    if robot.kind != "mobile_base":
        raise ConfigError(
            f"the {engine} mobile-base backend simulates mobile bases; robot '{robot.name}' "
            f"is a {robot.kind}"
        )
    if not isinstance(robot, MobileBaseDescription):
        raise ConfigError(
            f"robot '{robot.name}' has no MobileBaseDescription (wheels, lidar, assets): the "
            f"{engine} mobile-base backend needs one"
        )
    return robot
