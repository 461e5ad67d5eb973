"""Build ros2_ws with colcon into a temporary workspace and run its installed executables the
way `ros2 launch` (launch_ros) does, for the tests of the installed package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PKG = "tether_ros"
# variables a sourced workspace would set: dropped, so only install/setup.bash provides them
WORKSPACE_VARS = ("PYTHONPATH", "AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH", "CMAKE_PREFIX_PATH")


def colcon() -> list[str]:
    """The venv's colcon (next to this interpreter), else one on PATH; skip if there is none."""
    beside = Path(sys.executable).with_name("colcon")
    found = str(beside) if beside.exists() else shutil.which("colcon")
    if found is None:
        pytest.skip("colcon is not installed (pip install colcon-common-extensions)")
    return [found]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in WORKSPACE_VARS}
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return env


def build_workspace(
    ws: Path, symlink: bool = False, prepare: Callable[[Path], None] | None = None
) -> Path:
    """Copy ros2_ws/src into ``ws`` (links to launch/, configs/, models/ followed, so the real
    tree stays clean), let ``prepare`` add files to the copied package (its folder is the
    argument), `colcon build` it; returns ``ws/install``."""
    shutil.copytree(
        REPO / "ros2_ws" / "src",
        ws / "src",
        symlinks=False,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    if prepare is not None:
        prepare(ws / "src" / PKG)
    flags = ["--symlink-install"] if symlink else []
    out = subprocess.run(
        [*colcon(), "build", "--base-paths", "src", "--event-handlers", "console_direct+", *flags],
        cwd=ws,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, f"colcon build failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    return ws / "install"


def sourced_env(install: Path) -> dict[str, str]:
    """The environment after `source install/setup.bash` in a clean shell."""
    out = subprocess.run(
        ["bash", "-c", "source install/setup.bash && env -0"],
        cwd=install.parent,
        env=clean_env(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    pairs = (item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def launch_ros_command(
    install: Path, executable: str, name: str, namespace: str, params_file: Path
) -> list[str]:
    """What launch_ros runs for ``Node(package, executable, name, namespace, parameters)``:
    the installed console script with a node-name remap, a namespace remap and the
    parameters written to a YAML file."""
    cmd = [str(install / PKG / "lib" / PKG / executable), "--ros-args", "-r", f"__node:={name}"]
    if namespace:
        cmd += ["-r", f"__ns:=/{namespace.strip('/')}"]
    return [*cmd, "--params-file", str(params_file)]


def write_params_file(path: Path, parameters: dict[str, object]) -> Path:
    """A parameters file as launch_ros writes one for a dict of parameters."""
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": parameters}}))
    return path
