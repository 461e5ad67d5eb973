"""A mock arm that follows joint trajectories like a ros2_control JointTrajectoryController
on a real arm: commands take effect after a configurable latency, the reference is the
trajectory interpolated linearly between its points, and the joints track it within their
position, velocity and acceleration limits.

Time comes from a clock (the monotonic clock, or a ManualClock in tests); the state is
integrated lazily up to the clock's time whenever it is read or commanded.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.errors import InvalidCommand, TetherError
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.mock.clock import Clock, monotonic

# internal integration step (s)
SUBSTEP = 0.001


class MockArmConfig(BaseModel):
    """Limits and latency of the mock arm."""

    model_config = ConfigDict(extra="forbid")
    # seconds between a command's arrival and its first effect (bus + controller delay)
    latency_s: float = Field(0.02, ge=0)
    # joint acceleration limit (rad/s^2 or m/s^2), one for all joints; Franka's are 10-20
    max_acceleration: float = Field(10.0, gt=0)
    # gain (1/s) of the tracking loop: velocity command per unit of position error
    tracking_gain: float = Field(30.0, gt=0)
    # state names that mirror another joint; None: every state name that is not an action
    # element follows the action's last element (an arm's extra finger joints follow the
    # gripper opening: action = arm joints + first finger, state = arm joints + every finger)
    mirror: dict[str, str] | None = None
    # start position per joint; joints not named start at the robot description's home pose
    # (an arm's ready pose and gripper opening), or the middle of their range without one
    initial: dict[str, float] = Field(default_factory=dict)


def _home(spec: RobotSpec) -> dict[str, float]:
    """The registered robot's home pose by action name (arm joints, then the gripper
    opening); empty for a robot without one."""
    from tether.core import registry
    from tether.core.errors import ConfigError

    try:
        desc = registry.load("robot", spec.name)
    except ConfigError:
        return {}
    home = getattr(desc, "home", None)
    gripper = getattr(desc, "gripper", None)
    if home is None or gripper is None:
        return {}
    return dict(zip(spec.action.names, (*home, gripper.home), strict=False))


class MockArm:
    """Robot: a joint-position arm (``spec.action.mode == "joint_position"``).

    ``send_action(q)`` (dim,) is a one-point trajectory reaching ``q`` at once (the limits
    shape the motion); ``send_trajectory(points, times)`` is a JointTrajectory: ``points``
    (N, dim) joint positions, ``times`` (N,) seconds from its start. Observation: ``state``
    (len(spec.state_names),) positions, ``velocity`` (same) velocities, float32, stamped
    with the clock in ns.
    """

    def __init__(
        self, spec: RobotSpec, cfg: MockArmConfig | None = None, clock: Clock = monotonic
    ) -> None:
        if spec.action.mode != "joint_position":
            raise TetherError(
                f"the mock arm takes joint_position actions, not {spec.action.mode} "
                f"(robot '{spec.name}')"
            )
        joints = {j.name: j for j in spec.joints}
        missing = [n for n in spec.action.names if n not in joints]
        if missing:
            raise TetherError(f"the mock arm needs joint limits for {missing} in the spec")
        self.spec = spec
        self.cfg = cfg or MockArmConfig()
        self.clock = clock
        js = [joints[n] for n in spec.action.names]
        self.lower = np.array([j.lower for j in js])
        self.upper = np.array([j.upper for j in js])
        self.vmax = np.array([j.max_velocity for j in js])
        self.amax = self.cfg.max_acceleration
        self._index = {n: i for i, n in enumerate(spec.action.names)}
        if self.cfg.mirror is not None:
            self.mirror = dict(self.cfg.mirror)
        else:
            last = spec.action.names[-1]
            self.mirror = {n: last for n in spec.state_names if n not in self._index}
        for name in spec.state_names:
            src = self.mirror.get(name, name)
            if src not in self._index:
                raise TetherError(f"the mock arm cannot report state '{name}'")
        self._connected = False
        self.q = np.zeros(spec.action.dim)
        self.v = np.zeros(spec.action.dim)
        self._t = 0.0
        # pending trajectories: (start time s, times (N,), points (N, dim)); the newest
        # started one replaces the older ones, as a JointTrajectoryController does
        self._pending: deque[tuple[float, np.ndarray, np.ndarray]] = deque()
        self._active: tuple[float, np.ndarray, np.ndarray] | None = None

    # ---- Robot ------------------------------------------------------------------------

    def connect(self) -> None:
        start = {**_home(self.spec), **self.cfg.initial}
        mid = (self.lower + self.upper) / 2
        init = [start.get(n, mid[i]) for i, n in enumerate(self.spec.action.names)]
        self.q = np.clip(np.asarray(init, dtype=np.float64), self.lower, self.upper)
        self.v = np.zeros_like(self.q)
        self._t = self.clock()
        self._pending.clear()
        self._active = (self._t, np.zeros(1), self.q[None].copy())
        self._connected = True

    def disconnect(self) -> None:
        self._connected = False

    @property
    def is_connected(self) -> bool:
        return self._connected

    def get_observation(self) -> Observation:
        self._advance()
        q = {n: self.q[i] for n, i in self._index.items()}
        v = {n: self.v[i] for n, i in self._index.items()}
        names = [self.mirror.get(n, n) for n in self.spec.state_names]
        return Observation(
            {
                "state": np.array([q[n] for n in names], dtype=np.float32),
                "velocity": np.array([v[n] for n in names], dtype=np.float32),
            },
            stamp_ns=round(self._t * 1e9),
        )

    def send_action(self, action: np.ndarray) -> None:
        """Go to joint positions ``action`` (dim,) as fast as the limits allow."""
        a = self._validate(np.asarray(action, dtype=np.float64)[None])
        self._queue(np.zeros(1), a)

    def send_trajectory(self, points: np.ndarray, times_from_start: np.ndarray) -> None:
        """Follow ``points`` (N, dim) reached at ``times_from_start`` (N,) s, strictly
        increasing, >= 0; the trajectory starts when it arrives (plus the latency)."""
        p = self._validate(np.asarray(points, dtype=np.float64))
        t = np.asarray(times_from_start, dtype=np.float64)
        if t.shape != (p.shape[0],) or np.any(t < 0) or np.any(np.diff(t) <= 0):
            raise InvalidCommand(
                "trajectory times must be one per point, >= 0 and strictly increasing"
            )
        self._queue(t, p)

    # ---- internals --------------------------------------------------------------------

    def _validate(self, points: np.ndarray) -> np.ndarray:
        if not self._connected:
            raise TetherError("the mock arm is not connected: call connect() first")
        if points.ndim != 2 or points.shape[1] != self.spec.action.dim or len(points) == 0:
            raise InvalidCommand(
                f"trajectory points must have shape (N, {self.spec.action.dim}), got {points.shape}"
            )
        if not np.all(np.isfinite(points)):
            raise InvalidCommand("trajectory contains NaN or inf")
        return np.clip(points, self.lower, self.upper)

    def _queue(self, times: np.ndarray, points: np.ndarray) -> None:
        self._advance()
        self._pending.append((self._t + self.cfg.latency_s, times, points))

    def reference(self, t: float) -> np.ndarray:
        """The active trajectory's position at time ``t`` (s): linear interpolation between
        its points, from where the arm was when it started; the last point holds after."""
        assert self._active is not None
        start, times, points = self._active
        s = t - start
        if s <= times[0]:
            return points[0]
        if s >= times[-1]:
            return points[-1]
        k = int(np.searchsorted(times, s)) - 1
        w = (s - times[k]) / (times[k + 1] - times[k])
        return points[k] + w * (points[k + 1] - points[k])

    def _advance(self) -> None:
        """Integrate from the last state time to the clock's now in SUBSTEP steps."""
        if not self._connected:
            raise TetherError("the mock arm is not connected: call connect() first")
        now = self.clock()
        n = math.floor((now - self._t) / SUBSTEP + 1e-9)
        for _ in range(n):
            t = self._t + SUBSTEP
            # a command arriving within this substep acts from the next one
            while self._pending and self._pending[0][0] <= self._t + 1e-9:
                start, times, points = self._pending.popleft()
                if times[0] > 0:  # the first segment starts where the arm is
                    times = np.concatenate([[0.0], times])
                    points = np.vstack([self.q, points])
                self._active = (start, times, points)
            ref = self.reference(t)
            err = ref - self.q
            # track the reference; brake in time to stop at it (v^2 = 2 a d)
            v_des = np.clip(self.cfg.tracking_gain * err, -self.vmax, self.vmax)
            v_stop = np.sqrt(2.0 * self.amax * np.abs(err))
            v_des = np.clip(v_des, -v_stop, v_stop)
            dv = np.clip(v_des - self.v, -self.amax * SUBSTEP, self.amax * SUBSTEP)
            self.v = self.v + dv
            q = self.q + self.v * SUBSTEP
            hit = (q < self.lower) | (q > self.upper)
            self.q = np.clip(q, self.lower, self.upper)
            self.v[hit] = 0.0
            self._t = t
