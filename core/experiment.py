"""Helpers that turn an ExperimentConfig into the objects every layer shares."""

from __future__ import annotations

from typing import Any

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.robot import RobotDescription
from tether.core.spec import RobotSpec


def robot_description(cfg: ExperimentConfig) -> RobotDescription:
    """The description of the experiment's robot (its folder's ``ROBOT``)."""
    return registry.load("robot", cfg.robot)


def robot_spec(cfg: ExperimentConfig) -> RobotSpec:
    """The RobotSpec of the experiment's robot at the simulator's control rate and cameras."""
    desc = robot_description(cfg)
    world = cfg.world  # the sim section, or the hardware one
    cameras = tuple(getattr(world, "cameras", ()))
    # robot options the sim section carries (a quadcopter's action mode and drone count)
    options = getattr(cfg.sim, "robot_options", None)
    extra = options(desc.kind) if options is not None else {}
    return desc.spec(control_hz=world.control_hz, cameras=cameras, **extra)


def build_task(cfg: ExperimentConfig) -> Any:
    return registry.build("task", cfg.task)


def build_policy(cfg: ExperimentConfig, spec: RobotSpec | None = None) -> Any:
    """The experiment's policy, built for ``spec`` (default: robot_spec(cfg))."""
    return registry.build("policy", cfg.policy, spec or robot_spec(cfg), cfg.task)


def max_episode_steps(cfg: ExperimentConfig) -> int:
    """Episode length limit in control steps (task.max_duration_s at sim.control_hz)."""
    duration = float(getattr(cfg.task, "max_duration_s", 10.0))
    return max(1, round(duration * cfg.world.control_hz))
