"""Differential-drive (skid-steer) kinematics, acceleration limiting, wheel odometry and
lidar beam geometry. Pure numpy, shared by the simulated and the mock mobile bases.

Frames are REP-103: x forward, y left, z up; yaw counter-clockwise from +x.
"""

from __future__ import annotations

import math

import numpy as np


def wheel_speeds(vx: float, wz: float, track: float, radius: float) -> tuple[float, float]:
    """Left and right wheel speeds (rad/s) for a body twist: ``vx`` (m/s) forward, ``wz``
    (rad/s) yaw rate, ``track`` (m) the effective distance between the wheel rows, ``radius``
    (m) the wheel radius."""
    left = (vx - 0.5 * wz * track) / radius
    right = (vx + 0.5 * wz * track) / radius
    return left, right


def body_twist(left: float, right: float, track: float, radius: float) -> tuple[float, float]:
    """Inverse of ``wheel_speeds``: (vx m/s, wz rad/s) from left/right wheel speeds (rad/s)."""
    return radius * (left + right) / 2.0, radius * (right - left) / track


class TwistLimiter:
    """Ramps a commanded twist (vx, wz) towards its target with acceleration limits, like the
    ROS diff_drive_controller's limiter; the output is what the motors are asked for."""

    def __init__(self, max_linear_accel: float, max_angular_accel: float) -> None:
        self.max_accel = np.array([max_linear_accel, max_angular_accel], dtype=np.float64)
        self.current = np.zeros(2)

    def reset(self) -> None:
        self.current = np.zeros(2)

    def step(self, target: np.ndarray, dt: float) -> np.ndarray:
        """Advance ``dt`` seconds towards ``target`` (2,); returns the new twist (2,)."""
        delta = np.clip(
            np.asarray(target, np.float64) - self.current, -self.max_accel * dt, self.max_accel * dt
        )
        self.current = self.current + delta
        return self.current.copy()


class WheelOdometry:
    """Planar pose from wheel encoder angles, integrated at the control rate (second-order
    Runge-Kutta, as ros2_controllers' diff_drive_controller). Wheel slip is not observed, so
    the estimate drifts from the true pose, as it does on a real skid-steer base.

    ``track`` (m) is the effective wheel separation (geometric track x the
    wheel_separation_multiplier that accounts for skid-steer slip); with a ``gyro`` the
    heading is the gyro's (``Gyro``) and only the position comes from the wheels.
    """

    def __init__(self, track: float, radius: float, gyro: Gyro | None = None) -> None:
        self.track = track
        self.radius = radius
        self.gyro = gyro
        self.reset()

    def reset(
        self, x: float = 0.0, y: float = 0.0, yaw: float = 0.0, seed: int | None = None
    ) -> None:
        """Start at pose (x m, y m, yaw rad); the next ``update`` only records the angles.
        With a gyro, its new bias and noise come from ``seed``."""
        self.x, self.y, self.yaw = x, y, yaw
        self.vx, self.wz = 0.0, 0.0
        self._last: tuple[float, float] | None = None
        if self.gyro is not None:
            self.gyro.reset(yaw, np.random.default_rng(None if seed is None else [seed, 2]))

    def update(
        self, left_angle: float, right_angle: float, dt: float, true_yaw: float | None = None
    ) -> None:
        """New mean encoder angles (rad) of the left and right wheels, ``dt`` s after the
        previous ones. With a gyro (odometry fused with an IMU) the heading change is the
        gyro's, from the base's true heading ``true_yaw`` (rad), not the wheels'."""
        if self._last is None:
            self._last = (left_angle, right_angle)
            return
        dl = left_angle - self._last[0]
        dr = right_angle - self._last[1]
        self._last = (left_angle, right_angle)
        ds = self.radius * (dl + dr) / 2.0
        if self.gyro is None:
            dth = self.radius * (dr - dl) / self.track
        else:
            if true_yaw is None:
                raise ValueError("odometry with a gyro needs the base's true heading")
            dth = self.gyro.delta(true_yaw, dt)
        self.x += ds * math.cos(self.yaw + 0.5 * dth)
        self.y += ds * math.sin(self.yaw + 0.5 * dth)
        self.yaw = wrap_angle(self.yaw + dth)
        if dt > 0:
            self.vx, self.wz = ds / dt, dth / dt

    def as_array(self) -> np.ndarray:
        """(x, y, yaw, vx, wz), shape (5,), float64."""
        return np.array([self.x, self.y, self.yaw, self.vx, self.wz], dtype=np.float64)


class Gyro:
    """A yaw-rate gyro integrated over each control period: the true heading change plus a
    bias drawn at each reset (uniform within +-``bias`` rad/s) and white noise of ``noise``
    rad/s per period. What an IMU gives the odometry of a base that fuses it (a real Husky's
    robot_localization EKF): a heading that does not drift with the tracks' slip."""

    def __init__(self, bias: float, noise: float) -> None:
        self.bias_range, self.noise = bias, noise
        self.reset(0.0, np.random.default_rng(0))

    def reset(self, yaw: float, rng: np.random.Generator) -> None:
        """Start at the true heading ``yaw`` (rad), with a new bias from ``rng``."""
        self.rng = rng
        self.last = yaw
        self.bias = float(rng.uniform(-self.bias_range, self.bias_range))

    def delta(self, yaw: float, dt: float) -> float:
        """The measured heading change (rad) since the last call, the true heading now being
        ``yaw`` (rad), ``dt`` s later."""
        true = wrap_angle(yaw - self.last)
        self.last = yaw
        return true + (self.bias + self.noise * float(self.rng.standard_normal())) * dt


def wrap_angle(a: float) -> float:
    """Angle (rad) wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def yaw_of(quat_wxyz: np.ndarray) -> float:
    """Yaw (rad) of a wxyz quaternion."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_quat(yaw: float) -> np.ndarray:
    """wxyz quaternion (4,) of a rotation by ``yaw`` (rad) about z."""
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def beam_angles(n_beams: int, fov_deg: float) -> np.ndarray:
    """Beam angles (rad) in the sensor frame, shape (n_beams,), from -fov/2 counter-clockwise
    (sensor_msgs/LaserScan angle_min .. angle_max). A 360 deg scan leaves out the last beam
    (it would repeat the first)."""
    fov = math.radians(fov_deg)
    if fov_deg >= 360.0:
        return -math.pi + np.arange(n_beams) * (2 * math.pi / n_beams)
    if n_beams == 1:
        return np.zeros(1)
    return np.linspace(-fov / 2, fov / 2, n_beams)


def side_angles(wheel_angles: np.ndarray, side: tuple[float, ...]) -> tuple[float, float]:
    """Mean angle (rad) of the left (``side`` > 0) and of the right wheels."""
    s = np.asarray(side)
    a = np.asarray(wheel_angles, dtype=np.float64)
    return float(a[s > 0].mean()), float(a[s < 0].mean())


def finish_scan(
    ranges: np.ndarray,
    range_min: float,
    range_max: float,
    noise_std: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Lidar ranges (m) with Gaussian noise on the beams that hit something, clipped to
    [range_min, range_max]; float32."""
    r = np.asarray(ranges, dtype=np.float64)
    if noise_std > 0:
        r = r + (r < range_max) * rng.normal(0.0, noise_std, r.shape)
    return np.clip(r, range_min, range_max).astype(np.float32)
