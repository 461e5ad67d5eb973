"""What the ROS layer registers (tether.core.registry discovers this table): hardware types
whose driver speaks ROS 2, and the ROS I/O of each robot kind. Light: strings only."""

from __future__ import annotations

from tether.core.registry import Entry

PLUGINS = {
    # a simulator reached over ROS 2 (its backend lives in the sim bridge's graph: the
    # option ``ros_node`` has the bridge build it with its node)
    "sim": {
        "isaac_ros": Entry(
            "tether.sim.isaac.config_isaac:IsaacRosConfig",
            "tether_ros.isaac.backend:build_isaac_ros",
            {
                "ros_node": True,
                "standin_node": "isaac_standin",
                "standin_module": "tether_ros.isaac.standin",
            },
        ),
    },
    # the sim section of a mobile base over isaac_ros carries the lidar settings (the arm's
    # is the engine's own config class)
    "backend": {
        "isaac_ros/mobile_base": Entry(
            "tether.sim.isaac.config_isaac:IsaacRosMobileBaseConfig",
            "tether_ros.isaac.backend:build_isaac_ros",
        ),
    },
    "hardware": {
        "jtc_arm": Entry(
            None,
            "tether_ros.drivers.jtc_arm:build_jtc_arm",
            {"mock_node": "mock_arm", "mock_namespace": "driver", "kind": "arm"},
        ),
        "twist_base": Entry(
            None,
            "tether_ros.drivers.twist_base:build_twist_base",
            {"mock_node": "mock_base", "mock_namespace": "driver", "kind": "mobile_base"},
        ),
    },
    # the ROS 2 I/O of each robot kind (tether_ros.kinds): what every node speaks to it
    "ros_io": {
        "arm": Entry(None, "tether_ros.kinds.arm:ArmIO"),
        "mobile_base": Entry(None, "tether_ros.kinds.mobile_base:MobileBaseIO"),
        "quadcopter": Entry(None, "tether_ros.kinds.quadcopter:QuadcopterIO"),
    },
}
