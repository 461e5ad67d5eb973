"""Config of the PyBullet backend. Light: pydantic only, never imports pybullet."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tether.core.config import ComponentConfig
from tether.core.spec import CameraSpec


def _default_cameras() -> list[CameraSpec]:
    return [CameraSpec(name="front", width=96, height=96, fps=30.0)]


class PybulletConfig(ComponentConfig):
    """PyBullet simulation of a robot on a table, the same scene as the MuJoCo backend
    (robot from pybullet_data, table and task objects at the MuJoCo scene's poses)."""

    type: Literal["pybullet"] = "pybullet"
    # control (action) rate in Hz; one step() holds an action for 1/control_hz seconds
    control_hz: float = Field(100.0, gt=0)
    # upper bound of the physics step in seconds: the backend uses the largest step <= this
    # that divides the control period evenly; keep it <= 2 ms for stable grasp contacts
    physics_dt: float = Field(0.002, gt=0, le=0.01)
    # cameras to expose, by name (panda: "front", "wrist"), posed as in the MuJoCo scene;
    # the spec's fovy sets the field of view
    cameras: list[CameraSpec] = Field(default_factory=_default_cameras)
    # also render every camera into observe()/step() observations as images/<camera>
    # (costs one CPU render per camera per step; the ROS bridge renders at camera fps instead)
    render_in_obs: bool = False
    # half-width (rad) of the uniform noise added to the home arm pose at reset
    reset_noise: float = Field(0.02, ge=0, le=0.5)
    # false: open PyBullet's GUI window (needs a display); true: DIRECT (no window)
    headless: bool = True
