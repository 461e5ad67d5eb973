"""launch/hardware.launch.py builds the same node graph as `tether up` for a hardware
experiment: the hardware bridge in place of the sim bridge, the mock driver in front of it
with mock:=true, nothing but the bridge (and policy server) with mock:=false. Checked against
the fakes of launch / launch_ros in test_launch_file.py (launch is not on PyPI)."""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("rclpy")
pytestmark = [pytest.mark.ros]

from test_launch_file import (  # noqa: E402
    DeclareLaunchArgument,
    FakeContext,
    LaunchConfiguration,
    LaunchDescription,
    Node,
    OpaqueFunction,
    SetEnvironmentVariable,
    _module,
    _node_view,
    _spec_view,
)

from tether.core.errors import ConfigError  # noqa: E402
from tether_ros.graph import plan_graph  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / "launch" / "hardware.launch.py"
EXPERIMENTS = REPO / "configs" / "experiments"


@pytest.fixture
def launch_file(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
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
    monkeypatch.delenv("AMENT_PREFIX_PATH", raising=False)
    spec = importlib.util.spec_from_file_location("tether_test_hardware_launch", LAUNCH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(launch_file: types.ModuleType, **args: str) -> list:
    ld = launch_file.generate_launch_description()
    entities = list(ld.kwargs["initial_entities"])
    declared = [e for e in entities if isinstance(e, DeclareLaunchArgument)]
    (opaque,) = [e for e in entities if isinstance(e, OpaqueFunction)]
    configs = {d.kwargs["name"]: d.kwargs["default_value"] for d in declared}
    assert not set(args) - set(configs), f"not declared: {set(args) - set(configs)}"
    configs.update(args)
    return list(opaque.kwargs["function"](FakeContext(configs)))


def test_declares_robot_experiment_and_mock(launch_file):
    ld = launch_file.generate_launch_description()
    declared = [e for e in ld.kwargs["initial_entities"] if isinstance(e, DeclareLaunchArgument)]
    assert {d.kwargs["name"] for d in declared} == {"robot", "experiment", "mock"}
    assert all(d.kwargs.get("description") for d in declared)


@pytest.mark.parametrize(
    ("robot", "experiment", "mock", "expected"),
    [
        ("panda", "panda_lift_mock", "true", ["mock_arm", "hardware_bridge", "policy_server"]),
        ("panda", "panda_lift_mock", "false", ["hardware_bridge", "policy_server"]),
        (
            "husky",
            "husky_go_to_goal_mock",
            "true",
            ["mock_base", "hardware_bridge", "policy_server"],
        ),
        ("crazyflie", "quad_mavlink_mock", "true", ["mock_autopilot", "hardware_bridge"]),
    ],
)
def test_nodes_match_plan_graph(
    launch_file, robot, experiment, mock, expected, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the robot's experiment resolves outside the repository too
    nodes = [a for a in _run(launch_file, robot=robot, mock=mock) if isinstance(a, Node)]
    plan = plan_graph(EXPERIMENTS / f"{experiment}.yaml", [f"hardware.mock={mock}"])
    assert [_node_view(n) for n in nodes] == [_spec_view(s) for s in plan]
    assert [n.kwargs["name"] for n in nodes] == expected
    assert "sim_bridge" not in [n.kwargs["executable"] for n in nodes]
    for n in nodes:
        assert n.kwargs["parameters"][0]["overrides"] == [f"hardware.mock={mock}"]
    mocks = [n for n in nodes if n.kwargs["name"].startswith("mock_")]
    if robot in ("panda", "husky") and mocks:  # the driver's namespace, not the bridge's
        assert mocks[0].kwargs["namespace"] == "driver"


def test_every_planned_executable_is_installed(launch_file):
    """Each executable a launch file names is a console script of the colcon package."""
    setup = (REPO / "ros2_ws/src/tether_ros/setup.py").read_text()
    scripts = dict(re.findall(r'"(\w+) = (tether_ros\.\w+:\w+)"', setup))
    for robot in ("panda", "husky", "crazyflie"):
        for n in _run(launch_file, robot=robot, mock="true"):
            if isinstance(n, Node):
                module, _, func = scripts[n.kwargs["executable"]].partition(":")
                assert callable(getattr(importlib.import_module(module), func))


def test_each_robot_finds_its_hardware_experiment(launch_file):
    """Discovered from the shipped experiments (a new robot's mock needs no edit here)."""
    found = {robot: path.name for robot, path in launch_file.hardware_experiments().items()}
    assert found["panda"] == "panda_lift_mock.yaml"
    assert found["husky"] == "husky_go_to_goal_mock.yaml"
    assert found["crazyflie"] == "quad_mavlink_mock.yaml"


def test_bad_arguments_fail_with_one_sentence(launch_file):
    with pytest.raises(ConfigError, match="robot:=r2d2: no hardware experiment"):
        _run(launch_file, robot="r2d2")
    with pytest.raises(ConfigError, match="mock:=maybe"):
        _run(launch_file, mock="maybe")
    with pytest.raises(ConfigError, match="no hardware: section"):
        _run(launch_file, experiment=str(EXPERIMENTS / "panda_lift_expert.yaml"))
