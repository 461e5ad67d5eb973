"""DroneSafety: what reaches a drone's rotors, and when the watchdog and e-stop take over."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.errors import InvalidCommand
from tether.core.safety import DroneSafety, SafetyConfig
from tether.core.spec import ActionSpec

MAX_RPM = 20000.0
LIMITS = {
    "rotor_rpm": ActionSpec(
        mode="rotor_rpm", names=("r0", "r1", "r2", "r3"), low=(0.0,) * 4, high=(MAX_RPM,) * 4
    ),
    "thrust_rates": ActionSpec(
        mode="thrust_rates",
        names=("t", "p", "q", "r"),
        low=(0, -10, -10, -10),
        high=(0.6, 10, 10, 10),
    ),
    "velocity_setpoint": ActionSpec(
        mode="velocity_setpoint",
        names=("vx", "vy", "vz", "r"),
        low=(-1, -1, -1, -2),
        high=(1, 1, 1, 2),
    ),
}


def _gate(**cfg) -> DroneSafety:
    return DroneSafety(LIMITS, SafetyConfig(watchdog_s=0.1, **cfg))


@pytest.mark.parametrize(
    "mode,values",
    [
        ("rotor_rpm", [np.nan, 1, 2, 3]),
        ("rotor_rpm", [np.inf, 1, 2, 3]),
        ("rotor_rpm", [1, 2, 3]),
        ("rotor_rpm", [1, 2, 3, 4, 5]),
        ("rotor_rpm", [[1, 2, 3, 4]]),
        ("rotor_rpm", "fast"),
        ("rotor_rpm", [1e9, 0, 0, 0]),  # a unit bug, not full throttle
        ("rotor_rpm", [-500.0, 0, 0, 0]),
        ("thrust_rates", [5.0, 0, 0, 0]),  # 5 N on a 27 g drone
        ("velocity_setpoint", [0, np.nan, 0, 0]),
        ("warp_drive", [0, 0, 0, 0]),
    ],
)
def test_rejects_malformed_and_out_of_range_low_level_commands(mode, values):
    gate = _gate()
    with pytest.raises(InvalidCommand):
        gate.command(mode, values, 0.0)
    assert gate.stats.rejected == 1 and gate.stats.accepted == 0
    assert gate.verdict(0.0) == ("none", None)  # nothing to follow


def test_round_off_is_clamped_and_velocity_requests_are_clamped():
    gate = _gate(range_tolerance=0.01)
    out = gate.command("rotor_rpm", [MAX_RPM * 1.005, 100.0, -1.0, 0.0], 0.0)
    np.testing.assert_allclose(out, [MAX_RPM, 100.0, 0.0, 0.0])
    # a velocity setpoint far too fast still says where to go: clamped, not rejected
    out = gate.command("velocity_setpoint", [5.0, -0.5, 0.0, -9.0], 0.0)
    np.testing.assert_allclose(out, [1.0, -0.5, 0.0, -2.0])
    assert gate.stats.clamped == 2 and gate.stats.rejected == 0


@pytest.mark.parametrize(
    "on_stale,expected", [("land", "land"), ("hold", "hold"), ("zero", "hold")]
)
def test_watchdog_lands_or_holds_after_watchdog_s(on_stale, expected):
    gate = _gate(on_stale=on_stale)
    gate.command("thrust_rates", [0.3, 0, 0, 0.5], 1.0)
    verdict, values = gate.verdict(1.05)
    assert verdict == "command" and gate.mode == "thrust_rates"
    np.testing.assert_allclose(values, [0.3, 0, 0, 0.5])
    assert gate.verdict(1.11) == (expected, None)
    gate.command("rotor_rpm", [1.0, 2.0, 3.0, 4.0], 1.2)  # a fresh command takes over again
    assert gate.verdict(1.25)[0] == "command" and gate.mode == "rotor_rpm"


def test_emergency_is_latched_until_reset():
    gate = _gate()
    gate.command("rotor_rpm", [1.0, 2.0, 3.0, 4.0], 0.0)
    gate.trip_emergency()
    assert gate.verdict(0.01) == ("off", None)
    with pytest.raises(InvalidCommand, match="emergency"):
        gate.command("rotor_rpm", [1.0, 2.0, 3.0, 4.0], 0.02)
    assert gate.verdict(0.03) == ("off", None)
    gate.reset()
    assert gate.verdict(0.04) == ("none", None)
    gate.command("rotor_rpm", [1.0, 2.0, 3.0, 4.0], 0.05)
    assert gate.verdict(0.06)[0] == "command"
