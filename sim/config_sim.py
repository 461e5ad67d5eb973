"""Fields every engine's sim section shares, whatever the robot kind. Light: pydantic only.

A kind's own settings (a drone world's ``quadrotor:``, a base's ``mobile_base:``) live in the
config class of the engine's backend for that kind (registry "backend" entries), so an arm
experiment that sets ``sim.quadrotor`` is an unknown-field error."""

from __future__ import annotations

from pydantic import Field

from tether.core.config import ComponentConfig
from tether.core.spec import CameraSpec


def default_cameras() -> list[CameraSpec]:
    return [CameraSpec(name="front", width=96, height=96, fps=30.0)]


class TableSimConfig(ComponentConfig):
    """A robot in an engine's scene with task objects; subclasses set ``type``."""

    # control (action) rate in Hz; one step() holds an action for 1/control_hz seconds
    control_hz: float = Field(100.0, gt=0)
    # upper bound of the physics step in seconds: the backend uses the largest step <= this
    # that divides the control period evenly; keep it <= 2 ms for stable grasp contacts
    physics_dt: float = Field(0.002, gt=0, le=0.01)
    # cameras to expose, by name (panda: "front", "wrist"); the spec's fovy sets the field
    # of view
    cameras: list[CameraSpec] = Field(default_factory=default_cameras)
    # also render every camera into observe()/step() observations as images/<camera>
    # (costs one render per camera per step; the ROS bridge renders at camera fps instead)
    render_in_obs: bool = False
    # half-width (rad) of the uniform noise added to the home arm pose at reset (mobile
    # bases: to the start heading)
    reset_noise: float = Field(0.02, ge=0, le=0.5)
    # false: open the simulator's own window (needs a display); true: offscreen only
    headless: bool = True
    # arms: drive a parallel gripper's fingers as one mechanism, as the Franka Hand's and
    # the Robotiq 2F-85's are (MuJoCo: a joint equality; PyBullet: a gear constraint).
    # Off, each finger has its own servo: PyBullet's force-limited motors then let a
    # grasped object slide sideways with both fingers, too loose for peg-in-hole
    # (docs/insert.md). Off by default so the recorded reach/lift physics stay as they were
    coupled_fingers: bool = False
    # arms, for recording demonstrations: DART-style noise injection (Laskey et al., "DART:
    # Noise Injection for Robust Imitation Learning", 2017). A smooth random offset (rad per
    # arm joint; Ornstein-Uhlenbeck, stationary std ``perturb_std``, time constant
    # ``perturb_tau_s``; drawn afresh from each episode's seed) is added to every arm joint
    # command before the safety filter, inside the simulator: the command the policy or
    # expert published, which the recorder stores, stays clean. The recorded states then
    # stray from the expert's plan and its actions lead back, so a cloned policy learns the
    # way back (docs/diffusion.md). 0: off (the default; never on when evaluating)
    perturb_std: float = Field(0.0, ge=0, le=0.05)
    perturb_tau_s: float = Field(0.5, gt=0, le=10.0)
