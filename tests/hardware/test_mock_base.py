"""MockBase: a diff-drive base with acceleration limits, latency, command timeout and wheel
odometry, on a ManualClock."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tether.core.errors import InvalidCommand, TetherError
from tether.core.protocols import Robot
from tether.hardware.mock.base import MockBase, MockBaseConfig
from tether.hardware.mock.clock import ManualClock
from tether.robots.husky.robot import TRACK_WIDTH, WHEEL_RADIUS, husky_spec


def make(**cfg: float) -> tuple[MockBase, ManualClock]:
    clock = ManualClock()
    base = MockBase(husky_spec(), MockBaseConfig(**cfg), clock)
    base.connect()
    return base, clock


def drive(
    base: MockBase, clock: ManualClock, twist: tuple[float, float], seconds: float, hz: float = 20.0
) -> np.ndarray:
    """Send ``twist`` at ``hz`` for ``seconds``; returns the states (n, 13)."""
    out = []
    for _ in range(round(seconds * hz)):
        base.send_action(np.array(twist))
        clock.advance(1.0 / hz)
        out.append(base.get_observation()["state"])
    return np.asarray(out, dtype=np.float64)


def test_is_a_robot() -> None:
    base, _ = make()
    assert isinstance(base, Robot)
    obs = base.get_observation()
    assert obs["state"].shape == (13,) and obs["base_pose"].shape == (7,)
    base.disconnect()
    with pytest.raises(TetherError, match="connect"):
        base.get_observation()


def test_acceleration_limit_and_latency() -> None:
    base, clock = make(latency_s=0.05, max_linear_accel=3.0)
    base.send_action(np.array([1.0, 0.0]))
    clock.advance(0.05)
    assert base.get_observation()["state"][3] == pytest.approx(0.0, abs=1e-9)
    clock.advance(0.1)
    assert base.get_observation()["state"][3] == pytest.approx(0.3, abs=0.01)
    states = drive(base, clock, (1.0, 0.0), 2.0)
    assert states[-1, 3] == pytest.approx(1.0)
    assert np.all(np.diff(states[:, 3]) <= 3.0 / 20.0 + 1e-6)
    # the wheel speeds are the twist's: v / r on every wheel
    np.testing.assert_allclose(states[-1, 9:13], 1.0 / WHEEL_RADIUS, rtol=1e-5)


def test_drives_a_circle_and_integrates_wheels() -> None:
    base, clock = make(max_linear_accel=100.0, max_angular_accel=100.0, latency_s=0.0)
    v, w = 0.5, 0.5
    states = drive(base, clock, (v, w), 2 * math.pi / w)
    # one full circle of radius v / w = 1 m: back near the start, having gone up to y = 2 m
    assert np.hypot(states[-1, 0], states[-1, 1]) < 0.05
    assert states[:, 1].max() == pytest.approx(2 * v / w, abs=0.02)
    left = (v - w * TRACK_WIDTH / 2) / WHEEL_RADIUS
    right = (v + w * TRACK_WIDTH / 2) / WHEEL_RADIUS
    np.testing.assert_allclose(states[-1, 9:13], [left, right, left, right], rtol=1e-4)
    # encoder angles grew by speed x time
    assert states[-1, 6] == pytest.approx(right * 2 * math.pi / w, rel=0.02)


def test_command_timeout_stops_the_base_and_limits_clip() -> None:
    base, clock = make(cmd_timeout_s=0.5)
    drive(base, clock, (2.0, -5.0), 2.0)  # beyond the Husky's 1 m/s, 2 rad/s
    state = base.get_observation()["state"]
    assert state[3] == pytest.approx(1.0) and state[4] == pytest.approx(-2.0)
    clock.advance(2.0)  # no commands
    state = base.get_observation()["state"]
    assert state[3] == pytest.approx(0.0) and state[4] == pytest.approx(0.0)


def test_rejects_bad_commands_and_robots() -> None:
    base, _ = make()
    with pytest.raises(InvalidCommand, match="NaN"):
        base.send_action(np.array([np.nan, 0.0]))
    with pytest.raises(InvalidCommand, match="shape"):
        base.send_action(np.zeros(3))
    from tether.core import registry

    panda_spec = registry.load("robot", "panda").spec

    with pytest.raises(TetherError, match="mobile base"):
        MockBase(panda_spec())
