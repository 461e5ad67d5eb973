"""Every registered arm, and every engine with an arm backend, as pytest parameters: a robot
folder added under robots/ (or by a plugin) adds its cases to every test that uses these."""

from __future__ import annotations

from typing import Any

import pytest

from tether.core import registry
from tether.core.robot import ArmDescription
from tether.sim.factory import engine_missing

# the Python package each engine needs (a test skips, with the reason, when it is missing)
ENGINE_PACKAGES = {"mujoco": "mujoco", "pybullet": "pybullet"}
ENGINE_MARKS = {"mujoco": [pytest.mark.mujoco], "pybullet": [pytest.mark.pybullet]}

ARMS: list[str] = [
    name
    for name in registry.available("robot")
    if isinstance(registry.load("robot", name), ArmDescription)
]
ARM_ENGINES: list[str] = sorted(
    b.partition("/")[0] for b in registry.available("backend") if b.endswith("/arm")
)


def arm(name: str) -> ArmDescription:
    """The registered description of arm ``name``."""
    desc = registry.load("robot", name)
    assert isinstance(desc, ArmDescription)
    return desc


def arm_params() -> list[Any]:
    """One parameter per registered arm (id: its name)."""
    return [pytest.param(name, id=name) for name in ARMS]


def engine_arm_params(engines: list[str] | None = None, as_tuple: bool = False) -> list[Any]:
    """(engine, arm) for every engine with an arm backend x every registered arm, marked with
    the engine's marker (id: ``engine-arm``): two values for ``parametrize("engine, robot")``
    or, ``as_tuple``, one (engine, arm) tuple for a fixture's ``params``."""
    return [
        pytest.param(
            *(((engine, name),) if as_tuple else (engine, name)),
            marks=ENGINE_MARKS.get(engine, []),
            id=f"{engine}-{name}",
        )
        for engine in engines or ARM_ENGINES
        for name in ARMS
    ]


def build_arm_sim(engine: str, robot: str, task: Any = None, **cfg: Any) -> Any:
    """The ``engine`` backend for arm ``robot`` with ``task``; ``cfg`` overrides the sim
    config's defaults. Skips when the engine's package is missing (with the engine's own
    sentence when it has one)."""
    why = engine_missing(engine, robot)
    if why is not None:
        pytest.skip(why)
    if engine in ENGINE_PACKAGES:
        pytest.importorskip(ENGINE_PACKAGES[engine])
    sim_cfg = registry.config_class("sim", engine)(**cfg)
    return registry.build("sim", sim_cfg, robot=robot, task=task)
