"""Helpers that turn an ExperimentConfig into the objects every layer shares."""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.robot import ArmDescription, RobotDescription
from tether.core.safety import ForwardKinematics
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
    if cfg.hardware is not None and desc.kind == "quadcopter":
        # a real drone is flown by velocity setpoints (the hardware bridge's only command)
        extra = {"mode": "velocity_setpoint"}
    return desc.spec(control_hz=world.control_hz, cameras=cameras, **extra)


def build_task(cfg: ExperimentConfig) -> Any:
    return registry.build("task", cfg.task)


def build_policy(cfg: ExperimentConfig, spec: RobotSpec | None = None) -> Any:
    """The experiment's policy, built for ``spec`` (default: robot_spec(cfg)). A policy
    section with a ``runtime`` field left unset (the ONNX types) gets the experiment's
    ``runtime:`` section (the execution provider)."""
    return registry.build("policy", with_runtime(cfg), spec or robot_spec(cfg), cfg.task)


def with_runtime(cfg: ExperimentConfig) -> Any:
    """``cfg.policy``, with the experiment's ``runtime:`` where it has an unset ``runtime``."""
    policy = cfg.policy
    if "runtime" in type(policy).model_fields and getattr(policy, "runtime", None) is None:
        return policy.model_copy(update={"runtime": cfg.runtime})
    return policy


def max_episode_steps(cfg: ExperimentConfig) -> int:
    """Episode length limit in control steps (task.max_duration_s at sim.control_hz)."""
    duration = float(getattr(cfg.task, "max_duration_s", 10.0))
    return max(1, round(duration * cfg.world.control_hz))


def workspace_fk(spec: RobotSpec) -> ForwardKinematics | None:
    """End-effector position (3,) m, robot base frame, of a joint-position action, for the
    safety filter's workspace box: the TCP of the robot's kinematic chain (every arm's
    description has one); None for a robot without a chain or another action mode."""
    if spec.action.mode != "joint_position" or spec.name not in registry.available("robot"):
        return None
    desc = registry.load("robot", spec.name)
    if not isinstance(desc, ArmDescription):
        return None
    kin, n = desc.kinematics, desc.dof
    return lambda a: kin.fk(np.asarray(a, np.float64)[:n])[0]
