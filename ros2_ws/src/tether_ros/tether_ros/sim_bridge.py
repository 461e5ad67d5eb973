"""sim_bridge: steps a simulator at the control rate in sim time and speaks ROS 2.

The endpoints are those of the robot's kind (tether_ros.kinds): an arm's joint_states and
joint_trajectory, a mobile base's odom / scan / base_pose / cmd_vel as well, each drone's
odom / imu / cmd_vel / cmd_low_level and takeoff / land / emergency services. Every kind
publishes /clock, the task's ``objects/<name>/pose``, the cameras and ``episode_status``,
subscribes ``estop`` (std_msgs/Bool) and serves ``~/reset``, ``~/start_episode`` and
``~/stop_episode`` (std_srvs/Trigger; tether_ros.kinds.runner.EpisodeBridge). Every command
passes the kind's safety gate; a malformed one is logged, counted and dropped.
"""

from __future__ import annotations

import sys
from typing import Any

from rclpy.node import Node

from tether.core.config import ExperimentConfig
from tether.core.protocols import SimBackend
from tether.core.spec import RobotSpec
from tether_ros.kinds import BridgeIO, experiment_io
from tether_ros.runtime import experiment_from_params, run_node


class SimBridge(Node):
    """ROS 2 shell around the simulated world; ``io`` holds the kind's endpoints and the
    world (``io.runner``: the SimRunner of an arm or base, ``io.fleet``: the drones).
    ``backend``: simulate with this one instead of building the experiment's."""

    def __init__(
        self,
        cfg: ExperimentConfig | None = None,
        backend: SimBackend | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__("sim_bridge", start_parameter_services=False, **kwargs)
        self.cfg = cfg or experiment_from_params(self)
        self.io: BridgeIO = experiment_io(self.cfg).sim_bridge(self, self.cfg, backend)

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
    sys.exit(run_node(SimBridge, args))


if __name__ == "__main__":
    main()
