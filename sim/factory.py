"""One simulator type per engine, whatever the robot: ``sim: {type: pybullet}`` builds the
engine's backend for the experiment robot's kind (arm, quadcopter, mobile_base), given the
robot's description. Backends are registered as "<engine>/<kind>" (tether.sim.plugins)."""

from __future__ import annotations

from typing import Any

from tether.core import registry
from tether.core.errors import ConfigError
from tether.core.robot import RobotDescription


def robot_description(robot: str | RobotDescription) -> RobotDescription:
    """The registered description of ``robot`` (a name), or ``robot`` itself."""
    return robot if isinstance(robot, RobotDescription) else registry.load("robot", robot)


def robot_kind(robot: str | RobotDescription) -> str:
    """The kind (arm, quadcopter, mobile_base) of a registered robot."""
    return str(robot_description(robot).kind)


def build_backend(cfg: Any, robot: str | RobotDescription = "panda", task: Any = None) -> Any:
    """The backend of engine ``cfg.type`` for ``robot``'s kind."""
    desc = robot_description(robot)
    name = f"{cfg.type}/{desc.kind}"
    if name not in registry.available("backend"):
        kinds = sorted(
            b.partition("/")[2] for b in registry.available("backend") if b.startswith(cfg.type)
        )
        raise ConfigError(
            f"the {cfg.type} engine has no {desc.kind} backend ('{desc.name}'; it simulates: "
            f"{', '.join(kinds) or 'nothing'})"
        )
    return registry.load("backend", name)(cfg, robot=desc, task=task)


def engine_missing(engine: str, robot: str | RobotDescription = "panda") -> str | None:
    """Why ``engine`` cannot simulate ``robot``'s kind on this machine, in the engine's own
    sentence (its backend's registry option ``missing``, e.g. Isaac Sim without an RTX GPU),
    or None (also for engines that have no such check)."""
    import importlib

    name = f"{engine}/{robot_description(robot).kind}"
    if name not in registry.available("backend"):
        return None
    target = registry.entry("backend", name).options.get("missing")
    if not target:
        return None
    module, _, attr = str(target).partition(":")
    why: str | None = getattr(importlib.import_module(module), attr)()
    return why
