"""One simulator type per engine, whatever the robot: ``sim: {type: pybullet}`` builds the
engine's backend for the experiment robot's kind (arm, quadcopter, mobile_base).

Each (engine, kind) pair maps to a "module:attr" backend class taking
``(cfg, robot=..., task=...)``, imported only when built.
"""

from __future__ import annotations

import importlib
from typing import Any

from tether.core import registry
from tether.core.errors import ConfigError

BACKENDS: dict[tuple[str, str], str] = {
    ("mujoco", "arm"): "tether.sim.mujoco.backend:MujocoBackend",
    ("pybullet", "arm"): "tether.sim.pybullet.backend:PybulletBackend",
    ("mujoco", "quadcopter"): "tether.sim.mujoco.quadrotor:MujocoQuadrotorBackend",
    ("pybullet", "quadcopter"): "tether.sim.pybullet.quadrotor:PybulletQuadrotorBackend",
    ("mujoco", "mobile_base"): "tether.sim.mujoco.mobile_base:MujocoMobileBase",
    ("pybullet", "mobile_base"): "tether.sim.pybullet.mobile_base:PybulletMobileBase",
}


def robot_kind(robot: str) -> str:
    """The kind (arm, quadcopter, mobile_base) of a registered robot, from its default spec."""
    return str(registry.load("robot", robot)().kind)


def build_backend(engine: str, cfg: Any, robot: str = "panda", task: Any = None) -> Any:
    kind = robot_kind(robot)
    target = BACKENDS.get((engine, kind))
    if target is None:
        kinds = sorted(k for e, k in BACKENDS if e == engine)
        raise ConfigError(
            f"the {engine} backend has no {kind} robots yet ('{robot}'; it simulates: "
            f"{', '.join(kinds)})"
        )
    module, _, attr = target.partition(":")

    return getattr(importlib.import_module(module), attr)(cfg, robot=robot, task=task)


def mujoco_backend(cfg: Any, robot: str = "panda", task: Any = None) -> Any:
    return build_backend("mujoco", cfg, robot, task)


def pybullet_backend(cfg: Any, robot: str = "panda", task: Any = None) -> Any:
    return build_backend("pybullet", cfg, robot, task)
