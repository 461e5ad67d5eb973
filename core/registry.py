"""A registry of implementations keyed by the YAML ``type:`` field; imports lazily.

Entries are "module:attribute" strings, so listing or validating a config never imports a
simulator or torch: only building does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from tether.core.errors import ConfigError

KINDS = ("robot", "sim", "task", "policy", "trainer")


@dataclass(frozen=True)
class Entry:
    """``config``: pydantic class validating the YAML section (a light import);
    ``target``: the class or factory that builds the thing from that config."""

    config: str | None
    target: str


_REGISTRY: dict[str, dict[str, Entry]] = {
    "robot": {
        "panda": Entry(None, "tether.sim.robots.panda:panda_spec"),
        "husky": Entry(None, "tether.sim.robots.husky:husky_spec"),
        "crazyflie": Entry(None, "tether.sim.quadrotor.crazyflie:crazyflie_robot"),
    },
    "sim": {
        "mujoco": Entry(
            "tether.sim.mujoco.config_mujoco:MujocoConfig",
            "tether.sim.factory:mujoco_backend",
        ),
        "pybullet": Entry(
            "tether.sim.pybullet.config_pybullet:PybulletConfig",
            "tether.sim.factory:pybullet_backend",
        ),
    },
    "task": {
        "reach": Entry(
            "tether.sim.tasks.config_tasks:ReachConfig", "tether.sim.tasks.reach:ReachTask"
        ),
        "lift": Entry("tether.sim.tasks.config_tasks:LiftConfig", "tether.sim.tasks.lift:LiftTask"),
        # mobile-base tasks (robot husky)
        "go_to_goal": Entry(
            "tether.sim.tasks.config_base_tasks:GoToGoalConfig",
            "tether.sim.tasks.go_to_goal:GoToGoalTask",
        ),
        "obstacle_course": Entry(
            "tether.sim.tasks.config_base_tasks:ObstacleCourseConfig",
            "tether.sim.tasks.obstacle_course:ObstacleCourseTask",
        ),
        # drone tasks (robot crazyflie): tether.sim.tasks.quad_tasks, docs/quadrotor.md
        "hover": Entry(
            "tether.sim.tasks.config_quad_tasks:HoverConfig",
            "tether.sim.tasks.quad_tasks:HoverTask",
        ),
        "waypoints": Entry(
            "tether.sim.tasks.config_quad_tasks:WaypointsConfig",
            "tether.sim.tasks.quad_tasks:WaypointsTask",
        ),
        "figure_eight": Entry(
            "tether.sim.tasks.config_quad_tasks:FigureEightConfig",
            "tether.sim.tasks.quad_tasks:FigureEightTask",
        ),
    },
    "policy": {
        "scripted_expert": Entry(
            "tether.sim.experts.config_expert:ScriptedExpertConfig",
            "tether.sim.experts.expert:ScriptedExpert",
        ),
        "hold": Entry("tether.core.policies:HoldPolicyConfig", "tether.core.policies:HoldPolicy"),
        "base_expert": Entry(
            "tether.sim.experts.config_base_expert:BaseExpertConfig",
            "tether.sim.experts.base_expert:BaseExpert",
        ),
        "quad_pid": Entry(
            "tether.sim.quadrotor.config_quadrotor:QuadPIDConfig",
            "tether.sim.quadrotor.pid_policy:QuadPIDPolicy",
        ),
        "onnx": Entry(
            "tether.policies.config_onnx:OnnxPolicyConfig", "tether.policies.runtime:OnnxPolicy"
        ),
        "diffusion": Entry(
            "tether.policies.diffusion.config:DiffusionPolicyConfig",
            "tether.policies.diffusion.policy:DiffusionPolicy",
        ),
    },
    # the experiment's optional ``train:`` section; a trainer target is a class with
    # ``train(cfg, out, resume) -> dict``, ``evaluate(checkpoint, options) -> dict`` and
    # ``export(checkpoint, fmt, out) -> Path`` (see tether.cli.train)
    "trainer": {
        "diffusion": Entry(
            "tether.policies.diffusion.config:DiffusionTrainConfig",
            "tether.policies.diffusion.trainer:DiffusionTrainer",
        ),
        "quad_hover": Entry(
            "tether.policies.quad.config_quad:QuadHoverTrainConfig",
            "tether.policies.quad.trainer:QuadHoverTrainer",
        ),
    },
}


def register(kind: str, type_: str, target: str, config: str | None = None) -> None:
    """Add (or replace) an implementation; ``target``/``config`` are "module:attr" strings."""
    if kind not in KINDS:
        raise ValueError(f"unknown registry kind '{kind}' (kinds: {', '.join(KINDS)})")
    _REGISTRY[kind][type_] = Entry(config, target)


def available(kind: str) -> list[str]:
    """Registered type names of one kind, sorted."""
    return sorted(_REGISTRY[kind])


def entry(kind: str, type_: str) -> Entry:
    try:
        return _REGISTRY[kind][type_]
    except KeyError:
        known = ", ".join(available(kind))
        raise ConfigError(f"unknown {kind} type '{type_}' (available: {known})") from None


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def config_class(kind: str, type_: str) -> Any:
    """The pydantic config class for ``kind``/``type_``, or None when it takes no config."""
    e = entry(kind, type_)
    return _resolve(e.config) if e.config else None


def load(kind: str, type_: str) -> Any:
    """Import and return the implementation (class or factory)."""
    return _resolve(entry(kind, type_).target)


def build(kind: str, cfg: Any, *args: Any, **kwargs: Any) -> Any:
    """Build the implementation named by ``cfg.type`` with ``cfg`` and extra arguments."""
    return load(kind, cfg.type)(cfg, *args, **kwargs)
