"""MockArm follows joint trajectories within its position, velocity and acceleration limits,
after its command latency; time is a ManualClock, so every number is exact."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core import registry
from tether.core.errors import InvalidCommand, TetherError
from tether.core.protocols import Robot
from tether.hardware.mock.arm import MockArm, MockArmConfig
from tether.hardware.mock.clock import ManualClock
from tether.robots.panda.robot import ARM_MAX_VELOCITY, ARM_UPPER, HOME_ARM

HOME = {f"panda_joint{i + 1}": q for i, q in enumerate(HOME_ARM)}


def panda_spec():  # noqa: ANN201 - test helper
    return registry.load("robot", "panda").spec()


def make(latency: float = 0.05, accel: float = 10.0) -> tuple[MockArm, ManualClock]:
    clock = ManualClock(100.0)
    arm = MockArm(
        panda_spec(), MockArmConfig(latency_s=latency, max_acceleration=accel, initial=HOME), clock
    )
    arm.connect()
    return arm, clock


def sample(arm: MockArm, clock: ManualClock, seconds: float, dt: float = 0.005) -> np.ndarray:
    """(n, 2, 9): positions and velocities every dt."""
    out = []
    for _ in range(round(seconds / dt)):
        clock.advance(dt)
        obs = arm.get_observation()
        out.append([obs["state"], obs["velocity"]])
    return np.asarray(out, dtype=np.float64)


def test_is_a_robot_and_needs_connect() -> None:
    arm = MockArm(panda_spec(), clock=ManualClock())
    assert isinstance(arm, Robot)
    with pytest.raises(TetherError, match="connect"):
        arm.get_observation()
    arm.connect()
    obs = arm.get_observation()
    assert obs["state"].shape == (9,) and obs["state"].dtype == np.float32
    arm.disconnect()
    with pytest.raises(TetherError, match="connect"):
        arm.send_action(np.zeros(8))


def test_step_respects_latency_and_limits() -> None:
    arm, clock = make(latency=0.05, accel=10.0)
    q0 = arm.get_observation()["state"][:8].astype(np.float64)
    target = q0.copy()
    target[0] += 1.0
    target[6] -= 0.5
    arm.send_action(target)
    traj = sample(arm, clock, 1.5)
    q, v = traj[:, 0, :8], traj[:, 1, :8]
    # nothing moves during the latency (10 samples of 5 ms = 0.05 s)
    np.testing.assert_allclose(q[:9], np.broadcast_to(q0, (9, 8)), atol=1e-6)
    assert abs(q[12, 0] - q0[0]) > 1e-4
    # velocity and acceleration limits hold
    assert np.all(np.abs(v[:, :7]) <= np.asarray(ARM_MAX_VELOCITY) + 1e-4)
    assert np.abs(v[:, 0]).max() == pytest.approx(ARM_MAX_VELOCITY[0], rel=1e-3)  # reached
    assert np.all(np.abs(np.diff(v, axis=0)) <= 10.0 * 0.005 + 1e-4)
    # and it arrives without overshoot
    np.testing.assert_allclose(q[-1], target, atol=1e-3)
    assert q[:, 0].max() <= target[0] + 2e-3


def test_follows_a_trajectory() -> None:
    arm, clock = make(latency=0.0)
    q0 = arm.get_observation()["state"][:8].astype(np.float64)
    points = np.stack([q0 + [0.2, 0, 0, 0, 0, 0, 0, 0], q0 + [0.4, -0.2, 0, 0, 0, 0, 0, 0]])
    arm.send_trajectory(points, np.array([1.0, 2.0]))
    traj = sample(arm, clock, 2.5, dt=0.01)
    q = traj[:, 0, :8]
    # slow (0.2 rad/s): the arm tracks the interpolated reference closely
    for t, expect in ((0.5, q0[0] + 0.1), (1.0, q0[0] + 0.2), (1.5, q0[0] + 0.3)):
        assert q[round(t / 0.01) - 1, 0] == pytest.approx(expect, abs=0.02)
    np.testing.assert_allclose(q[-1], points[-1], atol=1e-3)


def test_newer_trajectory_replaces_older_and_limits_clamp() -> None:
    arm, clock = make(latency=0.0)
    q0 = arm.get_observation()["state"][:8].astype(np.float64)
    arm.send_trajectory(np.stack([q0 + 0.3]), np.array([1.0]))
    clock.advance(0.2)
    far = q0.copy()
    far[0] = 10.0  # beyond the 2.8973 rad limit
    arm.send_action(far)
    traj = sample(arm, clock, 3.0, dt=0.01)
    assert traj[-1, 0, 0] == pytest.approx(ARM_UPPER[0], abs=1e-6)
    assert traj[-1, 0, 1] == pytest.approx(q0[1], abs=1e-3)  # the old trajectory is gone


def test_state_mirrors_the_second_finger() -> None:
    arm, clock = make(latency=0.0)
    q = arm.get_observation()["state"][:8].copy()
    q[7] = 0.01
    arm.send_action(q)
    clock.advance(1.0)
    state = arm.get_observation()["state"]
    assert state[7] == pytest.approx(0.01, abs=1e-4) and state[8] == state[7]


@pytest.mark.parametrize(
    ("points", "times", "match"),
    [
        (np.full((1, 8), np.nan), [1.0], "NaN"),
        (np.zeros((1, 7)), [1.0], "shape"),
        (np.zeros((2, 8)), [1.0, 1.0], "increasing"),
        (np.zeros((2, 8)), [1.0], "one per point"),
    ],
)
def test_rejects_bad_trajectories(points: np.ndarray, times: list[float], match: str) -> None:
    arm, _ = make()
    with pytest.raises(InvalidCommand, match=match):
        arm.send_trajectory(points, np.array(times))


def test_rejects_non_position_robots() -> None:
    with pytest.raises(TetherError, match="joint_position"):
        MockArm(registry.load("robot", "husky").spec())


def test_every_arm_reports_every_finger_from_the_gripper_element() -> None:
    """By default a state name that is not an action element (an arm's other fingers)
    follows the gripper element, for every registered arm; an explicit mirror wins."""
    from tether.core.robot import ArmDescription

    robots = [registry.load("robot", name) for name in registry.available("robot")]
    arms = [d for d in robots if isinstance(d, ArmDescription)]
    assert arms
    for desc in arms:
        spec = desc.spec()
        arm = MockArm(spec, MockArmConfig(latency_s=0.0), clock=ManualClock())
        arm.connect()
        state = arm.get_observation()["state"]
        assert state.shape == (len(spec.state_names),)
        np.testing.assert_array_equal(state[desc.dof :], state[desc.dof])
    spec = registry.load("robot", "panda").spec()
    with pytest.raises(TetherError, match="cannot report state 'panda_finger_joint2'"):
        MockArm(spec, MockArmConfig(mirror={}), clock=ManualClock())
