"""A MAVLink companion-computer client over pymavlink: heartbeats both ways, arming, takeoff,
offboard (PX4) / guided (ArduPilot) velocity setpoints, landing, and link-loss detection
with a failsafe action.

Velocity setpoints are SET_POSITION_TARGET_LOCAL_NED in MAV_FRAME_LOCAL_NED with a type
mask that ignores position, acceleration and yaw (``VELOCITY_TYPE_MASK``), so the autopilot
tracks (vx, vy, vz) and the yaw rate. The client speaks ROS frames (ENU, FLU; REP-103) and
converts at the boundary (tether.hardware.mavlink.frames).

Threads: one receives and decodes every message; one sends our heartbeat, re-sends the
latest setpoint at ``stream_hz`` (PX4 drops out of offboard below 2 Hz) and watches the link.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core.errors import InvalidCommand, MissingDependency, TetherError
from tether.core.spec import ActionSpec, RobotSpec
from tether.core.types import Observation
from tether.hardware.mavlink import frames
from tether.hardware.mavlink.config_mavlink import MavlinkConfig

try:
    from pymavlink import mavutil
except ImportError as exc:  # pragma: no cover - depends on the install
    raise MissingDependency("pymavlink", "all", "The MAVLink client") from exc

mav = mavutil.mavlink
VELOCITY_TYPE_MASK = (
    mav.POSITION_TARGET_TYPEMASK_X_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_Y_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_Z_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AX_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AY_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_AZ_IGNORE
    | mav.POSITION_TARGET_TYPEMASK_YAW_IGNORE
)  # = 1479: velocity + yaw rate
# (main mode, sub mode) for DO_SET_MODE: PX4 custom modes, ArduCopter mode numbers
OFFBOARD_MODE = {"px4": (6, 0), "ardupilot": (4, 0)}  # OFFBOARD / GUIDED
STATE_NAMES = ("x", "y", "z", "vx", "vy", "vz", "roll", "pitch", "yaw")


def mavlink_quad_spec(cfg: MavlinkConfig | None = None, control_hz: float = 20.0) -> RobotSpec:
    """RobotSpec of a multicopter flown by velocity setpoints through an autopilot.

    Action (4,), mode ``velocity_setpoint``: ENU world-frame velocity (vx, vy, vz m/s) and
    yaw rate (rad/s, counter-clockwise), limited by the config. State (9,): ENU position
    (m), ENU velocity (m/s), roll, pitch, yaw of the FLU body (rad).
    """
    c = cfg or MavlinkConfig()
    h, v, r = c.max_horizontal_speed, c.max_vertical_speed, c.max_yaw_rate
    action = ActionSpec(
        mode="velocity_setpoint",
        names=("vx", "vy", "vz", "yaw_rate"),
        low=(-h, -h, -v, -r),
        high=(h, h, v, r),
        units=("m/s", "m/s", "m/s", "rad/s"),
    )
    return RobotSpec(
        name="mavlink_quad",
        kind="quadcopter",
        control_hz=control_hz,
        action=action,
        state_names=STATE_NAMES,
    )


class MavlinkClient:
    """Robot: a multicopter behind a MAVLink autopilot (PX4 or ArduPilot).

    ``connect()`` waits for the autopilot's heartbeat and fails with one sentence when none
    comes; then ``arm()``, ``takeoff(alt)``, ``start_offboard()``, ``send_action(v)``,
    ``land()``. ``link_lost`` turns true when the autopilot's heartbeats stop for
    ``link_timeout_s``; listeners added with ``on_link_lost`` are called once per loss.
    Observation: ``state`` (9,) ENU (see ``mavlink_quad_spec``) and ``status`` (4,) =
    armed, offboard, link ok, autopilot failsafe (0/1); float32, monotonic stamp in ns.
    """

    def __init__(self, cfg: MavlinkConfig | None = None, control_hz: float = 20.0) -> None:
        self.cfg = cfg or MavlinkConfig()
        self.spec = mavlink_quad_spec(self.cfg, control_hz)
        self._conn: Any = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acks: dict[int, int] = {}
        self._ack_event = threading.Condition(self._lock)
        self._listeners: list[Callable[[], None]] = []
        self.target_system = 1
        self.target_component = 1
        self._reset_state()

    def _reset_state(self) -> None:
        self.pos_ned = np.zeros(3)
        self.vel_ned = np.zeros(3)
        self.attitude = (0.0, 0.0, 0.0)  # roll, pitch, yaw (FRD in NED)
        self.armed = False
        self.custom_mode = 0
        self.system_status = 0
        self.autopilot_failsafe = False
        self.statustexts: list[str] = []
        self.link_lost = False
        self.failsafe_triggered: str | None = None
        self._last_hb = -math.inf
        self._setpoint: np.ndarray | None = None  # NED vx, vy, vz, yaw rate
        self._setpoint_t = -math.inf
        self._streaming = False
        self._offboard = False

    # ---- Robot ------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the link and wait for an autopilot heartbeat; raises TetherError (one
        sentence) when none arrives within ``connect_timeout_s``."""
        c = self.cfg
        try:
            self._conn = mavutil.mavlink_connection(
                c.url, source_system=c.system_id, source_component=c.component_id
            )
        except Exception as exc:  # serial port missing, bad URL, address in use
            raise TetherError(f"cannot open MAVLink connection '{c.url}': {exc}") from None
        self._reset_state()
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._receive_loop, name="mavlink-rx", daemon=True),
            threading.Thread(target=self._send_loop, name="mavlink-tx", daemon=True),
        ]
        for t in self._threads:
            t.start()
        if not self.wait_until(lambda: self._last_hb > -math.inf, c.connect_timeout_s):
            self.disconnect()
            raise TetherError(
                f"no MAVLink autopilot answered on '{c.url}' within {c.connect_timeout_s:g} s: "
                "is the flight controller (or SITL) running and the URL right?"
            )

    def disconnect(self) -> None:
        """Stop sending (heartbeats and setpoints) and close the link."""
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=2.0)
        self._threads = []
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def is_connected(self) -> bool:
        return self._conn is not None and not self.link_lost

    def get_observation(self) -> Observation:
        with self._lock:
            pos = frames.ned_to_enu(self.pos_ned)
            vel = frames.ned_to_enu(self.vel_ned)
            att = frames.attitude_frd_to_flu(*self.attitude)
            status = [self.armed, self.offboard, not self.link_lost, self.autopilot_failsafe]
        return Observation(
            {
                "state": np.concatenate([pos, vel, att]).astype(np.float32),
                "status": np.array(status, dtype=np.float32),
            },
            stamp_ns=time.monotonic_ns(),
        )

    def send_action(self, action: np.ndarray) -> None:
        """ENU velocity (vx, vy, vz m/s) and yaw rate (rad/s), shape (4,), clipped to the
        config's limits; streamed until the next one."""
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (4,):
            raise InvalidCommand(f"velocity setpoint must have shape (4,), got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise InvalidCommand("velocity setpoint contains NaN or inf")
        if self._conn is None:
            raise TetherError("the MAVLink client is not connected: call connect() first")
        a = np.clip(a, self.spec.action.low_array(), self.spec.action.high_array())
        ned = np.concatenate([frames.enu_to_ned(a[:3]), [frames.rate_ned_to_enu(a[3])]])
        with self._lock:
            self._setpoint = ned
            self._setpoint_t = time.monotonic()
            self._streaming = True
        self._send_setpoint(ned)

    # ---- flight commands --------------------------------------------------------------

    def arm(self) -> None:
        self._command(mav.MAV_CMD_COMPONENT_ARM_DISARM, 1.0)
        if not self.wait_until(lambda: self.armed, self.cfg.command_timeout_s):
            raise TetherError("the autopilot accepted arming but does not report armed")

    def disarm(self, force: bool = False) -> None:
        self._command(mav.MAV_CMD_COMPONENT_ARM_DISARM, 0.0, 21196.0 if force else 0.0)

    def takeoff(self, altitude_m: float) -> None:
        """Climb to ``altitude_m`` above home (converted to AMSL when ``home_amsl_m`` is
        set, as PX4 expects)."""
        alt = altitude_m + (self.cfg.home_amsl_m or 0.0)
        self._command(mav.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, math.nan, math.nan, alt)

    def start_offboard(self) -> None:
        """Stream zero-velocity setpoints, then switch to OFFBOARD (PX4) / GUIDED
        (ArduPilot); PX4 refuses the switch without a setpoint stream."""
        if self._setpoint is None:
            self.send_action(np.zeros(4))
        time.sleep(3.0 / self.cfg.stream_hz)
        main, sub = OFFBOARD_MODE[self.cfg.autopilot]
        self._command(mav.MAV_CMD_DO_SET_MODE, mav.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, main, sub)

    def stop_offboard_stream(self) -> None:
        """Stop re-sending setpoints (heartbeats go on): what a crashed policy looks like to
        the autopilot, whose offboard-loss failsafe then acts."""
        with self._lock:
            self._streaming = False

    def land(self) -> None:
        """Land where it is (NAV_LAND with NaN position: the current one)."""
        with self._lock:
            self._streaming = False
        self._command(mav.MAV_CMD_NAV_LAND, 0, 0, 0, math.nan, math.nan, math.nan, math.nan)

    @property
    def offboard(self) -> bool:
        main, sub = OFFBOARD_MODE[self.cfg.autopilot]
        if self.cfg.autopilot == "px4":
            return bool((self.custom_mode >> 16) & 0xFF == main)
        return self.custom_mode == main

    def on_link_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` (from the client's thread) each time the link is lost."""
        self._listeners.append(callback)

    def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``predicate`` until it holds or ``timeout_s`` passes; returns it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return bool(predicate())

    # ---- internals --------------------------------------------------------------------

    def _command(self, command: int, *params: float) -> None:
        """COMMAND_LONG and wait for its COMMAND_ACK; raises TetherError unless accepted."""
        if self._conn is None:
            raise TetherError("the MAVLink client is not connected: call connect() first")
        p = [float(x) for x in params] + [0.0] * (7 - len(params))
        with self._lock:
            self._acks.pop(command, None)
        with self._send_lock:
            self._conn.mav.command_long_send(
                self.target_system, self.target_component, command, 0, *p
            )
        with self._ack_event:
            got = self._ack_event.wait_for(
                lambda: command in self._acks, timeout=self.cfg.command_timeout_s
            )
            result = self._acks.get(command)
        name = mav.enums["MAV_CMD"][command].name
        if not got:
            raise TetherError(
                f"the autopilot did not acknowledge {name} within {self.cfg.command_timeout_s:g} s"
            )
        if result != mav.MAV_RESULT_ACCEPTED:
            why = mav.enums["MAV_RESULT"][result].name if result is not None else "?"
            raise TetherError(f"the autopilot refused {name} ({why})")

    def _send_setpoint(self, ned: np.ndarray) -> None:
        ms = int(time.monotonic() * 1000) & 0xFFFFFFFF
        with self._send_lock:
            if self._conn is None:
                return
            self._conn.mav.set_position_target_local_ned_send(
                ms,
                self.target_system,
                self.target_component,
                mav.MAV_FRAME_LOCAL_NED,
                VELOCITY_TYPE_MASK,
                0,
                0,
                0,
                *ned[:3],
                0,
                0,
                0,
                0,
                ned[3],
            )

    def _receive_loop(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self._conn.recv_match(blocking=True, timeout=0.05)
            except (OSError, AttributeError):
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            if msg is not None:
                self._handle(msg)

    def _handle(self, msg: Any) -> None:
        kind = msg.get_type()
        with self._lock:
            if kind == "HEARTBEAT":
                if msg.autopilot == mav.MAV_AUTOPILOT_INVALID or msg.type == mav.MAV_TYPE_GCS:
                    return  # another companion or a ground station
                self.target_system = msg.get_srcSystem()
                self.target_component = msg.get_srcComponent()
                self._last_hb = time.monotonic()
                self.armed = bool(msg.base_mode & mav.MAV_MODE_FLAG_SAFETY_ARMED)
                self.custom_mode = int(msg.custom_mode)
                self.system_status = int(msg.system_status)
                self.autopilot_failsafe = self.autopilot_failsafe or msg.system_status in (
                    mav.MAV_STATE_CRITICAL,
                    mav.MAV_STATE_EMERGENCY,
                )
            elif kind == "LOCAL_POSITION_NED":
                self.pos_ned = np.array([msg.x, msg.y, msg.z])
                self.vel_ned = np.array([msg.vx, msg.vy, msg.vz])
            elif kind == "ATTITUDE":
                self.attitude = (msg.roll, msg.pitch, msg.yaw)
            elif kind == "STATUSTEXT":
                text = msg.text if isinstance(msg.text, str) else msg.text.decode(errors="replace")
                self.statustexts.append(text)
                if "failsafe" in text.lower():
                    self.autopilot_failsafe = True
            elif kind == "COMMAND_ACK":
                self._acks[int(msg.command)] = int(msg.result)
                self._ack_event.notify_all()

    def _send_loop(self) -> None:
        hb_period = 1.0 / self.cfg.heartbeat_hz
        sp_period = 1.0 / self.cfg.stream_hz
        next_hb = 0.0
        while not self._stop.wait(sp_period / 2):
            now = time.monotonic()
            if now >= next_hb:
                with self._send_lock:
                    if self._conn is not None:
                        self._conn.mav.heartbeat_send(
                            mav.MAV_TYPE_ONBOARD_CONTROLLER,
                            mav.MAV_AUTOPILOT_INVALID,
                            0,
                            0,
                            mav.MAV_STATE_ACTIVE,
                        )
                next_hb = now + hb_period
            self._watch_link(now)
            with self._lock:
                stream = self._streaming and not self.link_lost
                setpoint = None if self._setpoint is None else self._setpoint.copy()
                stale = stream and now - self._setpoint_t > self.cfg.setpoint_timeout_s
            if stale:
                self._apply_failsafe("setpoints stale")
            elif stream and setpoint is not None:
                self._send_setpoint(setpoint)

    def _watch_link(self, now: float) -> None:
        if self._last_hb == -math.inf:
            return  # not established yet: connect() reports that
        lost = now - self._last_hb > self.cfg.link_timeout_s
        if lost and not self.link_lost:
            with self._lock:
                self.link_lost = True
                self._streaming = False
            for cb in list(self._listeners):
                cb()
        elif not lost and self.link_lost:
            with self._lock:
                self.link_lost = False
            # the link is back: make sure the vehicle does not resume stale commands
            self._apply_failsafe("link regained")

    def _apply_failsafe(self, reason: str) -> None:
        """The configured failsafe action: land, hold (stream zero velocity) or none."""
        self.failsafe_triggered = reason
        action = self.cfg.failsafe_action
        if action == "hold":
            with self._lock:
                self._setpoint = np.zeros(4)
                self._setpoint_t = time.monotonic()
            return
        with self._lock:
            self._streaming = False
        if action == "land" and self.armed:
            # if the autopilot refuses, its own failsafe still lands it
            with contextlib.suppress(TetherError):
                self._command(mav.MAV_CMD_NAV_LAND, 0, 0, 0, math.nan, math.nan, math.nan, math.nan)
