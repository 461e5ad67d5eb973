"""launch/sim.launch.py builds the same node graph as `tether up`, without a ROS install.

`launch` and `launch_ros` are not on PyPI, so tiny fakes stand in for them: each records how
the launch file constructed it, and only accepts the keyword arguments the real class takes,
so a typo in the launch file fails here instead of on a robot. The plan the launch file turns
into Node actions must be exactly `tether_ros.graph.plan_graph`: one source of truth for
`ros2 launch` and `tether up`.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tether.core.config import load_config
from tether.core.errors import ConfigError
from tether_ros.graph import NodeSpec, launch_overrides, plan_graph

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "launch" / "sim.launch.py"
EXPERIMENT = REPO / "configs" / "experiments" / "panda_lift_expert.yaml"
EXPECTED_ARGS = {"experiment", "robot", "sim", "task", "policy", "headless"}


# --- fakes of the launch / launch_ros API the launch file uses -------------------------------
class _Recorded:
    """Binds positional and keyword arguments to the real class's parameter names (POSITIONAL)
    and rejects keywords the real class would not take (ALLOWED), then keeps them in kwargs."""

    POSITIONAL: tuple[str, ...] = ()
    ALLOWED: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(self.POSITIONAL):
            raise TypeError(f"{type(self).__name__}: too many positional arguments {args!r}")
        bound = dict(zip(self.POSITIONAL, args, strict=False))
        dup = set(bound) & set(kwargs)
        if dup:
            raise TypeError(f"{type(self).__name__}: {sorted(dup)} given twice")
        unknown = set(kwargs) - self.ALLOWED - set(self.POSITIONAL)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword(s) {sorted(unknown)}")
        self.kwargs: dict[str, Any] = {**bound, **kwargs}


class LaunchDescription(_Recorded):
    POSITIONAL = ("initial_entities",)


class DeclareLaunchArgument(_Recorded):
    POSITIONAL = ("name",)
    ALLOWED = frozenset({"default_value", "description", "choices"})


class OpaqueFunction(_Recorded):
    ALLOWED = frozenset({"function", "args", "kwargs"})


class SetEnvironmentVariable(_Recorded):
    POSITIONAL = ("name", "value")


class LaunchConfiguration(_Recorded):
    POSITIONAL = ("variable_name", "default")

    def perform(self, context: FakeContext) -> str:
        """Like the real one: the value the launch context holds for this argument."""
        name = self.kwargs["variable_name"]
        if name not in context.launch_configurations:
            raise LookupError(f"launch configuration {name!r} is not set")
        return context.launch_configurations[name]


class Node(_Recorded):
    # launch_ros.actions.Node's own parameters plus the ExecuteProcess ones the file may pass
    ALLOWED = frozenset(
        {
            "executable",
            "package",
            "name",
            "namespace",
            "exec_name",
            "parameters",
            "remappings",
            "ros_arguments",
            "arguments",
            "output",
            "emulate_tty",
            "env",
            "additional_env",
            "respawn",
            "respawn_delay",
            "sigterm_timeout",
            "sigkill_timeout",
            "on_exit",
        }
    )


class FakeContext:
    """The slice of launch.LaunchContext that LaunchConfiguration.perform reads."""

    def __init__(self, launch_configurations: dict[str, str]) -> None:
        self.launch_configurations = launch_configurations


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


@pytest.fixture
def launch_file(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """The launch file, imported against the fakes (sys.modules restored by monkeypatch)."""
    actions = _module(
        "launch.actions",
        DeclareLaunchArgument=DeclareLaunchArgument,
        OpaqueFunction=OpaqueFunction,
        SetEnvironmentVariable=SetEnvironmentVariable,
    )
    substitutions = _module("launch.substitutions", LaunchConfiguration=LaunchConfiguration)
    launch = _module(
        "launch",
        LaunchDescription=LaunchDescription,
        actions=actions,
        substitutions=substitutions,
        __path__=[],
    )
    ros_actions = _module("launch_ros.actions", Node=Node)
    launch_ros = _module("launch_ros", actions=ros_actions, __path__=[])
    for mod in (launch, actions, substitutions, launch_ros, ros_actions):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    # outside a colcon install: the experiment resolves from the CWD or the repository
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    spec = importlib.util.spec_from_file_location("tether_test_sim_launch", LAUNCH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _describe(launch_file: types.ModuleType) -> tuple[list[DeclareLaunchArgument], OpaqueFunction]:
    ld = launch_file.generate_launch_description()
    assert isinstance(ld, LaunchDescription)
    entities = list(ld.kwargs["initial_entities"])
    declared = [e for e in entities if isinstance(e, DeclareLaunchArgument)]
    opaque = [e for e in entities if isinstance(e, OpaqueFunction)]
    assert len(opaque) == 1 and len(declared) + 1 == len(entities), entities
    return declared, opaque[0]


def _run(launch_file: types.ModuleType, **args: str) -> list[_Recorded]:
    """What `ros2 launch tether_ros sim.launch.py k:=v ...` would execute: declared defaults,
    overridden by the given arguments, handed to the OpaqueFunction."""
    declared, opaque = _describe(launch_file)
    configs = {d.kwargs["name"]: d.kwargs.get("default_value", "") for d in declared}
    unknown = set(args) - set(configs)
    assert not unknown, f"not declared by the launch file: {unknown}"
    configs.update(args)
    function: Callable[..., list[_Recorded]] = opaque.kwargs["function"]
    assert len(inspect.signature(function).parameters) >= 1
    return list(
        function(
            FakeContext(configs),
            *opaque.kwargs.get("args", []) or [],
            **opaque.kwargs.get("kwargs", {}) or {},
        )
    )


def _node_view(node: Node) -> dict[str, Any]:
    return {
        k: node.kwargs.get(k) for k in ("package", "executable", "name", "namespace", "parameters")
    }


def _spec_view(spec: NodeSpec) -> dict[str, Any]:
    return {
        "package": spec.package,
        "executable": spec.executable,
        "name": spec.name,
        "namespace": spec.namespace or None,
        "parameters": [spec.parameters],
    }


# --- tests ----------------------------------------------------------------------------------
def test_declares_every_argument(launch_file):
    declared, _ = _describe(launch_file)
    names = [d.kwargs["name"] for d in declared]
    assert set(names) >= EXPECTED_ARGS, names
    assert len(names) == len(set(names)), f"declared twice: {names}"
    for d in declared:  # `ros2 launch -s` shows these; an undocumented argument is a trap
        assert d.kwargs.get("description"), d.kwargs["name"]
        assert isinstance(d.kwargs.get("default_value"), str), d.kwargs["name"]


@pytest.mark.parametrize(
    "args",
    [
        {"task": "reach", "policy": "hold"},
        {"robot": "panda", "sim": "mujoco", "task": "lift", "policy": "scripted_expert"},
        {},
    ],
    ids=["reach-hold", "all-explicit", "defaults"],
)
def test_nodes_match_plan_graph(launch_file, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default experiment must resolve outside the repo too
    if args:
        args = {"experiment": str(EXPERIMENT), **args}
    actions = _run(launch_file, **args)
    overrides = launch_overrides(
        args.get("robot", ""),
        args.get("sim", ""),
        args.get("task", ""),
        args.get("policy", ""),
        "true",
    )
    expected = plan_graph(EXPERIMENT, overrides)

    nodes = [a for a in actions if isinstance(a, Node)]
    assert [_node_view(n) for n in nodes] == [_spec_view(s) for s in expected]
    for node in nodes:
        params = node.kwargs["parameters"][0]
        assert Path(params["experiment"]).is_absolute() and Path(params["experiment"]).is_file()
        assert Path(params["experiment"]).samefile(EXPERIMENT)
        assert params.get("overrides", []) == overrides
    if "task" in args:
        assert f"task.type={args['task']}" in overrides
        assert f"policy.type={args['policy']}" in overrides


def test_environment_is_set_before_nodes_start(launch_file, monkeypatch):
    for key in ("RMW_IMPLEMENTATION", "FASTDDS_DEFAULT_PROFILES_FILE", "PYOPENGL_PLATFORM"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MUJOCO_GL", "osmesa")  # the user's own export wins
    actions = _run(launch_file, experiment=str(EXPERIMENT), task="reach", policy="hold")
    env_idx = [i for i, a in enumerate(actions) if isinstance(a, SetEnvironmentVariable)]
    node_idx = [i for i, a in enumerate(actions) if isinstance(a, Node)]
    assert env_idx and node_idx
    # launch runs actions in order: a variable set after a Node would not reach that process
    assert max(env_idx) < min(node_idx)
    env = {actions[i].kwargs["name"]: actions[i].kwargs["value"] for i in env_idx}
    assert env["RMW_IMPLEMENTATION"] == "rmw_fastrtps_cpp"
    profile = Path(env["FASTDDS_DEFAULT_PROFILES_FILE"])
    assert profile.is_absolute() and profile.is_file(), profile
    assert all(isinstance(v, str) for v in env.values())
    assert "MUJOCO_GL" not in env


def test_namespace_from_the_experiment(launch_file, tmp_path):
    data = yaml.safe_load(EXPERIMENT.read_text())
    data.setdefault("ros", {})["namespace"] = "arm1"
    exp = tmp_path / "ns.yaml"
    exp.write_text(yaml.safe_dump(data))
    nodes = [a for a in _run(launch_file, experiment=str(exp)) if isinstance(a, Node)]
    assert [n.kwargs["namespace"] for n in nodes] == ["arm1", "arm1"]
    assert [_node_view(n) for n in nodes] == [_spec_view(s) for s in plan_graph(exp)]


def test_bad_task_fails_with_the_field_name(launch_file):
    with pytest.raises(ConfigError, match=r"task\.type"):
        _run(launch_file, experiment=str(EXPERIMENT), task="juggle")


@pytest.mark.parametrize(
    ("headless", "override"), [("true", None), ("false", "sim.headless=false")]
)
def test_headless_argument_reaches_the_sim_config(launch_file, headless, override):
    """headless:=false becomes the override sim.headless=false, which the sim config must
    accept (it once had no such field, so the launch failed); true keeps the YAML's value."""
    nodes = [
        a
        for a in _run(launch_file, experiment=str(EXPERIMENT), headless=headless)
        if isinstance(a, Node)
    ]
    params = nodes[0].kwargs["parameters"][0]
    overrides = params.get("overrides", [])
    if override:
        assert override in overrides
    else:
        assert not [o for o in overrides if o.startswith("sim.headless")]
    cfg = load_config(EXPERIMENT, overrides)
    assert cfg.sim.headless is (headless == "true")


def test_launch_file_does_not_leak_fakes():
    """The fixture's fakes are gone after the tests that used them (monkeypatch restores)."""
    for name in (
        "launch",
        "launch.actions",
        "launch.substitutions",
        "launch_ros",
        "launch_ros.actions",
    ):
        mod = sys.modules.get(name)
        assert mod is None or getattr(mod, "Node", None) is not Node
        assert mod is None or getattr(mod, "LaunchDescription", None) is not LaunchDescription
    assert os.path.isfile(LAUNCH_FILE)
