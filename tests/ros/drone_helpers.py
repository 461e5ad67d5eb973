"""Drone experiments for the ROS tests: Crazyflies in PyBullet (the registered backend), on the
floor or hovering, with a short watchdog."""

from __future__ import annotations

from typing import Any

import numpy as np

from tether.core.config import ExperimentConfig, parse_experiment
from tether.core.types import StepResult


def drone_cfg(
    start_z: float = 0.015, num_drones: int = 1, sim: str = "pybullet", **safety: Any
) -> ExperimentConfig:
    """Drones level at rest at height ``start_z`` (m; 0.015 = on the floor), 1 m apart along
    y; takeoff to 0.6 m. The task (waypoints: (0, 0, 1), which the tests never hold) only
    makes one long episode: it starts with the bridge and runs for 600 s of sim time."""
    return parse_experiment(
        {
            "name": "drone_test",
            "robot": "crazyflie",
            "sim": {
                "type": sim,
                "control_hz": 100,
                "cameras": [],
                "quadrotor": {"action_mode": "rotor_rpm", "num_drones": num_drones},
            },
            "task": {
                "type": "waypoints",
                "start": [0.0, 0.0, start_z],
                "waypoints": [[0.0, 0.0, 1.0]],
                "max_duration_s": 600,
            },
            "policy": {"type": "quad_pid"},
            "safety": {"watchdog_s": 0.2, **safety},
            "drones": {"takeoff_height": 0.6, "takeoff_speed": 0.8},
        },
        "drone_test",
    )


def spy_on_step(backend: Any) -> list[np.ndarray]:
    """Record every action the simulator receives."""
    received: list[np.ndarray] = []
    real = backend.step

    def spy(action: np.ndarray) -> StepResult:
        received.append(np.array(action, copy=True))
        return real(action)

    backend.step = spy
    return received
