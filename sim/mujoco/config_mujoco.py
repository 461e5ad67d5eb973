"""Config of the MuJoCo backend. Light: pydantic only, never imports mujoco."""

from __future__ import annotations

from typing import Literal

from tether.sim.config_sim import TableSimConfig


class MujocoConfig(TableSimConfig):
    """MuJoCo simulation of a robot on a table (sim/assets/<robot>/scene.xml); cameras are
    looked up by name in the scene; headless=false opens MuJoCo's passive viewer."""

    type: Literal["mujoco"] = "mujoco"
