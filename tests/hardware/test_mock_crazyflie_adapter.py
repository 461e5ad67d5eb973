"""The Crazyflie adapter: one clear sentence without cflib or without a radio, and the
cflib calls it makes with a working link (cflib replaced by a recording fake)."""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import numpy as np
import pytest

from tether.core.errors import InvalidCommand, TetherError
from tether.core.protocols import Robot
from tether.hardware.crazyflie import LOG_VARIABLES, CrazyflieRobot


class FakeCommander:
    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[float, ...]]] = []

    def send_velocity_world_setpoint(self, *args: float) -> None:
        self.sent.append(("velocity", args))

    def send_stop_setpoint(self) -> None:
        self.sent.append(("stop", ()))


class FakeCallbacks:
    def __init__(self) -> None:
        self.fns: list[Any] = []

    def add_callback(self, fn: Any) -> None:
        self.fns.append(fn)


class FakeLogConfig:
    def __init__(self, name: str, period_in_ms: int) -> None:
        self.variables: list[str] = []
        self.data_received_cb = FakeCallbacks()
        self.started = False

    def add_variable(self, name: str, kind: str) -> None:
        self.variables.append(name)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False


def install_fake_cflib(monkeypatch: pytest.MonkeyPatch, open_error: str | None) -> dict:
    """Put a minimal cflib into sys.modules; ``open_error``: what open_link raises."""
    made: dict[str, Any] = {}

    class Crazyflie:
        def __init__(self, rw_cache: Any = None) -> None:
            self.commander = FakeCommander()
            self.log = types.SimpleNamespace(add_config=lambda cfg: made.setdefault("log", cfg))

    class SyncCrazyflie:
        def __init__(self, uri: str, cf: Any) -> None:
            self.uri, self.cf, self.open = uri, cf, False
            made["scf"] = self

        def open_link(self) -> None:
            if open_error is not None:
                raise Exception(open_error)
            self.open = True

        def close_link(self) -> None:
            self.open = False

    mods = {
        "cflib": types.ModuleType("cflib"),
        "cflib.crtp": types.ModuleType("cflib.crtp"),
        "cflib.crazyflie": types.ModuleType("cflib.crazyflie"),
        "cflib.crazyflie.syncCrazyflie": types.ModuleType("cflib.crazyflie.syncCrazyflie"),
        "cflib.crazyflie.log": types.ModuleType("cflib.crazyflie.log"),
    }
    mods["cflib.crtp"].init_drivers = lambda: None  # type: ignore[attr-defined]
    mods["cflib.crazyflie"].Crazyflie = Crazyflie  # type: ignore[attr-defined]
    mods["cflib.crazyflie.syncCrazyflie"].SyncCrazyflie = SyncCrazyflie  # type: ignore[attr-defined]
    mods["cflib.crazyflie.log"].LogConfig = FakeLogConfig  # type: ignore[attr-defined]
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return made


def test_without_cflib_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cflib", None)  # import fails even where it is installed
    monkeypatch.setitem(sys.modules, "cflib.crtp", None)
    robot = CrazyflieRobot()
    assert isinstance(robot, Robot)
    with pytest.raises(TetherError) as err:
        robot.connect()
    assert str(err.value) == (
        "the Crazyflie needs Bitcraze's cflib, which is not installed: pip install cflib"
    )


def test_without_radio_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_cflib(monkeypatch, "Couldn't load link driver: Cannot find a Crazyradio Dongle")
    with pytest.raises(TetherError, match="^no Crazyradio found") as err:
        CrazyflieRobot().connect()
    assert "\n" not in str(err.value)
    install_fake_cflib(monkeypatch, "Too many packets lost")
    with pytest.raises(TetherError, match="could not reach the Crazyflie at radio://0/80/2M"):
        CrazyflieRobot().connect()


def test_commands_and_state(monkeypatch: pytest.MonkeyPatch) -> None:
    made = install_fake_cflib(monkeypatch, None)
    robot = CrazyflieRobot()
    with pytest.raises(TetherError, match="not connected"):
        robot.send_action(np.zeros(4))
    robot.connect()
    log = made["log"]
    assert log.variables == list(LOG_VARIABLES) and log.started
    robot.send_action(np.array([0.2, -0.1, 5.0, 0.5]))  # vz beyond the 1 m/s limit
    kind, args = made["scf"].cf.commander.sent[-1]
    assert kind == "velocity"
    # Tether's yaw rate is CCW positive; the velocity packet's is CW positive (the firmware's
    # generic commander stores attitudeRate.yaw = -yawrate): a left turn goes out negative
    np.testing.assert_allclose(args, [0.2, -0.1, 1.0, -math.degrees(0.5)])
    with pytest.raises(InvalidCommand):
        robot.send_action(np.array([np.nan, 0, 0, 0]))
    data = dict(zip(LOG_VARIABLES, [1, 2, 3, 0.1, 0.2, 0.3, 90.0, -45.0, 180.0], strict=True))
    log.data_received_cb.fns[0](0, data, log)
    state = robot.get_observation()["state"]
    np.testing.assert_allclose(state[:6], [1, 2, 3, 0.1, 0.2, 0.3], rtol=1e-6)
    # stateEstimate.pitch is nose-up positive (legacy CF2 sign); REP-103 pitch is nose-down
    # positive: -45 deg logged (nose down) is +pi/4
    np.testing.assert_allclose(state[6:], [math.pi / 2, math.pi / 4, math.pi], rtol=1e-6)
    robot.disconnect()
    assert made["scf"].cf.commander.sent[-1][0] == "stop" and not made["scf"].open
