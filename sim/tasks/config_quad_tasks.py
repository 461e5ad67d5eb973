"""Configs of the drone tasks (robot ``crazyflie``). Light: pydantic only.

Positions in the world frame (ENU, z up), metres; times in seconds. With several drones,
drone i flies the task shifted by its formation offset (``sim.quadrotor.spacing``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig

Vec3 = tuple[float, float, float]


class HoverConfig(ComponentConfig):
    """Hold a fixed point from a thrown start: the BatchedHoverEnv episode (reset
    distribution, reward, crash and success rule in tether.sim.quadrotor.batched_env)."""

    type: Literal["hover"] = "hover"
    # the defaults are BatchedHoverEnv's; success = within success_radius for the last
    # success_window_s of the episode
    max_duration_s: float = Field(15.0, gt=0)
    target: Vec3 = (0.0, 0.0, 1.0)
    success_radius: float = Field(0.1, gt=0)
    success_window_s: float = Field(10.0, gt=0)
    # false: start level and at rest on the target instead of the thrown-start distribution
    random_start: bool = True


class WaypointsConfig(ComponentConfig):
    """Visit waypoints in order, holding each for ``hold_s`` within ``radius``."""

    type: Literal["waypoints"] = "waypoints"
    max_duration_s: float = Field(20.0, gt=0)
    # the drone starts level and at rest here
    start: Vec3 = (0.0, 0.0, 1.0)
    waypoints: list[Vec3] = Field(
        default_factory=lambda: [
            (1.0, 0.0, 1.0),
            (1.0, 0.5, 1.5),
            (0.0, 0.5, 1.0),
            (0.0, 0.0, 1.0),
        ],
        min_length=1,
    )
    radius: float = Field(0.1, gt=0)
    hold_s: float = Field(0.5, ge=0)


class FigureEightConfig(ComponentConfig):
    """Track a horizontal figure-eight (lemniscate of Gerono, control.figure_eight)."""

    type: Literal["figure_eight"] = "figure_eight"
    max_duration_s: float = Field(16.0, gt=0)
    # full x, y extent (m), one loop per period (s), centre (m)
    size: tuple[float, float] = (1.0, 0.5)
    period: float = Field(8.0, gt=0)
    center: Vec3 = (0.0, 0.0, 1.0)
    # the tracking error is judged from settle_s on; success when its RMS is <= rms_tolerance
    settle_s: float = Field(8.0, ge=0)
    rms_tolerance: float = Field(0.05, gt=0)


class SwarmConfig(ComponentConfig):
    """N drones (``sim.quadrotor.num_drones``) fly from their starts to their goals without
    touching (tether.sim.quadrotor.swarm: scenarios, collision distance)."""

    type: Literal["swarm"] = "swarm"
    # swap: facing rows trade places; cross: a circle to its antipodes; formation:
    # scattered starts to a ring
    scenario: Literal["swap", "cross", "formation"] = "swap"
    max_duration_s: float = Field(12.0, gt=0)
    # success: every drone within goal_radius of its goal, held hold_s
    goal_radius: float = Field(0.1, gt=0)
    hold_s: float = Field(0.5, ge=0)
    # m: centres closer than this are a collision (two Crazyflies' rotor tips touch at 0.126)
    collision_distance: float = Field(0.13, gt=0)
    # end the episode at the first collision (outcome "collision"); false: fly on, count it
    end_on_collision: bool = True
