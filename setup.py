"""Packages are discovered, not typed: every folder under a ``package-dir`` root (pyproject.toml)
that holds an ``__init__.py`` is a package, named by its root's mapping
(``robots/ur5e`` -> ``tether.robots.ur5e``). Everything else is in pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    roots = tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    packages = []
    for name, folder in roots.items():
        root = HERE / folder
        for init in sorted(root.rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            if any(
                part.startswith((".", "_")) or part in ("build", "install", "log")
                for part in rel.parts
            ):
                continue
            packages.append(".".join((name, *rel.parts)) if rel.parts else name)
    return packages


setup(packages=discover())
