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


# --- composition: `extends:` ------------------------------------------------------------------


def _write(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


PARENT = """\
    name: parent
    sim:
      type: mujoco
      control_hz: 100
      cameras:
        - {name: front, width: 96, height: 96, fps: 30}
    task: {type: lift, max_duration_s: 5}
    policy: {type: hold}
    safety: {watchdog_s: 0.05}
    episodes: {count: 3, seed: 7}
    """


def test_extends_merges_mappings_replaces_values_and_null_removes(tmp_path):
    _write(tmp_path, "parent.yaml", PARENT)
    child = _write(
        tmp_path,
        "child.yaml",
        """\
        extends: parent.yaml
        name: child
        sim:
          control_hz: 50          # a scalar replaces, sim.type stays
          cameras: []             # a list replaces
        task: {type: reach}       # a mapping merges: max_duration_s stays
        safety: null              # a section goes back to its defaults
        episodes: {seed: null}    # a field goes back to its default
        ros: {lockstep_timeout_s: null}   # in a section the parent lacks: the default
        """,
    )
    cfg = load_config(child)
    assert cfg.name == "child"
    assert cfg.sim.type == "mujoco" and cfg.sim.control_hz == 50 and cfg.sim.cameras == []
    assert cfg.task.type == "reach" and cfg.task.max_duration_s == 5
    assert cfg.safety.watchdog_s == parse_experiment(BASE).safety.watchdog_s != 0.05
    assert cfg.episodes.count == 3 and cfg.episodes.seed == 0
    assert cfg.ros.lockstep_timeout_s == parse_experiment(BASE).ros.lockstep_timeout_s


def test_a_mock_is_the_parent_with_sim_swapped_for_hardware(tmp_path):
    _write(tmp_path, "parent.yaml", PARENT)
    mock = _write(
        tmp_path,
        "mock.yaml",
        """\
        extends: parent.yaml
        name: mock
        sim: null
        hardware: {type: jtc_arm, mock: true, control_hz: 100}
        """,
    )
    cfg = load_config(mock)
    assert cfg.sim is None and cfg.hardware.type == "jtc_arm"
    assert cfg.task.max_duration_s == 5 and cfg.episodes.seed == 7
    # without `sim: null` both worlds would be set: the usual one-line error
    _write(tmp_path, "both.yaml", "extends: parent.yaml\nhardware: {type: jtc_arm}\n")
    with pytest.raises(ConfigError, match="exactly one of 'sim' and 'hardware'"):
        load_config(tmp_path / "both.yaml")


def test_chains_and_overrides_after_the_merge(tmp_path):
    _write(tmp_path, "a.yaml", PARENT)
    _write(tmp_path, "sub/b.yaml", "extends: ../a.yaml\nsim: {control_hz: 50}\n")
    c = _write(tmp_path, "sub/c.yaml", "extends: b.yaml\nname: c\ntask: {type: reach}\n")
    cfg = load_config(c, ["sim.control_hz=25", "task.max_duration_s=9"])
    assert (cfg.name, cfg.sim.control_hz, cfg.task.type) == ("c", 25, "reach")
    assert cfg.task.max_duration_s == 9 and cfg.episodes.count == 3
    dumped = dump_config(cfg)
    assert "extends" not in dumped  # the flat, merged experiment (what model.json carries)
    assert parse_experiment(dumped) == cfg


def test_cycles_and_missing_parents_are_one_line(tmp_path):
    _write(tmp_path, "a.yaml", "extends: b.yaml\nname: a\n")
    _write(tmp_path, "b.yaml", "extends: a.yaml\nname: b\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "a.yaml")
    msg = str(err.value)
    assert "\n" not in msg and "cycle" in msg and "a.yaml -> b.yaml -> a.yaml" in msg, msg
    _write(tmp_path, "self.yaml", "extends: self.yaml\n")
    with pytest.raises(ConfigError, match=r"cycle \(self.yaml -> self.yaml\)"):
        load_config(tmp_path / "self.yaml")
    _write(tmp_path, "orphan.yaml", "extends: nowhere.yaml\nname: o\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "orphan.yaml")
    msg = str(err.value)
    assert "\n" not in msg and "orphan.yaml: extends:" in msg and "nowhere.yaml" in msg, msg
    _write(tmp_path, "list.yaml", "extends: [a.yaml]\n")
    with pytest.raises(ConfigError, match="extends: expected the name of an experiment file"):
        load_config(tmp_path / "list.yaml")


def test_errors_in_the_merged_result_name_the_file_and_the_field(tmp_path):
    _write(tmp_path, "parent.yaml", PARENT.replace("max_duration_s: 5", "max_duration_s: soon"))
    child = _write(tmp_path, "child.yaml", "extends: parent.yaml\nname: child\n")
    with pytest.raises(ConfigError) as err:
        load_config(child)
    msg = str(err.value)
    # the file given, the field, and where the field was written
    assert msg.startswith(f"{child}: task.max_duration_s:"), msg
    assert msg.endswith(f"(set in {tmp_path / 'parent.yaml'})") and "\n" not in msg, msg
    _write(tmp_path, "typo.yaml", "extends: child.yaml\nsim: {contrl_hz: 5}\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "typo.yaml", ["task.max_duration_s=4"])
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'typo.yaml'}: sim.contrl_hz: unknown field"), msg
    assert "(set in" not in msg  # written in the file given
    with pytest.raises(ConfigError, match=r"sim.control_hz: .* \(set on the command line\)"):
        load_config(child, ["task.max_duration_s=4", "sim.control_hz=-1"])


def test_a_parsed_dict_cannot_extend():
    with pytest.raises(ConfigError, match="x.yaml: extends: only an experiment file"):
        parse_experiment({**BASE, "extends": "panda_lift_expert.yaml"}, "x.yaml")


def test_extends_resolves_next_to_the_file_in_an_install_tree(tmp_path, monkeypatch):
    """colcon copies configs/experiments/ whole into share/tether_ros: a variant finds its
    parent there, not in the checkout."""
    share = tmp_path / "install/tether_ros/share/tether_ros/configs/experiments"
    _write(share, "panda_lift_expert.yaml", PARENT.replace("name: parent", "name: installed"))
    child = _write(share, "variant.yaml", "extends: panda_lift_expert.yaml\nname: v\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(child)
    assert cfg.episodes.seed == 7  # the installed parent, not the repository's file


def test_a_project_file_extends_a_shipped_experiment_by_name(repo, tmp_path, monkeypatch):
    mine = _write(tmp_path, "mine.yaml", "extends: panda_lift_expert.yaml\nname: mine\n")
    monkeypatch.chdir("/")
    cfg = load_config(mine)
    shipped = load_config(repo / "configs/experiments/panda_lift_expert.yaml")
    assert dump_config(cfg) == {**dump_config(shipped), "name": "mine"}


def test_shipped_variants_extend_and_load_flat(repo):
    """The variants of configs/experiments are a few lines each, and load to the full
    experiment: what their parent says, plus their own changes."""
    from tether.core.config import read_experiment, read_yaml

    variants = {
        "husky_obstacle_course.yaml": "husky_go_to_goal.yaml",
        "panda_lift_diffusion_image.yaml": "panda_lift_diffusion.yaml",
        "panda_lift_diffusion_mlp.yaml": "panda_lift_diffusion.yaml",
        "quad_hover_onnx.yaml": "quad_hover.yaml",
    }
    folder = repo / "configs/experiments"
    for variant, parent in variants.items():
        assert read_yaml(folder / variant)["extends"] == parent
        assert "extends" not in read_experiment(folder / variant)
    course = load_config(folder / "husky_obstacle_course.yaml")
    goal = load_config(folder / "husky_go_to_goal.yaml")
    assert course.task.type == "obstacle_course"
    assert dump_config(course)["sim"] == dump_config(goal)["sim"]
    mlp = load_config(folder / "panda_lift_diffusion_mlp.yaml").train.model
    assert mlp.denoiser == "mlp" and mlp.kernel_size == 5 and mlp.activation == "mish"
