"""Sim settings that only mobile bases use: the 2D lidar and the wheel odometry. Light:
pydantic only. They sit under ``sim.mobile_base`` of an experiment whose robot is a mobile
base (any engine: the engines' mobile-base config classes add :class:`MobileBaseSimConfig`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether.sim.config_sim import TableSimConfig


class LidarConfig(BaseModel):
    """A planar scanning range finder (sensor_msgs/LaserScan), simulated by ray casts.

    Beams sweep counter-clockwise from -fov/2 (right) to +fov/2 (left) in the sensor frame;
    a beam that hits nothing within ``range_max`` reads ``range_max`` (finite for learning;
    a sensor_msgs/LaserScan conversion should publish +inf there, as REP-117 asks)."""

    model_config = ConfigDict(extra="forbid")
    # number of beams per scan (a Hokuyo UST-10LX has 1081 over 270 deg; fewer is cheaper)
    n_beams: int = Field(64, ge=1, le=4096)
    fov_deg: float = Field(270.0, gt=0, le=360)
    # measurable range (m); readings are clipped to it
    range_min: float = Field(0.1, ge=0)
    range_max: float = Field(10.0, gt=0)
    # standard deviation of the Gaussian range noise (m); 0 = exact
    noise_std: float = Field(0.0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> LidarConfig:
        if self.range_min >= self.range_max:
            raise ValueError("range_min must be < range_max")
        return self


class MobileBaseConfig(BaseModel):
    """Lidar and odometry of a simulated mobile base."""

    model_config = ConfigDict(extra="forbid")
    lidar: LidarConfig = Field(default_factory=LidarConfig)
    # effective wheel separation / geometric track, used for the twist -> wheel speeds
    # conversion and for the odometry (diff_drive_controller's wheel_separation_multiplier;
    # a skid-steer base turns slower than its geometric track predicts). None: the engine's
    # calibrated value
    wheel_separation_multiplier: float | None = Field(None, gt=0)
    # the odometry's heading: "wheels" from the wheel encoders (drifts with the tracks' yaw
    # slip), "imu" from a gyro (the true yaw rate plus a bias drawn per reset, uniform within
    # +-gyro_bias rad/s, and white noise of gyro_noise rad/s per control period), as the
    # odometry of a base that fuses its IMU (a real Husky's robot_localization EKF);
    # the position integrates the wheels' forward travel along that heading either way
    odometry_heading: Literal["wheels", "imu"] = "wheels"
    gyro_bias: float = Field(0.002, ge=0)
    gyro_noise: float = Field(0.01, ge=0)
    # ramp the commanded twist with the robot's published acceleration limits
    limit_acceleration: bool = True


class MobileBaseSimConfig(TableSimConfig):
    """An engine's sim section for a mobile base: the engine's fields plus ``mobile_base:``
    (each engine's mobile-base config derives from it and from the engine's config)."""

    # lidar and wheel odometry of the simulated base
    mobile_base: MobileBaseConfig = Field(default_factory=MobileBaseConfig)
