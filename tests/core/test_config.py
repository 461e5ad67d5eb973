from __future__ import annotations

import textwrap

import pytest

from tether.core import registry
from tether.core.config import apply_overrides, dump_config, load_config, parse_experiment
from tether.core.errors import ConfigError

BASE = {
    "name": "t",
    "sim": {"type": "mujoco", "control_hz": 100},
    "task": {"type": "lift"},
    "policy": {"type": "hold"},
}


def test_demo_config_loads_with_typed_sections(repo):
    cfg = load_config(repo / "configs/experiments/panda_lift_demo.yaml")
    assert cfg.sim.type == "mujoco" and cfg.task.type == "lift"
    assert type(cfg.sim).__name__ == "MujocoConfig"  # validated by the registered class
    assert cfg.sim.control_hz == 100


def test_every_experiment_file_validates(repo):
    files = sorted((repo / "configs/experiments").glob("*.yaml"))
    assert files
    for f in files:
        load_config(f)


def test_dotted_overrides_parse_values():
    data = apply_overrides(
        BASE, ["sim.control_hz=250", "episodes.autostart=false", "ros.namespace=arm1"]
    )
    cfg = parse_experiment(data)
    assert cfg.sim.control_hz == 250.0
    assert cfg.episodes.autostart is False
    assert cfg.ros.namespace == "arm1"
    assert BASE["sim"]["control_hz"] == 100  # the caller's dict is not mutated


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("sim.control_hz=-5", "sim.control_hz"),
        ("sim.contrl_hz=5", "sim.contrl_hz"),
        ("safety.watchdog_s=abc", "safety.watchdog_s"),
        ("episodes.count=0", "episodes.count"),
        ("ros.rate_mode=warp", "ros.rate_mode"),
        ("task.type=juggle", "task.type"),
    ],
)
def test_bad_values_name_the_field_in_one_line(override, field):
    with pytest.raises(ConfigError) as err:
        parse_experiment(apply_overrides(BASE, [override]), "x.yaml")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"x.yaml: {field}:"), msg


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        textwrap.dedent("""\
        name: x
        sim: {type: mujoco
        """)
    )
    with pytest.raises(ConfigError, match="could not parse YAML"):
        load_config(bad)


def test_override_syntax_error():
    with pytest.raises(ConfigError, match="section.field=value"):
        apply_overrides(BASE, ["sim.control_hz"])


def test_unknown_robot_is_rejected():
    with pytest.raises(ConfigError, match="robot: unknown robot type 'r2d2'"):
        parse_experiment({**BASE, "robot": "r2d2"}, "x.yaml")


def test_dump_round_trips():
    cfg = parse_experiment(BASE)
    again = parse_experiment(dump_config(cfg))
    assert again == cfg


def test_registry_lists_and_registers():
    assert "mujoco" in registry.available("sim")
    assert {"lift", "reach"} <= set(registry.available("task"))
    registry.register(
        "policy",
        "hold2",
        "tether.core.policies:HoldPolicy",
        "tether.core.policies:HoldPolicyConfig",
    )
    assert registry.load("policy", "hold2").__name__ == "HoldPolicy"
    with pytest.raises(ValueError):
        registry.register("widget", "x", "a:b")
