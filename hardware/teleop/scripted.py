"""A "device" that is a policy: the scripted expert (or any Policy) drives the robot, for
automated demonstrations. It emits full actions (``TeleopCommand.action``) with the
dead-man always held; it never triggers episode events.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.protocols import Policy
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.teleop.command import TeleopCommand


class ScriptedDevice:
    """Wraps a Policy: ``observe(obs)`` then ``read()`` gives the first action of its chunk.

    Until the first observation arrives ``read`` reports the dead-man released.
    """

    name = "scripted"

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        keys = policy.contract.get("observation_keys", ["state"])
        self.observation_keys: tuple[str, ...] = tuple(keys)
        self._obs: Observation | None = None
        self._fresh = False

    @classmethod
    def from_experiment(cls, cfg: ExperimentConfig, spec: RobotSpec) -> ScriptedDevice:
        """The experiment's policy when it is the scripted expert (its settings apply),
        else a default scripted expert for the experiment's task. Built through the
        registry, so this layer does not import the simulator package."""
        pcfg: Any = cfg.policy
        if pcfg.type != "scripted_expert":
            pcfg = registry.config_class("policy", "scripted_expert")()
        return cls(registry.build("policy", pcfg, spec, cfg.task))

    def observe(self, obs: Observation) -> None:
        self._obs = obs
        self._fresh = True

    def read(self) -> TeleopCommand:
        if self._obs is None:
            return TeleopCommand()
        # one act() per observation: the expert integrates its own commanded state
        if self._fresh:
            chunk = self.policy.act(self._obs)
            self._action = np.asarray(chunk.actions[0], np.float64)
            self._fresh = False
        return TeleopCommand(deadman=True, action=self._action.copy())

    def close(self) -> None:
        pass
