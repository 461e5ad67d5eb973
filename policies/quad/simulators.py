"""The simulators the hover trainer learns and is judged in, obtained through the registry:
the policy layer never imports tether.sim (arrows point down). The batched hover simulator
is registered as env "batched/quadcopter" (a ``tether.core.protocols.BatchedEnv``), the
gymnasium view of an experiment as "gym/any" (``tether.sim.make_env``)."""

from __future__ import annotations

from typing import Any

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.protocols import BatchedEnv

# the robot a hover policy flies (its checkpoint's contract names it)
ROBOT = "crazyflie"


def hover_env(n: int, *, coarse: bool = False, seed: int | None = None) -> BatchedEnv:
    """The hover episode (docs/quadrotor.md) for ``n`` drones at once: on the reference model
    (2 ms RK4 physics), or with ``coarse`` on the training model (one 10 ms step per
    control step)."""
    factory = registry.load("env", "batched/quadcopter")
    env: BatchedEnv = factory(n, robot=registry.load("robot", ROBOT), coarse=coarse, seed=seed)
    return env


def engine_env(cfg: ExperimentConfig) -> Any:
    """A ``gymnasium.Env`` over the experiment's simulator and task (observation and action
    as ``hover_env``'s, drone by drone)."""
    return registry.load("env", "gym/any")(cfg)
