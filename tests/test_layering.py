"""Arrows only point down: core <- robots <- sim / policies / hardware <- tether_ros <- cli.

Every module of each layer is parsed (no import runs) and every import it makes, at the top
level or inside a function, must name its own layer or one below it. sim, policies and
hardware are siblings: none of them imports another (a policy that needs a simulator gets it
through a protocol; a hardware adapter that speaks ROS lives in tether_ros). A string handed
to ``importlib.import_module`` counts as an import. Registry targets ("module:attr" strings in
a layer's plugins.py) are not imports: the registry resolves them on demand.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# folder -> (layer, dotted package of the folder)
LAYERS = {
    "core": ("core", "tether.core"),
    "robots": ("robots", "tether.robots"),
    "sim": ("sim", "tether.sim"),
    "policies": ("policies", "tether.policies"),
    "hardware": ("hardware", "tether.hardware"),
    "ros2_ws/src/tether_ros/tether_ros": ("tether_ros", "tether_ros"),
    "cli": ("cli", "tether.cli"),
}
BELOW_ENGINES = {"core", "robots"}
# layer -> the layers its modules may import
ALLOWED = {
    "core": {"core"},
    "robots": {"core", "robots"},
    "sim": BELOW_ENGINES | {"sim"},
    "policies": BELOW_ENGINES | {"policies"},
    "hardware": BELOW_ENGINES | {"hardware"},
    "tether_ros": BELOW_ENGINES | {"sim", "policies", "hardware", "tether_ros"},
    "cli": {"core", "robots", "sim", "policies", "hardware", "tether_ros", "cli"},
}
# Imports that still point the wrong way, as (file, imported module) pairs. Each one is a
# bug being fixed; the list only shrinks, and an entry that no longer occurs fails the test
# (remove it). Do not add to it: fix the import (move the code down, or hand the caller's
# object in through a protocol).
KNOWN: set[tuple[str, str]] = set()


def layer_of(module: str) -> str | None:
    """The layer a dotted module belongs to; None for anything outside Tether."""
    parts = module.split(".")
    if parts[0] == "tether_ros":
        return "tether_ros"
    if parts[0] == "tether" and len(parts) > 1:
        for layer, package in LAYERS.values():
            if package == f"tether.{parts[1]}":
                return layer
    return None


def package_of(path: Path) -> str:
    """The dotted package a module file sits in (``sim/mujoco/backend.py`` -> tether.sim.mujoco)."""
    for folder, (_, package) in LAYERS.items():
        root = REPO / folder
        if path.is_relative_to(root):
            rel = path.parent.relative_to(root).parts
            return ".".join((package, *rel))
    raise AssertionError(f"{path} is in no layer")


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in a module of ``package``, relative ones made
    absolute."""
    tree = ast.parse(source)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # `from tether import sim` imports the module tether.sim
            if module == "tether":
                out += [(node.lineno, f"tether.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, module))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node.lineno, node.args[0].value))
    return out


def modules() -> list[tuple[str, Path]]:
    out = []
    for folder, (layer, _) in LAYERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            if not any(p.startswith(".") or p == "__pycache__" for p in path.parts):
                out.append((layer, path))
    return out


def violations() -> list[tuple[str, int, str, str]]:
    """(file, line, module, why) for every import that points up or across the stack."""
    found = []
    for layer, path in modules():
        rel = str(path.relative_to(REPO))
        for line, module in imported_modules(path.read_text(), package_of(path)):
            target = layer_of(module)
            if target is not None and target not in ALLOWED[layer]:
                found.append((rel, line, module, f"{layer} imports {target}"))
    return sorted(found)


def test_every_layer_has_modules():
    layers = {layer for layer, _ in modules()}
    assert layers == set(ALLOWED), f"no modules found for {set(ALLOWED) - layers}"


def test_imports_only_point_down():
    found = violations()
    new = [v for v in found if (v[0], v[2]) not in KNOWN]
    assert not new, "imports that point up or across the stack:\n" + "\n".join(
        f"  {file}:{line}: import {module} ({why})" for file, line, module, why in new
    )
    stale = KNOWN - {(v[0], v[2]) for v in found}
    assert not stale, f"fixed, remove from KNOWN: {sorted(stale)}"


def test_the_checker_sees_function_level_relative_and_dynamic_imports():
    """The rule can fail: a policy module that reaches into the simulator, into tether_ros, the
    cli and the hardware layer by each form of import is reported on every one of those lines."""
    source = (
        "import numpy\n"
        "from tether.core.config import load_config\n"
        "def f():\n"
        "    from tether.sim.runner import SimRunner\n"
        "    import tether_ros.graph\n"
        "    from ... import cli\n"
        "    importlib.import_module('tether.hardware.mock')\n"
        "    from .model import Net\n"
    )
    got = set(imported_modules(source, "tether.policies.diffusion"))
    assert (8, "tether.policies.diffusion.model") in got
    assert {(4, "tether.sim.runner"), (5, "tether_ros.graph"), (6, "tether.cli")} <= got
    assert (7, "tether.hardware.mock") in got
    bad = {m for _, m in got if layer_of(m) not in (None, *ALLOWED["policies"])}
    assert bad == {"tether.sim.runner", "tether_ros.graph", "tether.cli", "tether.hardware.mock"}
