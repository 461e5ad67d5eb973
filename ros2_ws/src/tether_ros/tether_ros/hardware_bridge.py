"""hardware_bridge: the sim bridge's topics, services and command path, driving real (or
mock) hardware instead of a simulator.

The endpoints are those the sim bridge gives the robot's kind (tether_ros.kinds), built over
the robot ``hardware:`` names: arms and bases run the sim bridge's very command path
(joint_trajectory -> chunk validation -> SafetyFilter -> robot) on a RobotBackend, in
realtime, with the wall clock since the episode's reset as time; a drone gets the drone
endpoints (odom, cmd_vel, cmd_low_level, takeoff, land, emergency, estop, ~/reset) and the
same safety gate as in simulation. A ROS-side robot (a ros2_control arm, a cmd_vel base)
talks to its driver's topics under ``hardware.driver_namespace``.

On shutdown (``close()``, which run_node calls on SIGINT / SIGTERM while the ROS context is
still valid) the robot is left safe before the node goes: an arm holds the position it
measures now, a base gets a zero twist, a drone lands; each waits until its driver
acknowledged that last command.
"""

from __future__ import annotations

import sys
from typing import Any

from rclpy.node import Node

from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError
from tether.core.protocols import Robot
from tether.core.spec import RobotSpec
from tether_ros.kinds import BridgeIO, experiment_io
from tether_ros.runtime import experiment_from_params, run_node


class HardwareBridge(Node):
    """ROS 2 shell around the experiment's hardware; ``io`` holds the kind's endpoints.
    ``robot``: use this Robot instead of building the one ``hardware:`` names (tests)."""

    def __init__(
        self, cfg: ExperimentConfig | None = None, robot: Robot | None = None, **kwargs: Any
    ) -> None:
        super().__init__("hardware_bridge", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        if self.cfg.hardware is None:
            raise ConfigError(
                f"experiment '{self.cfg.name}' has no hardware: section (run sim_bridge)"
            )
        self.io: BridgeIO = experiment_io(self.cfg).hardware_bridge(self, self.cfg, robot)

    @property
    def spec(self) -> RobotSpec:
        return self.io.spec

    @property
    def rejected(self) -> int:
        """Commands refused so far (malformed, or refused by the safety gate)."""
        return self.io.rejected

    def close(self) -> None:
        self.io.close()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(HardwareBridge, args))


if __name__ == "__main__":
    main()
