"""A mock differential-drive base with the interface of a real one's driver (``cmd_vel`` in,
``odom`` out): the commanded twist ramps with acceleration limits after a latency, the base
moves as a unicycle, and the wheel encoders and odometry follow from the wheel speeds.

Defaults are a Clearpath Husky's (track 0.5708 m, wheel radius 0.17775 m, 3 m/s^2 and
6 rad/s^2); its state has the layout of ``husky_spec`` (tether.robots.husky.robot). Time comes
from a clock and the state is integrated lazily, as in MockArm.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import InvalidCommand, TetherError
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.mock.clock import Clock, monotonic

SUBSTEP = 0.001  # s
STATE_DIM = 13  # odom x, y, yaw, vx, wz, 4 wheel angles, 4 wheel speeds


class MockBaseConfig(BaseModel):
    """Geometry, limits and latency of the mock base."""

    model_config = ConfigDict(extra="forbid")
    track_width: float = Field(0.5708, gt=0)  # m, between left and right wheels
    wheel_radius: float = Field(0.17775, gt=0)  # m
    max_linear_accel: float = Field(3.0, gt=0)  # m/s^2
    max_angular_accel: float = Field(6.0, gt=0)  # rad/s^2
    # seconds between a command's arrival and its first effect
    latency_s: float = Field(0.02, ge=0)
    # stop (ramp to zero) when no command arrived for this long, as base drivers do (s)
    cmd_timeout_s: float = Field(0.5, gt=0)


class MockBase:
    """Robot: a ``twist`` base. ``send_action((vx m/s, wz rad/s))``; observation ``state``
    (13,) = odometry x, y (m), yaw (rad), vx (m/s), wz (rad/s), wheel angles (4, rad) and
    wheel speeds (4, rad/s) in front-left, front-right, rear-left, rear-right order;
    ``base_pose`` (7,) the true pose (x, y, z, wxyz), the same as the odometry here (no
    slip); float32, stamped with the clock in ns."""

    def __init__(
        self, spec: RobotSpec, cfg: MockBaseConfig | None = None, clock: Clock = monotonic
    ) -> None:
        if spec.kind != "mobile_base" or spec.action.mode != "twist":
            raise TetherError(
                f"the mock base drives a twist-controlled mobile base, not '{spec.name}'"
            )
        if len(spec.state_names) != STATE_DIM:
            raise TetherError(
                f"the mock base reports {STATE_DIM} state values (husky layout), "
                f"'{spec.name}' has {len(spec.state_names)}"
            )
        self.spec = spec
        self.cfg = cfg or MockBaseConfig()
        self.clock = clock
        self._low = spec.action.low_array().astype(np.float64)
        self._high = spec.action.high_array().astype(np.float64)
        self._connected = False
        self._reset_state()

    def _reset_state(self) -> None:
        self.pose = np.zeros(3)  # x, y, yaw
        self.twist = np.zeros(2)  # current vx, wz
        self.wheels = np.zeros(2)  # left, right wheel angles (rad)
        self._target = np.zeros(2)
        self._pending: list[tuple[float, np.ndarray]] = []
        self._last_cmd_t = -math.inf
        self._t = 0.0

    # ---- Robot ------------------------------------------------------------------------

    def connect(self) -> None:
        self._reset_state()
        self._t = self.clock()
        self._connected = True

    def disconnect(self) -> None:
        self._connected = False

    @property
    def is_connected(self) -> bool:
        return self._connected

    def send_action(self, action: np.ndarray) -> None:
        """Command the twist ``action`` (2,): forward m/s, yaw rate rad/s (clipped to the
        spec's limits)."""
        self._advance()
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (2,):
            raise InvalidCommand(f"twist must have shape (2,), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise InvalidCommand("twist contains NaN or inf")
        self._pending.append((self._t + self.cfg.latency_s, np.clip(a, self._low, self._high)))

    def get_observation(self) -> Observation:
        self._advance()
        left, right = self._wheel_speeds()
        state = np.concatenate(
            [
                self.pose,
                self.twist,
                [self.wheels[0], self.wheels[1], self.wheels[0], self.wheels[1]],
                [left, right, left, right],
            ]
        )
        yaw = self.pose[2]
        pose = [self.pose[0], self.pose[1], 0.0, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        return Observation(
            {"state": state.astype(np.float32), "base_pose": np.array(pose, np.float32)},
            stamp_ns=round(self._t * 1e9),
        )

    # ---- internals --------------------------------------------------------------------

    def _wheel_speeds(self) -> tuple[float, float]:
        vx, wz = self.twist
        half = 0.5 * wz * self.cfg.track_width
        return (vx - half) / self.cfg.wheel_radius, (vx + half) / self.cfg.wheel_radius

    def _advance(self) -> None:
        if not self._connected:
            raise TetherError("the mock base is not connected: call connect() first")
        now = self.clock()
        accel = np.array([self.cfg.max_linear_accel, self.cfg.max_angular_accel]) * SUBSTEP
        for _ in range(math.floor((now - self._t) / SUBSTEP + 1e-9)):
            t = self._t + SUBSTEP
            # a command arriving within this substep acts from the next one
            while self._pending and self._pending[0][0] <= self._t + 1e-9:
                self._target = self._pending.pop(0)[1]
                self._last_cmd_t = t
            if t - self._last_cmd_t > self.cfg.cmd_timeout_s:
                self._target = np.zeros(2)
            self.twist = self.twist + np.clip(self._target - self.twist, -accel, accel)
            vx, wz = self.twist
            yaw = self.pose[2] + 0.5 * wz * SUBSTEP
            self.pose += (vx * math.cos(yaw) * SUBSTEP, vx * math.sin(yaw) * SUBSTEP, wz * SUBSTEP)
            self.pose[2] = (self.pose[2] + math.pi) % (2 * math.pi) - math.pi
            self.wheels += np.array(self._wheel_speeds()) * SUBSTEP
            self._t = t
