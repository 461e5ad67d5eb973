"""Drone message conversions: odometry (REP-105 frames), IMU, cmd_vel, low-level commands."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nav_msgs")
pytestmark = [pytest.mark.ros]

from geometry_msgs.msg import Twist  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from tether.core.errors import InvalidCommand  # noqa: E402
from tether.sim.drone_bridge import specific_force  # noqa: E402
from tether.sim.quadrotor.dynamics import quat_from_euler  # noqa: E402
from tether_ros import conversions as conv  # noqa: E402


def _state(yaw: float = 0.0, roll: float = 0.0, v=(0.0, 0.0, 0.0), w=(0.0, 0.0, 0.0)):
    q = quat_from_euler(np.array([roll]), np.array([0.0]), np.array([yaw]))[0]
    return np.concatenate([[1.0, 2.0, 3.0], q, v, w])


def test_odometry_twist_is_in_the_body_frame_and_round_trips():
    # facing +y (yaw 90 deg) and flying along world +y: forward in the body frame
    s = _state(yaw=np.pi / 2, v=(0.0, 0.7, 0.1), w=(0.1, -0.2, 0.3))
    msg = conv.odometry_msg(s, 1_500_000_000, *conv.frame_ids("cf1"))
    assert (msg.header.frame_id, msg.child_frame_id) == ("cf1/odom", "cf1/base_link")
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1, 500_000_000)
    t = msg.twist.twist.linear
    assert (t.x, t.y, t.z) == pytest.approx((0.7, 0.0, 0.1), abs=1e-9)
    a = msg.twist.twist.angular
    assert (a.x, a.y, a.z) == pytest.approx((0.1, -0.2, 0.3))
    np.testing.assert_allclose(conv.odometry_to_state(msg), s, atol=1e-6)
    assert conv.frame_ids("") == ("odom", "base_link")
    msg.pose.pose.position.x = float("nan")
    with pytest.raises(InvalidCommand):
        conv.odometry_to_state(msg)


def test_imu_reads_the_gravity_reaction_in_the_body_frame():
    level = _state(v=(0.0, 0.0, 0.0))
    f = specific_force(level, np.zeros(3), 0.01)  # at rest
    msg = conv.imu_msg(level, f, 0, "base_link")
    a = msg.linear_acceleration
    assert (a.x, a.y, a.z) == pytest.approx((0.0, 0.0, 9.81))
    # rolled +90 deg about x: body +y points up, so the reaction of gravity is along body +y
    rolled = _state(roll=np.pi / 2)
    f = specific_force(rolled, np.zeros(3), 0.01)
    np.testing.assert_allclose(f, [0.0, 9.81, 0.0], atol=1e-9)
    # free fall: the accelerometer reads zero
    falling = _state(v=(0.0, 0.0, -0.0981))
    np.testing.assert_allclose(specific_force(falling, np.zeros(3), 0.01), 0.0, atol=1e-9)
    w = conv.imu_msg(_state(w=(0.5, 0.0, -1.0)), f, 0, "base_link").angular_velocity
    assert (w.x, w.y, w.z) == (0.5, 0.0, -1.0)


def test_cmd_vel_is_turned_by_the_heading_into_a_world_setpoint():
    msg = Twist()
    msg.linear.x, msg.linear.y, msg.linear.z, msg.angular.z = 0.5, 0.0, 0.2, 0.3
    # heading +y: forward is world +y
    sp = conv.twist_to_setpoint(msg, np.pi / 2)
    np.testing.assert_allclose(sp, [0.0, 0.5, 0.2, 0.3], atol=1e-12)
    back = conv.setpoint_to_twist(sp, np.pi / 2)
    assert (back.linear.x, back.linear.y, back.linear.z, back.angular.z) == pytest.approx(
        (0.5, 0.0, 0.2, 0.3)
    )
    msg.linear.y = float("inf")
    with pytest.raises(InvalidCommand):
        conv.twist_to_setpoint(msg, 0.0)


def test_low_level_command_layout_picks_mode_by_names_and_reorders():
    vals = np.array([0.3, 0.1, -0.2, 0.05])
    msg = conv.low_level_msg("thrust_rates", vals, 42)
    mode, got, stamp = conv.low_level_to_command(msg)
    assert (mode, stamp) == ("thrust_rates", 42)
    np.testing.assert_allclose(got, vals)
    shuffled = JointState()
    shuffled.name = ["rotor3", "rotor0", "rotor2", "rotor1"]
    shuffled.position = [3.0, 0.0, 2.0, 1.0]
    mode, got, _ = conv.low_level_to_command(shuffled)
    assert mode == "rotor_rpm"
    np.testing.assert_allclose(got, [0.0, 1.0, 2.0, 3.0])
    for names, values in (
        (["rotor0", "rotor1", "rotor2"], [1.0, 2.0, 3.0]),  # a mode needs all four channels
        (["rotor0", "rotor1", "rotor2", "thrust"], [1.0, 2.0, 3.0, 4.0]),  # mixed modes
        (["rotor0", "rotor1", "rotor2", "rotor3"], [1.0, 2.0]),  # names without values
    ):
        bad = JointState()
        bad.name, bad.position = names, values
        with pytest.raises(InvalidCommand):
            conv.low_level_to_command(bad)
