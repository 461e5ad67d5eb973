"""Config of the batched kinematic world the learned local planner trains in
(tether.sim.nav_world). Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Range = tuple[float, float]
Density = Literal["open", "sparse", "medium", "dense"]


class NavWorldConfig(BaseModel):
    """The batched kinematic world (policies/nav/world.py): scenes, domain randomisation
    (drawn per base at each reset), lidar and reward."""

    model_config = ConfigDict(extra="forbid")
    # the scenes episodes draw from (uniformly): "open" is go_to_goal's (a goal 2-5 m away in
    # any direction, no obstacles), the others the obstacle course's density levels
    densities: tuple[Density, ...] = ("open", "sparse", "medium", "dense")
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
    # times the robot's accelerations (a heavier or weaker base)
    accel_scale: Range = (0.6, 1.0)
    # reward: per metre of progress to the goal, per step, at success, at a collision, and
    # up to proximity_penalty per step within proximity (m) of an obstacle
    progress_reward: float = Field(1.0, ge=0)
    time_penalty: float = Field(0.005, ge=0)
    success_reward: float = Field(5.0, ge=0)
    collision_penalty: float = Field(5.0, ge=0)
    proximity: float = Field(0.2, gt=0)
    proximity_penalty: float = Field(0.02, ge=0)
