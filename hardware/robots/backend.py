"""A Robot in the shape of a SimBackend, so hardware runs the simulator's command path
(chunk validation -> SafetyFilter -> output) unchanged: ``reset`` connects (once) and
observes, ``step(action)`` sends the action and returns the observation at the next control
period. Time is the wall clock (monotonic) since the last reset, in ns.

Task objects have no simulator here: ``set_body_pose`` (what a task's reset asks for) records
where the object is meant to be, and ``body_pose`` / ``env_state`` report that pose, the way
an operator places the object and a motion-capture system reports it; the robot's own base
pose comes from its ``base_pose`` observation (odometry).

Episodes are scored as in simulation where the hardware can judge the task: a mobile base's
go-to-goal compares its odometry with the goal, so reaching the goal ends the episode (and
``episodes.auto_reset`` starts the next), as in the sim twin. A task that needs what the
hardware does not report (an end-effector pose, a moved object) scores 0 and never succeeds:
its episodes end on the time limit. ROS-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tether.core.errors import TetherError
from tether.core.protocols import Robot
from tether.core.types import Observation, StepResult


class RobotBackend:
    """SimBackend over a ``Robot``. ``pace``: ``step`` sleeps until one control period
    (``spec.dt``) after the previous step, so an in-process loop runs at the control rate
    (a ROS timer at that rate makes the sleep ~0)."""

    # a robot moves on the wall clock: a runner bridge ignores ros.rate_mode lockstep
    realtime_only = True

    def __init__(
        self,
        robot: Robot,
        task: Any = None,
        pace: bool = True,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.robot = robot
        self.spec = robot.spec
        self.task = task
        self.pace = pace
        self.clock_ns = clock_ns
        self.connected = False
        self.objects: dict[str, np.ndarray] = {}
        self._t0 = clock_ns()
        self._last_stamp = -1
        self._last_step = 0
        self._robot_obs: Observation | None = None
        # "reward" / "success" once the task asked for something the hardware cannot report
        self._unscored: set[str] = set()

    # ---- SimBackend -------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> Observation:
        """Connect on the first call; place the task's objects (recorded, see module doc);
        time restarts at 0."""
        if not self.connected:
            self.robot.connect()
            self.connected = True
        self._robot_obs = self.robot.get_observation()
        if self.task is not None:
            self.task.reset(self, np.random.default_rng(seed))
        self._t0 = self.clock_ns()
        self._last_stamp = -1
        self._last_step = self._t0
        return self.observe()

    def step(self, action: np.ndarray) -> StepResult:
        """Send ``action`` (spec.action.shape) and return the observation one period later,
        with the task's reward and success where the hardware can judge them (module doc);
        terminated on success, never truncated (the runner counts the time limit)."""
        if self.pace:
            wait_ns = self._last_step + round(self.spec.dt * 1e9) - self.clock_ns()
            if wait_ns > 0:
                time.sleep(wait_ns * 1e-9)
        self._last_step = self.clock_ns()
        self.robot.send_action(np.asarray(action))
        obs = self.observe()
        reward = float(self._score("reward", 0.0))
        success = bool(self._score("success", False))
        return StepResult(obs, reward, success, False, {"is_success": success})

    def _score(self, what: str, default: Any) -> Any:
        """``task.<what>(self)``, or ``default`` when there is no task or it needs what the
        hardware cannot report (asked once: such a task is not asked again)."""
        if self.task is None or what in self._unscored:
            return default
        try:
            return getattr(self.task, what)(self)
        except TetherError:
            self._unscored.add(what)
            return default

    def observe(self) -> Observation:
        obs = self._robot_obs = self.robot.get_observation()
        data = dict(obs.items())
        names: tuple[str, ...] = tuple(getattr(self.task, "objects", None) or ())
        if names:
            data["env_state"] = np.concatenate(
                [self.objects.get(n, np.r_[0, 0, 0, 1, 0, 0, 0]) for n in names]
            ).astype(np.float32)
        # strictly increasing stamps: the policy server answers each observation once
        stamp = max(self.clock_ns() - self._t0, self._last_stamp + 1)
        self._last_stamp = stamp
        return Observation(data, stamp_ns=stamp, instruction=obs.instruction)

    @property
    def sim_time(self) -> float:
        return max(self._last_stamp, 0) * 1e-9

    def render(self, camera: str) -> np.ndarray:
        raise TetherError(f"camera '{camera}': the hardware bridge has no camera driver yet")

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A task object's recorded pose; any other body is the robot's base (its
        ``base_pose`` observation, e.g. odometry), else the origin."""
        pose = self.objects.get(name)
        if pose is None:
            base = self._robot_obs.get("base_pose") if self._robot_obs is not None else None
            pose = (
                np.asarray(base, np.float64) if base is not None else np.r_[0.0, 0, 0, 1, 0, 0, 0]
            )
        return pose[:3].copy(), pose[3:].copy()

    def set_body_pose(self, name: str, pos: np.ndarray, quat: np.ndarray) -> None:
        self.objects[name] = np.concatenate([pos, quat]).astype(np.float64)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        raise TetherError("the hardware bridge does not compute end-effector poses")

    def close(self) -> None:
        if self.connected:
            self.robot.disconnect()
            self.connected = False
