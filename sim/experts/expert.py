"""A scripted expert for the arm tasks reach and lift: Cartesian waypoints followed with
numpy damped-least-squares IK on the robot's kinematic chain, so it drives any arm that has a
description (tether.core.robot.ArmDescription): its chain, home pose, gripper and grasp height.

It reads only ``obs["state"]`` (joint positions) and ``obs["env_state"]`` (task object poses)
and the observation stamp, so it runs in another process than the simulator (over ROS 2).
It keeps its own commanded joint positions and integrates small IK steps on them: commanding
measured + delta would leave the position servos too little error to move.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ComponentConfig
from tether.core.errors import ConfigError
from tether.core.kinematics import down_rotation
from tether.core.robot import ArmDescription
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.scene import CUBE_HALF

# a commanded/measured joint gap (rad) larger than this means the robot was moved under us
# (reset, e-stop, teleop): restart from the measured state
RESYNC_GAP = 0.3
# keep commands this far (rad) inside the joint limits
LIMIT_MARGIN = 0.02
# the fingers closed on nothing when their opening (m, each) falls below this fraction of
# the way from closed to the cube's half-width (holding the cube, each finger is open by
# about the half-width): 0.012 m for a gripper that closes to 0
MISSED_GRASP_FRACTION = 0.48
# fingers within this (m) of fully open count as open
OPEN_TOLERANCE = 0.005


def _cube_yaw(quat: np.ndarray) -> float:
    """Yaw (rad) of a wxyz quaternion, folded to [-pi/4, pi/4) (the cube repeats every 90 deg)."""
    w, x, y, z = (float(v) for v in quat)
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


def arm_description(spec: RobotSpec) -> ArmDescription:
    """The registered description of the arm ``spec`` is for; ConfigError if it is none."""
    desc = registry.load("robot", spec.name)
    if not isinstance(desc, ArmDescription):
        raise ConfigError(
            f"the scripted expert drives arms; robot '{spec.name}' is a {desc.kind} "
            "(use its kind's expert)"
        )
    expected = (*desc.arm_joints, desc.gripper.joints[0])
    if tuple(spec.action.names) != expected:
        raise ConfigError(
            f"the scripted expert needs robot '{spec.name}''s arm action {list(expected)}, "
            f"got {list(spec.action.names)}"
        )
    return desc


class ScriptedExpert:
    """Policy for ``reach`` (go to the target) and ``lift`` (above cube, descend, close, lift).

    Output: chunks of horizon 1, action (dof + 1,) = one target per arm joint (rad) + the
    finger opening (m), dof = the arm's joints. Joint steps are limited to
    ``joint_speed_scale`` x the joint velocity limits, the TCP to ``max_speed`` /
    ``max_accel``, so the safety filter's rate limit never bites. Robot facts (chain, home
    pose as the null-space rest pose, gripper range, grasp height) come from the robot's
    description, looked up by ``spec.name``.
    """

    # the task types this expert plans for (a subclass plans for others: insert_expert.py)
    TASKS: tuple[str, ...] = ("reach", "lift")

    def __init__(self, cfg: ScriptedExpertConfig, spec: RobotSpec, task: ComponentConfig) -> None:
        if task.type not in self.TASKS:
            raise ConfigError(
                f"the {type(self).__name__} knows tasks {' and '.join(self.TASKS)}, "
                f"not '{task.type}'"
            )
        desc = arm_description(spec)
        self.cfg = cfg
        self.spec = spec
        self.task = task
        self.dt = spec.dt
        self.robot = desc
        self.kin = desc.kinematics
        self.n = desc.dof
        g = desc.gripper
        self.open, self.closed = g.upper, g.lower
        grasped = min(max(CUBE_HALF, g.lower), g.upper)
        self.missed_grasp = g.lower + MISSED_GRASP_FRACTION * (grasped - g.lower)
        self.grasp_offset = desc.grasp_offset if cfg.grasp_offset is None else cfg.grasp_offset
        vmax = {j.name: j.max_velocity for j in spec.joints}
        self._max_step = (
            np.array([vmax[n] for n in spec.action.names]) * cfg.joint_speed_scale * self.dt
        )
        self._lower = self.kin.lower + LIMIT_MARGIN
        self._upper = self.kin.upper - LIMIT_MARGIN
        self._home = np.asarray(desc.home, dtype=np.float64)
        self.reset()

    # ---- Policy -----------------------------------------------------------------------

    def reset(self) -> None:
        self._q: np.ndarray | None = None  # commanded arm joints (dof,)
        self._grip = self.open  # commanded finger opening (m)
        self._speed = 0.0  # current commanded TCP speed (m/s), for the acceleration limit
        self._phase = "approach"
        self._phase_t0 = 0
        self._last_stamp: int | None = None
        self._grasp_yaw = 0.0
        self._grasp_xyz = np.zeros(3)

    def act(self, obs: Observation) -> ActionChunk:
        state = np.asarray(obs["state"], dtype=np.float64)
        q_meas = state[: self.n]
        stamp = int(obs.stamp_ns)
        if (
            self._q is None
            or self._last_stamp is None
            or stamp < self._last_stamp
            or np.abs(self._q - q_meas).max() > RESYNC_GAP
        ):
            self._restart(state, stamp)
        self._last_stamp = stamp
        assert self._q is not None

        env = np.asarray(obs["env_state"], dtype=np.float64)
        jac = self.kin.jacobian(self._q)
        p_cmd = jac[1]
        goal, rot, grip, speed = self._plan(env, state, p_cmd, stamp)

        # trapezoid speed profile on the distance left: accelerate, cruise, brake
        dist = float(np.linalg.norm(goal - p_cmd))
        v = min(
            speed,
            math.sqrt(2.0 * self.cfg.max_accel * dist),
            self._speed + self.cfg.max_accel * self.dt,
        )
        self._speed = v
        dq = self.kin.dls_step(
            self._q,
            goal,
            rot,
            damping=0.03,
            max_lin=max(v, 0.005) * self.dt,
            max_ang=self.cfg.max_ang_speed * self.dt,
            q_rest=self._home,
            rest_gain=0.5 * self.dt,
            jac=jac,
        )
        # scale the whole step (keeps the direction) so no joint exceeds its rate limit
        ratio = float(np.max(np.abs(dq) / self._max_step[: self.n]))
        if ratio > 1.0:
            dq /= ratio
        self._q = np.clip(self._q + dq, self._lower, self._upper)
        g_step = float(self._max_step[self.n])
        self._grip = float(np.clip(grip, self._grip - g_step, self._grip + g_step))
        action = np.concatenate([self._q, [self._grip]])
        return ActionChunk(action[None].astype(np.float32), self.dt, stamp)

    @property
    def contract(self) -> dict[str, Any]:
        return {
            "observation_keys": ["state", "env_state"],
            "action_names": list(self.spec.action.names),
            "action_mode": self.spec.action.mode,
            "control_hz": self.spec.control_hz,
            "task": self.task.type,
        }

    # ---- internals --------------------------------------------------------------------

    def _restart(self, state: np.ndarray, stamp: int) -> None:
        """Start over from the measured state (first call, a reset, or an external move)."""
        self._q = np.clip(state[: self.n], self._lower, self._upper)
        self._grip = float(np.clip(state[self.n], self.closed, self.open))
        self._speed = 0.0
        self._set_phase("approach", stamp)

    def _set_phase(self, phase: str, stamp: int) -> None:
        self._phase = phase
        self._phase_t0 = stamp
        self._speed = 0.0

    def _plan(
        self, env: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Goal TCP position (3,), rotation (3, 3), finger opening (m) and speed (m/s) of
        this step, from the task objects' poses ``env``, the measured ``state`` and the
        commanded TCP position ``p_cmd`` (3,)."""
        if self.task.type == "reach":
            return env[:3], down_rotation(0.0), self.open, self.cfg.max_speed
        return self._lift_plan(env, state, p_cmd, stamp)

    def _lift_plan(
        self, env: np.ndarray, state: np.ndarray, p_cmd: np.ndarray, stamp: int
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Goal TCP position (3,), rotation (3, 3), finger opening (m), speed (m/s), given the
        commanded TCP position ``p_cmd`` (3,)."""
        c = self.cfg
        cube, cube_quat = env[:3], env[3:7]
        opened, closed, missed = self.open, self.closed, self.missed_grasp
        p_meas, _ = self.kin.fk(state[: self.n])
        fingers = float(state[self.n])
        elapsed = (stamp - self._phase_t0) * 1e-9

        if self._phase in ("approach", "descend"):
            self._grasp_yaw = _cube_yaw(cube_quat)
        rot = down_rotation(self._grasp_yaw)

        if self._phase == "approach":
            goal = cube + np.array([0.0, 0.0, c.approach_height])
            if (
                np.linalg.norm(goal - p_cmd) < 1e-3
                and np.linalg.norm(goal - p_meas) < 2 * c.tolerance
                and fingers > opened - OPEN_TOLERANCE
            ):
                self._set_phase("descend", stamp)
            return goal, rot, opened, c.max_speed
        if self._phase == "descend":
            goal = cube + np.array([0.0, 0.0, self.grasp_offset])
            if np.linalg.norm(goal - p_meas) < c.tolerance:
                self._grasp_xyz = goal.copy()
                self._set_phase("close", stamp)
            return goal, rot, opened, 0.5 * c.max_speed
        if self._phase == "close":
            if elapsed >= c.close_time_s:
                self._set_phase("missed" if fingers < missed else "lift", stamp)
            return self._grasp_xyz, rot, closed, c.max_speed
        if self._phase == "lift":
            goal = self._grasp_xyz + np.array([0.0, 0.0, c.lift_height])
            # the cube slipped out (it stays low or the fingers closed on nothing): retry
            dropped = p_meas[2] - cube[2] > 0.03 or fingers < missed
            if dropped and elapsed > 0.2:
                self._set_phase("missed", stamp)
            return goal, rot, closed, 0.6 * c.max_speed
        # missed: open and rise straight up before approaching again
        goal = self._grasp_xyz + np.array([0.0, 0.0, c.approach_height])
        if (
            fingers > opened - OPEN_TOLERANCE
            and p_meas[2] > self._grasp_xyz[2] + 0.5 * c.approach_height
        ):
            self._set_phase("approach", stamp)
        return goal, rot, opened, c.max_speed
