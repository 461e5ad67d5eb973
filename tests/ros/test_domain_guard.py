"""One graph per ROS 2 domain: a graph refuses to start where another already runs (a node of
the same name in its namespace, or, for a simulation, a /clock of another graph), before any
of its nodes starts; a sim bridge started some other way (a launch file) refuses to come up
beside another graph's /clock (hardware bridges, which may share a domain in namespaces, do
not check). Two graphs on one domain mix silently otherwise: each sim
bridge takes both policies' commands, each supervisor's resets reach both bridges, and a
recording saves the other's episodes (found with two `tether record` runs side by side)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.mujoco]

from rclpy.node import Node  # noqa: E402
from ros_helpers import ros_context  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402

from tether.core.config import load_config  # noqa: E402
from tether.core.errors import TetherError  # noqa: E402
from tether_ros import graph as graph_mod  # noqa: E402
from tether_ros import interface as itf  # noqa: E402
from tether_ros.graph import GraphProcesses, domain_conflict, graph_env, plan_graph  # noqa: E402
from tether_ros.sim_bridge import SimBridge  # noqa: E402

EXPERIMENT = "configs/experiments/panda_lift_expert.yaml"


def _graph(repo, *overrides: str):  # noqa: ANN001, ANN202
    path = repo / EXPERIMENT
    cfg = load_config(path, list(overrides))
    return plan_graph(path, list(overrides)), graph_env(cfg)


def _wait_seen(probe: Node, pred, timeout_s: float = 5.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pred()


def test_a_free_domain_starts_and_a_busy_one_is_refused_before_any_node(  # noqa: ANN001
    repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, env = _graph(repo)
    assert domain_conflict(nodes, env) is None  # nothing else on the test's domain
    # a loaded machine (the suite's other worker) can take longer than the default to
    # discover: listen longer here (a conflict ends the listening as soon as it is seen)
    monkeypatch.setattr(graph_mod, "DOMAIN_PROBE_S", 10.0)
    with ros_context() as ctx:
        other = Node("other_sim", context=ctx)
        other.create_publisher(Clock, itf.CLOCK, itf.CLOCK_QOS)
        _wait_seen(other, lambda: other.count_publishers(itf.CLOCK) == 1)
        why = domain_conflict(nodes, env)
        assert why is not None and "a /clock published by another graph" in why
        assert f"ROS_DOMAIN_ID {env.get('ROS_DOMAIN_ID', '0')}" in why
        graph = GraphProcesses(nodes, env)
        try:
            with pytest.raises(TetherError, match="two graphs on one domain"):
                graph.start()
            assert graph.procs == {}  # refused before a single node process started
        finally:
            graph.stop()  # (a start that was not refused leaves no graph behind)
        other.destroy_node()
    # the other simulator gone, the domain is free again
    assert domain_conflict(nodes, env, wait_s=0.3) is None


def test_a_node_of_the_graph_already_running_is_named(repo) -> None:  # noqa: ANN001
    """A policy server of another graph in the same namespace (no /clock needed: a hardware
    graph has none) is found by name; one in another namespace is not in the way."""
    nodes, env = _graph(repo, "ros.namespace=arm1")
    assert any(n.name == "policy_server" for n in nodes)
    with ros_context() as ctx:
        elsewhere = Node("policy_server", namespace="arm2", context=ctx)
        _wait_seen(elsewhere, lambda: ("policy_server", "/arm2") in _names(elsewhere))
        assert domain_conflict(nodes, env, wait_s=0.3) is None
        same = Node("policy_server", namespace="arm1", context=ctx)
        _wait_seen(same, lambda: ("policy_server", "/arm1") in _names(same))
        why = domain_conflict(nodes, env, wait_s=10.0)
        assert why is not None and "nodes /arm1/policy_server" in why
        same.destroy_node()
        elsewhere.destroy_node()


def _names(node: Node) -> list[tuple[str, str]]:
    return node.get_node_names_and_namespaces()


def test_a_sim_bridge_refuses_to_run_beside_another_simulators_clock(repo) -> None:  # noqa: ANN001
    cfg = load_config(repo / EXPERIMENT)
    with ros_context() as ctx:
        other = Node("other_sim", context=ctx)
        other.create_publisher(Clock, itf.CLOCK, itf.CLOCK_QOS)
        _wait_seen(other, lambda: other.count_publishers(itf.CLOCK) == 1)
        with pytest.raises(TetherError, match="another graph already publishes /clock"):
            SimBridge(cfg, context=ctx)
        other.destroy_node()
        bridge = SimBridge(cfg, context=ctx)  # alone on the domain: it comes up
        try:
            assert bridge.count_publishers(itf.CLOCK) == 1
        finally:
            bridge.close()
            bridge.destroy_node()
