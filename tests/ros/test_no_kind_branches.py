"""The nodes dispatch through the robot kind's adapter (tether_ros.kinds) and never branch on a
kind or a robot: no comparison with a kind, a registered robot's name or a hardware type,
no ``<x>.kind`` / ``robot_kind(...)`` in a comparison, no table keyed by them. So a new robot
of a known kind (robots/<name>/) runs through these nodes without an edit. Parses the source:
no ROS needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tether.core import registry

PACKAGE = Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "tether_ros" / "tether_ros"
NODES = (
    "sim_bridge.py",
    "hardware_bridge.py",
    "policy_server.py",
    "teleop.py",
    "graph.py",
    "chunk_executor.py",
    "recorder.py",
    "supervisor.py",
)
KINDS = ("arm", "mobile_base", "quadcopter")


def _forbidden_names() -> set[str]:
    return {
        *KINDS,
        *registry.available("ros_io"),
        *registry.available("robot"),
        *registry.available("hardware"),
    }


def _strings(node: ast.AST) -> list[str]:
    """String constants of a comparison operand (tuples, lists and sets included)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def _is_kind(node: ast.AST) -> bool:
    """``kind``, ``<x>.kind`` or ``robot_kind(...)``."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", "")
        return name == "robot_kind"
    return False


def kind_branches(source: str, forbidden: set[str]) -> list[str]:
    """``line: code`` of every comparison with a kind / robot / hardware-type name or a kind
    expression, and every dict keyed by such names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names = {s for op in operands for s in _strings(op)}
            if names & forbidden or any(_is_kind(op) for op in operands):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = {s for k in node.keys if k is not None for s in _strings(k)}
            if keys & forbidden:
                found.append(f"{node.lineno}: a table keyed by {sorted(keys & forbidden)}")
        elif isinstance(node, ast.Match):
            found.append(f"{node.lineno}: match statement")
    return found


def test_the_guard_catches_what_it_forbids():
    forbidden = _forbidden_names()
    assert {"arm", "panda", "husky", "crazyflie", "jtc_arm"} <= forbidden
    bad = [
        'if robot_kind(cfg.robot) == "quadcopter": pass',
        'if self.spec.kind == "mobile_base": pass',
        "x = y if kind != ARM else z",
        'if spec.name != "panda": pass',
        'if hw.type in ("jtc_arm", "twist_base"): pass',
        'mocks = {"jtc_arm": "mock_arm"}',
    ]
    for code in bad:
        assert kind_branches(code, forbidden), code
    assert not kind_branches('if key == "state" and policy.type == "onnx": pass', forbidden)


@pytest.mark.parametrize("name", NODES)
def test_node_has_no_kind_or_robot_branch(name):
    found = kind_branches((PACKAGE / name).read_text(), _forbidden_names())
    assert not found, f"{name} branches on a kind or robot: {found}"
