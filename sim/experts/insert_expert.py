"""The scripted expert of the ``insert`` task (peg in hole), for any arm: the ScriptedExpert's
IK, speed profile and rate limits with an insert plan, and optional realistic noise so the
demonstrations it records are imperfect (docs/insert.md).

Plan: above the peg -> down to the grasp height -> close -> lift to the carry height -> carry
over the hole and turn the peg's yaw to the hole's -> align the peg on the hole's axis
(closed loop on the perceived peg pose) -> push in at ``insert_speed``, the command never more
than ``max_push`` ahead of the measured peg (bounded force when it jams) -> open and rise.
"""

from __future__ import annotations

import math

import numpy as np

from tether.core.config import ComponentConfig
from tether.core.errors import ConfigError
from tether.core.kinematics import down_rotation
from tether.core.spec import RobotSpec
from tether.sim.experts.config_expert import InsertExpertConfig
from tether.sim.experts.expert import (
    MISSED_GRASP_FRACTION,
    OPEN_TOLERANCE,
    ScriptedExpert,
    _cube_yaw,
)
from tether.sim.tasks.config_tasks import InsertConfig


def _fold(angle: float) -> float:
    """An angle (rad) folded to [-pi/4, pi/4) (a square repeats every 90 deg)."""
    return (angle + math.pi / 4) % (math.pi / 2) - math.pi / 4


class InsertExpert(ScriptedExpert):
    """Policy for ``insert``. Reads ``obs["state"]`` and ``obs["env_state"]`` (peg then hole:
    position + wxyz quaternion each); output as ScriptedExpert's (horizon-1 chunks of
    (dof + 1,) joint targets + finger opening)."""

    TASKS = ("insert",)

    def __init__(self, cfg: InsertExpertConfig, spec: RobotSpec, task: ComponentConfig) -> None:
        self.icfg = cfg
        if not isinstance(task, InsertConfig):
            raise ConfigError(f"the InsertExpert knows task insert, not '{task.type}'")
        self.itask = task
        self._rng = np.random.default_rng(cfg.noise_seed)
        super().__init__(cfg, spec, task)
        g = self.robot.gripper
        grasped = min(max(self.itask.peg_size / 2, g.lower), g.upper)
        # close to grip_squeeze inside the peg's faces, not fully: the grip force is the
        # finger servo's gain x this gap (MuJoCo), and uncoupled PyBullet fingers, which
        # squeeze with their full force whatever the gap, can drift sideways together only
        # until one reaches this target (docs/insert.md, sim.coupled_fingers)
        self.closed = max(g.lower, grasped - cfg.grip_squeeze)
        # closed on nothing: the mean opening fell about half-way from the peg to closed
        self.missed_grasp = self.closed + MISSED_GRASP_FRACTION * (grasped - self.closed)

    def reset(self) -> None:
        super().reset()
        self._bias = np.zeros(6)  # perceived error: peg dx, dy, dyaw, hole dx, dy, dyaw
        self._hand_yaw = 0.0
        self._offset = np.zeros(3)  # the peg's centre in the TCP frame (m)
        self._aligned_since: int | None = None
        self._insert_xy = np.zeros(2)
        self._hold = np.zeros(3)  # the align goal (TCP position, m)

    # ---- internals --------------------------------------------------------------------

    def _restart(self, state: np.ndarray, stamp: int) -> None:
        """Start over (a new episode): draw this episode's perception errors."""
        super()._restart(state, stamp)
        c = self.icfg
        if c.pose_noise_std > 0 or c.yaw_noise_std > 0:
            std = [c.pose_noise_std] * 2 + [c.yaw_noise_std]
            self._bias = self._rng.normal(0.0, std * 2)
        self._aligned_since = None

    def _perceive(self, env: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, float]:
        """Peg centre (3,), peg yaw, hole centre (3,) on the table, hole yaw (m, rad), with
        this episode's perception errors."""
        b = self._bias
        peg = env[0:3] + np.array([b[0], b[1], 0.0])
        hole = env[7:10] + np.array([b[3], b[4], 0.0])
        return peg, _cube_yaw(env[3:7]) + b[2], hole, _cube_yaw(env[10:14]) + b[5]

    def _plan(
        self, env: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        goal, rot, grip, speed = self._insert_plan(env, state, p_cmd, stamp)
        if self.icfg.action_noise_std > 0:
            goal = goal + self._rng.normal(0.0, self.icfg.action_noise_std, 3)
        return goal, rot, grip, speed

    def _insert_plan(
        self, env: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        c, t = self.icfg, self.itask
        peg, peg_yaw, hole, hole_yaw = self._perceive(env)
        half = t.peg_length / 2
        opened, closed, missed = self.open, self.closed, self.missed_grasp
        p_meas, r_meas = self.kin.fk(state[: self.n])
        # the mean finger opening: the peg's half-width while held, even when the fingers
        # have shifted together to one side
        fingers = float(np.mean(state[self.n :]))
        elapsed = (stamp - self._phase_t0) * 1e-9
        # the TCP at the grasp: grasp_depth below the peg's top
        grasp = peg + np.array([0.0, 0.0, half - c.grasp_depth])
        # the peg's centre while carried: its bottom carry_clearance above the fixture
        carry_z = hole[2] + t.fixture_height + c.carry_clearance + half

        if self._phase in ("approach", "descend"):
            self._grasp_yaw = peg_yaw
        if self._phase == "approach":
            rot = down_rotation(self._grasp_yaw)
            goal = grasp + np.array([0.0, 0.0, c.approach_height])
            if (
                np.linalg.norm(goal - p_cmd) < 1e-3
                and np.linalg.norm(goal - p_meas) < 2 * c.tolerance
                and fingers > opened - OPEN_TOLERANCE
            ):
                self._set_phase("descend", stamp)
            return goal, rot, opened, c.max_speed
        if self._phase == "descend":
            rot = down_rotation(self._grasp_yaw)
            if np.linalg.norm(grasp - p_meas) < 0.5 * c.tolerance:
                self._grasp_xyz = grasp.copy()
                self._set_phase("close", stamp)
            return grasp, rot, opened, 0.5 * c.max_speed
        if self._phase == "close":
            rot = down_rotation(self._grasp_yaw)
            if elapsed >= c.close_time_s:
                self._set_phase("missed" if fingers < missed else "lift", stamp)
            return self._grasp_xyz, rot, closed, c.max_speed
        if self._phase == "lift":
            rot = down_rotation(self._grasp_yaw)
            goal = np.array([*self._grasp_xyz[:2], carry_z + half - c.grasp_depth])
            if self._dropped(peg, p_meas, fingers) and elapsed > 0.2:
                self._set_phase("missed", stamp)
            elif np.linalg.norm(goal - p_meas) < c.tolerance:
                # turn the hand by the peg-to-hole yaw, the shortest way for a square
                self._hand_yaw = self._grasp_yaw + _fold(hole_yaw - peg_yaw)
                self._set_phase("carry", stamp)
            return goal, rot, closed, 0.6 * c.max_speed
        if self._phase in ("carry", "align"):
            rot = down_rotation(self._hand_yaw)
            err = float(np.linalg.norm(peg[:2] - hole[:2]))
            yaw_err = abs(_fold(hole_yaw - peg_yaw))
            # the peg's centre in the TCP frame (nothing touches the peg yet): carry takes
            # the measured TCP (a feed-forward guess); align the commanded one, so the goal
            # moves the command by the peg's error to the hole and a servo's steady tracking
            # error cannot stay in the result (integral action). Within align_tolerance the
            # goal holds still: a grasp with backlash (PyBullet's fingers) would make a
            # loop that keeps correcting cycle around the hole
            if self._phase == "align" and yaw_err > 0.5 * c.align_yaw:
                # turn the hand toward the hole's yaw (0.2 s time constant: the peg's yaw
                # lags the command)
                self._hand_yaw += _fold(hole_yaw - peg_yaw) * min(1.0, self.dt / 0.2)
                rot = down_rotation(self._hand_yaw)
            if self._phase == "carry":
                self._offset = r_meas.T @ (peg - p_meas)
                self._hold = np.array([*hole[:2], carry_z]) - rot @ self._offset
            elif err > c.align_tolerance:
                p_c, r_c = self.kin.fk(self._q)
                self._offset = r_c.T @ (peg - p_c)
                self._hold = np.array([*hole[:2], carry_z]) - rot @ self._offset
            goal = self._hold
            if self._dropped(peg, p_meas, fingers):
                self._set_phase("missed", stamp)
                return goal, rot, closed, c.max_speed
            if self._phase == "carry":
                if np.linalg.norm(goal - p_meas) < c.tolerance:
                    self._set_phase("align", stamp)
                return goal, rot, closed, 0.6 * c.max_speed
            if err > c.align_tolerance or yaw_err > c.align_yaw:
                self._aligned_since = None
            elif self._aligned_since is None:
                self._aligned_since = stamp
            elif (stamp - self._aligned_since) * 1e-9 >= c.settle_time_s:
                self._insert_xy = goal[:2].copy()
                self._set_phase("insert", stamp)
            return goal, rot, closed, c.align_speed
        if self._phase == "insert":
            rot = down_rotation(self._hand_yaw)
            # 5 mm past the success depth, never into the table
            final = hole[2] + max(t.fixture_height - t.depth - 0.005, 0.002) + half
            target = max(final, peg[2] - c.max_push)
            if peg[2] - half > hole[2] + t.fixture_height:
                # still above the hole: keep the peg on its axis (it may shift in the hand)
                p_c, r_c = self.kin.fk(self._q)
                self._offset = r_c.T @ (peg - p_c)
                self._insert_xy = (hole - rot @ self._offset)[:2]
            goal = np.array([*self._insert_xy, target - (rot @ self._offset)[2]])
            if peg[2] <= final + 0.001:
                self._set_phase("release", stamp)
            return goal, rot, closed, c.insert_speed
        if self._phase == "missed":
            # open and rise straight up before approaching again
            rot = down_rotation(self._grasp_yaw)
            goal = self._grasp_xyz + np.array([0.0, 0.0, c.approach_height])
            if (
                fingers > opened - OPEN_TOLERANCE
                and p_meas[2] > self._grasp_xyz[2] + 0.5 * c.approach_height
            ):
                self._set_phase("approach", stamp)
            return goal, rot, opened, c.max_speed
        # release (and stay): open, then rise above the peg
        rot = down_rotation(self._hand_yaw)
        goal = p_cmd.copy()
        if fingers > opened - OPEN_TOLERANCE:
            goal[2] = carry_z + c.approach_height
        return goal, rot, opened, 0.5 * c.max_speed

    def _dropped(self, peg: np.ndarray, p_meas: np.ndarray, fingers: float) -> bool:
        """The peg is no longer in the hand: it stays low or the fingers closed on nothing."""
        held = self.itask.peg_length / 2 - self.icfg.grasp_depth
        return abs(p_meas[2] - peg[2] - held) > 0.03 or fingers < self.missed_grasp
