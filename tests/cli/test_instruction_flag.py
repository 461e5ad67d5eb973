"""`tether demo / up --instruction TEXT` (docs/vla.md): any text becomes the task's fixed
instruction, quotes and colons included; an empty one is refused; a task that takes no
instruction says so through the config's own error."""

from __future__ import annotations

import pytest

from tether.cli.main import instruction_override
from tether.core.config import load_config
from tether.core.errors import ConfigError

MULTITASK = "configs/experiments/panda_multitask_expert.yaml"


@pytest.mark.parametrize("text", ["lift the red cube", 'put it: "there", now', "  spaced  "])
def test_any_text_becomes_the_tasks_instruction(repo, text: str) -> None:
    cfg = load_config(repo / MULTITASK, instruction_override(text))
    assert cfg.task.instruction == text.strip()


def test_an_empty_instruction_is_refused() -> None:
    with pytest.raises(ConfigError, match="--instruction"):
        instruction_override("   ")
    assert instruction_override(None) == []


def test_a_task_without_instructions_refuses_one(repo) -> None:
    with pytest.raises(ConfigError, match="instruction"):
        load_config(
            repo / "configs/experiments/panda_lift_expert.yaml",
            instruction_override("lift the red cube"),
        )
