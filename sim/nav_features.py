"""What the learned planner sees, computed in training by the batched world (nav_world.py);
the exported graph computes the same from the raw observation (tether.policies.nav.export).

Features (F = SECTORS + 5,) float32 per base:

- the lidar downsampled to ``SECTORS`` sectors, each the nearest return in it, clipped to
  ``RANGE_CAP`` m and divided by it (1 = nothing near);
- the goal in the base frame as the odometry sees it: distance / GOAL_CAP (clipped to 1),
  cos and sin of its bearing;
- the base's velocity as wheel odometry measures it (forward m/s, yaw rate rad/s: the last
  commands after the acceleration ramp), divided by the velocity bounds (in [-1, 1]).

What a real base has: a 2-D scan, wheel odometry and the goal in the odom frame; never the
true pose. The exported graph computes the same from the raw ``state``
(odometry x, y, yaw, vx, wz first), the goal (``env_state[0:2]``) and ``scan``.
"""

from __future__ import annotations

import numpy as np

SECTORS = 32
RANGE_CAP = 5.0  # m
GOAL_CAP = 10.0  # m
FEATURES = SECTORS + 5


def sectors(scan: np.ndarray, n: int = SECTORS) -> np.ndarray:
    """(..., B) ranges -> (..., n) nearest return per sector (B divisible by n)."""
    b = scan.shape[-1]
    if b % n:
        raise ValueError(f"{b} lidar beams do not split into {n} sectors")
    return scan.reshape(*scan.shape[:-1], n, b // n).min(axis=-1)


def features(
    scan: np.ndarray,
    pose: np.ndarray,
    goal: np.ndarray,
    velocity: np.ndarray,
    v_max: float,
    w_max: float,
) -> np.ndarray:
    """Features (..., FEATURES) from ranges (..., B) m, the odometry pose (..., 3) (x, y,
    yaw), the goal (..., 2) in the odom frame and the odometry's velocity (..., 2) (v, w)."""
    lidar = np.minimum(sectors(np.asarray(scan, np.float64)), RANGE_CAP) / RANGE_CAP
    d = np.asarray(goal, np.float64) - pose[..., :2]
    c, s = np.cos(pose[..., 2]), np.sin(pose[..., 2])
    # the goal in the base frame; its bearing's cos and sin are that over the distance
    gx = c * d[..., 0] + s * d[..., 1]
    gy = -s * d[..., 0] + c * d[..., 1]
    dist = np.hypot(gx, gy)
    safe = np.maximum(dist, 1e-6)
    cmd = np.asarray(velocity, np.float64) / np.array([v_max, w_max])
    return np.concatenate(
        [
            lidar,
            np.minimum(dist, GOAL_CAP)[..., None] / GOAL_CAP,
            (gx / safe)[..., None],
            (gy / safe)[..., None],
            np.clip(cmd, -1.0, 1.0),
        ],
        axis=-1,
    ).astype(np.float32)
