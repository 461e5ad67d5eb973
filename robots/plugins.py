"""Discovers robot folders: every ``robots/<name>/robot.py`` registers robot ``<name>``, whose
description is its module's ``ROBOT``. Nothing to edit when a folder is added.

Light: lists folders, imports no robot.
"""

from __future__ import annotations

from pathlib import Path

from tether.core.registry import Entry

HERE = Path(__file__).resolve().parent


def _robot_folders() -> dict[str, Entry]:
    return {
        d.name: Entry(None, f"tether.robots.{d.name}.robot:ROBOT")
        for d in sorted(HERE.iterdir())
        if (d / "robot.py").is_file() and (d / "__init__.py").is_file()
    }


PLUGINS = {"robot": _robot_folders()}
