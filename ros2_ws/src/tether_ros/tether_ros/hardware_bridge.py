"""hardware_bridge: the sim bridge's topics, services and command path, driving real (or
mock) hardware instead of a simulator.

Arms and bases: SimBridge with a ``RobotBackend`` (tether.hardware.robots.backend) in place of
the simulator, so joint_trajectory -> chunk validation -> SafetyFilter -> robot is the very
code sim_bridge runs; the robot is a ``JtcArm`` (ros2_control JointTrajectoryController) or a
``TwistBase`` (cmd_vel / odom) talking to the driver's topics under
``hardware.driver_namespace``. Time is the wall clock since the episode's reset, and the
bridge always runs in realtime. Quadcopters (MAVLink, Crazyflie) get the drone endpoints of
the sim bridge (odom, cmd_vel, cmd_low_level, takeoff, land, emergency, estop, ~/reset):
see tether_ros.hardware_drone.

On shutdown (``close()``, which run_node calls on SIGINT / SIGTERM while the ROS context is
still valid) the bridge sends the safety filter's stale-command output once more as its last
command, whatever the policy last asked for: an arm holds the position it measures now, a
base gets a zero twist (a drone lands: HardwareDroneBridge.close); the robot then waits until
its driver acknowledged it (reliable QoS) before the node goes.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from tether.core.config import ExperimentConfig
from tether.core.errors import ConfigError, TetherError
from tether.core.experiment import build_task
from tether.core.protocols import Robot, SimBackend
from tether.hardware.robots.backend import RobotBackend
from tether.hardware.robots.factory import build_robot
from tether_ros.hardware_drone import HardwareDroneBridge
from tether_ros.runtime import run_node
from tether_ros.sim_bridge import SimBridge


class HardwareBridge(SimBridge):
    """SimBridge over hardware. ``robot``: use this Robot instead of building the one
    ``hardware:`` names (tests)."""

    def __init__(
        self, cfg: ExperimentConfig | None = None, robot: Robot | None = None, **kwargs: Any
    ) -> None:
        self._robot = robot
        self._ready = False  # the robot connects while the node is built (timers may fire)
        super().__init__(cfg, None, node_name="hardware_bridge", **kwargs)
        self._ready = True

    def _hardware(self) -> Any:
        hw = self.cfg.hardware
        if hw is None:
            raise ConfigError(
                f"experiment '{self.cfg.name}' has no hardware: section (run sim_bridge)"
            )
        if hw.type in ("jtc_arm", "twist_base") and (
            hw.driver_namespace.strip("/") == self.get_namespace().strip("/")
        ):
            raise ConfigError(
                f"hardware.driver_namespace '{hw.driver_namespace}' is the bridge's own "
                "namespace: the driver's topics would collide with Tether's (set ros.namespace "
                "or hardware.driver_namespace apart)"
            )
        return hw

    def _make_drones(self, backend: SimBackend | None) -> Any:
        hw = self._hardware()
        robot = self._robot or build_robot(hw, None, self)
        return HardwareDroneBridge(self, self.cfg, robot)

    def _make_backend(self, backend: SimBackend | None) -> SimBackend:
        from tether.core.experiment import robot_spec

        hw = self._hardware()
        if self.cfg.ros.rate_mode != "realtime":
            self.get_logger().info("hardware runs in realtime (ros.rate_mode ignored)")
            ros = self.cfg.ros.model_copy(update={"rate_mode": "realtime"})
            self.cfg = self.cfg.model_copy(update={"ros": ros})
        robot = self._robot or build_robot(hw, robot_spec(self.cfg), self)
        # the bridge's timer paces the steps: a sleep in its callback would hold the executor
        # (and the policy's answer) back
        return RobotBackend(robot, task=build_task(self.cfg), pace=False)

    def _idle_publish(self) -> None:
        """Between episodes the robot may still move (a person pushes it, a driver settles):
        publish fresh state, not the last step's."""
        if not self._ready:
            return
        if not self.runner.done:
            self.runner.obs = self.runner.backend.observe()
        super()._idle_publish()

    def safe_stop(self) -> np.ndarray:
        """Send the watchdog's safe output as the last command: e-stop the safety filter
        (nothing the policy sends any more applies) and step once, so an arm holds where it
        is measured now and a base or other velocity mode gets zeros. Returns that action."""
        runner = self.runner
        runner.safety.engage_estop()
        obs = runner.backend.observe()
        out, _ = runner.safety.output(obs.stamp_ns * 1e-9, runner.measured(obs))
        runner.backend.step(out)
        return out

    def close(self) -> None:
        if self.drones is None and self._ready and getattr(self.runner.backend, "connected", False):
            try:
                out = self.safe_stop()
                self.get_logger().info(f"stopped: sent the safe command {np.round(out, 4)}")
            except TetherError as exc:  # the driver went away first: nothing to tell it
                self.get_logger().error(f"could not send the safe stop: {exc}")
        super().close()


def main(args: list[str] | None = None) -> None:
    sys.exit(run_node(HardwareBridge, args))


if __name__ == "__main__":
    main()
