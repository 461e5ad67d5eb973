"""Shared fixtures: a Panda spec, environment for headless rendering and Fast DDS."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "configs/dds/fastdds_shm.xml"))


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def panda():
    from tether.sim.robots.panda import panda_spec

    return panda_spec(control_hz=100.0)


# Every test session gets its own DDS domain, so concurrent runs (or stray nodes) on this
# machine never cross-talk. Nodes started as subprocesses inherit it.
if "ROS_DOMAIN_ID" not in os.environ:
    os.environ["ROS_DOMAIN_ID"] = str(100 + os.getpid() % 100)
