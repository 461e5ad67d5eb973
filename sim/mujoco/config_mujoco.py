"""Configs of the MuJoCo backends. Light: pydantic only, never imports mujoco."""

from __future__ import annotations

from typing import Literal

from tether.sim.config_mobile_base import MobileBaseSimConfig
from tether.sim.config_sim import TableSimConfig
from tether.sim.quadrotor.config_quadrotor import QuadrotorSimConfig


class MujocoConfig(TableSimConfig):
    """MuJoCo simulation of a robot (its folder's MJCF scene); cameras are looked up by name;
    headless=false opens MuJoCo's passive viewer."""

    type: Literal["mujoco"] = "mujoco"


class MujocoQuadrotorConfig(MujocoConfig, QuadrotorSimConfig):
    """``sim:`` of a MuJoCo drone world: the engine's fields plus ``quadrotor:``."""


class MujocoMobileBaseConfig(MujocoConfig, MobileBaseSimConfig):
    """``sim:`` of a MuJoCo mobile base: the engine's fields plus ``mobile_base:``."""
