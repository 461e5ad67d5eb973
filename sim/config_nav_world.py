"""Config of the batched kinematic world the learned local planner trains in
(tether.sim.nav_world). Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Range = tuple[float, float]
Density = Literal["open", "sparse", "medium", "dense"]


class NavWorldConfig(BaseModel):
    """The batched kinematic world (policies/nav/world.py): scenes, domain randomisation
    (drawn per base at each reset), lidar and reward."""

    model_config = ConfigDict(extra="forbid")
    # the scenes episodes draw from (uniformly): "open" is go_to_goal's (a goal 2-5 m away in
    # any direction, no obstacles), the others the obstacle course's density levels
    densities: tuple[Density, ...] = ("open", "sparse", "medium", "dense")
    # how often each of densities is drawn (relative; None: uniformly)
    density_weights: tuple[float, ...] | None = None
    max_duration_s: float = Field(40.0, gt=0)
    # layouts drawn per level before training (0: a fresh one at every reset)
    layout_pool: int = Field(500, ge=0)
    # start pose noise (m, m, rad), uniform +-
    start_noise: float = Field(0.1, ge=0)
    # the lidar: as the experiments' sim.mobile_base.lidar (64 beams over 270 deg, 10 m)
    n_beams: int = Field(64, ge=1)
    fov_deg: float = Field(270.0, gt=0, le=360)
    range_min: float = Field(0.1, ge=0)
    range_max: float = Field(10.0, gt=0)
    # domain randomisation: Gaussian range noise std (m) and the share of beams dropped
    lidar_noise: Range = (0.0, 0.03)
    lidar_dropout: Range = (0.0, 0.05)
    # command latency (control steps, inclusive)
    latency_steps: tuple[int, int] = (0, 2)
    # true / commanded forward speed and yaw rate (wheel slip; a skid-steer turns slower)
    lin_gain: Range = (0.9, 1.05)
    yaw_gain: Range = (0.6, 1.1)
    # the base turns about a point this far (m) behind its centre, so it slides sideways at
    # rotation_offset x its yaw rate (a skid-steer's shifted centre of rotation: the
    # engines' Husky slides at 0.12-0.22 m x the yaw rate, docs/base_planner.md)
    rotation_offset: Range = (0.0, 0.0)
    # times the robot's accelerations (a heavier or weaker base)
    accel_scale: Range = (0.6, 1.0)
    # the odometry's heading: "wheels" integrates the wheels' yaw rate (drifts with the yaw
    # slip), "imu" integrates a gyro (the true yaw rate plus a bias drawn per reset, uniform
    # within +-gyro_bias rad/s, and white noise of gyro_noise rad/s per control step), as a
    # base whose odometry fuses its IMU does (robot_localization's EKF on a real Husky);
    # the position integrates the wheels' forward speed along that heading either way
    heading: Literal["wheels", "imu"] = "wheels"
    gyro_bias: float = Field(0.002, ge=0)
    gyro_noise: float = Field(0.01, ge=0)
    # progress to the goal: "euclidean" the straight-line distance, "geodesic" the
    # navigation function of the true layout (sim/experts/navfn.py: cost-weighted distance
    # around the obstacles, lethal where the base's centre comes within its half width less
    # 5 cm of an obstacle, inflated out to plan_inflation m beyond it): a dead end then
    # lowers the reward, where the straight line leads into it. The reward only: the planner
    # never sees the layout
    progress: Literal["euclidean", "geodesic"] = "euclidean"
    plan_resolution: float = Field(0.1, gt=0)
    plan_inflation: float = Field(0.6, ge=0)
    plan_inflation_weight: float = Field(1.0, ge=0)
    # the planner's velocity bounds (m/s, rad/s), within the robot's (None: the robot's);
    # its actions in [-1, 1] are times these, and its velocity features divided by them
    max_speed: float | None = Field(None, gt=0)
    max_yaw_rate: float | None = Field(None, gt=0)
    # training counts a collision this much (m) before the engines do (the outline within
    # 1 cm + collision_margin of an obstacle): a margin for the engines' skid, which the
    # kinematic world does not model
    collision_margin: float = Field(0.0, ge=0)
    # reward: per metre of progress to the goal, per step, at success, at a collision, and
    # up to proximity_penalty per step within proximity (m) of an obstacle
    progress_reward: float = Field(1.0, ge=0)
    time_penalty: float = Field(0.005, ge=0)
    success_reward: float = Field(5.0, ge=0)
    collision_penalty: float = Field(5.0, ge=0)
    proximity: float = Field(0.2, gt=0)
    proximity_penalty: float = Field(0.02, ge=0)

    @model_validator(mode="after")
    def _check(self) -> NavWorldConfig:
        if len(set(self.densities)) != len(self.densities):
            raise ValueError(f"densities lists a level twice: {self.densities}")
        w = self.density_weights
        if w is not None and (len(w) != len(self.densities) or min(w) < 0 or sum(w) <= 0):
            raise ValueError(
                f"density_weights needs one weight >= 0 per level of densities "
                f"{self.densities} (not all 0), got {w}"
            )
        return self
