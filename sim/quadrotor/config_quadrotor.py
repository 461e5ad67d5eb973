"""Options of a quadrotor world: the ``sim.quadrotor`` section of an experiment YAML.

Light: pydantic only. Only the engines' quadcopter config classes carry it
(:class:`QuadrotorSimConfig`), so an arm or base experiment that sets it is an unknown-field
error::

    robot: crazyflie
    sim:
      type: pybullet            # or mujoco
      control_hz: 100
      quadrotor: {action_mode: velocity_setpoint, num_drones: 2, drag: true}
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.core.config import ComponentConfig
from tether.sim.config_sim import TableSimConfig


class QuadrotorConfig(BaseModel):
    """How many drones fly, how they are commanded, which aerodynamic terms are on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # what one drone's (4,) action means; see tether.robots.crazyflie.robot.crazyflie_spec
    action_mode: Literal["rotor_rpm", "thrust_rates", "velocity_setpoint"] = "rotor_rpm"
    # drones in one world; actions/observations concatenate per drone (docs/quadrotor.md)
    num_drones: int = Field(1, ge=1, le=64)
    # m, distance between neighbours along world y; drone i's task (target, start) is the
    # single-drone one shifted by formation_offsets(num_drones, spacing)[i]
    spacing: float = Field(1.0, gt=0)
    # body drag proportional to rotor speed x body velocity (gym-pybullet-drones' model)
    drag: bool = True
    # extra thrust near the floor (Shi et al., Neural Lander)
    ground_effect: bool = True
    # first-order rotor lag (QuadrotorParams.motor_tau); false = ideal motors
    motor_lag: bool = True

    def robot_options(self) -> dict[str, object]:
        """Keyword arguments of the robot spec factory (``crazyflie_robot``)."""
        return {"mode": self.action_mode, "num_drones": self.num_drones}


class QuadrotorSimConfig(TableSimConfig):
    """An engine's sim section for a drone world: the engine's fields plus ``quadrotor:``
    (each engine's quadcopter config derives from it and from the engine's config)."""

    # action mode, drone count, aerodynamics
    quadrotor: QuadrotorConfig = Field(default_factory=QuadrotorConfig)

    def robot_options(self, kind: str) -> dict[str, object]:
        """Extra keyword arguments of the robot's spec factory (tether.core.experiment)."""
        return self.quadrotor.robot_options() if kind == "quadcopter" else {}


class QuadPIDConfig(ComponentConfig):
    """The ``quad_pid`` policy: the cascaded PID flying every drone to its task reference
    (Observation["env_state"]) in the robot's action mode."""

    type: Literal["quad_pid"] = "quad_pid"
    # rows per action chunk (the same command repeated)
    horizon: int = Field(1, ge=1)
    # use the task's reference velocity/acceleration as feedforward (figure_eight)
    feedforward: bool = True
