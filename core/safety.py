"""The safety filter every command passes before reaching a simulator or a robot.

It rejects NaN/inf and wrong-shaped actions, clamps to the action limits, rate-limits each
element, and runs a watchdog: when no valid command arrives for ``watchdog_s`` it holds the
position measured when the commands went stale (or sends zeros for velocity-type modes).
Drones have their own gatekeeper, :class:`DroneSafety` (several command modes at once,
land-or-hover watchdog, latched emergency motor stop). Pure numpy: the sim bridge and the
hardware bridge use this same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import InvalidCommand
from tether.core.spec import ActionSpec, RobotSpec

POSITION_MODES = ("joint_position",)
# drone modes whose out-of-range values are rejected rather than clamped (see DroneSafety)
LOW_LEVEL_MODES = ("rotor_rpm", "thrust_rates")


class SafetyConfig(BaseModel):
    """Limits and watchdog; velocity limits come from the RobotSpec's joints."""

    model_config = ConfigDict(extra="forbid")
    # a command older than this is stale (seconds); typically 2-5 control periods
    watchdog_s: float = Field(0.1, gt=0)
    # what the watchdog does: hold the measured position, or command zeros (velocity modes);
    # drones: "hold" (or "zero") hovers in place, "land" descends at land_speed, then motors off
    on_stale: Literal["hold", "zero", "land"] = "hold"
    # drones: descent speed of a watchdog or service landing, m/s
    land_speed: float = Field(0.3, gt=0, le=2.0)
    # drones: a rotor / thrust-rates value outside its limits by at most this fraction of the
    # range is clamped (round-off); further out the command is rejected (see DroneSafety)
    range_tolerance: float = Field(0.01, ge=0, le=0.5)
    # fraction of each joint's max velocity the rate limiter allows
    velocity_scale: float = Field(1.0, gt=0, le=1.0)
    rate_limit: bool = True


@dataclass
class SafetyStats:
    """Counters for reports: how many commands passed, were clamped, rejected, stale."""

    accepted: int = 0
    rejected: int = 0
    clamped: int = 0
    rate_limited: int = 0
    stale_steps: int = 0
    reasons: dict[str, int] = field(default_factory=dict)


class SafetyFilter:
    """Validate, clamp, rate-limit and watchdog actions of shape ``spec.action.shape``."""

    def __init__(self, spec: RobotSpec, cfg: SafetyConfig | None = None) -> None:
        self.spec = spec
        self.cfg = cfg or SafetyConfig()
        self.low = spec.action.low_array()
        self.high = spec.action.high_array()
        self.dim = spec.action.dim
        self.max_step = self._max_step(spec)
        self.stats = SafetyStats()
        self._last_out: np.ndarray | None = None
        self._last_cmd: np.ndarray | None = None
        self._last_cmd_t: float | None = None
        self._hold: np.ndarray | None = None
        self._estop = False

    @property
    def estopped(self) -> bool:
        return self._estop

    def set_estop(self, engaged: bool) -> None:
        """Engage (latched until released) or release the e-stop: engaged means hold/zero."""
        self._estop = engaged
        if engaged:
            self._last_cmd_t = None

    def _max_step(self, spec: RobotSpec) -> np.ndarray | None:
        """Largest change per control period for each action element (None: unlimited)."""
        if not self.cfg.rate_limit or spec.action.mode not in POSITION_MODES:
            return None
        vmax = {j.name: j.max_velocity for j in spec.joints}
        steps = [vmax.get(n, np.inf) * self.cfg.velocity_scale * spec.dt for n in spec.action.names]
        return np.asarray(steps, dtype=np.float32)

    def reset(self, current: np.ndarray | None = None) -> None:
        """Forget old commands; ``current`` (measured action-space position) seeds the rate limit."""
        self._last_out = None if current is None else np.asarray(current, np.float32).copy()
        self._last_cmd = None
        self._last_cmd_t = None
        self._hold = None

    def validate(self, action: np.ndarray) -> np.ndarray:
        """Return ``action`` as float32 of shape (dim,) or raise InvalidCommand."""
        try:
            a = np.asarray(action, dtype=np.float32)
        except (TypeError, ValueError):
            self._reject("not numeric")
        if a.shape != (self.dim,):
            self._reject(f"shape {a.shape} != ({self.dim},)")
        if not np.all(np.isfinite(a)):
            self._reject("NaN or inf")
        return a

    def _reject(self, reason: str) -> None:
        self.stats.rejected += 1
        self.stats.reasons[reason.split(" ")[0]] = (
            self.stats.reasons.get(reason.split(" ")[0], 0) + 1
        )
        raise InvalidCommand(f"action rejected: {reason}")

    def command(self, action: np.ndarray, now_s: float) -> None:
        """Register a fresh command (validated here) at time ``now_s``."""
        self._last_cmd = self.validate(action)
        if self._estop:
            return
        self._last_cmd_t = now_s
        self._hold = None
        self.stats.accepted += 1

    def is_stale(self, now_s: float) -> bool:
        return (
            self._estop
            or self._last_cmd_t is None
            or now_s - self._last_cmd_t > self.cfg.watchdog_s
        )

    def output(self, now_s: float, measured: np.ndarray) -> tuple[np.ndarray, bool]:
        """The action to apply now and whether the watchdog is in force.

        ``measured``: current position in action space, shape (dim,); held when stale.
        """
        stale = self.is_stale(now_s)
        if stale:
            self.stats.stale_steps += 1
            if self._hold is None:
                if self.cfg.on_stale == "zero" or self.spec.action.mode not in POSITION_MODES:
                    self._hold = np.zeros(self.dim, np.float32)
                else:
                    self._hold = np.clip(np.asarray(measured, np.float32), self.low, self.high)
            target = self._hold
        else:
            assert self._last_cmd is not None
            target = np.clip(self._last_cmd, self.low, self.high)
            if not np.array_equal(target, self._last_cmd):
                self.stats.clamped += 1
        # the hold target is where the robot is: no rate limit (crawling back from the last
        # command towards it would move the robot); the limiter restarts from there
        if self.max_step is not None and not stale:
            ref = self._last_out if self._last_out is not None else np.asarray(measured, np.float32)
            limited = np.clip(target, ref - self.max_step, ref + self.max_step)
            if not np.array_equal(limited, target):
                self.stats.rate_limited += 1
            target = limited
        self._last_out = np.asarray(target, np.float32).copy()
        return self._last_out.copy(), stale


DroneVerdict = Literal["command", "none", "hold", "land", "off"]


class DroneSafety:
    """Gatekeeper of one drone: validates its commands, runs the watchdog, latches the e-stop.

    ``limits`` maps each accepted command mode (``rotor_rpm``, ``thrust_rates``,
    ``velocity_setpoint``) to its ActionSpec (shape (4,), low/high). Every command is checked:
    wrong shape, NaN or inf -> rejected. Out of range: a velocity setpoint is clamped (a too
    fast request still says where to go); a rotor / thrust-rates value more than
    ``range_tolerance`` of its range outside the limits is rejected, because such a value is a
    unit or scaling bug (rad/s for rpm, a PWM count) and clamping it would turn garbage into
    full throttle; within the tolerance it is clamped (round-off). ``verdict`` says what the
    drone should do now: follow the command, nothing commanded yet, hold (hover) or land
    (watchdog), or off (emergency: motors off, latched until :meth:`reset`).
    """

    def __init__(self, limits: dict[str, ActionSpec], cfg: SafetyConfig | None = None) -> None:
        self.cfg = cfg or SafetyConfig()
        self.limits = {
            mode: (spec.low_array().astype(np.float64), spec.high_array().astype(np.float64))
            for mode, spec in limits.items()
        }
        self.stats = SafetyStats()
        self.mode: str | None = None
        self._cmd: np.ndarray | None = None
        self._cmd_t: float | None = None
        self._emergency = False

    @property
    def emergency(self) -> bool:
        return self._emergency

    def trip_emergency(self) -> None:
        """Motors off now and until :meth:`reset`; commands meanwhile are rejected."""
        self._emergency = True
        self.clear()

    def reset(self) -> None:
        """Forget commands and release the emergency latch (a new episode / a reset)."""
        self._emergency = False
        self.clear()

    def clear(self) -> None:
        """Forget the current command (a takeoff or land service takes over)."""
        self.mode, self._cmd, self._cmd_t = None, None, None

    def _reject(self, reason: str) -> None:
        key = reason.split(" ")[0]
        self.stats.rejected += 1
        self.stats.reasons[key] = self.stats.reasons.get(key, 0) + 1
        raise InvalidCommand(f"drone command rejected: {reason}")

    def validate(self, mode: str, values: object) -> np.ndarray:
        """``values`` as float64 (4,) within the mode's limits, or raise InvalidCommand."""
        if mode not in self.limits:
            self._reject(f"unknown mode '{mode}' (accepted: {', '.join(self.limits)})")
        low, high = self.limits[mode]
        try:
            a = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            self._reject("not numeric")
        if a.shape != low.shape:
            self._reject(f"shape {a.shape} != {low.shape} for {mode}")
        if not np.all(np.isfinite(a)):
            self._reject(f"NaN or inf in {mode}")
        if mode in LOW_LEVEL_MODES:
            tol = self.cfg.range_tolerance * (high - low)
            if np.any(a < low - tol) or np.any(a > high + tol):
                self._reject(f"out of range {mode} {np.round(a, 3).tolist()}")
        out = np.clip(a, low, high)
        if not np.array_equal(out, a):
            self.stats.clamped += 1
        return out

    def command(self, mode: str, values: object, now_s: float) -> np.ndarray:
        """Validate and register a fresh command at time ``now_s`` (s); returns it clamped."""
        if self._emergency:
            self._reject("emergency stop latched (reset to release)")
        out = self.validate(mode, values)
        self.mode, self._cmd, self._cmd_t = mode, out, now_s
        self.stats.accepted += 1
        return out

    def verdict(self, now_s: float) -> tuple[DroneVerdict, np.ndarray | None]:
        """What the drone does at time ``now_s``: ("command", values of ``self.mode``),
        ("none", None) before any command, ("hold" | "land", None) when the last command is
        older than ``watchdog_s``, ("off", None) after an emergency."""
        if self._emergency:
            return "off", None
        if self._cmd_t is None:
            return "none", None
        if now_s - self._cmd_t > self.cfg.watchdog_s:
            self.stats.stale_steps += 1
            return ("land" if self.cfg.on_stale == "land" else "hold"), None
        return "command", self._cmd
