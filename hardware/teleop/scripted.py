"""A "device" that is a policy: the scripted expert (or any Policy) drives the robot, for
automated demonstrations. It emits full actions (``TeleopCommand.action``) with the
dead-man always held; it never triggers episode events.

Which expert: the one the experiment's task names in its registry entry (option
``expert``: a policy type, e.g. ``reach`` -> ``scripted_expert``, ``go_to_goal`` ->
``base_expert``, ``hover`` -> ``quad_pid``), so a new task brings its expert along and
nothing here names a task or a robot kind.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core import registry
from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.protocols import Policy
from tether.core.spec import RobotSpec
from tether.core.types import Observation
from tether.hardware.teleop.command import TeleopCommand

# a task's registry option: the policy type of the task's scripted expert
EXPERT_OPTION = "expert"


def task_expert(task_type: str) -> str:
    """The policy type of the scripted expert registered for a task; ConfigError if none."""
    expert = registry.entry("task", task_type).options.get(EXPERT_OPTION)
    if not expert:
        raise ConfigError(
            f"task '{task_type}' has no scripted expert (its registry entry names none in "
            f"option '{EXPERT_OPTION}'): record it with a human device"
        )
    return expert


def expert_policy_config(cfg: ExperimentConfig) -> Any:
    """The policy section of the experiment's scripted expert: the experiment's own when it
    is that expert (its settings apply), else the expert's defaults."""
    expert = task_expert(cfg.task.type)
    pcfg: Any = cfg.policy
    if pcfg.type == expert:
        return pcfg
    return registry.config_class("policy", expert)()


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
        """The scripted expert of the experiment's task (:func:`expert_policy_config`).
        Built through the registry, so this layer does not import the simulator package."""
        return cls(registry.build("policy", expert_policy_config(cfg), spec, cfg.task))

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
