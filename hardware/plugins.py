"""What the hardware layer registers (tether.core.registry discovers this table): device
types of a ``hardware:`` section that talk to their device without ROS. Light: strings only.
ROS-side types (jtc_arm, twist_base) are registered by tether_ros."""

from __future__ import annotations

from tether.core.registry import Entry

PLUGINS = {
    "hardware": {
        # mock_node: the node `hardware.mock: true` starts (tether_ros.mock_nodes);
        # mock_namespace: where it runs ("bridge": the bridge's namespace, "driver": the
        # driver namespace, where a real driver's topics would be)
        "mavlink": Entry(
            "tether.hardware.mavlink.config_mavlink:MavlinkConfig",
            "tether.hardware.robots.factory:build_mavlink",
            {"mock_node": "mock_autopilot", "mock_namespace": "bridge", "kind": "quadcopter"},
        ),
        "crazyflie": Entry(
            "tether.hardware.crazyflie:CrazyflieConfig",
            "tether.hardware.robots.factory:build_crazyflie",
            {"kind": "quadcopter"},
        ),
    }
}
