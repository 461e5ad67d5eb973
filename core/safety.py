"""The safety filter every command passes before reaching a simulator or a robot.

It rejects NaN/inf and wrong-shaped actions, clamps to the action limits, rate-limits each
element, and runs a watchdog: when no valid command arrives for ``watchdog_s`` it holds the
position measured when the commands went stale (or sends zeros for velocity-type modes).
Pure numpy: the sim bridge and the hardware bridge use this same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import InvalidCommand
from tether.core.spec import RobotSpec

POSITION_MODES = ("joint_position",)


class SafetyConfig(BaseModel):
    """Limits and watchdog; velocity limits come from the RobotSpec's joints."""

    model_config = ConfigDict(extra="forbid")
    # a command older than this is stale (seconds); typically 2-5 control periods
    watchdog_s: float = Field(0.1, gt=0)
    # what the watchdog does: hold the measured position, or command zeros (velocity modes)
    on_stale: Literal["hold", "zero"] = "hold"
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
