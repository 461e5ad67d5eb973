"""Launch the hardware bridge + policy server graph of an experiment (ROS 2 installs).

    ros2 launch tether_ros hardware.launch.py robot:=panda mock:=true
    ros2 launch tether_ros hardware.launch.py experiment:=my_ur5.yaml mock:=false

The same graph as sim.launch.py with the sim bridge swapped for the hardware bridge (same
topics and services); ``mock:=true`` starts mock hardware with the driver's interface in
front of it (a ros2_control-like arm, a cmd_vel/odom base, or a PX4-like autopilot on UDP
loopback). ``mock:=false`` talks to the device; without one the bridge exits with one
sentence. The nodes come from tether_ros.graph.plan_graph, as for `tether up`.
"""

from __future__ import annotations

import os
from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from tether.core.config import load_config, read_yaml
from tether.core.errors import ConfigError
from tether.core.paths import data_dirs, find_given
from tether_ros.graph import graph_env, plan_graph

ARGS = {
    "robot": ("panda", "robot whose hardware experiment runs (one with a hardware: section)"),
    "experiment": ("", "experiment YAML with a hardware: section (default: the robot's)"),
    "mock": ("true", "true: mock hardware with the driver's interface; false: the real device"),
}


def hardware_experiments() -> dict[str, Path]:
    """Robot name -> the first (by file name) shipped experiment with a ``hardware:``
    section that runs it, from configs/experiments of Tether's data folders: a new robot's
    mock experiment is found without an edit here."""
    found: dict[str, Path] = {}
    for base in data_dirs():
        for path in sorted((base / "configs" / "experiments").glob("*.yaml")):
            try:
                cfg = load_config(path) if "hardware" in read_yaml(path) else None
            except ConfigError:
                continue  # not this launch file's to report
            if cfg is not None and cfg.hardware is not None:
                found.setdefault(cfg.robot, path)
    return found


def hardware_overrides(mock: str) -> list[str]:
    """Dotted overrides from the launch arguments (``mock:=false`` -> hardware.mock=false)."""
    value = mock.strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"mock:={mock}: expected true or false")
    return [f"hardware.mock={'true' if value in ('true', '1', 'yes') else 'false'}"]


def _graph(context, *args, **kwargs):
    get = {k: LaunchConfiguration(k).perform(context) for k in ARGS}
    experiment = get["experiment"]
    if not experiment:
        known = hardware_experiments()
        if get["robot"] not in known:
            raise ConfigError(
                f"robot:={get['robot']}: no hardware experiment for it (known: "
                f"{', '.join(known)}); pass experiment:=<yaml>"
            )
        experiment = str(known[get["robot"]])
    # as given, else under the checkout or share/tether_ros (tether.core.paths)
    experiment = str(find_given(experiment))
    overrides = hardware_overrides(get["mock"])
    if load_config(experiment).hardware is None:
        raise ConfigError(f"{experiment}: no hardware: section (use sim.launch.py)")
    cfg = load_config(experiment, overrides)
    env = graph_env(cfg)
    added = {k: v for k, v in env.items() if os.environ.get(k) != v}
    actions = [SetEnvironmentVariable(k, v) for k, v in sorted(added.items())]
    for spec in plan_graph(experiment, overrides):
        actions.append(
            Node(
                package=spec.package,
                executable=spec.executable,
                name=spec.name,
                namespace=spec.namespace or None,
                parameters=[spec.parameters],
                output="screen",
                emulate_tty=True,
            )
        )
    return actions


def generate_launch_description() -> LaunchDescription:
    declared = [
        DeclareLaunchArgument(k, default_value=v, description=d) for k, (v, d) in ARGS.items()
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=_graph)])
