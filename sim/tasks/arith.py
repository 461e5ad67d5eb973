"""Scalar arithmetic for the tasks' per-step measures: numpy's results bit for bit, without
the dispatch that makes numpy slow on 3- and 4-element vectors and Python floats (a task
scores every control step)."""

from __future__ import annotations

import math

import numpy as np


def norm(v: np.ndarray) -> float:
    """``float(np.linalg.norm(v))`` of a 1-D float64 array: numpy's own arithmetic (the
    square root of ``v.dot(v)``)."""
    return math.sqrt(v.dot(v))


def clip01(x: float) -> float:
    """``float(np.clip(x, 0.0, 1.0))``: NaN stays NaN, -0.0 becomes 0.0."""
    return 0.0 if x <= 0.0 else 1.0 if x >= 1.0 else x


def unit_quat(quat: np.ndarray) -> tuple[float, float, float, float]:
    """wxyz quaternion ``quat`` / its norm, as Python floats (numpy's division)."""
    q = np.asarray(quat, dtype=np.float64)
    n = norm(q)
    w, x, y, z = q.tolist()
    # Python's float division is numpy's elementwise one (IEEE, correctly rounded)
    return w / n, x / n, y / n, z / n


def rotation(quat: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a wxyz quaternion (normalised first)."""
    w, x, y, z = unit_quat(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
