"""Downwash: the air a drone pushes down pushes down the drones below it.

One function, :func:`downwash_forces`, used by every simulator (the numpy model, the batched
swarm world and both engines through ``QuadrotorWorld``): world forces (..., N, 3) on N
drones from their positions (..., N, 3). Drone j acts on drone i only when j is above i
(dz = z_j - z_i > 0); the force is along world -z. Two published empirical models
(``sim.quadrotor.downwash.model``):

``neural_swarm`` (default): the Crazyflie measurements of Neural-Swarm (Shi et al., ICRA
    2020, arXiv 2003.02992, Fig. 3) as quad-swarm-rl (Huang et al., arXiv 2309.13285) fits
    them: a 34 g Crazyflie under another feels 10 / 8 / 6 / 4 grams-force at dz = 0.2 / 0.3 /
    0.4 / 0.5 m, i.e. an acceleration a(dz) = g (14 - 20 dz) / 34 for 0 < dz < 0.7 m, inside
    a vertical cylinder of radius ``radius`` (0.1 m) under the upper drone. Here the force
    is m a(dz) on a drone of mass m (the same acceleration), so a 27 g Crazyflie 0.3 m
    below another needs 8 / 34 = 23.5 % more thrust to hold its height.
``gym_pybullet_drones``: gym-pybullet-drones' model (Panerati et al., IROS 2021, ``cf2x.urdf``
    coefficients, after measurements by SiQi Zhou at UTIAS DSL):
    F = -c1 (r_prop / (4 dz))^2 exp(-0.5 (r / beta)^2), beta = c2 dz + c3, c1 = 2267.18,
    c2 = 0.16, c3 = -0.11, r_prop = 23.1 mm. beta crosses zero at dz = 0.6875 m (the
    original then divides by zero): its magnitude is clamped to >= 1 cm here. Its forces are
    far larger at short range (0.84 N, 3.2 weights, at dz = 0.3 m on the axis) and far
    narrower (|beta| = 6 cm there).

Tilt of the upper drone and the wake's lag are ignored (both models do).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tether.core.robot_kinds import GRAVITY

# Neural-Swarm's fit as quad-swarm-rl writes it: grams-force on a 34 g Crazyflie
NS_INTERCEPT_G = 14.0
NS_SLOPE_G_PER_M = 20.0
NS_REFERENCE_MASS_G = 34.0
NS_HEIGHT = NS_INTERCEPT_G / NS_SLOPE_G_PER_M  # 0.7 m: where the fit reaches zero
# gym-pybullet-drones' cf2x.urdf coefficients
GPD_C1, GPD_C2, GPD_C3 = 2267.18, 0.16, -0.11
GPD_PROP_RADIUS = 2.31348e-2
GPD_MIN_WIDTH = 0.01


class DownwashConfig(BaseModel):
    """``sim.quadrotor.downwash``: off by default (a single drone has none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    model: Literal["neural_swarm", "gym_pybullet_drones"] = "neural_swarm"
    # m, neural_swarm: radius of the wake's cylinder under the upper drone
    radius: float = Field(0.1, gt=0)
    # multiplies the force (0.5: half the measured wake; for sensitivity studies)
    scale: float = Field(1.0, ge=0)


def downwash_acceleration(dz: np.ndarray, r: np.ndarray, cfg: DownwashConfig) -> np.ndarray:
    """Downward acceleration (m/s^2, >= 0) of the ``neural_swarm`` model on a drone dz m
    below and r m beside another (arrays broadcast)."""
    inside = (dz > 0.0) & (dz < NS_HEIGHT) & (r < cfg.radius)
    grams = np.clip(NS_INTERCEPT_G - NS_SLOPE_G_PER_M * dz, 0.0, None)
    return np.where(inside, GRAVITY * grams / NS_REFERENCE_MASS_G, 0.0) * cfg.scale


def downwash_force_gpd(dz: np.ndarray, r: np.ndarray, cfg: DownwashConfig) -> np.ndarray:
    """Downward force (N, >= 0) of gym-pybullet-drones' model (arrays broadcast)."""
    above = dz > 0.0
    z = np.where(above, dz, 1.0)
    alpha = GPD_C1 * (GPD_PROP_RADIUS / (4.0 * z)) ** 2
    width = np.maximum(np.abs(GPD_C2 * z + GPD_C3), GPD_MIN_WIDTH)
    return np.where(above, alpha * np.exp(-0.5 * (r / width) ** 2), 0.0) * cfg.scale


def downwash_forces(pos: np.ndarray, mass: float, cfg: DownwashConfig) -> np.ndarray:
    """World forces (..., N, 3) N on N drones of ``mass`` kg at positions (..., N, 3) m:
    the sum over the drones above each one. Zero when ``cfg.enabled`` is false."""
    pos = np.asarray(pos, dtype=np.float64)
    out = np.zeros(pos.shape)
    if not cfg.enabled or pos.shape[-2] < 2:
        return out
    d = pos[..., None, :, :] - pos[..., :, None, :]  # d[..., i, j] = p_j - p_i
    dz = d[..., 2]
    r = np.hypot(d[..., 0], d[..., 1])
    if cfg.model == "neural_swarm":
        f = mass * downwash_acceleration(dz, r, cfg)
    else:
        f = downwash_force_gpd(dz, r, cfg)
    out[..., 2] = -f.sum(axis=-1)
    return out
