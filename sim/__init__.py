"""Simulators: backends (MuJoCo, ...), robot models and tasks. Backends import their engine
lazily, so importing this package (e.g. for a task's config) never loads a simulator."""

from __future__ import annotations

from typing import Any

__all__ = ["make_env"]


def __getattr__(name: str) -> Any:
    # make_env imports gymnasium: only on first use, so `import tether.sim` stays light
    if name == "make_env":
        from tether.sim.gym_env import make_env

        return make_env
    raise AttributeError(f"module 'tether.sim' has no attribute '{name}'")
