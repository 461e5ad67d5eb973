"""The scripted expert of the ``multitask`` scene (docs/multitask.md), for any arm: the
ScriptedExpert's IK, speed profile and rate limits, with a plan per sub-task. The sub-task is
what the observation's instruction asks for (``tether.sim.tasks.multitask.resolve``): the
expert reads language exactly as the policy it teaches must, through
``Observation.instruction``, never through the simulator.

- lift the red / blue cube: the lift plan on that cube;
- place the blue cube on the pad: grasp and lift it, carry it over the pad, lower it to
  the table, open, rise;
- push the green cube into the square: fingers closed, down behind the cube on the line
  from the square through it, push along that line until the cube's centre is inside the
  square, rise; when the cube turns off the line, rise and come in again from behind.

Without an instruction it names, the expert holds where it is.
"""

from __future__ import annotations

import math

import numpy as np

from tether.core.config import ComponentConfig
from tether.core.errors import ConfigError
from tether.core.kinematics import down_rotation
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.sim.experts.config_expert import MultitaskExpertConfig
from tether.sim.experts.expert import ScriptedExpert
from tether.sim.scene import CUBE_HALF
from tether.sim.tasks.config_tasks import MultitaskConfig
from tether.sim.tasks.multitask import TARGET, MultitaskTask, resolve

# the cubes' and markers' slots in env_state (7 each: position, wxyz quaternion)
SLOTS = {name: i for i, name in enumerate(MultitaskTask.objects)}


def _slot(env: np.ndarray, name: str) -> np.ndarray:
    i = 7 * SLOTS[name]
    return env[i : i + 7]


def _fold_half(angle: float) -> float:
    """An angle folded to [-pi/2, pi/2) (a parallel gripper repeats every 180 deg)."""
    return (angle + math.pi / 2) % math.pi - math.pi / 2


class MultitaskExpert(ScriptedExpert):
    """Policy for ``multitask``; output as ScriptedExpert's (horizon-1 chunks of (dof + 1,)
    joint targets + finger opening)."""

    TASKS = ("multitask",)

    def __init__(self, cfg: MultitaskExpertConfig, spec: RobotSpec, task: ComponentConfig) -> None:
        if not isinstance(task, MultitaskConfig):
            raise ConfigError(f"the MultitaskExpert knows task multitask, not '{task.type}'")
        self.mcfg = cfg
        super().__init__(cfg, spec, task)

    def reset(self) -> None:
        super().reset()
        self._subtask: str | None = None
        self._push_dir = np.zeros(2)

    def act(self, obs: Observation) -> ActionChunk:
        subtask = resolve(obs.instruction)
        if subtask != self._subtask:
            self._subtask = subtask
            self._q = None  # a new sub-task: plan again from where the arm is
        if subtask is None:
            state = np.asarray(obs["state"], dtype=np.float32)
            hold = state[: self.n + 1].copy()
            return ActionChunk(hold[None], self.dt, int(obs.stamp_ns))
        return super().act(obs)

    # ---- internals --------------------------------------------------------------------

    def _plan(
        self, env: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        sub = self._subtask
        assert sub is not None
        cube = _slot(env, TARGET[sub])
        if sub.startswith("lift"):
            return self._lift_plan(cube, state, p_cmd, stamp)
        if sub == "place_blue":
            return self._place_plan(cube, _slot(env, "pad"), state, p_cmd, stamp)
        return self._push_plan(cube, _slot(env, "square"), state, stamp)

    def _place_plan(
        self, cube: np.ndarray, pad: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        c = self.mcfg
        p_meas, _ = self.kin.fk(state[: self.n])
        elapsed = (stamp - self._phase_t0) * 1e-9
        if self._phase in ("approach", "descend", "close", "missed"):
            return self._lift_plan(cube, state, p_cmd, stamp)
        rot = down_rotation(self._grasp_yaw)
        carry = self._grasp_xyz[2] + c.carry_height
        if self._phase == "lift":
            goal, rot, grip, speed = self._lift_plan(cube, state, p_cmd, stamp)
            if self._phase != "lift":  # dropped: the lift plan retries
                return goal, rot, grip, speed
            goal = np.array([*self._grasp_xyz[:2], carry])
            if abs(p_meas[2] - carry) < c.tolerance:
                self._set_phase("carry", stamp)
            return goal, rot, self.closed, speed
        if self._phase == "carry":
            goal = np.array([pad[0], pad[1], carry])
            if float(np.mean(state[self.n :])) < self.missed_grasp:
                self._set_phase("missed", stamp)
            elif np.linalg.norm(goal - p_meas) < c.tolerance:
                self._set_phase("lower", stamp)
            return goal, rot, self.closed, c.carry_speed
        if self._phase == "lower":
            goal = np.array([pad[0], pad[1], self._grasp_xyz[2] + c.place_clearance])
            if np.linalg.norm(goal - p_meas) < c.tolerance:
                self._set_phase("release", stamp)
            return goal, rot, self.closed, 0.5 * c.max_speed
        if self._phase == "release":
            goal = np.array([pad[0], pad[1], self._grasp_xyz[2] + c.place_clearance])
            if elapsed >= c.close_time_s:
                self._set_phase("retreat", stamp)
            return goal, rot, self.open, c.max_speed
        # retreat: straight up, open
        goal = np.array([pad[0], pad[1], self._grasp_xyz[2] + c.carry_height])
        return goal, rot, self.open, c.max_speed

    def _push_plan(
        self, cube: np.ndarray, square: np.ndarray, state: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        c = self.mcfg
        p_meas, _ = self.kin.fk(state[: self.n])
        to_goal = square[:2] - cube[:2]
        dist = float(np.linalg.norm(to_goal))
        if self._phase in ("approach", "descend", "close", "lift", "missed"):
            self._set_phase("above", stamp)  # (the lift plan's phases mean nothing here)
        if self._phase == "above":
            self._push_dir = to_goal / max(dist, 1e-6)
        u = self._push_dir
        rot = down_rotation(_fold_half(math.atan2(u[1], u[0])))
        behind = cube[:2] - u * (CUBE_HALF + c.push_standoff)
        low, high = c.push_height, CUBE_HALF + c.approach_height
        # the cube's centre off the push line (m): it turned or slid sideways
        off_line = abs(float(u[0] * to_goal[1] - u[1] * to_goal[0]))
        if self._phase == "above":
            goal = np.array([*behind, high])
            if np.linalg.norm(goal - p_meas) < 2 * c.tolerance:
                self._set_phase("down", stamp)
            return goal, rot, self.closed, c.max_speed
        if self._phase == "down":
            goal = np.array([*behind, low])
            if np.linalg.norm(goal - p_meas) < c.tolerance:
                self._set_phase("push", stamp)
            return goal, rot, self.closed, 0.5 * c.max_speed
        if self._phase == "push":
            inside = dist <= c.push_done
            if inside:
                self._set_phase("retreat", stamp)
            elif off_line > c.push_off_line:
                self._set_phase("backoff", stamp)
            # the TCP runs to where the cube's back face is once the cube is on the goal
            goal = np.array([*(square[:2] - u * (CUBE_HALF + c.push_contact)), low])
            return goal, rot, self.closed, c.push_speed
        if self._phase == "backoff":
            goal = np.array([*(p_meas[:2] - u * 0.03), high])
            if p_meas[2] > CUBE_HALF + 0.5 * c.approach_height:
                self._set_phase("above", stamp)
            return goal, rot, self.closed, c.max_speed
        # retreat: back off and up
        goal = np.array([*(square[:2] - u * (CUBE_HALF + 0.05)), high])
        return goal, rot, self.closed, c.max_speed
