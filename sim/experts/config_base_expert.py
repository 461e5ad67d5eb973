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


class DWAConfig(ComponentConfig):
    """A Dynamic Window Approach local planner (Fox, Burgard and Thrun, "The Dynamic Window
    Approach to Collision Avoidance", 1997), the family of Nav2's default DWB controller:
    sample (v, w) pairs inside the window the base's accelerations reach in one control
    period, roll each out as an arc, drop the arcs whose footprint meets a lidar point or
    that cannot brake before one, score the rest by heading to the goal, clearance and speed
    (docs/mobile_base.md)."""

    type: Literal["dwa"] = "dwa"
    # where the planner's pose comes from (as base_expert's): a localization estimate or
    # wheel odometry
    pose_source: Literal["base_pose", "odometry"] = "base_pose"
    # velocity bounds (m/s, rad/s); the robot's limits clip them. min_speed < 0 lets it back up
    max_speed: float = Field(0.8, gt=0)
    min_speed: float = Field(0.0, le=0)
    max_yaw_rate: float = Field(1.2, gt=0)
    # accelerations (m/s^2, rad/s^2) that bound the window; None: the robot's published
    # limits (Husky: husky_control's 3.0 and 6.0)
    linear_accel: float | None = Field(None, gt=0)
    angular_accel: float | None = Field(None, gt=0)
    # samples across the window per axis (DWB: vx_samples 20, vtheta_samples 20)
    v_samples: int = Field(11, ge=2, le=101)
    w_samples: int = Field(21, ge=2, le=201)
    # how far ahead each arc is rolled out (s; DWB's sim_time 1.7) and at what step
    sim_time_s: float = Field(1.7, gt=0)
    sim_dt_s: float = Field(0.05, gt=0)
    # added to the robot's footprint on every side (m): an arc closer than this to a lidar
    # point is a collision
    margin: float = Field(0.05, ge=0)
    # weights of the scores, each in [0, 1] (or [-1, 1]): heading (Fox et al.'s alpha: the
    # goal's bearing from the arc's end), progress (DWB's GoalDist: how much nearer the goal
    # the arc ends, per the most a sim_time at full speed could gain), clearance (beta: the
    # nearest lidar point along the arc, capped at clearance_cap, beyond which it does not
    # matter) and speed (gamma). Without the progress term standing still far from obstacles
    # outscores driving towards them
    heading_weight: float = Field(0.5, ge=0)
    progress_weight: float = Field(1.0, ge=0)
    clearance_weight: float = Field(0.5, ge=0)
    speed_weight: float = Field(0.2, ge=0)
    clearance_cap: float = Field(0.6, gt=0)
    # the lidar's field of view (deg); must match sim.mobile_base.lidar.fov_deg
    lidar_fov_deg: float = Field(270.0, gt=0, le=360)
    # stop within this distance (m) of the goal; slow down (v <= gain x distance) near it
    goal_tolerance: float = Field(0.1, gt=0)
    approach_gain: float = Field(0.8, gt=0)
    # a navigation function (sim/experts/navfn.py, Nav2's NavFn on its costmap): the cost to
    # the goal around the obstacles mapped so far; progress is how much an arc lowers it and
    # heading aims at the point carrot_distance (m) down its descent path. Off: the straight
    # line to the goal (Fox et al.'s DWA, which stops in front of an obstacle on that line)
    global_plan: bool = True
    # grid cell (m) and how often (control steps) the function is recomputed
    plan_resolution: float = Field(0.1, gt=0)
    replan_every: int = Field(10, ge=1)
    carrot_distance: float = Field(1.0, gt=0)
    # costs (Nav2's inflation layer): lethal within lethal_radius of a lidar hit (None: the
    # base's half width less 5 cm), then 1 + inflation_weight x exp(-cost_scale x (distance -
    # lethal_radius)) out to inflation_radius
    lethal_radius: float | None = Field(None, gt=0)
    inflation_radius: float = Field(0.9, gt=0)
    cost_scale: float = Field(3.0, gt=0)
    inflation_weight: float = Field(2.0, ge=0)
