"""Each rule of the safety layer on its own: deadline watchdog per robot kind, latched e-stop,
joint position / velocity / acceleration limits, workspace box, geofence, command stamps and
a clock that jumps back. Times are sim seconds passed in by the test (no sleeps)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from tether.core.errors import ConfigError, InvalidCommand
from tether.core.safety import Box, SafetyConfig, SafetyFilter
from tether.core.spec import ActionSpec, JointSpec, RobotSpec

HZ = 50.0
DT = 1.0 / HZ


def _arm(mode: str = "joint_position", low=(-3.0, -3.0), high=(3.0, 3.0)) -> RobotSpec:
    joints = (
        JointSpec(name="a", lower=-1.0, upper=1.0, max_velocity=2.0),
        JointSpec(name="b", lower=-0.5, upper=0.5, max_velocity=1.0),
    )
    action = ActionSpec(mode=mode, names=("a", "b"), low=low, high=high)
    return RobotSpec(name="toy", kind="arm", joints=joints, control_hz=HZ, action=action)


def _base() -> RobotSpec:
    action = ActionSpec(
        mode="twist", names=("linear_x", "angular_z"), low=(-1.0, -2.0), high=(1.0, 2.0)
    )
    return RobotSpec(name="cart", kind="mobile_base", control_hz=HZ, action=action)


def _run(f: SafetyFilter, steps: range, cmd_steps: set[int], action, measured, pose=None):
    """Step the filter at the control rate; a chunk row is registered on ``cmd_steps``."""
    outs = []
    for k in steps:
        if k in cmd_steps:
            f.command(action, k * DT, valid_s=DT)
        outs.append(f.output(k * DT, measured, pose))
    return outs


@pytest.mark.parametrize("grace", [0, 1, 3])
def test_watchdog_acts_within_grace_plus_one_periods_of_the_last_row(grace):
    f = SafetyFilter(_arm(), SafetyConfig(watchdog_s=1.0, grace_periods=grace))
    f.reset(np.zeros(2))
    outs = _run(f, range(20), set(range(10)), [0.01, 0.0], np.zeros(2))
    stale = [s for _, s in outs]
    assert stale[:10] == [False] * 10
    first = stale.index(True)
    assert first - 9 == grace + 1  # periods from the last fresh output to the safe one
    assert f.stats.reaction_periods == [pytest.approx(grace + 1)]


def test_unstamped_command_lives_for_watchdog_s():
    f = SafetyFilter(_base(), SafetyConfig(watchdog_s=0.25))
    f.command([0.5, 0.0], 0.0)
    assert not f.is_stale(0.24)
    assert f.is_stale(0.25)


def test_base_watchdog_sends_zero_twist_and_arm_holds_measured():
    base = SafetyFilter(_base(), SafetyConfig(grace_periods=0))
    base.command([0.5, 1.0], 0.0, valid_s=DT)
    out, stale = base.output(DT, np.zeros(2))
    assert stale and np.array_equal(out, [0.0, 0.0])
    arm = SafetyFilter(_arm(), SafetyConfig(grace_periods=0))
    arm.reset(np.zeros(2))
    arm.command([0.01, 0.0], 0.0, valid_s=DT)
    arm.output(0.0, np.zeros(2))
    out, stale = arm.output(DT, np.array([0.3, 0.2]))
    assert stale and np.allclose(out, [0.3, 0.2])


def test_estop_latches_until_released_and_release_needs_a_fresh_command():
    f = SafetyFilter(_base(), SafetyConfig(watchdog_s=10.0))
    f.command([0.5, 0.0], 0.0)
    f.engage_estop()
    f.command([0.5, 0.0], 0.01)  # ignored while engaged
    for t in (0.02, 1.0, 5.0):
        out, stale = f.output(t, np.zeros(2))
        assert stale and np.array_equal(out, [0.0, 0.0])
    f.release_estop()
    out, stale = f.output(5.01, np.zeros(2))
    assert stale  # the command from before the e-stop does not come back
    f.command([0.5, 0.0], 5.02)
    out, stale = f.output(5.02, np.zeros(2))
    assert not stale and out[0] == pytest.approx(0.5)


def test_joint_position_limits_narrow_the_action_bounds():
    f = SafetyFilter(_arm(), SafetyConfig(rate_limit=False))
    f.reset(np.zeros(2))
    f.command([2.5, -2.5], 0.0)  # inside the action bounds (+-3), outside the joints'
    out, _ = f.output(0.0, np.zeros(2))
    np.testing.assert_allclose(out, [1.0, -0.5])


def test_joint_velocity_mode_is_clamped_to_max_velocity():
    f = SafetyFilter(_arm(mode="joint_velocity"), SafetyConfig(velocity_scale=0.5))
    f.command([5.0, -5.0], 0.0)
    out, _ = f.output(0.0, np.zeros(2))
    np.testing.assert_allclose(out, [1.0, -0.5])  # half of 2 and 1 rad/s


def test_twist_acceleration_limit():
    cfg = SafetyConfig(watchdog_s=10.0, max_acceleration={"linear_x": 3.0, "angular_z": 6.0})
    f = SafetyFilter(_base(), cfg)
    f.reset(np.zeros(2))
    outs = []
    for k in range(30):
        f.command([1.0, -2.0], k * DT)
        outs.append(f.output(k * DT, np.zeros(2))[0])
    d = np.diff(np.vstack([np.zeros(2), *outs]), axis=0)
    assert np.all(np.abs(d[:, 0]) <= 3.0 * DT + 1e-6)
    assert np.all(np.abs(d[:, 1]) <= 6.0 * DT + 1e-6)
    np.testing.assert_allclose(outs[-1], [1.0, -2.0])  # reached in the end
    assert f.stats.accel_limited > 0


def test_joint_acceleration_limit_ramps_up_and_never_overshoots():
    cfg = SafetyConfig(watchdog_s=10.0, max_acceleration={"a": 4.0})
    f = SafetyFilter(_arm(), cfg)
    f.reset(np.zeros(2))
    pos = [np.zeros(2)]
    for k in range(200):
        f.command([0.8, 0.0], k * DT)
        pos.append(f.output(k * DT, pos[-1])[0])
    a = np.array(pos)[:, 0]
    v = np.diff(a) / DT
    assert abs(v[0]) <= 4.0 * DT + 1e-5  # from rest
    # the acceleration limit holds (the last step, which lands on the target, within 15 %)
    assert np.all(np.abs(np.diff(v)) <= 4.0 * DT * 1.15)
    assert np.sum(np.abs(np.diff(v)) > 4.0 * DT + 1e-4) <= 1
    assert np.all(np.abs(v) <= 2.0 + 1e-4)  # and the velocity limit
    assert a.max() <= 0.8 + 1e-6  # no overshoot
    assert a[-1] == pytest.approx(0.8)


def test_workspace_box_blocks_targets_outside_it():
    def fk(q):  # a toy "arm" whose end effector is at (q_a, q_b, 0.5)
        return np.array([q[0], q[1], 0.5])

    cfg = SafetyConfig(rate_limit=False, workspace=Box(low=(-0.2, -1, 0), high=(0.2, 1, 1)))
    f = SafetyFilter(_arm(), cfg, fk=fk)
    f.reset(np.zeros(2))
    f.command([0.1, 0.0], 0.0)
    out, _ = f.output(0.0, np.zeros(2))
    np.testing.assert_allclose(out, [0.1, 0.0])
    f.command([0.5, 0.0], DT)  # end effector at x = 0.5: outside
    out, _ = f.output(DT, out)
    np.testing.assert_allclose(out, [0.1, 0.0])  # stays at the last safe target
    assert f.stats.workspace_blocked == 1
    with pytest.raises(ConfigError, match="forward kinematics"):
        SafetyFilter(_arm(), cfg)


def test_geofence_stops_forward_motion_out_of_the_fence_but_lets_the_base_turn_back():
    cfg = SafetyConfig(geofence=Box(low=(-5, -5), high=(5, 5)), geofence_lookahead_s=0.5)
    f = SafetyFilter(_base(), cfg)
    at_edge_facing_out = np.array([4.9, 0.0, 0.0])
    f.command([1.0, 0.5], 0.0)
    out, _ = f.output(0.0, np.zeros(2), at_edge_facing_out)
    np.testing.assert_allclose(out, [0.0, 0.5])  # no forward speed, turning allowed
    f.command([-1.0, 0.0], DT)  # reversing goes back in
    out, _ = f.output(DT, np.zeros(2), at_edge_facing_out)
    np.testing.assert_allclose(out, [-1.0, 0.0])
    outside_facing_in = np.array([6.0, 0.0, np.pi])
    f.command([1.0, 0.0], 2 * DT)
    out, _ = f.output(2 * DT, np.zeros(2), outside_facing_in)
    np.testing.assert_allclose(out, [1.0, 0.0])
    assert f.stats.geofence_blocked == 1


def test_stamps_out_of_order_and_future_are_rejected():
    f = SafetyFilter(_arm())
    f.check_stamp(1.0, now_s=1.0)
    f.check_stamp(1.0, now_s=1.01)  # the same stamp again (a re-sent answer) is fine
    with pytest.raises(InvalidCommand, match="out-of-order"):
        f.check_stamp(0.98, now_s=1.02)
    with pytest.raises(InvalidCommand, match="future"):
        f.check_stamp(1.5, now_s=1.02)
    with pytest.raises(InvalidCommand, match="stamp"):
        f.check_stamp(float("nan"), now_s=1.02)
    assert f.stats.rejected == 3


def test_clock_jump_back_resets_the_filter():
    f = SafetyFilter(_arm(), SafetyConfig(watchdog_s=10.0))
    f.reset(np.zeros(2))
    f.check_stamp(5.0, now_s=5.0)
    f.command([0.01, 0.0], 5.0)
    assert not f.output(5.0, np.zeros(2))[1]
    out, stale = f.output(0.0, np.array([0.2, 0.1]))  # simulator reset: time 5 s -> 0
    assert stale and np.allclose(out, [0.2, 0.1])  # the old command is forgotten: hold
    assert f.stats.clock_jumps == 1
    f.check_stamp(0.0, now_s=0.0)  # stamps of the new timeline are in order again


def test_huge_values_overflowing_float32_are_rejected_large_finite_ones_clamped():
    f = SafetyFilter(_base())
    with pytest.raises(InvalidCommand):
        f.command([1e39, 0.0], 0.0)
    f.command([1e30, -1e30], 0.0)
    out, _ = f.output(0.0, np.zeros(2))
    np.testing.assert_allclose(out, [1.0, -2.0])


def test_config_rejects_bad_boxes_and_unknown_acceleration_names():
    with pytest.raises(ValidationError):
        Box(low=(0, 0), high=(0, 1))
    with pytest.raises(ValidationError):
        SafetyConfig(max_acceleration={"linear_x": -1.0})
    with pytest.raises(ConfigError, match="not action elements"):
        SafetyFilter(_base(), SafetyConfig(max_acceleration={"elbow": 1.0}))


def test_drone_geofence_zeroes_outward_velocity_components():
    from tether.core.safety import DroneSafety

    spec = ActionSpec(
        mode="velocity_setpoint",
        names=("vx", "vy", "vz", "yaw_rate"),
        low=(-2, -2, -1, -3),
        high=(2, 2, 1, 3),
    )
    fenced = SafetyConfig(geofence=Box(low=(-5, -5, 0), high=(5, 5, 3)))
    g = DroneSafety({"velocity_setpoint": spec}, fenced)
    near_wall = np.array([4.9, 0.0, 2.9])
    out = g.fence(near_wall, np.array([1.0, 1.0, 0.5, 0.2]))
    np.testing.assert_allclose(out, [0.0, 1.0, 0.0, 0.2])  # x and z outward: stopped
    np.testing.assert_allclose(g.fence(near_wall, np.array([-1.0, 0, -0.5, 0])), [-1, 0, -0.5, 0])
    free = DroneSafety({"velocity_setpoint": spec})
    np.testing.assert_allclose(free.fence(near_wall, np.array([1.0, 0, 0, 0])), [1, 0, 0, 0])
