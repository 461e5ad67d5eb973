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
from tether.sim.quadrotor.downwash import DownwashConfig


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
    # the wake of a drone pushing down the drones below it (sim/quadrotor/downwash.py)
    downwash: DownwashConfig = Field(default_factory=DownwashConfig)

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
    # m/s: velocity_setpoint mode caps each drone's commanded speed here (None: the
    # position loop's own 2 m/s, then the spec's 1 m/s per axis)
    max_speed: float | None = Field(None, gt=0)


class SwarmOrcaConfig(ComponentConfig):
    """The ``swarm_orca`` policy: each drone's PID velocity towards its goal
    (``env_state``), changed as little as needed to leave every neighbour's velocity
    obstacle (ORCA, van den Berg et al. 2011) in the horizontal plane; velocity_setpoint
    mode only (docs/swarm.md)."""

    type: Literal["swarm_orca"] = "swarm_orca"
    # m/s: the preferred and largest horizontal speed
    max_speed: float = Field(1.0, gt=0)
    # m: each drone's radius for ORCA (two of them: the distance ORCA keeps between centres;
    # a collision is 0.13 m, the rest absorbs the velocity loop's lag)
    radius: float = Field(0.12, gt=0)
    # s: velocities that would touch a neighbour within this time are avoided
    time_horizon: float = Field(2.0, gt=0)
    # m: neighbours farther apart in height than this pass over or under (finite
    # cylinders; the lower one meets at most 8/34 g of downwash, briefly); None: every
    # neighbour is an obstacle (infinite cylinders: 8 drones crossing a circle then
    # deadlock in the middle, 5 of 5 episodes)
    vertical_clearance: float | None = Field(0.3, gt=0)
    # 1/s: preferred velocity per metre to the goal (the PID's position gain)
    pos_p: float = Field(2.0, gt=0)
    # rad: the preferred velocity is turned this much clockwise (seen from above), so
    # drones meeting head-on all keep right instead of waiting for each other (RVO2's
    # examples perturb it at random for the same reason: symmetric crowds deadlock)
    keep_right: float = Field(0.15, ge=0, le=1.0)
    # rows per action chunk (the same command repeated)
    horizon: int = Field(1, ge=1)
