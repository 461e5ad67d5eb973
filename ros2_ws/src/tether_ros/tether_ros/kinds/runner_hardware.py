"""A runner bridge on real (or mock) hardware: the sim bridge's command path for arms and
mobile bases (joint_trajectory / cmd_vel -> validation -> SafetyFilter -> robot), with a
Robot behind a RobotBackend in place of the simulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tether.core.config import ExperimentConfig
from tether.core.errors import TetherError
from tether.core.protocols import Robot
from tether_ros.kinds.runner import RunnerBridge, TopicsFactory

if TYPE_CHECKING:
    from rclpy.node import Node


class HardwareRunnerBridge(RunnerBridge):
    """RunnerBridge over a Robot: ``robot`` (or the one ``hardware:`` names, built on
    ``node``) behind a RobotBackend, so joint_trajectory -> chunk validation ->
    SafetyFilter -> robot is the sim bridge's code. Time is the wall clock since the
    episode's reset; always realtime (RobotBackend.realtime_only: the bridge's timer paces
    the steps).

    On close the safety filter's stale-command output goes out once more as the last
    command, whatever the policy last asked for (an arm holds the position it measures
    now, a base gets a zero twist); the robot then waits until its driver acknowledged it.
    """

    # robots may share a domain (in their namespaces); only simulations refuse another /clock
    sole_clock = False

    def __init__(
        self, node: Node, cfg: ExperimentConfig, robot: Robot | None, topics: TopicsFactory
    ) -> None:
        from tether.core.experiment import build_task, robot_spec
        from tether.hardware.robots.backend import RobotBackend
        from tether.hardware.robots.factory import build_robot

        self._ready = False  # the robot connects while the node is built (timers may fire)
        assert cfg.hardware is not None
        robot = robot or build_robot(cfg.hardware, robot_spec(cfg), node)
        # pace=False: a sleep in the timer's callback would hold the executor (and the
        # policy's answer) back
        super().__init__(node, cfg, RobotBackend(robot, task=build_task(cfg), pace=False), topics)
        self._ready = True

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
        if self._ready and getattr(self.runner.backend, "connected", False):
            try:
                out = self.safe_stop()
                self.node.get_logger().info(f"stopped: sent the safe command {np.round(out, 4)}")
            except TetherError as exc:  # the driver went away first: nothing to tell it
                self.node.get_logger().error(f"could not send the safe stop: {exc}")
        super().close()
