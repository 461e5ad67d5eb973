"""What the ROS layer registers (tether.core.registry discovers this table): hardware types
whose driver speaks ROS 2, and the ROS I/O of each robot kind. Light: strings only."""

from __future__ import annotations

from tether.core.registry import Entry

PLUGINS = {
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
