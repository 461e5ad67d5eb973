"""ament_python package of Tether's ROS 2 nodes. The `tether` distribution (the repository's
pyproject.toml) must be installed in the same Python environment."""

import os
from glob import glob

from setuptools import find_packages, setup

package_name = "tether_ros"


def model_files(root: str) -> list[tuple[str, list[str]]]:
    """data_files for every folder under ``root`` that holds files, subfolders included (a
    base + residual model keeps its base's exported folder in ``base/``), at the same place
    under share/tether_ros."""
    out = []
    for folder, _, files in sorted(os.walk(root, followlinks=True)):
        if folder != root and files:
            out.append((f"share/{package_name}/{folder}", [f"{folder}/{f}" for f in sorted(files)]))
    return out


setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(include=[package_name, f"{package_name}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        # launch/, configs/ and models/ are links to the repository's folders; an installed
        # experiment's relative paths (models/..., configs/dds/...) resolve against
        # share/tether_ros, its root (tether.core.paths)
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/configs/experiments", glob("configs/experiments/*.yaml")),
        ("share/" + package_name + "/configs/dds", glob("configs/dds/*.xml")),
        *model_files("models"),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Tether developers",
    maintainer_email="dev@tether.invalid",
    description="Tether ROS 2 nodes: sim_bridge and policy_server.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "sim_bridge = tether_ros.sim_bridge:main",
            "policy_server = tether_ros.policy_server:main",
            "recorder = tether_ros.recorder:main",
            "teleop = tether_ros.teleop:main",
            "chunk_executor = tether_ros.chunk_executor:main",
            "hardware_bridge = tether_ros.hardware_bridge:main",
            "mock_arm = tether_ros.mock_nodes:arm_main",
            "mock_base = tether_ros.mock_nodes:base_main",
            "mock_autopilot = tether_ros.mock_nodes:autopilot_main",
            "isaac_standin = tether_ros.isaac.standin:main",
        ],
    },
)
