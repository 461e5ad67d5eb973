"""What a learner sees of N drones and how its actions reach them: the observation and action
map of ``batched_env`` (its numpy functions are the reference), in plain floats, since numpy's
per-call cost dominates at a few drones. ``QuadrotorWorld`` serves them as its
``LearningView`` (tether.core.protocols), so ``tether.sim.make_env`` presents a drone world
exactly as ``BatchedHoverEnv`` does."""

from __future__ import annotations

import numpy as np


def hover_features(state: np.ndarray, env_state: np.ndarray, n: int) -> np.ndarray:
    """``batched_env.hover_observation`` of N drones' states (13 N,) relative to their
    targets (env_state (7 N,)): per drone position - target (3, m), rotation matrix
    world-from-body row-major (9), linear velocity (3, m/s, world), angular velocity (3,
    rad/s, body). Shape: (18 N,) float32."""
    st, env = np.asarray(state).tolist(), np.asarray(env_state).tolist()
    out: list[float] = []
    for i in range(n):
        s, t = st[13 * i : 13 * i + 13], env[7 * i : 7 * i + 3]
        w, x, y, z = s[3], s[4], s[5], s[6]
        out += (
            s[0] - t[0],
            s[1] - t[1],
            s[2] - t[2],
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * z + w * y),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (y * z - w * x),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
            1 - 2 * (x * x + y * y),
        )
        out += s[7:13]
    return np.array(out, dtype=np.float32)


def rpm_from_normalized(action: np.ndarray, hover_rpm: float) -> np.ndarray:
    """``batched_env.action_to_rpm`` of a flat action (4 N,): NaN -> 0, clip to [-1, 1],
    rpm = hover_rpm (1 + 0.5 a). Shape: (4 N,) float64."""
    h = hover_rpm
    vals = np.asarray(action).tolist()
    return np.array([h if v != v else h * (1.0 + 0.5 * min(max(v, -1.0), 1.0)) for v in vals])


def linear_from_normalized(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """A normalized action (NaN -> 0, clipped to [-1, 1]) mapped linearly onto [low, high]."""
    a = np.clip(np.nan_to_num(np.asarray(action, np.float64), nan=0.0), -1.0, 1.0)
    return low + (a + 1.0) * 0.5 * (high - low)
