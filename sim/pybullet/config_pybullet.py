"""Configs of the PyBullet backends. Light: pydantic only, never imports pybullet."""

from __future__ import annotations

from typing import Literal

from tether.sim.config_mobile_base import MobileBaseSimConfig
from tether.sim.config_sim import TableSimConfig
from tether.sim.quadrotor.config_quadrotor import QuadrotorSimConfig


class PybulletConfig(TableSimConfig):
    """PyBullet simulation of a robot in the same scene as the MuJoCo backend (task objects
    and cameras at the MuJoCo scene's poses); headless=false uses PyBullet's GUI instead of
    DIRECT."""

    type: Literal["pybullet"] = "pybullet"


class PybulletQuadrotorConfig(PybulletConfig, QuadrotorSimConfig):
    """``sim:`` of a PyBullet drone world: the engine's fields plus ``quadrotor:``."""


class PybulletMobileBaseConfig(PybulletConfig, MobileBaseSimConfig):
    """``sim:`` of a PyBullet mobile base: the engine's fields plus ``mobile_base:``."""
