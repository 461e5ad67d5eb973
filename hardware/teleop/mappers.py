"""Teleop commands -> robot commands, one mapper per action mode. Pure numpy.

- arm (``ee_delta`` teleop on a joint-position arm): the TCP moves by
  ``linear * max_linear_speed * dt`` (m, base frame) and turns by
  ``angular * max_angular_speed * dt`` (rad, about base-frame axes at the TCP); damped
  least-squares IK turns that into joint targets, rate-limited and clamped to the limits.
- mobile base: a body-frame Twist (x forward, yaw), optionally holonomic (y).
- drone: a body-frame velocity setpoint Twist (x, y, z, yaw rate).

Kinematics are passed in (``jacobian``), or come from the arm's description
(``ArmMapper.for_arm``: its chain, limits and gripper), so this module never imports a
simulator and works for every arm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.hardware.teleop.command import TeleopCommand

if TYPE_CHECKING:
    from tether.core.robot import ArmDescription

# jacobian(q (n,)) -> (J (6, n) rows linear then angular, TCP position (3,), rotation (3, 3))
JacobianFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class TwistCommand:
    """A body-frame velocity: ``linear`` (3,) m/s, ``angular`` (3,) rad/s (REP-103)."""

    linear: np.ndarray
    angular: np.ndarray


def rotvec_to_matrix(w: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) rad -> rotation matrix (3, 3) (Rodrigues)."""
    w = np.asarray(w, dtype=np.float64)
    th = float(np.linalg.norm(w))
    if th < 1e-12:
        return np.eye(3)
    k = w / th
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(th) * K + (1.0 - math.cos(th)) * (K @ K)


def rotation_error(R_target: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Rotation vector (3,) rad, base frame, turning R into R_target (small-angle exact)."""
    Re = R_target @ R.T
    v = 0.5 * np.array([Re[2, 1] - Re[1, 2], Re[0, 2] - Re[2, 0], Re[1, 0] - Re[0, 1]])
    s = float(np.linalg.norm(v))
    c = 0.5 * (float(np.trace(Re)) - 1.0)
    if s < 1e-12:
        return v
    return v * (math.atan2(s, c) / s)


def ik_step(
    q: np.ndarray,
    jacobian: JacobianFn,
    dp: np.ndarray,
    dr: np.ndarray,
    damping: float = 0.02,
) -> np.ndarray:
    """Joint change (n,) that moves the TCP by ``dp`` (3,) m and turns it by ``dr`` (3,) rad
    (both base frame), by damped least squares on the 6-D task. Pure function."""
    J, _, _ = jacobian(np.asarray(q, dtype=np.float64))
    e = np.concatenate([np.asarray(dp, np.float64), np.asarray(dr, np.float64)])
    JJt = J @ J.T + (damping**2) * np.eye(6)
    return J.T @ np.linalg.solve(JJt, e)


def ee_delta_to_joints(
    q: np.ndarray,
    jacobian: JacobianFn,
    dp: np.ndarray,
    dr: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    max_step: np.ndarray,
    damping: float = 0.02,
) -> np.ndarray:
    """Joint targets (n,) for a TCP delta: ``ik_step``, scaled as a whole so no joint moves
    more than ``max_step`` (n,) rad, then clipped to [lower, upper] (n,) rad. Pure."""
    dq = ik_step(q, jacobian, dp, dr, damping)
    ratio = float(np.max(np.abs(dq) / np.asarray(max_step, np.float64)))
    if ratio > 1.0:
        dq = dq / ratio  # keeps the direction of motion
    return np.clip(np.asarray(q, np.float64) + dq, lower, upper)


class ArmMapper:
    """End-effector-delta teleop for a joint-position arm with an optional gripper.

    Keeps its own commanded joints and integrates IK steps on them (commanding measured +
    delta would leave the position servos too little error to move), restarting from the
    measured joints when motion (re)starts or the two drift apart. A target pose is tracked
    so small IK errors do not accumulate; it stays within ``leash`` m / rad of the commanded
    pose, so pushing against a joint limit does not wind it up.

    Action: (n_arm,) joint targets (rad), plus one gripper element (m) when
    ``gripper_range`` = (closed, open) is given.
    """

    def __init__(
        self,
        jacobian: JacobianFn,
        lower: np.ndarray,
        upper: np.ndarray,
        max_velocity: np.ndarray,
        dt: float,
        max_linear_speed: float = 0.1,
        max_angular_speed: float = 0.8,
        gripper_range: tuple[float, float] | None = None,
        gripper_speed: float = 0.1,
        limit_margin: float = 0.02,
        resync_gap: float = 0.3,
        leash: float = 0.02,
    ) -> None:
        self.jacobian = jacobian
        self.lower = np.asarray(lower, np.float64) + limit_margin
        self.upper = np.asarray(upper, np.float64) - limit_margin
        self.max_step = np.asarray(max_velocity, np.float64) * dt
        self.dt = dt
        self.max_linear_speed = max_linear_speed
        self.max_angular_speed = max_angular_speed
        self.gripper_range = gripper_range
        self.gripper_step = gripper_speed * dt
        self.resync_gap = resync_gap
        self.leash = leash
        self.n = len(self.lower)
        self.reset()

    @classmethod
    def for_arm(
        cls, robot: ArmDescription, dt: float, joint_speed_scale: float = 1.0, **options: Any
    ) -> ArmMapper:
        """The mapper of an arm from its description: its chain's Jacobian, joint limits,
        ``joint_speed_scale`` x its joint velocity limits, and its gripper (range and speed).
        ``options``: the other keyword arguments of ``__init__`` (speeds, leash, ...)."""
        g = robot.gripper
        vmax = np.array([j.max_velocity for j in robot.joints], dtype=np.float64)
        return cls(
            robot.kinematics.jacobian,
            robot.lower,
            robot.upper,
            vmax * joint_speed_scale,
            dt,
            gripper_range=(g.lower, g.upper),
            gripper_speed=g.max_velocity * joint_speed_scale,
            **options,
        )

    def reset(self) -> None:
        """Forget the commanded state: the next ``step`` starts from the measurement."""
        self.q: np.ndarray | None = None
        self.grip_target: float | None = None
        self.grip: float | None = None
        self._p: np.ndarray | None = None
        self._R: np.ndarray | None = None

    def _sync(self, measured: np.ndarray) -> None:
        self.q = np.clip(measured[: self.n], self.lower, self.upper)
        _, self._p, self._R = self.jacobian(self.q)
        if self.gripper_range is not None and len(measured) > self.n:
            closed, opened = self.gripper_range
            self.grip = float(np.clip(measured[self.n], closed, opened))
            if self.grip_target is None:
                self.grip_target = opened if self.grip > 0.5 * (closed + opened) else closed

    def step(self, cmd: TeleopCommand, measured: np.ndarray) -> np.ndarray:
        """Action for one control step, shape (n_arm [+1],), from the measured joint (and
        gripper) positions ``measured`` (at least n_arm,)."""
        measured = np.asarray(measured, np.float64)
        if self.q is None or np.abs(self.q - measured[: self.n]).max() > self.resync_gap:
            self._sync(measured)
        assert self.q is not None and self._p is not None and self._R is not None
        dp = cmd.linear * self.max_linear_speed * self.dt
        dr = cmd.angular * self.max_angular_speed * self.dt
        self._p = self._p + dp
        self._R = rotvec_to_matrix(dr) @ self._R
        _, p, R = self.jacobian(self.q)
        e_lin = self._p - p
        e_ang = rotation_error(self._R, R)
        # the leash: a target the arm cannot follow (joint limit) is dragged along
        if np.linalg.norm(e_lin) > self.leash:
            e_lin *= self.leash / np.linalg.norm(e_lin)
            self._p = p + e_lin
        if np.linalg.norm(e_ang) > 10 * self.leash:
            e_ang *= 10 * self.leash / np.linalg.norm(e_ang)
            self._R = rotvec_to_matrix(e_ang) @ R
        self.q = ee_delta_to_joints(
            self.q, self.jacobian, e_lin, e_ang, self.lower, self.upper, self.max_step
        )
        if self.gripper_range is None:
            return self.q.copy()
        closed, opened = self.gripper_range
        if self.grip_target is None:
            self.grip_target = opened
        if self.grip is None:
            self.grip = self.grip_target
        if cmd.gripper_toggle:
            self.grip_target = closed if self.grip_target == opened else opened
        self.grip = float(
            np.clip(self.grip_target, self.grip - self.gripper_step, self.grip + self.gripper_step)
        )
        return np.concatenate([self.q, [self.grip]])


def base_twist(
    cmd: TeleopCommand, max_linear_speed: float, max_angular_speed: float, holonomic: bool = False
) -> TwistCommand:
    """Mobile-base Twist (body frame): linear.x forward, linear.y left (holonomic only),
    angular.z yaw rate. m/s, rad/s. Pure."""
    lin = np.array([cmd.linear[0], cmd.linear[1] if holonomic else 0.0, 0.0]) * max_linear_speed
    ang = np.array([0.0, 0.0, cmd.angular[2]]) * max_angular_speed
    return TwistCommand(lin, ang)


def drone_velocity(
    cmd: TeleopCommand, max_linear_speed: float, max_angular_speed: float
) -> TwistCommand:
    """Drone velocity setpoint (body frame, yaw-only rotation): linear x/y/z m/s and yaw
    rate rad/s. Pure."""
    lin = np.asarray(cmd.linear, np.float64) * max_linear_speed
    ang = np.array([0.0, 0.0, cmd.angular[2]]) * max_angular_speed
    return TwistCommand(lin, ang)
