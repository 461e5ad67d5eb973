"""The safety layer every command passes before reaching a simulator or a robot.

:class:`SafetyFilter` (arms and mobile bases) rejects NaN/inf and wrong-shaped actions and
commands with out-of-order or future stamps; clamps to the action and joint limits; limits each
element's rate (joint velocity) and acceleration; keeps arm end-effector targets inside a
workspace box and a base inside its geofence; and runs a deadline watchdog: a command is valid
for its own control period plus ``grace_periods`` (an unstamped one, such as a cmd_vel twist,
for ``watchdog_s``), after which an arm holds the position measured when the commands went
stale and velocity-type modes (a base's twist) command zeros. The e-stop latches until
:meth:`SafetyFilter.release_estop` (the bridges' ``~/reset_estop`` service). A clock that jumps
back (a simulator reset) resets the filter. Drones have their own gatekeeper,
:class:`DroneSafety` (several command modes at once, land-or-hover watchdog, latched emergency
motor stop). Pure numpy: the sim bridge and the hardware bridge use this same code.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tether.core.errors import ConfigError, InvalidCommand, StaleCommand
from tether.core.spec import ActionSpec, RobotSpec

# the largest finite float32
F32_MAX = float(np.finfo(np.float32).max)

POSITION_MODES = ("joint_position",)
# drone modes whose out-of-range values are rejected rather than clamped (see DroneSafety)
LOW_LEVEL_MODES = ("rotor_rpm", "thrust_rates")
# an action in position mode -> the end effector's position (3,), m, in the workspace's frame
ForwardKinematics = Callable[[np.ndarray], np.ndarray]
EPS_S = 1e-9


class Box(BaseModel):
    """An axis-aligned box, ``low`` <= x <= ``high`` per axis (m): (x, y) or (x, y, z)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    low: tuple[float, ...] = Field(min_length=2, max_length=3)
    high: tuple[float, ...] = Field(min_length=2, max_length=3)

    @model_validator(mode="after")
    def _check(self) -> Box:
        if len(self.low) != len(self.high):
            raise ValueError("low and high need the same number of axes")
        if any(lo >= hi for lo, hi in zip(self.low, self.high, strict=True)):
            raise ValueError("low must be < high on every axis")
        return self

    def contains(self, p: np.ndarray) -> bool:
        n = len(self.low)
        q = np.asarray(p, np.float64)[:n]
        return bool(np.all(q >= self.low) and np.all(q <= self.high))


class SafetyConfig(BaseModel):
    """Limits and watchdog; position and velocity limits also come from the RobotSpec's joints."""

    model_config = ConfigDict(extra="forbid")
    # an unstamped command (a cmd_vel twist) is stale after this long (s); it also caps how
    # long any command stays in force
    watchdog_s: float = Field(0.1, gt=0)
    # a chunk row stays in force this many control periods after its own period (covers a
    # policy answer that is a little late), then the watchdog acts: a dead policy is caught
    # within grace_periods + 1 periods of its last command
    grace_periods: int = Field(1, ge=0, le=20)
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
    # acceleration limit per action element name: joint acceleration (rad/s^2 or m/s^2) in
    # position modes, the command's rate of change (m/s^2, rad/s^2) in velocity modes / twist
    max_acceleration: dict[str, float] = Field(default_factory=dict)
    # arms: end-effector targets must stay in this box (m, robot base frame; needs the
    # forward kinematics the bridge injects); a target outside it is not applied
    workspace: Box | None = None
    # mobile bases: the base (odometry x, y, m) must stay in this box; a twist that would
    # carry it out (or further out) within geofence_lookahead_s loses its forward speed;
    # drones (x, y[, z], world): such velocity-setpoint components are zeroed
    geofence: Box | None = None
    geofence_lookahead_s: float = Field(0.5, gt=0)
    # a command stamped later than now + this (s) is rejected: policies answer observations
    # already made, so it is a clock mix-up or a chunk from before a simulator reset
    future_tolerance_s: float = Field(0.05, ge=0)

    @model_validator(mode="after")
    def _check(self) -> SafetyConfig:
        bad = [k for k, v in self.max_acceleration.items() if not v > 0]
        if bad:
            raise ValueError(f"max_acceleration must be > 0 for {bad}")
        return self


@dataclass
class SafetyStats:
    """Counters for reports: how many commands passed, were clamped, rejected, stale; and the
    watchdog's reaction times (control periods from the last fresh output to the safe one)."""

    accepted: int = 0
    rejected: int = 0
    clamped: int = 0
    rate_limited: int = 0
    accel_limited: int = 0
    workspace_blocked: int = 0
    geofence_blocked: int = 0
    stale_steps: int = 0
    clock_jumps: int = 0
    # commands from before a reset / clock jump back, dropped (StaleCommand; not rejected)
    old_timeline: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    reaction_periods: list[float] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """What reports show of the commands: accepted, and what the filter changed."""
        return {k: int(getattr(self, k)) for k in REPORTED_COUNTS}


#: the SafetyStats counters reports show (episode summaries, the chunk executor's cadence)
REPORTED_COUNTS = (
    "accepted",
    "rejected",
    "clamped",
    "rate_limited",
    "accel_limited",
    "workspace_blocked",
)


class SafetyFilter:
    """Validate, clamp, rate- and acceleration-limit, fence and watchdog actions of shape
    ``spec.action.shape``.

    ``fk``: forward kinematics for the workspace box (position-mode action -> end-effector
    position (3,), m); injected by the bridge so the core stays free of robot models.
    """

    def __init__(
        self, spec: RobotSpec, cfg: SafetyConfig | None = None, fk: ForwardKinematics | None = None
    ) -> None:
        self.spec = spec
        self.cfg = cfg or SafetyConfig()
        self.fk = fk
        self.dim = spec.action.dim
        self.dt = spec.dt
        self.position_mode = spec.action.mode in POSITION_MODES
        self.low, self.high = self._limits(spec)
        self.max_step = self._max_step(spec)
        self.max_accel = self._max_accel(spec)
        if self.cfg.workspace is not None and self.position_mode and fk is None:
            raise ConfigError(
                f"safety.workspace needs forward kinematics of '{spec.name}', and none is known"
            )
        self.stats = SafetyStats()
        self._estop = False
        self._last_now: float | None = None
        self._last_stamp: float | None = None
        self._last_out: np.ndarray | None = None
        # the output before the last one (acceleration limit)
        self._prev_out: np.ndarray | None = None
        self._cmd: np.ndarray | None = None
        self._valid_until = -np.inf
        self._hold: np.ndarray | None = None
        self._last_cmd_t: float | None = None  # time of the last fresh command
        # the latest time seen before the last reset or clock jump back (s): where the old
        # timeline ended, so a late command stamped in it is recognised as such
        self._timeline_end: float | None = None
        self.reset()

    # --- limits --------------------------------------------------------------------------
    def _limits(self, spec: RobotSpec) -> tuple[np.ndarray, np.ndarray]:
        """Action bounds, narrowed by the joints' position limits (position modes) or their
        velocity limits (joint_velocity)."""
        low, high = spec.action.low_array().copy(), spec.action.high_array().copy()
        joints = {j.name: j for j in spec.joints}
        for i, name in enumerate(spec.action.names):
            j = joints.get(name)
            if j is None:
                continue
            if self.position_mode:
                low[i], high[i] = max(low[i], j.lower), min(high[i], j.upper)
            elif spec.action.mode == "joint_velocity":
                v = j.max_velocity * self.cfg.velocity_scale
                low[i], high[i] = max(low[i], -v), min(high[i], v)
        return low, high

    def _max_step(self, spec: RobotSpec) -> np.ndarray | None:
        """Largest change per control period for each action element (None: unlimited)."""
        if not self.cfg.rate_limit or not self.position_mode:
            return None
        vmax = {j.name: j.max_velocity for j in spec.joints}
        steps = [vmax.get(n, np.inf) * self.cfg.velocity_scale * spec.dt for n in spec.action.names]
        return np.asarray(steps, dtype=np.float32)

    def _max_accel(self, spec: RobotSpec) -> np.ndarray | None:
        acc = self.cfg.max_acceleration
        unknown = sorted(set(acc) - set(spec.action.names))
        if unknown:
            raise ConfigError(
                f"safety.max_acceleration names {unknown}, not action elements of {spec.name} "
                f"({', '.join(spec.action.names)})"
            )
        if not acc:
            return None
        return np.asarray([acc.get(n, np.inf) for n in spec.action.names], np.float64)

    # --- e-stop --------------------------------------------------------------------------
    @property
    def estopped(self) -> bool:
        return self._estop

    def engage_estop(self) -> None:
        """Hold / zero from now until :meth:`release_estop`; commands meanwhile are ignored."""
        self._estop = True
        self._cmd = None
        self._last_cmd_t = None
        self._valid_until = -np.inf

    def release_estop(self) -> None:
        """Release a latched e-stop (the bridge's ``~/reset_estop``); the robot stays held
        until a fresh command arrives."""
        self._estop = False

    def set_estop(self, engaged: bool) -> None:
        """Engage (``True``) or release (``False``): for callers without a reset service."""
        if engaged:
            self.engage_estop()
        else:
            self.release_estop()

    # --- state ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """A copy of what the filter remembers between calls (the command in force, stamps,
        the rate and acceleration limits' last outputs, the e-stop, the counters): with a
        simulator's snapshot, a simulated episode goes back to a moment and on from there."""
        return copy.deepcopy(
            {k: v for k, v in vars(self).items() if k.startswith("_")} | {"stats": self.stats}
        )

    def load_state(self, state: dict[str, Any]) -> None:
        """Back to what :meth:`state` returned (which stays usable again)."""
        vars(self).update(copy.deepcopy(state))

    def reset(self, current: np.ndarray | None = None) -> None:
        """Forget old commands and stamps; ``current`` (measured action-space position) seeds
        the rate limit. The e-stop stays as it is."""
        cur = None if current is None else np.asarray(current, np.float32).copy()
        if self._last_now is not None:
            self._timeline_end = self._last_now
        self._last_out = cur
        self._prev_out = None if cur is None else cur.copy()  # at a reset the robot is at rest
        self._cmd = None
        self._valid_until = -np.inf
        self._hold = None
        self._last_cmd_t = None
        self._last_stamp = None
        self._last_now = None

    def _observe_time(self, now_s: float, measured: np.ndarray | None = None) -> None:
        """A clock that goes back (simulator reset, restarted driver) resets the filter."""
        if self._last_now is not None and now_s < self._last_now - EPS_S:
            self.stats.clock_jumps += 1
            self.reset(measured)
        self._last_now = now_s

    # --- commands ------------------------------------------------------------------------
    def _reject(self, reason: str) -> None:
        key = reason.split(" ")[0]
        self.stats.rejected += 1
        self.stats.reasons[key] = self.stats.reasons.get(key, 0) + 1
        raise InvalidCommand(f"action rejected: {reason}")

    def validate(self, action: object) -> np.ndarray:
        """Return ``action`` as float32 of shape (dim,) or raise InvalidCommand."""
        try:
            a = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError):
            self._reject("not numeric")
        if a.shape != (self.dim,):
            self._reject(f"shape {a.shape} != ({self.dim},)")
        # one pass for a valid command (every control step): NaN fails the comparison, inf
        # and values finite in float64 but not in float32 (1e39: huge, not a command) exceed it
        if not np.abs(a).max() <= F32_MAX:
            if not np.isfinite(a).all():
                self._reject("NaN or inf")
            self._reject("huge value (beyond float32)")
        return a.astype(np.float32)

    def check_stamp(self, stamp_s: float, now_s: float) -> None:
        """Accept a command stamp (s, the clock of ``now_s``) or raise InvalidCommand: one
        older than the last accepted stamp is out of order, one later than now +
        ``future_tolerance_s`` is from the future (a clock mix-up). A later stamp that lies
        in the timeline before the last reset / clock jump back (up to its end plus a control
        period, the old timeline's last observation) raises StaleCommand instead: a command
        that was on its way when time restarted, expected and counted in
        ``stats.old_timeline``, not in ``stats.rejected``."""
        self._observe_time(now_s, self._last_out)
        if not np.isfinite(stamp_s):
            self._reject("stamp not finite")
        tol = self.cfg.future_tolerance_s
        if stamp_s > now_s + tol:
            end = self._timeline_end
            if end is not None and stamp_s <= end + self.dt + tol:
                self.stats.old_timeline += 1
                raise StaleCommand(
                    f"stamp {stamp_s:.3f} s is from before time restarted (now {now_s:.3f} s)"
                )
            self._reject(f"future stamp {stamp_s:.3f} s > now {now_s:.3f} s + tolerance")
        if self._last_stamp is not None and stamp_s < self._last_stamp - EPS_S:
            self._reject(f"out-of-order stamp {stamp_s:.3f} s < {self._last_stamp:.3f} s")
        self._last_stamp = stamp_s

    def command(self, action: object, now_s: float, valid_s: float | None = None) -> None:
        """Register a fresh command (validated here) at time ``now_s`` (s).

        ``valid_s``: how long it is meant to apply (a chunk row: its period); it stays in
        force ``grace_periods`` control periods longer, never more than ``watchdog_s``.
        None (an unstamped command): ``watchdog_s``.
        """
        a = self.validate(action)
        if self._estop:
            return
        self._observe_time(now_s, self._last_out)
        life = self.cfg.watchdog_s
        if valid_s is not None:
            life = min(life, valid_s + self.cfg.grace_periods * self.dt)
        self._cmd = a
        self._last_cmd_t = now_s
        self._valid_until = now_s + life
        self.stats.accepted += 1

    def is_stale(self, now_s: float) -> bool:
        return self._estop or self._cmd is None or now_s >= self._valid_until - EPS_S

    # --- output --------------------------------------------------------------------------
    def output(
        self, now_s: float, measured: np.ndarray, pose: np.ndarray | None = None
    ) -> tuple[np.ndarray, bool]:
        """The action to apply at ``now_s`` (s) and whether the watchdog is in force.

        ``measured``: current position in action space, shape (dim,); held when stale (arms).
        ``pose``: mobile bases, (x m, y m, yaw rad) in the odometry frame, for the geofence.
        """
        measured = np.asarray(measured, np.float32)
        self._observe_time(now_s, measured)
        stale = self.is_stale(now_s)
        if stale:
            self.stats.stale_steps += 1
            if self._last_cmd_t is not None:  # the watchdog's reaction to the last command
                self.stats.reaction_periods.append((now_s - self._last_cmd_t) / self.dt)
                del self.stats.reaction_periods[:-1000]  # the latest 1000
                self._last_cmd_t = None
            if self._hold is None:
                if self.cfg.on_stale == "zero" or not self.position_mode:
                    self._hold = np.zeros(self.dim, np.float32)
                else:
                    self._hold = np.clip(measured, self.low, self.high)
            # the hold target is where the robot is: no rate limit (crawling back from the
            # last command towards it would move the robot); the limiters restart from there
            target = self._hold
        else:
            assert self._cmd is not None
            self._hold = None
            target = self._limit(self._cmd, measured, pose)
        # the robot is at rest on a hold: the acceleration limit restarts from zero velocity
        self._prev_out = np.asarray(target, np.float32).copy() if stale else self._last_out
        self._last_out = np.asarray(target, np.float32).copy()
        return self._last_out.copy(), stale

    def _limit(self, cmd: np.ndarray, measured: np.ndarray, pose: np.ndarray | None) -> np.ndarray:
        """Clamp, rate-limit, acceleration-limit and fence one fresh command."""
        # (np.minimum / np.maximum and the comparisons' .any(): np.clip and np.array_equal
        # cost several times more on arrays this small, at every control step)
        target = np.minimum(np.maximum(cmd, self.low), self.high)
        if (target != cmd).any():
            self.stats.clamped += 1
        ref = self._last_out if self._last_out is not None else measured
        if self.position_mode:
            if self.max_accel is not None and self._prev_out is not None:
                # on the full target (braking needs the true distance); rate-limits too
                target = self._accel_limit_position(target, ref, self._prev_out)
            if self.max_step is not None:
                limited = np.minimum(np.maximum(target, ref - self.max_step), ref + self.max_step)
                if (limited != target).any():
                    self.stats.rate_limited += 1
                target = limited
            if self.cfg.workspace is not None and not self._in_workspace(target):
                self.stats.workspace_blocked += 1
                target = ref if self._in_workspace(ref) else measured
        else:
            if self.max_accel is not None and self._last_out is not None:
                step = (self.max_accel * self.dt).astype(np.float32)
                limited = np.clip(target, self._last_out - step, self._last_out + step)
                if not np.array_equal(limited, target):
                    self.stats.accel_limited += 1
                target = limited
            if self.cfg.geofence is not None and pose is not None:
                target = self._fence_twist(target, np.asarray(pose, np.float64))
        return np.asarray(target, np.float32)

    def _accel_limit_position(
        self, target: np.ndarray, last: np.ndarray, prev: np.ndarray
    ) -> np.ndarray:
        """Change of velocity per period <= max_accel * dt, braking so as to stop at the
        target; never past the target (stopping on it may then exceed the limit)."""
        assert self.max_accel is not None
        dt = self.dt
        v_prev = (last.astype(np.float64) - prev) / dt
        dist = target.astype(np.float64) - last
        v_des = dist / dt
        a = np.where(np.isfinite(self.max_accel), self.max_accel, 1e12)
        # fastest speed from which steps of decreasing speed (a * dt less each) stop within
        # |dist|: v^2 / (2 a) + v dt / 2 = |dist|
        v_stop = a * (-dt / 2 + np.sqrt(dt * dt / 4 + 2 * np.abs(dist) / a))
        v = np.where(np.abs(v_des) > v_stop, np.sign(dist) * v_stop, v_des)
        dv = a * dt
        v = np.clip(v, v_prev - dv, v_prev + dv)
        out = last + v * dt
        # never past the target: a step that would pass it (or leave it) stops on it
        passed = (out - target) * dist > 0
        out = np.where(passed | (dist == 0), target, out)
        out = np.clip(out, self.low, self.high)
        if self.max_step is not None:
            out = np.clip(out, last - self.max_step, last + self.max_step)
        if not np.allclose(out, target):
            self.stats.accel_limited += 1
        return np.asarray(out, np.float32)

    def _in_workspace(self, action: np.ndarray) -> bool:
        assert self.cfg.workspace is not None and self.fk is not None
        p = np.asarray(self.fk(action), np.float64)
        return bool(np.all(np.isfinite(p))) and self.cfg.workspace.contains(p)

    def _fence_twist(self, twist: np.ndarray, pose: np.ndarray) -> np.ndarray:
        """Zero the forward speed of a twist (vx, wz) that would carry the base out of the
        geofence, or further out, within the lookahead; turning in place stays allowed."""
        fence = self.cfg.geofence
        assert fence is not None
        x, y, yaw = float(pose[0]), float(pose[1]), float(pose[2])
        t = self.cfg.geofence_lookahead_s
        nxt = np.array([x + twist[0] * np.cos(yaw) * t, y + twist[0] * np.sin(yaw) * t])
        if fence.contains(nxt):
            return twist
        lo, hi = np.asarray(fence.low[:2]), np.asarray(fence.high[:2])
        here = np.array([x, y])

        def outside(p: np.ndarray) -> float:
            return float(np.sum(np.maximum(lo - p, 0) + np.maximum(p - hi, 0)))

        if fence.contains(here) or outside(nxt) >= outside(here):
            self.stats.geofence_blocked += 1
            out = twist.copy()
            out[0] = 0.0
            return out
        return twist  # outside already and heading back in


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

    def fence(self, position: np.ndarray, setpoint: np.ndarray) -> np.ndarray:
        """A velocity setpoint (vx, vy, vz m/s world, yaw rate) with the components that would
        carry the drone at ``position`` (3,) m out of ``safety.geofence`` (or further out)
        within ``geofence_lookahead_s`` set to zero; unchanged without a geofence."""
        fence = self.cfg.geofence
        if fence is None:
            return setpoint
        out = np.asarray(setpoint, np.float64).copy()
        t = self.cfg.geofence_lookahead_s
        for i, (lo, hi) in enumerate(zip(fence.low, fence.high, strict=True)):
            nxt = float(position[i]) + out[i] * t
            if (nxt > hi and out[i] > 0) or (nxt < lo and out[i] < 0):
                out[i] = 0.0
        if not np.array_equal(out, setpoint):
            self.stats.reasons["geofence"] = self.stats.reasons.get("geofence", 0) + 1
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
