"""A Crazyflie 2.x flown through Bitcraze's cflib over a Crazyradio: world-frame velocity
setpoints in, the on-board state estimate out.

cflib is optional (it is not a dependency of tether): the adapter imports it in
``connect()`` and fails with one sentence when it or the radio is missing. The Crazyflie's
world frame is set at power-up (x forward, y left, z up), so it is REP-103 already, and so
is its body frame (x forward between motors M1 and M4, y left, z up; docs/quadrotor.md).

Two of the firmware's signs are not REP-103 and are converted here, at the boundary
(Bitcraze's cf2-coordinate-system page: "pitch ... counter-clockwise ... (left-hand-thumb)"):
- ``stateEstimate.pitch`` is logged nose-up positive (the estimator stores ``-pitch``, "the
  legacy CF2 body coordinate system"); REP-103 pitch about +y is nose-down positive, so the
  adapter negates it. Roll and yaw are right-handed already.
- the yaw rate of a velocity setpoint is clockwise positive on the wire (the firmware's
  generic commander stores ``attitudeRate.yaw = -yawrate``; cflib's MotionCommander turns
  left with a negative rate); Tether's yaw rate is CCW positive, so the adapter negates it.
"""

from __future__ import annotations

import importlib
import math
import threading
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import InvalidCommand, TetherError
from tether.core.spec import ActionSpec, RobotSpec
from tether.core.types import Observation

LOG_VARIABLES = (
    "stateEstimate.x",
    "stateEstimate.y",
    "stateEstimate.z",
    "stateEstimate.vx",
    "stateEstimate.vy",
    "stateEstimate.vz",
    "stateEstimate.roll",
    "stateEstimate.pitch",
    "stateEstimate.yaw",
)


class CrazyflieConfig(BaseModel):
    """Radio link and limits."""

    model_config = ConfigDict(extra="forbid")
    # radio://<dongle>/<channel>/<datarate>/<address>
    uri: str = "radio://0/80/2M/E7E7E7E7E7"
    # state-estimate log period (ms); the Crazyflie logs at most 100 Hz per block
    log_period_ms: int = Field(20, ge=10, le=1000)
    max_speed: float = Field(1.0, gt=0)  # m/s, every axis
    max_yaw_rate: float = Field(1.0, gt=0)  # rad/s


def crazyflie_hw_spec(cfg: CrazyflieConfig | None = None, control_hz: float = 50.0) -> RobotSpec:
    """Action (4,) ``velocity_setpoint``: world velocity (m/s) and yaw rate (rad/s, CCW);
    state (9,): position (m), velocity (m/s), roll, pitch, yaw (rad, FLU body, REP-103:
    positive pitch = nose down)."""
    c = cfg or CrazyflieConfig()
    s, r = c.max_speed, c.max_yaw_rate
    return RobotSpec(
        name="crazyflie_hw",
        kind="quadcopter",
        control_hz=control_hz,
        action=ActionSpec(
            mode="velocity_setpoint",
            names=("vx", "vy", "vz", "yaw_rate"),
            low=(-s, -s, -s, -r),
            high=(s, s, s, r),
            units=("m/s", "m/s", "m/s", "rad/s"),
        ),
        state_names=("x", "y", "z", "vx", "vy", "vz", "roll", "pitch", "yaw"),
    )


def _import_cflib() -> tuple[Any, Any, Any, Any]:
    try:
        crtp = importlib.import_module("cflib.crtp")
        crazyflie = importlib.import_module("cflib.crazyflie")
        sync = importlib.import_module("cflib.crazyflie.syncCrazyflie")
        log = importlib.import_module("cflib.crazyflie.log")
    except ImportError:
        raise TetherError(
            "the Crazyflie needs Bitcraze's cflib, which is not installed: pip install cflib"
        ) from None
    return crtp, crazyflie.Crazyflie, sync.SyncCrazyflie, log.LogConfig


class CrazyflieRobot:
    """Robot: a Crazyflie over cflib (``connect`` / ``disconnect`` / ``get_observation`` /
    ``send_action``). Observation ``state`` (9,) float32 from the last log packet (roll,
    pitch, yaw of the FLU body in rad, REP-103 signs, converted from the firmware's degrees
    and legacy pitch sign); stamped with the monotonic clock."""

    def __init__(self, cfg: CrazyflieConfig | None = None, control_hz: float = 50.0) -> None:
        self.cfg = cfg or CrazyflieConfig()
        self.spec = crazyflie_hw_spec(self.cfg, control_hz)
        self._scf: Any = None
        self._log: Any = None
        self._lock = threading.Lock()
        self._state = np.zeros(9, dtype=np.float32)
        self._stamp_ns = 0

    def connect(self) -> None:
        """Open the radio link and start the state log; one-sentence TetherError when cflib,
        the Crazyradio or the Crazyflie is missing."""
        crtp, crazyflie_cls, sync_cls, log_cls = _import_cflib()
        crtp.init_drivers()
        scf = sync_cls(self.cfg.uri, cf=crazyflie_cls(rw_cache=None))
        try:
            scf.open_link()
        except Exception as exc:
            text = str(exc)
            if "Crazyradio" in text or "dongle" in text.lower():
                raise TetherError(
                    "no Crazyradio found: plug in the USB radio (and check its udev "
                    "permissions) to reach the Crazyflie"
                ) from None
            raise TetherError(
                f"could not reach the Crazyflie at {self.cfg.uri} ({text or 'no answer'}): "
                "is it powered on and on that channel/address?"
            ) from None
        self._scf = scf
        log = log_cls(name="tether_state", period_in_ms=self.cfg.log_period_ms)
        for name in LOG_VARIABLES:
            log.add_variable(name, "float")
        scf.cf.log.add_config(log)
        log.data_received_cb.add_callback(self._on_log)
        log.start()
        self._log = log

    def disconnect(self) -> None:
        if self._scf is None:
            return
        try:
            self._scf.cf.commander.send_stop_setpoint()
            if self._log is not None:
                self._log.stop()
        finally:
            self._scf.close_link()
            self._scf = None
            self._log = None

    def get_observation(self) -> Observation:
        with self._lock:
            return Observation({"state": self._state.copy()}, stamp_ns=self._stamp_ns)

    def send_action(self, action: np.ndarray) -> None:
        """World velocity (m/s) and yaw rate (rad/s, CCW positive), shape (4,), clipped to
        the limits."""
        if self._scf is None:
            raise TetherError("the Crazyflie is not connected: call connect() first")
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (4,) or not np.all(np.isfinite(a)):
            raise InvalidCommand("a Crazyflie setpoint is 4 finite numbers (vx, vy, vz, yaw rate)")
        a = np.clip(a, self.spec.action.low_array(), self.spec.action.high_array())
        # cflib takes the yaw rate in deg/s, clockwise positive (module docstring)
        self._scf.cf.commander.send_velocity_world_setpoint(
            float(a[0]), float(a[1]), float(a[2]), -math.degrees(float(a[3]))
        )

    def _on_log(self, timestamp: int, data: dict[str, float], logconf: Any) -> None:
        values = [data[name] for name in LOG_VARIABLES]
        values[6:9] = [math.radians(v) for v in values[6:9]]  # firmware logs degrees
        values[7] = -values[7]  # legacy nose-up-positive pitch -> REP-103 (module docstring)
        with self._lock:
            self._state = np.asarray(values, dtype=np.float32)
            self._stamp_ns = time.monotonic_ns()
