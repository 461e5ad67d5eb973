"""Teleop mappers: end-effector deltas move an arm's TCP as commanded, within limits (the
Panda in detail; every registered arm through its description)."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core import registry
from tether.core.robot import ArmDescription
from tether.hardware.teleop.command import TeleopCommand
from tether.hardware.teleop.mappers import (
    ArmMapper,
    base_twist,
    drone_velocity,
    rotation_error,
    rotvec_to_matrix,
)
from tether.robots.panda.robot import ARM_MAX_VELOCITY, HOME_ARM, HOME_FINGER

DT = 0.01
PANDA = registry.load("robot", "panda")
kin = PANDA.kinematics
ARMS = [
    name
    for name in registry.available("robot")
    if isinstance(registry.load("robot", name), ArmDescription)
]


def _mapper(**kw) -> ArmMapper:
    return ArmMapper(
        kin.jacobian,
        kin.lower,
        kin.upper,
        np.asarray(ARM_MAX_VELOCITY) * 0.8,
        DT,
        max_linear_speed=0.1,
        max_angular_speed=0.5,
        gripper_range=(0.0, 0.04),
        gripper_speed=0.16,
        **kw,
    )


def _home() -> np.ndarray:
    return np.array([*HOME_ARM, HOME_FINGER, HOME_FINGER])


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_linear_command_moves_tcp_by_speed_times_time(axis, sign):
    m = _mapper()
    p0, R0 = kin.fk(_home()[:7])
    lin = np.zeros(3)
    lin[axis] = sign
    for _ in range(50):  # 0.5 s at 0.1 m/s
        a = m.step(TeleopCommand(linear=lin, deadman=True), _home())
    p1, R1 = kin.fk(a[:7])
    want = p0 + 0.05 * lin
    np.testing.assert_allclose(p1, want, atol=1e-3)
    assert np.linalg.norm(rotation_error(R0, R1)) < 1e-2  # orientation held


def test_angular_command_turns_tcp_about_base_z():
    m = _mapper()
    p0, R0 = kin.fk(_home()[:7])
    for _ in range(40):  # 0.4 s at 0.5 rad/s = 0.2 rad
        a = m.step(TeleopCommand(angular=(0, 0, 1), deadman=True), _home())
    p1, R1 = kin.fk(a[:7])
    np.testing.assert_allclose(rotation_error(R1, R0), [0, 0, 0.2], atol=5e-3)
    np.testing.assert_allclose(p1, p0, atol=1e-3)  # turning in place


def test_zero_command_holds_pose():
    m = _mapper()
    for _ in range(20):
        a = m.step(TeleopCommand(deadman=True), _home())
    np.testing.assert_allclose(a[:7], HOME_ARM, atol=1e-6)
    assert a[7] == pytest.approx(HOME_FINGER)


def test_joint_limits_and_rates_respected_when_pushed_out_of_reach():
    m = _mapper()
    meas = _home()
    prev = meas[:7]
    for cmd in ((1, 0, 1), (0, -1, -1)):
        for _ in range(600):  # 6 s at full speed: far outside the workspace
            a = m.step(TeleopCommand(linear=cmd, angular=(0.5, 0, 1), deadman=True), meas)
            q = a[:7]
            assert np.all(np.isfinite(a))
            assert np.all(q >= kin.lower) and np.all(q <= kin.upper)
            assert np.all(np.abs(q - prev) <= np.asarray(ARM_MAX_VELOCITY) * 0.8 * DT + 1e-9)
            prev = q
            meas = np.array([*q, a[7], a[7]])  # a position servo that follows exactly


def test_gripper_toggle_closes_at_the_finger_speed_then_opens():
    m = _mapper()
    a = m.step(TeleopCommand(deadman=True, gripper_toggle=True), _home())
    assert a[7] == pytest.approx(0.04 - 0.16 * DT)
    for _ in range(30):
        a = m.step(TeleopCommand(deadman=True), _home())
    assert a[7] == pytest.approx(0.0)
    a = m.step(TeleopCommand(deadman=True, gripper_toggle=True), _home())
    assert a[7] == pytest.approx(0.16 * DT)


def test_mapper_restarts_from_measurement_after_reset():
    m = _mapper()
    for _ in range(10):
        m.step(TeleopCommand(linear=(1, 0, 0), deadman=True), _home())
    m.reset()
    a = m.step(TeleopCommand(deadman=True), _home())
    np.testing.assert_allclose(a[:7], HOME_ARM, atol=1e-9)


def test_for_arm_takes_the_descriptions_facts():
    """``ArmMapper.for_arm`` on the Panda is the hand-built mapper above."""
    m = ArmMapper.for_arm(PANDA, DT, 0.8, max_linear_speed=0.1, max_angular_speed=0.5)
    ref = _mapper()
    np.testing.assert_array_equal(m.lower, ref.lower)
    np.testing.assert_array_equal(m.upper, ref.upper)
    np.testing.assert_allclose(m.max_step, ref.max_step)
    assert m.gripper_range == ref.gripper_range
    assert m.gripper_step == pytest.approx(ref.gripper_step)
    cmd = TeleopCommand(linear=(1, 0, 0), angular=(0, 0, 1), deadman=True)
    for _ in range(5):
        np.testing.assert_array_equal(m.step(cmd, _home()), ref.step(cmd, _home()))


@pytest.mark.parametrize("robot", ARMS)
def test_every_arm_moves_its_tcp_as_commanded(robot):
    desc = registry.load("robot", robot)
    m = ArmMapper.for_arm(desc, DT, 0.8, max_linear_speed=0.1, max_angular_speed=0.5)
    n_fingers = len(desc.gripper.joints)
    meas = np.array([*desc.home, *[desc.gripper.home] * n_fingers])
    p0, R0 = desc.kinematics.fk(meas[: desc.dof])
    for _ in range(50):  # 0.5 s at 0.1 m/s along -z
        a = m.step(TeleopCommand(linear=(0, 0, -1), deadman=True), meas)
    assert a.shape == (desc.dof + 1,)
    p1, R1 = desc.kinematics.fk(a[: desc.dof])
    np.testing.assert_allclose(p1, p0 + [0.0, 0.0, -0.05], atol=1e-3)
    assert np.linalg.norm(rotation_error(R0, R1)) < 1e-2


def test_base_twist_nonholonomic_and_holonomic():
    cmd = TeleopCommand(linear=(0.5, 1.0, 1.0), angular=(1.0, 1.0, -0.5), deadman=True)
    t = base_twist(cmd, 0.4, 2.0)
    np.testing.assert_allclose(t.linear, [0.2, 0.0, 0.0])
    np.testing.assert_allclose(t.angular, [0.0, 0.0, -1.0])
    t = base_twist(cmd, 0.4, 2.0, holonomic=True)
    np.testing.assert_allclose(t.linear, [0.2, 0.4, 0.0])


def test_drone_velocity_setpoint():
    cmd = TeleopCommand(linear=(0.5, -1.0, 0.25), angular=(1.0, 1.0, 0.5), deadman=True)
    t = drone_velocity(cmd, 2.0, 1.0)
    np.testing.assert_allclose(t.linear, [1.0, -2.0, 0.5])
    np.testing.assert_allclose(t.angular, [0.0, 0.0, 0.5])


def test_command_inputs_are_clipped_and_nan_free():
    cmd = TeleopCommand(linear=(5.0, np.nan, -3.0), angular=(np.inf, 0, 0))
    np.testing.assert_array_equal(cmd.linear, [1.0, 0.0, -1.0])
    np.testing.assert_array_equal(cmd.angular, [0.0, 0.0, 0.0])


def test_rotvec_roundtrip():
    w = np.array([0.1, -0.2, 0.3])
    np.testing.assert_allclose(rotation_error(rotvec_to_matrix(w), np.eye(3)), w, atol=1e-12)
