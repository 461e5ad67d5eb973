"""Config of the mobile-base expert. Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig


class BaseExpertConfig(ComponentConfig):
    """Go-to-goal with lidar obstacle avoidance for a differential-drive base."""

    type: Literal["base_expert"] = "base_expert"
    # where the planner's pose comes from: ``base_pose`` (a localization system's estimate;
    # in simulation the true pose stands in for it) or ``odometry`` (``state``: wheel
    # odometry alone, which drifts by decimetres per pivot turn on a skid-steer base)
    pose_source: Literal["base_pose", "odometry"] = "base_pose"
    # cruise speed (m/s) and yaw-rate limit (rad/s); the robot's limits clip them
    max_speed: float = Field(0.8, gt=0)
    max_yaw_rate: float = Field(1.2, gt=0)
    # yaw rate per rad of heading error (1/s)
    heading_gain: float = Field(2.0, gt=0)
    # half-width (m) of the corridor a heading must keep free: the base's half-width (0.34 m)
    # plus a margin
    corridor_half_width: float = Field(0.55, gt=0)
    # how far ahead (m) a heading must be free (or up to the goal, if nearer)
    lookahead: float = Field(2.0, gt=0)
    # slow down when the free distance ahead drops below this (m); stop before the bumper
    # (0.5 m ahead of the centre) touches
    slow_distance: float = Field(1.5, gt=0)
    # cost of switching heading, per rad of change (keeps it from dithering around an obstacle)
    switch_cost: float = Field(0.5, ge=0)
    # the lidar's field of view (deg); must match sim.mobile_base.lidar.fov_deg
    lidar_fov_deg: float = Field(270.0, gt=0, le=360)
    # stop within this distance (m) of the goal
    goal_tolerance: float = Field(0.1, gt=0)
