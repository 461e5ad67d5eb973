"""The drone node graph: one sim bridge for the world, one policy server per drone namespace,
identical from `tether up` (plan_graph) and launch/sim.launch.py."""

from __future__ import annotations

from pathlib import Path

import yaml
from test_launch_file import _node_view, _run, _spec_view, launch_file  # noqa: F401

from tether.core.config import load_config
from tether.core.experiment import robot_spec
from tether_ros.graph import GraphProcesses, plan_graph

REPO = Path(__file__).resolve().parents[2]
QUAD = REPO / "configs" / "experiments" / "quad_pid_hover.yaml"


def _fleet_yaml(tmp_path: Path, n: int, namespace: str = "") -> Path:
    data = yaml.safe_load(QUAD.read_text())
    data["sim"]["quadrotor"]["num_drones"] = n
    if namespace:
        data.setdefault("ros", {})["namespace"] = namespace
    path = tmp_path / f"fleet{n}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_one_policy_server_per_drone_each_seeing_one_drone(tmp_path):
    exp = _fleet_yaml(tmp_path, 3, namespace="lab")
    nodes = plan_graph(exp, ["policy.horizon=2"])
    assert [(n.name, n.namespace) for n in nodes] == [
        ("sim_bridge", "lab"),
        ("policy_server", "lab/cf0"),
        ("policy_server", "lab/cf1"),
        ("policy_server", "lab/cf2"),
    ]
    assert len({n.key for n in nodes}) == len(nodes)  # processes and logs do not collide
    bridge_cfg = load_config(exp, nodes[0].parameters.get("overrides"))
    assert robot_spec(bridge_cfg).action.dim == 12  # the bridge simulates all three
    for server in nodes[1:]:
        overrides = server.parameters["overrides"]
        assert overrides[0] == "policy.horizon=2"  # the user's overrides come first
        spec = robot_spec(load_config(exp, overrides))
        assert spec.action.dim == 4 and spec.action.names[0] == "rotor0"


def test_a_lone_drone_has_no_namespace_and_no_override():
    nodes = plan_graph(QUAD)
    assert [(n.name, n.namespace, n.key) for n in nodes] == [
        ("sim_bridge", "", "sim_bridge"),
        ("policy_server", "", "policy_server"),
    ]
    assert "overrides" not in nodes[1].parameters


def test_graph_processes_keep_per_drone_logs_apart(tmp_path):
    nodes = plan_graph(_fleet_yaml(tmp_path, 2))
    graph = GraphProcesses(nodes, env={}, log_dir=tmp_path / "logs")
    assert [n.key for n in graph.nodes] == ["sim_bridge", "cf0_policy_server", "cf1_policy_server"]


def test_launch_file_builds_the_drone_graph(launch_file, tmp_path):  # noqa: F811
    exp = _fleet_yaml(tmp_path, 2)
    actions = _run(launch_file, experiment=str(exp))
    nodes = [a for a in actions if type(a).__name__ == "Node"]
    assert [_node_view(n) for n in nodes] == [_spec_view(s) for s in plan_graph(exp, [])]
    assert [n.kwargs["namespace"] for n in nodes] == [None, "cf0", "cf1"]


def test_a_hardware_fleet_gets_a_mock_bridge_and_server_per_drone():
    """hardware.fleet: per member a mock autopilot, a hardware bridge and a velocity policy
    server in its namespace, each on the one-drone experiment with the member's device."""
    exp = REPO / "configs" / "experiments" / "swarm_mavlink_mock.yaml"
    nodes = plan_graph(exp, ["ros.namespace=lab"])
    assert sorted((n.name, n.namespace) for n in nodes) == sorted(
        (name, f"lab/{ns}")
        for ns in ("cf0", "cf1")
        for name in ("mock_autopilot", "hardware_bridge", "policy_server")
    )
    urls = set()
    for n in nodes:
        one = load_config(exp, n.parameters["overrides"])
        assert one.hardware is not None and one.hardware.fleet == []
        assert one.hardware.origin == (
            (-1.0, 0.0, 0.0) if n.namespace.endswith("cf0") else (1.0, 0.0, 0.0)
        )
        assert robot_spec(one).action.mode == "velocity_setpoint"  # what a real drone takes
        urls.add((n.namespace, one.hardware.device["url"]))
    assert len({u for _, u in urls}) == 2  # one link per drone
