"""`--teleop scripted` picks the scripted expert the experiment's task registers (the task
entry's ``expert`` option), for every kind, with no table of tasks in the code."""

from __future__ import annotations

import pytest

from tether.cli.record import expert_overrides
from tether.core import registry
from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether.hardware.teleop.scripted import expert_policy_config, task_expert


def test_every_registered_task_names_a_registered_expert():
    tasks = registry.available("task")
    assert {"reach", "lift", "go_to_goal", "obstacle_course", "hover"} <= set(tasks)
    for task in tasks:
        assert task_expert(task) in registry.available("policy"), task


@pytest.mark.parametrize(
    ("config", "expert"),
    [
        ("panda_lift_expert", "scripted_expert"),
        ("panda_reach_expert", "scripted_expert"),
        ("husky_go_to_goal", "base_expert"),
        ("husky_obstacle_course", "base_expert"),
        ("quad_pid_hover", "quad_pid"),
        ("quad_pid_figure_eight", "quad_pid"),
    ],
)
def test_the_experiments_own_expert_keeps_its_settings(repo, config, expert):
    path = str(repo / f"configs/experiments/{config}.yaml")
    assert expert_overrides(path, []) == []  # the experiment's policy is already its expert
    cfg = load_config(path)
    assert expert_policy_config(cfg) is cfg.policy and cfg.policy.type == expert


def test_a_learned_policy_is_replaced_by_the_tasks_expert(repo):
    path = str(repo / "configs/experiments/panda_lift_diffusion.yaml")
    overrides = expert_overrides(path, [])
    assert overrides == ["policy={type: scripted_expert}"]
    cfg = load_config(path, overrides)  # the diffusion section's keys are gone with it
    assert cfg.policy.type == "scripted_expert"
    assert expert_policy_config(load_config(path)).type == "scripted_expert"


def test_an_override_of_the_task_picks_that_tasks_expert(repo):
    path = str(repo / "configs/experiments/husky_go_to_goal.yaml")
    assert expert_overrides(path, ["task.type=obstacle_course"]) == []
    path = str(repo / "configs/experiments/quad_pid_hover.yaml")
    assert expert_overrides(path, ["task.type=waypoints"]) == []


def test_a_task_without_an_expert_is_one_sentence():
    e = registry.entry("task", "reach")
    registry.register("task", "no_expert_task", e.target, e.config)
    try:
        with pytest.raises(ConfigError, match="task 'no_expert_task' has no scripted expert"):
            task_expert("no_expert_task")
    finally:
        registry.unregister("task", "no_expert_task")
