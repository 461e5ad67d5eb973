"""The registry has no central table: layers' plugins modules, robot folders and other
distributions' entry points (group ``tether.plugins``) register themselves."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest

from tether.core import registry
from tether.core.errors import ConfigError


@pytest.fixture
def fresh_registry(monkeypatch):
    """An empty registry that discovers again (restored afterwards)."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_LOADED", set())
    return registry


def _plugin_package(tmp_path, monkeypatch, name, body):
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    ep = metadata.EntryPoint(name="x", value=name, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(
        registry.metadata,
        "entry_points",
        lambda group=None: [ep] if group == registry.ENTRY_POINT_GROUP else [],
    )


def test_every_layer_registers_its_own_plugins(fresh_registry):
    assert {"panda", "husky", "crazyflie"} <= set(registry.available("robot"))
    assert {"mujoco/arm", "pybullet/quadcopter"} <= set(registry.available("backend"))
    assert {"diffusion", "onnx", "scripted_expert"} <= set(registry.available("policy"))
    assert {"jtc_arm", "mavlink"} <= set(registry.available("hardware"))
    # core's own module names no plugin: the tables live in the layers
    source = Path(registry.__file__).read_text()
    assert "scripted_expert" not in source and "panda" not in source


def test_another_distribution_adds_a_robot_through_an_entry_point(
    fresh_registry, tmp_path, monkeypatch
):
    _plugin_package(
        tmp_path,
        monkeypatch,
        "acme_tether_plugins",
        "from tether.core.registry import Entry\n"
        "PLUGINS = {'task': {'acme_stack': Entry(None, 'acme_tether_plugins:Stack')}}\n"
        "class Stack:\n    pass\n",
    )
    assert "acme_stack" in registry.available("task")
    assert registry.load("task", "acme_stack").__name__ == "Stack"
    assert "lift" in registry.available("task")  # the built-in layers are still there


def test_a_plugin_module_with_an_unknown_kind_is_one_sentence(
    fresh_registry, tmp_path, monkeypatch
):
    _plugin_package(
        tmp_path,
        monkeypatch,
        "bad_tether_plugins",
        "from tether.core.registry import Entry\nPLUGINS = {'robots': {'x': Entry(None, 'x:y')}}\n",
    )
    with pytest.raises(ConfigError, match="bad_tether_plugins.*unknown kind 'robots'"):
        registry.available("task")


def test_an_unknown_type_names_what_is_available(fresh_registry):
    with pytest.raises(ConfigError, match=r"unknown robot type 'r2d2' \(available: .*panda"):
        registry.entry("robot", "r2d2")


def test_explicit_register_wins_and_unregister_removes(fresh_registry):
    registry.register("policy", "hold", "tether.core.policies:HoldPolicy", note="mine")
    assert registry.entry("policy", "hold").options == {"note": "mine"}
    registry.unregister("policy", "hold")
    assert "hold" not in registry.available("policy")
