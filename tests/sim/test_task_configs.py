"""Task and expert configs: defaults validate, typos and bad ranges fail with the field name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tether.core import registry
from tether.sim.experts.config_expert import ScriptedExpertConfig
from tether.sim.tasks.config_tasks import LiftConfig, ReachConfig


@pytest.mark.parametrize("cls", [ReachConfig, LiftConfig, ScriptedExpertConfig])
def test_defaults_and_misspelled_keys(cls: type) -> None:
    cfg = cls()
    assert (
        registry.config_class("task" if cls is not ScriptedExpertConfig else "policy", cfg.type)
        is cls
    )
    with pytest.raises(ValidationError, match="max_sped|x_rnage"):
        cls(max_sped=1.0) if cls is ScriptedExpertConfig else cls(x_rnage=(0, 1))


def test_ranges_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="y_range"):
        LiftConfig(y_range=(0.2, -0.2))


def test_tasks_expose_objects_and_time_limit() -> None:
    from tether.sim.tasks.lift import LiftTask
    from tether.sim.tasks.reach import ReachTask

    assert LiftTask(LiftConfig(max_duration_s=3.0)).max_duration_s == 3.0
    assert LiftTask().objects == ("cube",)
    assert ReachTask().objects == ("target",)
