"""Descriptions of the robot kinds that are not arms: a wheeled mobile base and an
X-configuration quadrotor (tether.core.robot holds the common base and the arm). A robot
folder fills one in with its numbers and cites them; engines read only these fields.

Light: pydantic and numpy only. Asset paths are relative to the robot's folder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether.core.robot import RobotDescription, SpecFactoryDescription, Vec3
from tether.core.spec import ActionSpec, CameraSpec, RobotSpec

GRAVITY = 9.81  # m/s^2, the value gym-pybullet-drones uses; every drone model takes it


# ---- mobile base ------------------------------------------------------------------------


class BaseCamera(BaseModel):
    """A camera fixed to the base: eye and look-at point (m) in the base_footprint frame."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    eye: Vec3
    target: Vec3


class MobileBaseMujocoAssets(BaseModel):
    """The base in MuJoCo: an MJCF with a free body ``base_body`` on a floor, one hinge joint
    per wheel and one velocity actuator per wheel, both named as the wheel joint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    base_body: str = "base_footprint"
    # effective / geometric track at which a commanded turn in place gives the commanded yaw
    # rate on the engine's floor (diff_drive_controller's wheel_separation_multiplier),
    # calibrated per engine: contact models resist a skid differently
    separation_multiplier: float = Field(gt=0)


class MobileBasePybulletAssets(BaseModel):
    """The base in PyBullet: a URDF in the robot's folder, or ``module:function`` taking
    (pybullet, client_id) and returning the body id (to load and patch a pybullet_data model).
    The base link is base_footprint; the wheel joints are named as the description's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    urdf: str | None = None
    loader: str | None = None
    # as MobileBaseMujocoAssets.separation_multiplier, for PyBullet's contacts
    separation_multiplier: float = Field(gt=0)

    @model_validator(mode="after")
    def _one_source(self) -> MobileBasePybulletAssets:
        if (self.urdf is None) == (self.loader is None):
            raise ValueError("set exactly one of urdf and loader")
        return self


class MobileBaseDescription(RobotDescription):
    """A differential-drive (skid-steer) base with a planar lidar.

    Action (2,), mode ``twist``: body-frame forward velocity ``linear_x`` (m/s) and yaw rate
    ``angular_z`` (rad/s, counter-clockwise positive), REP-103. State (5 + 2 wheels,): wheel
    odometry in the odom frame (x, y m, yaw rad, forward velocity m/s, yaw rate rad/s), then
    every wheel's angle (rad) and every wheel's speed (rad/s) in ``wheel_joints`` order.
    """

    kind: Literal["mobile_base"] = "mobile_base"
    wheel_joints: tuple[str, ...]
    # +1 for a left wheel, -1 for a right one (the sign of its track offset)
    wheel_side: tuple[float, ...]
    wheel_radius: float = Field(gt=0)  # m
    # distance between the left and right wheel centres (m)
    track_width: float = Field(gt=0)
    # half-extents (m) of the outline seen from above: along x (chassis), along y (outer
    # wheel faces); tasks keep obstacles off it
    footprint: tuple[float, float]
    # velocity controller limits
    max_linear: float = Field(gt=0)  # m/s
    max_angular: float = Field(gt=0)  # rad/s
    max_linear_accel: float = Field(gt=0)  # m/s^2
    max_angular_accel: float = Field(gt=0)  # rad/s^2
    # torque limit of each wheel motor (N m)
    wheel_torque: float = Field(gt=0)
    # lidar origin in the base_footprint frame (m)
    lidar_xyz: Vec3
    cameras: dict[str, BaseCamera] = Field(default_factory=dict)
    mujoco: MobileBaseMujocoAssets
    pybullet: MobileBasePybulletAssets

    @model_validator(mode="after")
    def _consistent(self) -> MobileBaseDescription:
        if len(self.wheel_side) != len(self.wheel_joints):
            raise ValueError("wheel_side needs one sign per wheel joint")
        if set(self.wheel_side) != {1.0, -1.0}:
            raise ValueError("wheel_side needs left (+1) and right (-1) wheels")
        return self

    @property
    def state_names(self) -> tuple[str, ...]:
        return (
            "odom_x",
            "odom_y",
            "odom_yaw",
            "odom_vx",
            "odom_wz",
            *(f"{j}_position" for j in self.wheel_joints),
            *(f"{j}_velocity" for j in self.wheel_joints),
        )

    @property
    def max_wheel_speed(self) -> float:
        """Wheel speed (rad/s) at full linear speed plus full turning."""
        return (self.max_linear + self.max_angular * self.track_width / 2) / self.wheel_radius

    def spec(
        self, control_hz: float | None = None, cameras: Sequence[CameraSpec] = (), **options: Any
    ) -> RobotSpec:
        if options:
            raise TypeError(f"mobile base '{self.name}' takes no options {sorted(options)}")
        action = ActionSpec(
            mode="twist",
            names=("linear_x", "angular_z"),
            low=(-self.max_linear, -self.max_angular),
            high=(self.max_linear, self.max_angular),
            units=("m/s", "rad/s"),
        )
        return RobotSpec(
            name=self.name,
            kind="mobile_base",
            cameras=tuple(cameras),
            control_hz=control_hz or self.control_hz,
            action=action,
            state_names=self.state_names,
        )


# ---- quadrotor --------------------------------------------------------------------------


class Rotor(NamedTuple):
    """One rotor of an X layout: where it sits and which way it turns."""

    motor: str  # the maker's motor name (Crazyflie: M1..M4)
    x: float  # sign of its body x (FLU); position = (x, y, 0) * arm_length / sqrt(2)
    y: float  # sign of its body y
    spin: float  # seen from above: +1 = CCW (angular velocity +z), -1 = CW


class QuadrotorParams(BaseModel):
    """Physical parameters of an X-configuration quadrotor. SI units, RPM for rotor speed.

    Rotor i of every array (rpm, thrust, mixer column) is ``rotors[i]``. The drag and
    ground-effect terms are gym-pybullet-drones' models (tether.sim.quadrotor.dynamics);
    their coefficients default to 0 (off).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mass: float = Field(gt=0)  # kg
    # kg m^2, diagonal body inertia
    inertia: tuple[float, float, float]
    arm_length: float = Field(gt=0)  # m, centre to rotor axis
    # N / rpm^2: thrust of one rotor = kf * rpm^2
    kf: float = Field(gt=0)
    # N m / rpm^2: reaction torque of one rotor = km * rpm^2
    km: float = Field(gt=0)
    # max total thrust / weight; sets max rpm = sqrt(t2w * m g / (4 kf))
    thrust_to_weight: float = Field(gt=1)
    # the four rotors by index: position signs and spin
    rotors: tuple[Rotor, Rotor, Rotor, Rotor]
    # s, first-order rotor speed lag; 0 = ideal motors
    motor_tau: float = Field(0.0, ge=0)
    # linear drag in N per (m/s body velocity) per (rad/s summed rotor speed):
    # F_b = -c * sum(omega_i) * v_b
    drag_xy: float = Field(0.0, ge=0)
    drag_z: float = Field(0.0, ge=0)
    # ground effect: extra thrust per rotor kf rpm^2 * gnd_eff_coeff * (prop_radius / (4 h))^2,
    # h = rotor height, clipped below
    gnd_eff_coeff: float = Field(0.0, ge=0)
    prop_radius: float = Field(gt=0)  # m

    @property
    def spin(self) -> tuple[float, float, float, float]:
        """Rotor spin directions (+1 = CCW seen from above), by rotor index."""
        a, b, c, d = (r.spin for r in self.rotors)
        return (a, b, c, d)

    @property
    def weight(self) -> float:
        """N."""
        return self.mass * GRAVITY

    @property
    def hover_rpm(self) -> float:
        """RPM per rotor whose four thrusts balance gravity."""
        return float(np.sqrt(self.weight / (4.0 * self.kf)))

    @property
    def max_rpm(self) -> float:
        """RPM limit per rotor."""
        return float(np.sqrt(self.thrust_to_weight * self.weight / (4.0 * self.kf)))

    @property
    def max_thrust(self) -> float:
        """Collective thrust at max rpm, N."""
        return 4.0 * self.kf * self.max_rpm**2

    def rotor_positions(self) -> np.ndarray:
        """Rotor centres in the body frame (FLU), m, rows by rotor index. Shape: (4, 3)."""
        a = self.arm_length / np.sqrt(2.0)
        return np.array([[r.x * a, r.y * a, 0.0] for r in self.rotors])

    def mixer(self) -> np.ndarray:
        """Map rpm^2 of the 4 rotors to [thrust N, torque_x, torque_y, torque_z N m].

        Shape: (4, 4); wrench = mixer @ rpm**2.
        """
        pos = self.rotor_positions()
        kf, km = self.kf, self.km
        spin = np.asarray(self.spin)
        return np.stack(
            [
                np.full(4, kf),
                kf * pos[:, 1],  # thrust up at +y rolls positive (right-hand about +x)
                -kf * pos[:, 0],  # thrust up at +x pitches nose up = negative about +y
                -km * spin,  # reaction torque opposes the rotor's spin
            ]
        )


class MultirotorMujocoAssets(BaseModel):
    """The drone in MuJoCo: a scene (floor, lights) holding one drone body with a free joint
    and one mocap target marker; the engine copies both once per drone (cf<i>, cf<i>/target).
    Loads are applied by the engine, so the drone needs no actuators."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: str
    body: str = "cf"
    target: str = "target"


class MultirotorPybulletAssets(BaseModel):
    """The drone in PyBullet: its URDF (body frame FLU at the centre of mass); the engine
    builds the floor and the target markers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    urdf: str


class MultirotorDescription(SpecFactoryDescription):
    """An X-configuration quadrotor. Its spec comes from the folder's factory (``factory``,
    options ``mode`` and ``num_drones``); engines and controllers read ``params``."""

    kind: Literal["quadcopter"] = "quadcopter"
    params: QuadrotorParams
    mujoco: MultirotorMujocoAssets
    pybullet: MultirotorPybulletAssets
