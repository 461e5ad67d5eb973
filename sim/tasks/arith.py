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
