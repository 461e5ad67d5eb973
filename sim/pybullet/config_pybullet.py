"""Config of the PyBullet backend. Light: pydantic only, never imports pybullet."""

from __future__ import annotations

from typing import Literal

from tether.sim.config_sim import TableSimConfig


class PybulletConfig(TableSimConfig):
    """PyBullet simulation of a robot on a table, the same scene as the MuJoCo backend
    (robot from pybullet_data, table, task objects and cameras at the MuJoCo scene's poses);
    headless=false uses PyBullet's GUI instead of DIRECT."""

    type: Literal["pybullet"] = "pybullet"
