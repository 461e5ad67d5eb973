"""The ``quad_pid`` policy: the cascaded PID flying every drone to its task reference.

Reads Observation["state"] (13 N,) and ["env_state"] (7 N,: each drone's target pose) and
answers in the robot's action mode, running the loops the backend does not:
    rotor_rpm          position -> velocity -> attitude -> rates -> rpm (all here)
    thrust_rates       position -> velocity -> attitude (the backend runs the rate loop)
    velocity_setpoint  position loop (the backend runs velocity and below); the reference
                       acceleration enters as a lead of acc / vel_p on the velocity
With ``feedforward`` the task's reference velocity/acceleration at the observation's time
is added (figure_eight), so the reference is tracked without lag.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.robot_kinds import MultirotorDescription
from tether.core.spec import RobotSpec
from tether.core.types import ActionChunk, Observation
from tether.sim.quadrotor.config_quadrotor import QuadPIDConfig
from tether.sim.quadrotor.control import CascadedPID
from tether.sim.quadrotor.dynamics import quat_yaw

# 1/s: yaw-rate command per rad of heading error in velocity_setpoint mode
YAW_P = 2.0


def hold_heading(state: np.ndarray) -> np.ndarray:
    """velocity_setpoint yaw rates (N,) rad/s that turn drones (N, 13) back to yaw 0."""
    return np.clip(-YAW_P * quat_yaw(state[:, 3:7]), -2.0, 2.0)


class QuadPIDPolicy:
    """PID for ``spec.action.dim // 4`` drones of the robot ``spec.name`` (its mixer and
    mass from its description); ``task`` is the experiment's task config."""

    def __init__(self, cfg: QuadPIDConfig, spec: RobotSpec, task: Any = None) -> None:
        desc = registry.load("robot", spec.name)
        if not isinstance(desc, MultirotorDescription):
            raise ConfigError(
                f"the quad_pid policy flies multirotors; robot '{spec.name}' is a {desc.kind}"
            )
        self.cfg = cfg
        self.spec = spec
        self.n = spec.action.dim // 4
        self.mode = spec.action.mode
        self.pid = CascadedPID(self.n, desc.params)
        self._task = None
        if cfg.feedforward and task is not None:
            built = registry.build("task", task)
            if hasattr(built, "feedforward"):
                self._task = built

    def reset(self) -> None:
        self.pid.reset()

    def command(self, state: np.ndarray, target: np.ndarray, t: float) -> np.ndarray:
        """Action (N, 4) for states (N, 13) and target positions (N, 3) m at time t s."""
        vel_ff = acc_ff = None
        if self._task is not None:
            v, a = self._task.feedforward(t)
            vel_ff, acc_ff = np.tile(v, (self.n, 1)), np.tile(a, (self.n, 1))
        dt = self.spec.dt
        if self.mode == "rotor_rpm":
            return self.pid.position(state, target, dt, vel_ff, acc_ff)
        if self.mode == "thrust_rates":
            return self.pid.position_rates(state, target, dt, vel_ff, acc_ff)
        if acc_ff is not None and vel_ff is not None:
            # the backend's velocity loop turns a velocity error into vel_p x error of
            # acceleration, so leading the setpoint by acc / vel_p feeds the acceleration
            vel_ff = vel_ff + acc_ff / np.asarray(self.pid.gains.vel_p)
        cmd = self.pid.position_velocity(state, target, vel_ff)
        if self.cfg.max_speed is not None:
            speed = np.linalg.norm(cmd[:, :3], axis=1, keepdims=True)
            cmd[:, :3] *= np.minimum(1.0, self.cfg.max_speed / np.maximum(speed, 1e-9))
        cmd[:, 3] = hold_heading(state)
        return cmd

    def act(self, obs: Observation) -> ActionChunk:
        state = np.asarray(obs["state"], np.float64).reshape(self.n, 13)
        target = np.asarray(obs["env_state"], np.float64).reshape(self.n, 7)[:, 0:3]
        a = self.command(state, target, obs.stamp_s).reshape(-1).astype(np.float32)
        a = np.clip(a, self.spec.action.low_array(), self.spec.action.high_array())
        return ActionChunk(np.repeat(a[None], self.cfg.horizon, 0), self.spec.dt, obs.stamp_ns)

    @property
    def contract(self) -> dict[str, Any]:
        return {
            "observation_keys": ["state", "env_state"],
            "action_names": list(self.spec.action.names),
            "action_mode": self.mode,
            "control_hz": self.spec.control_hz,
        }
