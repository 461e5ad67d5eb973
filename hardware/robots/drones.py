"""Quadcopters flown by world-frame velocity setpoints: through a MAVLink autopilot (PX4 /
ArduPilot, via tether.hardware.mavlink) or a Crazyflie (cflib, via tether.hardware.crazyflie).

Both add flight phases on top of the Robot protocol: ``takeoff(height)``, ``land()``,
``emergency()``, ``safe_stop()`` (what the bridge does before it lets go of the drone);
velocity setpoints are obeyed only while ``phase == "flying"`` (a command
during the climb would abort the takeoff, one during landing would undo it). ``state13``
gives the odometry layout of the drone bridge: position (3,) m, wxyz quaternion (4,), world
velocity (3,) m/s, body rates (3,) rad/s; ENU / FLU (REP-103).
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from tether.core.errors import TetherError
from tether.core.types import Observation
from tether.hardware.crazyflie import CrazyflieConfig, CrazyflieRobot
from tether.hardware.mavlink.client import MavlinkClient, mav
from tether.hardware.mavlink.config_mavlink import MavlinkConfig

Phase = Literal["ground", "takeoff", "flying", "landing", "emergency"]
AIRBORNE = ("takeoff", "flying", "landing")
# (main, sub) mode to arm and take off from: PX4 AUTO.LOITER, ArduCopter GUIDED
HOLD_MODE = {"px4": (4, 3), "ardupilot": (4, 0)}


def state13(state9: np.ndarray) -> np.ndarray:
    """(9,) position, velocity, roll/pitch/yaw -> (13,) drone-bridge state (rates 0)."""
    s = np.asarray(state9, np.float64)
    r, p, y = s[6:9] / 2
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    quat = [
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    ]
    return np.concatenate([s[0:3], quat, s[3:6], np.zeros(3)]).astype(np.float32)


class MavlinkDrone:
    """A PX4 / ArduPilot multicopter: arm + NAV_TAKEOFF, then OFFBOARD / GUIDED velocity
    setpoints, NAV_LAND. ``link_lost`` / ``autopilot_failsafe`` mirror the client; on a link
    loss the client applies its failsafe (land / hold) and the autopilot its own (PX4
    COM_DL_LOSS_T), so the vehicle lands even though we can no longer reach it."""

    def __init__(self, cfg: MavlinkConfig, control_hz: float = 20.0) -> None:
        self.client = MavlinkClient(cfg, control_hz)
        self.spec = self.client.spec
        self.phase: Phase = "ground"
        self.takeoff_height = 1.0
        self.link_events: list[str] = []

    # ---- Robot ------------------------------------------------------------------------
    def connect(self) -> None:
        self.client.connect()
        self.client.on_link_lost(lambda: self.link_events.append("link_lost"))

    def disconnect(self) -> None:
        self.client.disconnect()

    def get_observation(self) -> Observation:
        obs = self.client.get_observation()
        c = self.client
        if self.phase == "takeoff" and obs["state"][2] >= 0.9 * self.takeoff_height:
            self.phase = "flying"
        if self.phase in ("takeoff", "flying") and (c.autopilot_failsafe or c.link_lost):
            self.phase = "landing"  # the autopilot's failsafe takes over
        if self.phase in ("landing", "emergency") and not c.armed and not c.link_lost:
            self.phase = "ground"
        return obs

    def send_action(self, action: np.ndarray) -> None:
        """Velocity setpoint (4,) ENU m/s + yaw rate; ignored unless flying. The first one
        switches the autopilot to OFFBOARD (PX4) / GUIDED (ArduPilot)."""
        if self.phase != "flying" or self.client.link_lost:
            return
        self.client.send_action(action)
        if not self.client.offboard:
            self.client.start_offboard()

    # ---- flight -----------------------------------------------------------------------
    @property
    def link_lost(self) -> bool:
        return bool(self.client.link_lost)

    @property
    def autopilot_failsafe(self) -> bool:
        return bool(self.client.autopilot_failsafe)

    def takeoff(self, height: float) -> str:
        if self.phase != "ground":
            raise TetherError(f"cannot take off while {self.phase}")
        self.takeoff_height = height
        # after a landing PX4 stays in AUTO.LAND, which disarms on the ground at once: switch
        # to a hold mode first (ArduPilot takes off in GUIDED). MavlinkClient has no public
        # set-mode call yet, hence its _command.
        main, sub = HOLD_MODE[self.client.cfg.autopilot]
        self.client._command(
            mav.MAV_CMD_DO_SET_MODE, mav.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, main, sub
        )
        self.client.arm()
        self.client.takeoff(height)
        self.phase = "takeoff"
        return f"taking off to {height:g} m"

    def land(self) -> str:
        self.client.land()
        self.phase = "landing"
        return "landing"

    def hold(self) -> None:
        """Zero velocity (the watchdog's hold)."""
        self.send_action(np.zeros(4))

    def emergency(self) -> str:
        self.client.disarm(force=True)
        self.phase = "emergency"
        return "motors off"

    def safe_stop(self) -> str:
        """Before the companion goes (nobody will command the vehicle after this): land an
        airborne vehicle (NAV_LAND, acknowledged; the autopilot lands and disarms on its own),
        disarm one left armed on the ground. With the link lost the autopilot's own failsafe
        is all there is."""
        c = self.client
        if c.link_lost:
            return "link lost: the autopilot's failsafe lands the vehicle"
        if not c.armed:
            return "disarmed"
        if self.phase in AIRBORNE:
            return self.land()
        c.disarm()
        self.phase = "ground"
        return "disarmed"


class CrazyflieDrone:
    """A Crazyflie over cflib: velocity setpoints in the world frame; takeoff / land climb
    and descend at ``speed`` m/s with velocity setpoints (no high-level commander). cflib is
    optional: ``connect`` fails with one sentence when it or the Crazyradio is missing."""

    def __init__(self, cfg: CrazyflieConfig, control_hz: float = 50.0, speed: float = 0.3):
        self.robot = CrazyflieRobot(cfg, control_hz)
        self.spec = self.robot.spec
        self.speed = speed
        self.phase: Phase = "ground"
        self.takeoff_height = 1.0
        self.link_lost = False
        self.autopilot_failsafe = False
        self.link_events: list[str] = []

    def connect(self) -> None:
        self.robot.connect()

    def disconnect(self) -> None:
        self.robot.disconnect()

    def get_observation(self) -> Observation:
        obs = self.robot.get_observation()
        z = float(obs["state"][2])
        if self.phase == "takeoff":
            if z >= 0.95 * self.takeoff_height:
                self.phase = "flying"
            else:
                self.robot.send_action(np.array([0.0, 0.0, self.speed, 0.0]))
        elif self.phase == "landing":
            if z < 0.05:
                self.phase = "ground"  # no more setpoints: the firmware's timeout idles it
            else:
                self.robot.send_action(np.array([0.0, 0.0, -self.speed, 0.0]))
        return obs

    def send_action(self, action: np.ndarray) -> None:
        if self.phase == "flying":
            self.robot.send_action(action)

    def takeoff(self, height: float) -> str:
        self.takeoff_height, self.phase = height, "takeoff"
        return f"taking off to {height:g} m"

    def land(self) -> str:
        self.phase = "landing"
        return "landing"

    def hold(self) -> None:
        self.send_action(np.zeros(4))

    def emergency(self) -> str:
        self.robot.disconnect()
        self.phase = "emergency"
        return "motors off"

    def safe_stop(self, timeout_s: float = 10.0) -> str:
        """Before the bridge goes: land an airborne Crazyflie here and now (its firmware cuts
        the motors when setpoints stop, mid-air too), descending at ``speed`` for at most
        ``timeout_s``."""
        if self.phase not in AIRBORNE:
            return "on the ground"
        self.land()
        deadline = time.monotonic() + timeout_s
        period = self.spec.dt
        while self.phase == "landing" and time.monotonic() < deadline:
            self.get_observation()  # sends the descent setpoint, ends the landing at 5 cm
            time.sleep(period)
        return "landed" if self.phase == "ground" else "landing timed out"
