from __future__ import annotations

import numpy as np
import pytest

from tether.core.errors import InvalidCommand
from tether.core.safety import SafetyConfig, SafetyFilter
from tether.core.spec import ActionSpec, JointSpec, RobotSpec


def _spec(hz: float = 100.0, mode: str = "joint_position") -> RobotSpec:
    joints = (
        JointSpec(name="a", lower=-1, upper=1, max_velocity=2.0),
        JointSpec(name="b", lower=0, upper=0.04, max_velocity=0.2),
    )
    action = ActionSpec(mode=mode, names=("a", "b"), low=(-1, 0), high=(1, 0.04))
    return RobotSpec(
        name="toy", kind="arm", joints=joints, control_hz=hz, action=action, state_names=("a", "b")
    )


def test_rejects_nan_inf_and_wrong_shape():
    f = SafetyFilter(_spec())
    for bad in ([np.nan, 0.0], [0.0, np.inf], [0.0], [0.0, 0.0, 0.0], "xy"):
        with pytest.raises(InvalidCommand):
            f.command(np.asarray(bad) if not isinstance(bad, str) else bad, 0.0)
    assert f.stats.rejected == 5 and f.stats.accepted == 0


def test_clamps_to_limits_and_rate_limits():
    f = SafetyFilter(_spec(hz=100.0))
    f.reset(np.array([0.0, 0.02]))
    f.command(np.array([5.0, 0.04]), now_s=0.0)
    out, stale = f.output(0.0, measured=np.array([0.0, 0.02]))
    assert not stale
    # 2 rad/s at 100 Hz -> at most 0.02 rad per step; 0.2 m/s -> 0.002 m per step
    np.testing.assert_allclose(out, [0.02, 0.022], atol=1e-7)
    for k in range(1, 200):
        out, _ = f.output(k * 0.01 * 0.001, measured=out)  # keep the command fresh
    np.testing.assert_allclose(out, [1.0, 0.04], atol=1e-6)  # clamped at the upper limit
    assert f.stats.clamped > 0 and f.stats.rate_limited > 0


def test_watchdog_holds_measured_position_when_commands_stop():
    f = SafetyFilter(_spec(), SafetyConfig(watchdog_s=0.05))
    f.reset(np.array([0.0, 0.0]))
    f.command(np.array([0.01, 0.0]), now_s=0.0)
    out, stale = f.output(0.02, measured=np.zeros(2))
    assert not stale and out[0] == pytest.approx(0.01)
    measured = np.array([0.3, 0.01])
    out, stale = f.output(0.2, measured=measured)  # 200 ms without a command
    assert stale
    held = out.copy()
    out2, stale2 = f.output(0.3, measured=np.array([0.9, 0.0]))  # the hold target is latched
    assert stale2
    np.testing.assert_allclose(out2, held)
    # a fresh command ends the hold
    f.command(np.array([0.0, 0.0]), now_s=0.31)
    _, stale3 = f.output(0.31, measured=out2)
    assert not stale3


def test_no_command_at_start_is_stale():
    f = SafetyFilter(_spec())
    out, stale = f.output(0.0, measured=np.array([0.5, 0.01]))
    assert stale
    np.testing.assert_allclose(out, [0.5, 0.01])


def test_velocity_modes_go_to_zero_when_stale():
    f = SafetyFilter(_spec(mode="joint_velocity"))
    f.command(np.array([0.5, 0.01]), now_s=0.0)
    out, stale = f.output(1.0, measured=np.array([0.2, 0.2]))
    assert stale
    np.testing.assert_array_equal(out, [0.0, 0.0])


def test_estop_latches_until_released():
    f = SafetyFilter(_spec(), SafetyConfig(watchdog_s=10.0))
    f.reset(np.zeros(2))
    f.set_estop(True)
    f.command(np.array([0.01, 0.0]), now_s=0.0)
    out, stale = f.output(0.0, measured=np.array([0.2, 0.0]))
    assert stale and out[0] == pytest.approx(0.2)  # holds where the robot is
    f.set_estop(False)
    f.command(np.array([0.01, 0.0]), now_s=0.01)
    _, stale = f.output(0.01, measured=np.zeros(2))
    assert not stale


def test_a_command_from_before_a_reset_is_stale_not_rejected():
    """After a reset (time restarts at 0) the previous episode's last chunk, stamped up to the
    old timeline's end, is a StaleCommand (expected, counted apart); a stamp later than
    anything the old timeline reached is still a rejected future stamp."""
    from tether.core.errors import StaleCommand

    f = SafetyFilter(_spec(hz=100.0))
    f.reset(np.zeros(2))
    for k in range(300):  # an episode of 3 s
        f.output(k * 0.01, measured=np.zeros(2))
    f.check_stamp(2.99, now_s=3.0)
    f.reset(np.zeros(2))  # the next episode: t = 0
    with pytest.raises(StaleCommand, match="before time restarted"):
        f.check_stamp(3.0, now_s=0.01)  # the last observation of the old episode answered
    assert f.stats.old_timeline == 1 and f.stats.rejected == 0
    with pytest.raises(InvalidCommand, match="future stamp") as err:
        f.check_stamp(9.0, now_s=0.01)
    assert not isinstance(err.value, StaleCommand)
    assert f.stats.rejected == 1 and f.stats.reasons == {"future": 1}
    f.check_stamp(0.01, now_s=0.01)  # the new episode's commands pass


def test_a_future_stamp_before_any_reset_is_rejected():
    f = SafetyFilter(_spec())
    with pytest.raises(InvalidCommand, match="future stamp"):
        f.check_stamp(1.0, now_s=0.0)
    assert f.stats.old_timeline == 0 and f.stats.rejected == 1
