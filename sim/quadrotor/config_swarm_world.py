"""Config of the batched swarm world the decentralised drone policy trains in
(tether.sim.quadrotor.swarm_world). Light: pydantic only."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.sim.quadrotor.downwash import DownwashConfig

ScenarioName = Literal["swap", "cross", "formation"]


class SwarmWorldConfig(BaseModel):
    """Worlds of N Crazyflies (the full numpy model, PID velocity loops, downwash), each
    episode one scenario of tether.sim.quadrotor.swarm; every drone is one RL agent sharing
    the policy."""

    model_config = ConfigDict(extra="forbid")
    # swarm sizes trained on together, and how many drones of each size (worlds = that / N)
    sizes: tuple[int, ...] = (4, 8, 16)
    drones_per_size: int = Field(64, ge=1)
    scenarios: tuple[ScenarioName, ...] = ("swap", "cross", "formation")
    max_duration_s: float = Field(12.0, gt=0)
    control_hz: float = Field(100.0, gt=0)
    # s: physics step. The engines take 2 ms; 5 ms trains 2x faster and the PID-to-goal
    # flight gives the same outcomes (30 episodes of 4 and 8 drones: identical counts, mean
    # time and separation)
    physics_dt: float = Field(0.005, gt=0, le=0.005)
    # the policy decides every hold_steps control steps and its command is held between
    hold_steps: int = Field(5, ge=1)
    # nearest neighbours each drone sees (N - 1 < k: zeros), largest speed (m/s)
    neighbours: int = Field(6, ge=1)
    v_max: float = Field(1.0, gt=0)
    downwash: DownwashConfig = Field(default_factory=lambda: DownwashConfig(enabled=True))
    # success: all within goal_radius for hold_s; a collision: centres closer than this
    goal_radius: float = Field(0.1, gt=0)
    hold_s: float = Field(0.5, ge=0)
    collision_distance: float = Field(0.13, gt=0)
    # observation noise (std): position m, velocity m/s (a motion-capture / flow-deck estimate)
    pos_noise: float = Field(0.005, ge=0)
    vel_noise: float = Field(0.02, ge=0)
    # reward per drone and decision: per metre of progress to its goal, while within
    # goal_radius, per decision in collision, up to proximity_penalty inside proximity (m),
    # when the world succeeds, and at a crash (below 0.1 m)
    progress_reward: float = Field(10.0, ge=0)
    goal_reward: float = Field(0.1, ge=0)
    collision_penalty: float = Field(5.0, ge=0)
    proximity: float = Field(0.4, gt=0)
    proximity_penalty: float = Field(0.5, ge=0)
    success_reward: float = Field(5.0, ge=0)
    crash_penalty: float = Field(10.0, ge=0)
    # per unit squared change of the normalised command (smooth flight)
    smooth_penalty: float = Field(0.02, ge=0)
