"""Launch a simulator + policy server graph from an experiment YAML (ROS 2 installs).

    ros2 launch tether_ros sim.launch.py experiment:=configs/experiments/panda_lift_expert.yaml \
        robot:=panda sim:=mujoco task:=lift policy:=scripted_expert headless:=true

The node list, parameters and environment come from tether_ros.graph.plan_graph, the same
function `tether up` uses, so both read the experiment YAML identically. Drone experiments
(``experiment:=configs/experiments/quad_hover_onnx.yaml``) get one sim bridge for the world
and one policy server per drone namespace (/cf0, /cf1, ... when sim.quadrotor.num_drones > 1).
"""

from __future__ import annotations

import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from tether.core.config import load_config
from tether.core.paths import find_given
from tether_ros.graph import graph_env, launch_overrides, plan_graph

DEFAULT_EXPERIMENT = "configs/experiments/panda_lift_expert.yaml"
ARGS = {
    "experiment": (DEFAULT_EXPERIMENT, "experiment YAML (path, or relative to the repository)"),
    "robot": ("", "robot name (overrides the YAML's robot)"),
    "sim": ("", "simulator backend type, e.g. mujoco (overrides sim.type)"),
    "task": ("", "task type, e.g. lift or reach (overrides task.type)"),
    "policy": ("", "policy type, e.g. scripted_expert (overrides policy.type)"),
    "headless": ("true", "run without a viewer window"),
}


def _graph(context, *args, **kwargs):
    get = {k: LaunchConfiguration(k).perform(context) for k in ARGS}
    # as given, else under the checkout or share/tether_ros (tether.core.paths)
    experiment = str(find_given(get["experiment"]))
    overrides = launch_overrides(
        get["robot"], get["sim"], get["task"], get["policy"], get["headless"]
    )
    cfg = load_config(experiment, overrides)
    # what graph_env adds to the environment (the user's exports win, as in `tether up`;
    # the DDS profile comes from the experiment)
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
