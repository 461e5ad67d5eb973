"""The fault tests' safety oracle (tests/ros/safety_oracle.py): its limits are what each
robot's description says, and it catches a safety filter configured with wrong limits (which
a verdict taken from the filter itself could not). No ROS needed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from safety_oracle import (
    PANDA_MJCF,
    crazyflie_limits,
    holds_safe,
    husky_limits,
    limits_for,
    mjcf_joint_ranges,
    panda_limits,
    panda_urdf,
    unsafe_actions,
    unsafe_steps,
    urdf_joint_limits,
)

from tether.core.safety import SafetyConfig, SafetyFilter
from tether.core.spec import RobotSpec
from tether.robots.husky.robot import husky_spec
from tether.robots.panda.robot import HOME_ARM, HOME_FINGER
from tether.robots.panda.robot import ROBOT as PANDA

OK = {"not_finite": 0, "out_of_limits": 0, "too_fast": 0}


@pytest.fixture
def panda():
    pytest.importorskip("pybullet_data")  # the URDF with the Panda's velocity limits
    return panda_limits().select(PANDA.spec().action.names)


# --- the limits are the descriptions' ----------------------------------------------------------
def test_panda_position_limits_are_the_mjcf_joint_ranges(panda):
    # robots/panda/assets/scene.xml: <joint name="panda_joint4" ... range="-3.0718 -0.0698"/>
    i = panda.names.index("panda_joint4")
    assert (panda.low[i], panda.high[i]) == (-3.0718, -0.0698)
    # the fingers' range comes from <default class="finger"><joint range="0 0.04"/>
    f = panda.names.index("panda_finger_joint1")
    assert (panda.low[f], panda.high[f]) == (0.0, 0.04)
    assert mjcf_joint_ranges(PANDA_MJCF)["panda_finger_joint2"] == (0.0, 0.04)
    assert panda.source.startswith("robots/panda/assets/scene.xml")


def test_panda_velocity_limits_are_the_urdfs(panda):
    # franka_panda/panda.urdf: <limit ... velocity="2.1750"/> (joints 1-4), "2.6100" (5-7),
    # "0.2" (fingers)
    np.testing.assert_array_equal(panda.max_rate, [2.175] * 4 + [2.61] * 3 + [0.2])


def test_the_mjcf_ranges_lie_within_the_urdf_limits(panda):
    """Two descriptions of one arm: the simulated ranges (Franka's datasheet) are inside the
    older franka_ros URDF's (panda_joint4 there: -3.1416..0.0)."""
    urdf = urdf_joint_limits(panda_urdf())
    assert (urdf["panda_joint4"]["lower"], urdf["panda_joint4"]["upper"]) == (-3.1416, 0.0)
    for name, (lo, hi) in mjcf_joint_ranges(PANDA_MJCF).items():
        assert urdf[name]["lower"] <= lo < hi <= urdf[name]["upper"], name


def test_the_mjcf_reader_resolves_classes_and_degrees(tmp_path):
    path = tmp_path / "arm.xml"
    path.write_text(
        """<mujoco>
          <default>
            <joint range="-90 90"/>
            <default class="wide"><joint range="-180 180"/>
              <default class="wider"><joint damping="1"/></default>
            </default>
            <default class="slider"><joint type="slide" range="0 0.5"/></default>
          </default>
          <worldbody>
            <body childclass="wide">
              <joint name="a"/>
              <body><joint name="b" class="wider"/><joint name="c" range="0 45"/></body>
              <body childclass="slider"><joint name="d"/></body>
              <joint name="e" class="main"/>
              <joint name="free" limited="false"/>
            </body>
          </worldbody>
        </mujoco>"""
    )
    got = mjcf_joint_ranges(path)
    np.testing.assert_allclose(got["a"], (-np.pi, np.pi))  # childclass, degrees
    np.testing.assert_allclose(got["b"], (-np.pi, np.pi))  # inherited through "wider"
    np.testing.assert_allclose(got["c"], (0.0, np.pi / 4))
    assert got["d"] == (0.0, 0.5)  # a slide joint's range is a length, never converted
    np.testing.assert_allclose(got["e"], (-np.pi / 2, np.pi / 2))
    assert "free" not in got


def test_husky_limits_are_clearpaths():
    lim = husky_limits()
    assert lim.names == ("linear_x", "angular_z")
    np.testing.assert_array_equal(lim.high, [1.0, 2.0])  # m/s, rad/s
    np.testing.assert_array_equal(lim.low, [-1.0, -2.0])
    np.testing.assert_array_equal(lim.max_rate, [3.0, 6.0])  # m/s^2, rad/s^2


def test_crazyflie_rpm_limit_is_computed_from_its_constants():
    # sqrt(2.25 * 0.027 kg * 9.81 m/s^2 / (4 * 3.16e-10 N/rpm^2)) = 21713.7 rpm
    # (crazyflie.py's docstrings quote ~21702, which is the same formula with g = 9.8)
    lim = crazyflie_limits()
    assert lim.names == ("rotor0", "rotor1", "rotor2", "rotor3")
    np.testing.assert_array_equal(lim.low, 0.0)
    np.testing.assert_allclose(lim.high, 21713.7, atol=0.1)


def test_limits_for_rejects_a_name_the_robot_lacks():
    with pytest.raises(ValueError):
        limits_for("husky", ["linear_x", "linear_y"])


# --- the oracle catches a filter with wrong limits ---------------------------------------------
@dataclass
class _Step:
    t_ns: int
    action: np.ndarray
    stale: bool


def _drive(spec: RobotSpec, start: np.ndarray, target: np.ndarray, n: int = 150) -> list[_Step]:
    """Command ``target`` each period through a SafetyFilter built from ``spec``; the robot
    tracks each output perfectly. Returns what a backend would have received."""
    filt = SafetyFilter(spec, SafetyConfig(watchdog_s=1.0))
    filt.reset(start)
    measured, steps = start.astype(np.float32), []
    for k in range(n):
        t = k * spec.dt
        filt.command(target, t)
        out, stale = filt.output(t, measured)
        steps.append(_Step(round(t * 1e9), out, stale))
        measured = out
    return steps


def _panda_with(joint: str, **change: float) -> RobotSpec:
    """PANDA.spec() with one joint's facts changed (limits in both joints and action)."""
    spec = PANDA.spec()
    joints = tuple(j.model_copy(update=change) if j.name == joint else j for j in spec.joints)
    i = spec.action.names.index(joint)
    low, high = list(spec.action.low), list(spec.action.high)
    low[i], high[i] = change.get("lower", low[i]), change.get("upper", high[i])
    action = spec.action.model_copy(update={"low": tuple(low), "high": tuple(high)})
    return spec.model_copy(update={"joints": joints, "action": action})


HOME = np.array([*HOME_ARM, HOME_FINGER])


def test_a_panda_filter_with_a_widened_position_limit_is_caught(panda):
    target = HOME.copy()
    target[3] = 0.5  # past panda_joint4's upper limit, -0.0698 rad
    good = _drive(PANDA.spec(), HOME, target)
    assert unsafe_steps(good, panda, 0.01) == OK
    assert good[-1].action[3] == pytest.approx(-0.0698, abs=1e-6)  # it got to the limit
    wrong = _drive(_panda_with("panda_joint4", upper=1.0), HOME, target)
    bad = unsafe_steps(wrong, panda, 0.01)
    assert bad["out_of_limits"] > 0 and bad["too_fast"] == 0, bad


def test_a_panda_filter_with_a_widened_velocity_limit_is_caught(panda):
    target = HOME.copy()
    target[0] += 1.0
    assert unsafe_steps(_drive(PANDA.spec(), HOME, target), panda, 0.01) == OK
    wrong = _drive(_panda_with("panda_joint1", max_velocity=4 * 2.175), HOME, target)
    bad = unsafe_steps(wrong, panda, 0.01)
    assert bad["too_fast"] > 0 and bad["out_of_limits"] == 0, bad


def test_a_husky_filter_with_a_widened_speed_limit_is_caught():
    oracle = husky_limits()
    target = np.array([3.0, 0.0])  # m/s, beyond Clearpath's 1.0
    spec = husky_spec()
    assert unsafe_steps(_drive(spec, np.zeros(2), target), oracle) == {
        "not_finite": 0,
        "out_of_limits": 0,
    }
    fast = spec.action.model_copy(update={"low": (-3.0, -2.0), "high": (3.0, 2.0)})
    wrong = _drive(spec.model_copy(update={"action": fast}), np.zeros(2), target)
    assert unsafe_steps(wrong, oracle)["out_of_limits"] > 0


def test_a_drone_filter_with_a_raised_rpm_limit_is_caught():
    from tether.core.safety import DroneSafety
    from tether.robots.crazyflie.robot import CRAZYFLIE
    from tether.sim.drone_bridge import command_limits

    oracle = crazyflie_limits()
    request = np.full(4, 24000.0)  # rpm, a strong climb
    right = DroneSafety(command_limits()).command("rotor_rpm", request * 0.9, 0.0)
    assert unsafe_actions(right[None], oracle) == {"not_finite": 0, "out_of_limits": 0}
    # a thrust-to-weight of 3 instead of the Crazyflie's 2.25: max rpm ~25060
    boosted = CRAZYFLIE.model_copy(update={"thrust_to_weight": 3.0})
    wrong = DroneSafety(command_limits(boosted)).command("rotor_rpm", request, 0.0)
    assert unsafe_actions(wrong[None], oracle)["out_of_limits"] == 1


def test_holds_safe_needs_the_hold_within_the_descriptions_limits(panda):
    measured = HOME.copy()
    assert holds_safe(measured, measured, panda)
    measured[3] = 0.2  # read beyond joint 4's limit: the safe hold is at the limit
    assert not holds_safe(measured, measured, panda)
    held = measured.copy()
    held[3] = -0.0698
    assert holds_safe(held, measured, panda)
    assert not holds_safe(HOME + 0.01, HOME, panda)
    assert holds_safe(np.zeros(2), np.ones(2), husky_limits())  # velocity: zeros
    assert not holds_safe(np.array([0.1, 0.0]), np.zeros(2), husky_limits())
