"""DroneFleet without ROS: phases, the cmd_vel ground rule, emergency latch, watchdog."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet")
pytestmark = [pytest.mark.pybullet]

from tether.core import registry  # noqa: E402
from tether.core.config import parse_experiment  # noqa: E402
from tether.core.errors import ConfigError, InvalidCommand  # noqa: E402
from tether.sim.drone_bridge import DroneFleet, drone_names, specific_force  # noqa: E402


def _cfg(start_z: float, mode: str = "rotor_rpm", **safety):
    return parse_experiment(
        {
            "name": "fleet",
            "robot": "crazyflie",
            "sim": {
                "type": "pybullet",
                "control_hz": 100,
                "cameras": [],
                "quadrotor": {"action_mode": mode},
            },
            "task": {"type": "waypoints", "start": [0, 0, start_z], "waypoints": [[0, 0, 1]]},
            "policy": {"type": "quad_pid"},
            "safety": {"watchdog_s": 0.1, **safety},
        },
        "fleet",
    )


def test_names_and_accelerometer_at_rest():
    assert drone_names(1) == [""] and drone_names(3) == ["cf0", "cf1", "cf2"]
    level = np.array([0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], float)
    np.testing.assert_allclose(specific_force(level, np.zeros(3), 0.01), [0, 0, 9.81])


def test_backend_runs_rotor_rpm_whatever_mode_the_experiment_gives_its_policy():
    fleet = DroneFleet(_cfg(1.0, mode="velocity_setpoint"))
    assert fleet.backend.spec.action.mode == "rotor_rpm"
    # a prebuilt backend in another mode would bypass the bridge's PID: refused
    backend = registry.build("sim", _cfg(1.0, mode="thrust_rates").sim, robot="crazyflie")
    with pytest.raises(ConfigError, match="rotor speeds"):
        DroneFleet(_cfg(1.0), backend=backend)
    backend.close()


def test_cmd_vel_needs_takeoff_and_emergency_latches_until_reset():
    fleet = DroneFleet(_cfg(0.015))
    fleet.reset()
    d = fleet.drones[0]
    assert d.phase == "off"
    with pytest.raises(InvalidCommand, match="takeoff"):
        fleet.command("", "velocity_setpoint", [0.0, 0.0, 0.5, 0.0])
    fleet.step()
    np.testing.assert_array_equal(d.last_rpm, 0.0)  # nothing spun up
    assert fleet.takeoff("")[0]
    for _ in range(20):
        fleet.step()
    assert d.phase == "takeoff" and d.last_rpm.min() > 0
    assert fleet.emergency("")[0]
    fleet.step()
    np.testing.assert_array_equal(d.last_rpm, 0.0)
    assert not fleet.takeoff("")[0]  # latched: no takeoff, no commands
    with pytest.raises(InvalidCommand):
        fleet.command("", "rotor_rpm", [1000.0] * 4)
    fleet.reset()
    assert d.phase == "off" and fleet.takeoff("")[0]


@pytest.mark.parametrize("on_stale,phase", [("land", "landing"), ("hold", "hover")])
def test_a_quiet_commander_hands_over_to_the_watchdog(on_stale, phase):
    fleet = DroneFleet(_cfg(1.0, on_stale=on_stale))
    fleet.reset()
    d = fleet.drones[0]
    hover = fleet.params.hover_rpm
    for _ in range(5):
        fleet.command("", "rotor_rpm", [hover] * 4)
        fleet.step()
    assert d.phase == "command"
    np.testing.assert_allclose(d.last_rpm, hover)  # obeyed as sent
    steps = 0
    while d.phase == "command" and steps < 100:  # bounded: a silent watchdog fails below
        fleet.step()
        steps += 1
    assert d.phase == phase and steps <= 12  # watchdog_s = 0.1 s = 10 control periods


def test_land_service_wins_over_a_commander_still_streaming():
    fleet = DroneFleet(_cfg(1.0, on_stale="hold"))
    fleet.reset()
    d = fleet.drones[0]
    hover = [fleet.params.hover_rpm] * 4
    fleet.command("", "rotor_rpm", hover)
    fleet.step()
    assert fleet.land("")[0] and d.phase == "landing"
    for _ in range(400):  # the commander keeps streaming; every command is refused
        with pytest.raises(InvalidCommand, match="land"):
            fleet.command("", "rotor_rpm", hover)
        fleet.step()
        if d.phase == "off":
            break
    assert d.phase == "off" and d.state[2] < fleet.dcfg.touchdown_height
    assert fleet.takeoff("")[0]  # takeoff hands control back
    fleet.command("", "rotor_rpm", hover)
    fleet.step()
    assert d.phase == "command"
