"""Frame conversions between MAVLink's NED/FRD and ROS's ENU/FLU (REP-103, REP-105).

MAVLink local frames are NED: x north, y east, z down; bodies are FRD (forward, right,
down) and yaw is clockwise from north. ROS uses ENU: x east, y north, z up; bodies are FLU
and yaw is counter-clockwise from east. Vectors swap x and y and negate z (the map is its own
inverse); yaw_enu = pi/2 - yaw_ned; rates about z change sign; roll is unchanged and pitch
changes sign (FRD -> FLU flips the y and z body axes).
"""

from __future__ import annotations

import math

import numpy as np


def ned_to_enu(v: np.ndarray) -> np.ndarray:
    """(..., 3) NED vector(s) -> ENU: (north, east, down) -> (east, north, up)."""
    a = np.asarray(v, dtype=np.float64)
    return np.stack([a[..., 1], a[..., 0], -a[..., 2]], axis=-1)


def enu_to_ned(v: np.ndarray) -> np.ndarray:
    """(..., 3) ENU vector(s) -> NED (the same swap: the map is an involution)."""
    return ned_to_enu(v)


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def yaw_ned_to_enu(yaw_ned: float) -> float:
    """Heading clockwise from north (rad) -> yaw counter-clockwise from east, in [-pi, pi)."""
    return wrap(math.pi / 2 - yaw_ned)


def yaw_enu_to_ned(yaw_enu: float) -> float:
    return wrap(math.pi / 2 - yaw_enu)


def rate_ned_to_enu(rate: float) -> float:
    """Yaw rate about down (rad/s) -> about up."""
    return -rate


def attitude_frd_to_flu(roll: float, pitch: float, yaw_ned: float) -> tuple[float, float, float]:
    """MAVLink ATTITUDE (roll, pitch, yaw of FRD in NED) -> (roll, pitch, yaw) of FLU in ENU."""
    return roll, -pitch, yaw_ned_to_enu(yaw_ned)
