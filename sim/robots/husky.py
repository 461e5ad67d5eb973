"""The Clearpath Husky A200 as every layer sees it: dimensions, limits, action and state layout.

Pure python: importing this never loads a simulator. Dimensions and masses are those of
pybullet_data's ``husky/husky.urdf`` (Clearpath's husky_description); the velocity and
acceleration limits are Clearpath's ``husky_control/config/control.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.core.errors import ConfigError
from tether.core.spec import ActionSpec, CameraSpec, RobotSpec

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

STATE_NAMES = (
    "odom_x",
    "odom_y",
    "odom_yaw",
    "odom_vx",
    "odom_wz",
    *(f"{j}_position" for j in WHEEL_JOINTS),
    *(f"{j}_velocity" for j in WHEEL_JOINTS),
)


def husky_spec(control_hz: float = 20.0, cameras: Sequence[CameraSpec] = ()) -> RobotSpec:
    """RobotSpec of a Husky (kind ``mobile_base``).

    Action (2,), mode ``twist``: body-frame forward velocity ``linear_x`` (m/s, +-1.0) and yaw
    rate ``angular_z`` (rad/s, +-2.0, counter-clockwise positive), REP-103.

    State (13,): wheel odometry in the odom frame (x, y in m, yaw in rad, forward velocity
    m/s, yaw rate rad/s; integrated from the wheel encoders, so it drifts from the true pose
    as a real robot's does), then the 4 wheel angles (rad) and the 4 wheel speeds (rad/s) in
    ``WHEEL_JOINTS`` order. The odom frame is the world frame at reset.
    """
    action = ActionSpec(
        mode="twist",
        names=("linear_x", "angular_z"),
        low=(-MAX_LINEAR, -MAX_ANGULAR),
        high=(MAX_LINEAR, MAX_ANGULAR),
        units=("m/s", "rad/s"),
    )
    return RobotSpec(
        name="husky",
        kind="mobile_base",
        cameras=tuple(cameras),
        control_hz=control_hz,
        action=action,
        state_names=STATE_NAMES,
    )


# ---- sensors and scene, shared by the simulator backends ----------------------------------

# lidar origin in the base_footprint frame (m): on a mast above the top plate (0.40 m), so
# its beams clear the chassis
LIDAR_XYZ = (0.0, 0.0, 0.5)
# cameras fixed to the base: eye and look-at point in the base_footprint frame (m), z up
CAMERAS = {
    "front": ((0.55, 0.0, 0.45), (2.5, 0.0, 0.2)),
    "chase": ((-3.0, 0.0, 2.0), (1.0, 0.0, 0.0)),
}
# task bodies: a goal marker (visual only) and static cylindrical obstacles named
# obstacle_<i>; obstacles a task has not placed are parked far away
GOAL_RADIUS = 0.3
OBSTACLE_RADIUS = 0.25
OBSTACLE_HEIGHT = 1.0
PARKING = (100.0, 100.0)
OBJECT_NAME = re.compile(r"^(goal|obstacle_\d+)$")


def check_objects(objects: Sequence[str], engine: str) -> None:
    """Raise ConfigError unless every task object is ``goal`` or ``obstacle_<i>``."""
    bad = [o for o in objects if not OBJECT_NAME.match(o)]
    if bad:
        raise ConfigError(
            f"the {engine} mobile-base scene has no task object(s) {bad} "
            "(available: goal, obstacle_<i>)"
        )
