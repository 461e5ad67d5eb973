"""The MAVLink client against the mock PX4-like autopilot on UDP loopback (real MAVLink
through pymavlink): frames, heartbeats both ways, arm / takeoff / offboard velocity / land,
link loss and offboard loss failsafes, and a clear error when nobody answers.

Threads and sockets run in real time, so the tests wait for conditions with deadlines
(never for fixed times) and assert states, not durations.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

pytest.importorskip("pymavlink")

from tether.core.errors import TetherError  # noqa: E402
from tether.core.protocols import Robot  # noqa: E402
from tether.hardware.mavlink import frames  # noqa: E402
from tether.hardware.mavlink.client import VELOCITY_TYPE_MASK, MavlinkClient  # noqa: E402
from tether.hardware.mavlink.config_mavlink import MavlinkConfig  # noqa: E402
from tether.hardware.mock.autopilot import MockAutopilot, MockAutopilotConfig  # noqa: E402

DEADLINE = 15.0  # s; generous: the machine may be loaded


def test_frames() -> None:
    # 1 m north, 2 m east, 3 m down -> 2 m east, 1 m north, -3 m up; and back
    np.testing.assert_allclose(frames.ned_to_enu(np.array([1.0, 2.0, 3.0])), [2.0, 1.0, -3.0])
    v = np.random.default_rng(0).normal(size=(5, 3))
    np.testing.assert_allclose(frames.enu_to_ned(frames.ned_to_enu(v)), v)
    assert frames.yaw_ned_to_enu(0.0) == pytest.approx(math.pi / 2)  # north = +90 deg ENU
    assert frames.yaw_ned_to_enu(math.pi / 2) == pytest.approx(0.0)  # east = 0 ENU
    assert frames.yaw_enu_to_ned(frames.yaw_ned_to_enu(0.3)) == pytest.approx(0.3)
    assert frames.attitude_frd_to_flu(0.1, 0.2, 0.0)[:2] == (0.1, -0.2)
    # velocity + yaw rate: position, acceleration and yaw ignored (bits 0-2, 6-8, 10)
    assert VELOCITY_TYPE_MASK == 0b0000_0101_1100_0111 == 1479


@pytest.fixture
def autopilot() -> Iterator[MockAutopilot]:
    cfg = MockAutopilotConfig(
        heartbeat_hz=20.0, link_timeout_s=1.0, offboard_timeout_s=1.0, land_speed=1.5
    )
    ap = MockAutopilot(cfg).start()
    yield ap
    ap.close()


@pytest.fixture
def client(autopilot: MockAutopilot) -> Iterator[MavlinkClient]:
    cfg = MavlinkConfig(
        url=autopilot.client_url,
        heartbeat_hz=20.0,
        link_timeout_s=1.0,
        connect_timeout_s=5.0,
        failsafe_action="none",
    )
    c = MavlinkClient(cfg)
    c.connect()
    yield c
    c.disconnect()


def fly(client: MavlinkClient, autopilot: MockAutopilot, altitude: float = 1.0) -> None:
    """Arm, take off to ``altitude`` and enter offboard."""
    client.arm()
    client.takeoff(altitude)
    assert autopilot.failsafe is None
    climbed = client.wait_until(
        lambda: client.get_observation()["state"][2] > altitude - 0.1, DEADLINE
    )
    assert climbed, f"no climb: mode {autopilot.mode}, failsafe {autopilot.failsafe}"
    client.start_offboard()
    assert client.wait_until(lambda: client.offboard, DEADLINE)
    assert autopilot.mode == "OFFBOARD"


def test_heartbeats_both_ways(client: MavlinkClient, autopilot: MockAutopilot) -> None:
    assert isinstance(client, Robot)
    assert client.target_system == autopilot.cfg.system_id
    assert client.wait_until(lambda: autopilot._companion_hb > -math.inf, DEADLINE)
    obs = client.get_observation()
    assert obs["state"].shape == (9,) and obs["status"][2] == 1.0  # link ok
    assert not client.armed


def test_offboard_velocity_moves_in_enu(client: MavlinkClient, autopilot: MockAutopilot) -> None:
    fly(client, autopilot)
    start = client.get_observation()["state"][:3].copy()

    def moved_east() -> bool:
        client.send_action(np.array([0.8, 0.0, 0.0, 0.3]))  # east, CCW yaw rate
        return bool(client.get_observation()["state"][0] > start[0] + 0.5)

    assert client.wait_until(moved_east, DEADLINE)
    state = client.get_observation()["state"]
    with autopilot.lock:
        pos, yaw = autopilot.pos.copy(), autopilot.yaw
    # ENU east is NED y; the yaw rate turned the vehicle counter-clockwise (NED yaw < 0)
    assert pos[1] > 0.5 and abs(pos[0]) < 0.2
    assert yaw < -0.05 and state[8] > math.pi / 2 + 0.05
    assert abs(state[1] - start[1]) < 0.2 and abs(state[2] - start[2]) < 0.3
    client.land()
    assert client.wait_until(lambda: autopilot.landed and not autopilot.armed, DEADLINE)
    assert client.wait_until(lambda: not client.armed, DEADLINE)
    assert autopilot.failsafe is None


def test_link_loss_triggers_both_failsafes(client: MavlinkClient, autopilot: MockAutopilot) -> None:
    lost: list[bool] = []
    client.on_link_lost(lambda: lost.append(True))
    fly(client, autopilot)
    client.send_action(np.array([0.3, 0.0, 0.0, 0.0]))
    autopilot.cut_link()  # radio gone: nothing in or out
    # the client notices the missing heartbeats and stops streaming
    assert client.wait_until(lambda: client.link_lost, DEADLINE)
    assert lost == [True]
    assert client.get_observation()["status"][2] == 0.0
    # the autopilot's own failsafe: no companion heartbeat -> land, then disarm
    assert client.wait_until(lambda: autopilot.failsafe == "data link lost", DEADLINE)
    assert autopilot.mode == "AUTO.LAND"
    assert client.wait_until(lambda: autopilot.landed and not autopilot.armed, DEADLINE)
    assert "Failsafe activated: data link lost, landing" in autopilot.statustexts


def test_offboard_loss_lands(client: MavlinkClient, autopilot: MockAutopilot) -> None:
    fly(client, autopilot)
    client.stop_offboard_stream()  # heartbeats continue, setpoints stop
    assert client.wait_until(lambda: autopilot.failsafe == "offboard signal lost", DEADLINE)
    # the client learns it from the autopilot (STATUSTEXT / CRITICAL heartbeat)
    assert client.wait_until(lambda: client.autopilot_failsafe, DEADLINE)
    assert not client.link_lost
    assert client.wait_until(lambda: autopilot.landed and not autopilot.armed, DEADLINE)


def test_client_failsafe_lands_on_stale_setpoints(autopilot: MockAutopilot) -> None:
    cfg = MavlinkConfig(
        url=autopilot.client_url, heartbeat_hz=20.0, setpoint_timeout_s=0.3, failsafe_action="land"
    )
    client = MavlinkClient(cfg)
    client.connect()
    try:
        fly(client, autopilot)
        client.send_action(np.zeros(4))  # ... and then the policy goes quiet
        assert client.wait_until(lambda: client.failsafe_triggered == "setpoints stale", DEADLINE)
        assert client.wait_until(lambda: autopilot.mode == "AUTO.LAND", DEADLINE)
        assert autopilot.failsafe is None  # the client acted before the autopilot had to
    finally:
        client.disconnect()


def test_offboard_refused_without_setpoints(client: MavlinkClient) -> None:
    client.arm()
    with pytest.raises(TetherError, match="refused MAV_CMD_DO_SET_MODE"):
        client._command(176, 1, 6, 0)  # DO_SET_MODE OFFBOARD with no setpoint stream


def test_nobody_there_fails_with_one_sentence() -> None:
    ap = MockAutopilot().start()
    port = ap.port
    ap.close()  # the port is free now: nobody answers there
    client = MavlinkClient(MavlinkConfig(url=f"udpout:127.0.0.1:{port}", connect_timeout_s=0.3))
    with pytest.raises(TetherError) as err:
        client.connect()
    msg = str(err.value)
    assert "no MAVLink autopilot answered" in msg and str(port) in msg and "\n" not in msg
    with pytest.raises(TetherError, match="cannot open MAVLink connection"):
        MavlinkClient(MavlinkConfig(url="/dev/ttyNOSUCHDEVICE,57600")).connect()
