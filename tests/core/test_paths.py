"""Relative paths of an experiment resolve against one documented base (tether.core.paths),
whatever the working directory: what an installed package and every entry point rely on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether.core.paths import experiment_root, find_given, resolve_path

REPO = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path) -> Path:
    """A project laid out like the repository or share/tether_ros: configs/experiments/ and
    models/ side by side, with its own copy of one experiment and one model."""
    root = tmp_path / "project"
    (root / "configs" / "experiments").mkdir(parents=True)
    shutil.copy(
        REPO / "configs/experiments/quad_hover_onnx.yaml",
        root / "configs/experiments/quad_hover_onnx.yaml",
    )
    shutil.copytree(REPO / "models/quad_hover", root / "models/quad_hover")
    return root


def test_the_root_is_the_folder_holding_configs(tmp_path):
    root = _project(tmp_path)
    assert experiment_root(root / "configs/experiments/quad_hover_onnx.yaml") == root.resolve()
    loose = tmp_path / "mine.yaml"
    assert experiment_root(loose) == tmp_path.resolve()
    assert experiment_root(REPO / "configs/experiments/panda_lift_expert.yaml") == REPO


def test_paths_resolve_against_the_root_not_the_working_directory(tmp_path, monkeypatch):
    root = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(root / "configs/experiments/quad_hover_onnx.yaml")
    # the project's own copy wins over the one Tether ships
    assert cfg.policy.model == (root / "models/quad_hover/model.onnx").resolve()
    # not in the project: the profile Tether ships
    assert cfg.ros.dds_profile == REPO / "configs/dds/fastdds_shm.xml"
    assert cfg.ros.dds_profile.is_file()


def test_an_override_resolves_against_the_same_root(tmp_path, monkeypatch):
    root = _project(tmp_path)
    (root / "models/other").mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = load_config(
        root / "configs/experiments/quad_hover_onnx.yaml", ["policy.model=models/other/m.onnx"]
    )
    # missing everywhere: named under the root, where the user will look for it
    assert cfg.policy.model == root.resolve() / "models/other/m.onnx"


def test_a_loose_experiment_finds_the_shipped_models(tmp_path, monkeypatch):
    text = (REPO / "configs/experiments/quad_hover_onnx.yaml").read_text()
    mine = tmp_path / "my_hover.yaml"
    mine.write_text(text)
    monkeypatch.chdir("/")
    cfg = load_config(mine)
    assert cfg.policy.model == REPO / "models/quad_hover/model.onnx"


def test_experiment_names_work_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = find_given("configs/experiments/panda_lift_expert.yaml")
    assert found == REPO / "configs/experiments/panda_lift_expert.yaml"
    cfg = load_config("configs/experiments/panda_lift_diffusion.yaml")
    assert cfg.policy.model == REPO / "models/panda_lift_diffusion/model.onnx"
    with pytest.raises(ConfigError, match="config file not found"):
        load_config("configs/experiments/no_such.yaml")


def test_ament_share_is_a_data_folder(tmp_path, monkeypatch):
    """After `source install/setup.bash`, share/tether_ros holds what Tether ships."""
    share = tmp_path / "install/tether_ros/share/tether_ros"
    (share / "models/only_installed").mkdir(parents=True)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "install/tether_ros"))
    got = resolve_path("models/only_installed", tmp_path / "loose")
    assert got == (share / "models/only_installed").resolve()
    assert resolve_path("/abs/file", tmp_path) == Path("/abs/file")
