"""A mock PX4-like autopilot on UDP loopback that speaks real MAVLink through pymavlink.

It flies a point mass (velocity tracked with a time constant and an acceleration limit,
the ground at z = 0), answers COMMAND_LONG (arm/disarm, takeoff, land, set mode) with
COMMAND_ACK, follows SET_POSITION_TARGET_LOCAL_NED velocity setpoints in OFFBOARD mode,
sends HEARTBEAT, LOCAL_POSITION_NED, ATTITUDE, EXTENDED_SYS_STATE and STATUSTEXT, and has
PX4's failsafes: in the air, when the companion's heartbeats stop for ``link_timeout_s``
(COM_DL_LOSS_T) or, in OFFBOARD, its setpoints for ``offboard_timeout_s`` (COM_OF_LOSS_T),
it switches to AUTO.LAND, lands and disarms.

All frames are MAVLink's: local NED, yaw clockwise from north.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import MissingDependency

try:
    from pymavlink import mavutil
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pymavlink", "all", "The mock autopilot") from exc

mav = mavutil.mavlink
# PX4 custom modes: main mode << 16 | sub mode << 24
PX4_MAIN = {"POSCTL": 3, "AUTO": 4, "OFFBOARD": 6}
PX4_AUTO_SUB = {"READY": 1, "TAKEOFF": 2, "LOITER": 3, "LAND": 6}
MODES = {
    "POSCTL": (3, 0),
    "AUTO.LOITER": (4, 3),
    "AUTO.TAKEOFF": (4, 2),
    "AUTO.LAND": (4, 6),
    "OFFBOARD": (6, 0),
}
# velocity-only setpoint: ignore position, acceleration and yaw (yaw rate used)
VELOCITY_TYPE_MASK = (
    mav.POSITION_TARGET_TYPEMASK_X_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_Y_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_Z_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AX_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AY_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AZ_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_YAW_IGNORE
)


def px4_custom_mode(name: str) -> int:
    main, sub = MODES[name]
    return (main << 16) | (sub << 24)


def px4_mode_name(custom_mode: int) -> str:
    """PX4 custom_mode -> a name from MODES (or 'UNKNOWN')."""
    main, sub = (custom_mode >> 16) & 0xFF, (custom_mode >> 24) & 0xFF
    for name, (m, s) in MODES.items():
        if m == main and (s == sub or (s == 0 and main != 4)):
            return name
    return "UNKNOWN"


class MockAutopilotConfig(BaseModel):
    """Rates, dynamics and failsafe timing of the mock autopilot."""

    model_config = ConfigDict(extra="forbid")
    # where it listens; port 0 picks a free one (see MockAutopilot.client_url)
    url: str = "udpin:127.0.0.1:0"
    system_id: int = Field(1, ge=1, le=255)
    heartbeat_hz: float = Field(1.0, gt=0)
    telemetry_hz: float = Field(30.0, gt=0)
    # physics and control loop rate (Hz)
    loop_hz: float = Field(100.0, gt=0)
    # velocity response: first-order time constant (s) and acceleration limit (m/s^2)
    velocity_tau_s: float = Field(0.3, gt=0)
    max_accel: float = Field(4.0, gt=0)
    # climb speed of AUTO.TAKEOFF and descent speed of AUTO.LAND (m/s; PX4 MPC_TKO_SPEED,
    # MPC_LAND_SPEED)
    takeoff_speed: float = Field(1.5, gt=0)
    land_speed: float = Field(0.7, gt=0)
    # failsafe timeouts (s): companion heartbeat loss (COM_DL_LOSS_T) and offboard setpoint
    # loss (COM_OF_LOSS_T)
    link_timeout_s: float = Field(10.0, gt=0)
    offboard_timeout_s: float = Field(1.0, gt=0)
    # PX4 refuses OFFBOARD unless setpoints arrived within this long (s)
    offboard_setpoint_age_s: float = Field(0.5, gt=0)


class MockAutopilot:
    """A PX4-like flight controller in a background thread. ``start()`` / ``close()``;
    ``cut_link()`` simulates a radio/cable loss (nothing in or out) for failsafe tests.

    State (read under ``lock``): ``pos``/``vel`` (3,) NED m, m/s; ``yaw`` rad (NED);
    ``armed``; ``mode`` (a MODES name); ``failsafe`` (the reason, or None); ``landed``;
    ``last_command``: the last COMMAND_LONG received, (MAV_CMD name, CLOCK_MONOTONIC ns).
    """

    def __init__(self, cfg: MockAutopilotConfig | None = None) -> None:
        self.cfg = cfg or MockAutopilotConfig()
        self.lock = threading.Lock()
        self.pos = np.zeros(3)
        self.vel = np.zeros(3)
        self.yaw = 0.0
        self.yaw_rate = 0.0
        self.armed = False
        self.mode = "POSCTL"
        self.failsafe: str | None = None
        self.takeoff_alt = 2.5
        self.statustexts: list[str] = []
        self.last_command: tuple[str, int] | None = None
        self._sp_vel = np.zeros(3)
        self._sp_yaw_rate = 0.0
        self._sp_time = -math.inf
        self._companion_hb = -math.inf
        self._link_cut = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._t0 = time.monotonic()

    # ---- lifecycle --------------------------------------------------------------------

    def start(self) -> MockAutopilot:
        self._conn = mavutil.mavlink_connection(
            self.cfg.url, source_system=self.cfg.system_id, source_component=1
        )
        self._thread = threading.Thread(target=self._run, name="mock-autopilot", daemon=True)
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        return int(self._conn.port.getsockname()[1])

    @property
    def client_url(self) -> str:
        """The connection string a companion uses to reach this autopilot."""
        return f"udpout:127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def cut_link(self, cut: bool = True) -> None:
        """Drop every message in both directions (a lost radio link) until called with
        False."""
        self._link_cut = cut

    def __enter__(self) -> MockAutopilot:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def landed(self) -> bool:
        return bool(self.pos[2] >= -1e-3 and abs(self.vel[2]) < 1e-3)

    # ---- loop -------------------------------------------------------------------------

    def _run(self) -> None:
        period = 1.0 / self.cfg.loop_hz
        next_hb = next_tel = last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            self._receive(now)
            with self.lock:
                self._failsafe_checks(now)
                self._physics(min(now - last, 0.05))
            last = now
            if now >= next_hb:
                self._send_heartbeat()
                next_hb = now + 1.0 / self.cfg.heartbeat_hz
            if now >= next_tel:
                self._send_telemetry(now)
                next_tel = now + 1.0 / self.cfg.telemetry_hz
            self._stop.wait(max(0.0, period - (time.monotonic() - now)))

    def _receive(self, now: float) -> None:
        while True:
            try:
                msg = self._conn.recv_match(blocking=False)
            except OSError:
                return
            if msg is None:
                return
            if self._link_cut:
                continue
            kind = msg.get_type()
            if kind == "HEARTBEAT" and msg.type != mav.MAV_TYPE_QUADROTOR:
                self._companion_hb = now
            elif kind == "SET_POSITION_TARGET_LOCAL_NED":
                self._on_setpoint(msg, now)
            elif kind == "COMMAND_LONG":
                self._on_command(msg, now)

    def _on_setpoint(self, msg: Any, now: float) -> None:
        if msg.coordinate_frame != mav.MAV_FRAME_LOCAL_NED:
            return
        if msg.type_mask & VELOCITY_TYPE_MASK != VELOCITY_TYPE_MASK:
            return  # only velocity setpoints are supported by this mock
        with self.lock:
            self._sp_vel = np.array([msg.vx, msg.vy, msg.vz], dtype=np.float64)
            ignore_rate = msg.type_mask & mav.POSITION_TARGET_TYPEMASK_YAW_RATE_IGNORE
            self._sp_yaw_rate = 0.0 if ignore_rate else float(msg.yaw_rate)
            self._sp_time = now

    def _on_command(self, msg: Any, now: float) -> None:
        cmd = msg.command
        ok, denied = mav.MAV_RESULT_ACCEPTED, mav.MAV_RESULT_DENIED
        with self.lock:
            known = mav.enums["MAV_CMD"].get(cmd)
            self.last_command = (known.name if known else str(cmd), time.monotonic_ns())
            if cmd == mav.MAV_CMD_COMPONENT_ARM_DISARM:
                if msg.param1 >= 0.5:
                    result = denied if self.failsafe else ok
                    self.armed = self.armed or result == ok
                else:
                    result = ok if self.landed or msg.param2 == 21196 else denied
                    self.armed = self.armed and result != ok
            elif cmd == mav.MAV_CMD_NAV_TAKEOFF:
                result = ok if self.armed and not self.failsafe else denied
                if result == ok:
                    alt = msg.param7
                    self.takeoff_alt = 2.5 if math.isnan(alt) else float(alt)
                    self.mode = "AUTO.TAKEOFF"
            elif cmd == mav.MAV_CMD_NAV_LAND:
                result = ok
                self.mode = "AUTO.LAND"
            elif cmd == mav.MAV_CMD_DO_SET_MODE:
                result = self._set_mode(msg, now)
            else:
                result = mav.MAV_RESULT_UNSUPPORTED
        self._send(lambda m: m.command_ack_send(cmd, result))

    def _set_mode(self, msg: Any, now: float) -> int:
        custom = (int(msg.param2) << 16) | (int(msg.param3) << 24)
        name = px4_mode_name(custom)
        if name == "UNKNOWN" or self.failsafe:
            return int(mav.MAV_RESULT_DENIED)
        if name == "OFFBOARD" and now - self._sp_time > self.cfg.offboard_setpoint_age_s:
            return int(mav.MAV_RESULT_DENIED)  # PX4: stream setpoints before switching
        self.mode = name
        return int(mav.MAV_RESULT_ACCEPTED)

    def _failsafe_checks(self, now: float) -> None:
        if not self.armed or self.failsafe or self.landed and self.mode != "OFFBOARD":
            return
        reason = None
        if now - self._companion_hb > self.cfg.link_timeout_s:
            reason = "data link lost"
        elif self.mode == "OFFBOARD" and now - self._sp_time > self.cfg.offboard_timeout_s:
            reason = "offboard signal lost"
        if reason is not None:
            self.failsafe = reason
            self.mode = "AUTO.LAND"
            text = f"Failsafe activated: {reason}, landing"
            self.statustexts.append(text)
            self._send(lambda m: m.statustext_send(mav.MAV_SEVERITY_CRITICAL, text.encode()))

    def _physics(self, dt: float) -> None:
        """Point mass in NED: the mode sets a velocity target, tracked with a time constant
        and an acceleration limit; the ground stops it and disarms it after a landing."""
        if not self.armed:
            target = np.zeros(3)
            yaw_rate = 0.0
        elif self.mode == "OFFBOARD":
            target, yaw_rate = self._sp_vel.copy(), self._sp_yaw_rate
        elif self.mode == "AUTO.TAKEOFF":
            err = -self.takeoff_alt - self.pos[2]
            target = np.array([0.0, 0.0, float(np.clip(2.0 * err, -self.cfg.takeoff_speed, 1.0))])
            yaw_rate = 0.0
            if abs(err) < 0.05:
                self.mode = "AUTO.LOITER"
        elif self.mode == "AUTO.LAND":
            target, yaw_rate = np.array([0.0, 0.0, self.cfg.land_speed]), 0.0
        else:  # POSCTL / LOITER: hold
            target, yaw_rate = np.zeros(3), 0.0
        if not self.armed and self.pos[2] >= 0:
            self.vel[:] = 0.0
            return
        dv = (target - self.vel) * min(1.0, dt / self.cfg.velocity_tau_s)
        norm = float(np.linalg.norm(dv))
        if norm > self.cfg.max_accel * dt:
            dv *= self.cfg.max_accel * dt / norm
        self.vel += dv
        self.pos += self.vel * dt
        self.yaw = (self.yaw + yaw_rate * dt + math.pi) % (2 * math.pi) - math.pi
        self.yaw_rate = yaw_rate
        if self.pos[2] >= 0.0:  # on the ground
            self.pos[2] = 0.0
            self.vel[:] = 0.0
            if self.mode == "AUTO.LAND" and self.armed:
                self.armed = False  # PX4 auto-disarms after landing
                self.statustexts.append("Landing detected, disarmed")

    # ---- output -----------------------------------------------------------------------

    def _send(self, fn: Any) -> None:
        if self._link_cut or self._conn is None:
            return
        with contextlib.suppress(OSError):  # nobody listening yet
            fn(self._conn.mav)

    def _send_heartbeat(self) -> None:
        with self.lock:
            base = mav.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED
            if self.armed:
                base |= mav.MAV_MODE_FLAG_SAFETY_ARMED
            status = mav.MAV_STATE_STANDBY
            if self.armed:
                status = mav.MAV_STATE_CRITICAL if self.failsafe else mav.MAV_STATE_ACTIVE
            custom = px4_custom_mode(self.mode)
        self._send(
            lambda m: m.heartbeat_send(
                mav.MAV_TYPE_QUADROTOR, mav.MAV_AUTOPILOT_PX4, base, custom, status
            )
        )

    def _send_telemetry(self, now: float) -> None:
        ms = int((now - self._t0) * 1000) & 0xFFFFFFFF
        with self.lock:
            p, v, yaw, rate = self.pos.copy(), self.vel.copy(), self.yaw, self.yaw_rate
            landed = mav.MAV_LANDED_STATE_ON_GROUND if self.landed else mav.MAV_LANDED_STATE_IN_AIR
        self._send(lambda m: m.local_position_ned_send(ms, *p, *v))
        self._send(lambda m: m.attitude_send(ms, 0.0, 0.0, yaw, 0.0, 0.0, rate))
        self._send(lambda m: m.extended_sys_state_send(mav.MAV_VTOL_STATE_UNDEFINED, landed))
