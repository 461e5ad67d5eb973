"""The Clearpath Husky A200 as every layer sees it: dimensions, limits, sensors and assets,
registered as a ``MobileBaseDescription`` (``ROBOT``) that both engines' mobile-base
backends read.

Pure python: importing this never loads a simulator. Dimensions and masses are those of
pybullet_data's ``husky/husky.urdf`` (Clearpath's husky_description); the velocity and
acceleration limits are Clearpath's ``husky_control/config/control.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tether.core.robot_kinds import (
    BaseCamera,
    MobileBaseDescription,
    MobileBaseMujocoAssets,
    MobileBasePybulletAssets,
)
from tether.core.spec import CameraSpec, RobotSpec

WHEEL_JOINTS = ("front_left_wheel", "front_right_wheel", "rear_left_wheel", "rear_right_wheel")
# +1 for left wheels, -1 for right wheels (the sign of their track offset)
WHEEL_SIDE = (1.0, -1.0, 1.0, -1.0)

# geometry (m) and masses (kg) from the URDF
WHEEL_RADIUS = 0.17775
WHEEL_WIDTH = 0.1143
# distance between left and right wheel centres (2 x 0.2854)
TRACK_WIDTH = 0.5708
# distance between front and rear axles (2 x 0.256)
WHEELBASE = 0.512
# base_link sits this high above the ground (base_footprint); wheel centres 0.03282 above it
BASE_HEIGHT = 0.14493
WHEEL_Z = 0.03282
# the chassis collision box (full sizes) and its centre above base_link
CHASSIS_SIZE = (1.0074, 0.5709, 0.2675)
# the outer wheel faces, left to right (m): the simulated chassis box is this wide, so that
# obstacles meet the base's outline (the wheels, spheres in both engines, do not collide with
# obstacles: their equators reach 12 cm beyond the tyres)
OUTLINE_WIDTH = TRACK_WIDTH + WHEEL_WIDTH
CHASSIS_Z = 0.12498
CHASSIS_MASS = 33.455
# centre of mass relative to base_link and the diagonal of the inertia tensor (kg m^2)
CHASSIS_COM = (-0.08748, -0.00085, 0.09947)
CHASSIS_INERTIA = (0.6022, 1.7386, 2.0296)
WHEEL_MASS = 2.637
WHEEL_INERTIA = (0.02467, 0.04411, 0.02467)  # about x, y (the axle), z
TOTAL_MASS = CHASSIS_MASS + 4 * WHEEL_MASS

# Clearpath's husky_velocity_controller limits
MAX_LINEAR = 1.0  # m/s
MAX_ANGULAR = 2.0  # rad/s
MAX_LINEAR_ACCEL = 3.0  # m/s^2
MAX_ANGULAR_ACCEL = 6.0  # rad/s^2
# wheel speed at full linear speed plus full turning, rad/s (the motors' velocity limit)
MAX_WHEEL_SPEED = (MAX_LINEAR + MAX_ANGULAR * TRACK_WIDTH / 2) / WHEEL_RADIUS


def husky_spec(control_hz: float = 20.0, cameras: Sequence[CameraSpec] = ()) -> RobotSpec:
    """RobotSpec of a Husky (kind ``mobile_base``): ``ROBOT.spec``.

    Action (2,), mode ``twist``: body-frame forward velocity ``linear_x`` (m/s, +-1.0) and yaw
    rate ``angular_z`` (rad/s, +-2.0, counter-clockwise positive), REP-103.

    State (13,): wheel odometry in the odom frame (x, y in m, yaw in rad, forward velocity
    m/s, yaw rate rad/s; integrated from the wheel encoders, so it drifts from the true pose
    as a real robot's does), then the 4 wheel angles (rad) and the 4 wheel speeds (rad/s) in
    ``WHEEL_JOINTS`` order. The odom frame is the world frame at reset.
    """
    return ROBOT.spec(control_hz, cameras)


# ---- sensors ------------------------------------------------------------------------------

# lidar origin in the base_footprint frame (m): on a mast above the top plate (0.40 m), so
# its beams clear the chassis
LIDAR_XYZ = (0.0, 0.0, 0.5)
# cameras fixed to the base: eye and look-at point in the base_footprint frame (m), z up
CAMERAS = {
    "front": ((0.55, 0.0, 0.45), (2.5, 0.0, 0.2)),
    "chase": ((-3.0, 0.0, 2.0), (1.0, 0.0, 0.0)),
}
# wheel motor torque limit (N m): enough to skid-turn in place on a mu = 1 floor (the MuJoCo
# model's actuators carry the same forcerange)
WHEEL_TORQUE = 60.0
# effective track / geometric track at which the mean yaw rate of a turn in place matches the
# commanded one (0.5-2 rad/s) on the engines' floors (diff_drive_controller's
# wheel_separation_multiplier; Clearpath uses 1.875 on the real Husky). MuJoCo's contact model
# resists the skid more than Coulomb friction would, PyBullet's less
MUJOCO_SEPARATION_MULTIPLIER = 2.9
PYBULLET_SEPARATION_MULTIPLIER = 1.4


# ---- registration -------------------------------------------------------------------------

ASSETS = Path(__file__).resolve().parent / "assets"

ROBOT = MobileBaseDescription(
    name="husky",
    summary="Clearpath Husky A200 (husky_description URDF dimensions, husky_control limits)",
    folder=ASSETS.parent,
    control_hz=20.0,
    wheel_joints=WHEEL_JOINTS,
    wheel_side=WHEEL_SIDE,
    wheel_radius=WHEEL_RADIUS,
    track_width=TRACK_WIDTH,
    # chassis length; outer wheel faces (1.01 x 0.69 m)
    footprint=(CHASSIS_SIZE[0] / 2, OUTLINE_WIDTH / 2),
    max_linear=MAX_LINEAR,
    max_angular=MAX_ANGULAR,
    max_linear_accel=MAX_LINEAR_ACCEL,
    max_angular_accel=MAX_ANGULAR_ACCEL,
    wheel_torque=WHEEL_TORQUE,
    lidar_xyz=LIDAR_XYZ,
    cameras={name: BaseCamera(eye=eye, target=at) for name, (eye, at) in CAMERAS.items()},
    mujoco=MobileBaseMujocoAssets(
        model="assets/husky.xml", separation_multiplier=MUJOCO_SEPARATION_MULTIPLIER
    ),
    pybullet=MobileBasePybulletAssets(
        loader="tether.robots.husky.pybullet:load_husky",
        separation_multiplier=PYBULLET_SEPARATION_MULTIPLIER,
    ),
)
