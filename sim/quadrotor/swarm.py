"""Swarm geometry shared by the ``swarm`` task (engines) and the batched swarm world (RL):
scenarios (where N drones start and where they must go), separations and collisions, and
the decentralised policy's per-drone features (its own state plus its K nearest neighbours).

Scenarios (``scenario``), every start and every goal at least ``MIN_SPACING`` from the
others, heights U(0.8, 1.6) m, drones level and at rest at the start:

- ``swap``: two facing rows L = U(2, 3) m apart along x, spaced U(0.5, 0.7) m along y;
  drone k of one row and drone k of the other trade places (head-on pairs; an odd drone
  crosses to the free spot);
- ``cross``: a circle of radius max(1, 0.7 N / 2 pi) x U(1, 1.25) m, each drone to the
  antipodal point at its own height: every path crosses the centre;
- ``formation``: scattered starts in a square of side 2 R; goals on a ring of radius R at
  one height U(1.0, 1.5) m, assigned at random (paths cross).

A collision is two centres closer than ``COLLISION_DISTANCE`` (two Crazyflies' rotor tips,
39.7 mm arm + 23.1 mm propeller each, touch at 0.126 m when level).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Scenario = Literal["swap", "cross", "formation"]
SCENARIOS: tuple[str, ...] = ("swap", "cross", "formation")
# m: drones closer than this (centre to centre) have collided
COLLISION_DISTANCE = 0.13
# m: least distance between two starts and between two goals
MIN_SPACING = 0.5
Z_RANGE = (0.8, 1.6)

# features of the decentralised policy (FEATURE_VERSION in model.json)
FEATURE_VERSION = "swarm_knn/1"
GOAL_CAP = 2.0  # m: goal error beyond this is seen at this distance (direction kept)
SENSE_RANGE = 2.0  # m: neighbours farther than this look "absent"
SELF_DIM = 7
NEIGHBOUR_DIM = 7


def _spread(rng: np.random.Generator, n: int, sample, tries: int = 1000) -> np.ndarray:  # type: ignore[no-untyped-def]
    """n points, each drawn from ``sample(rng, 1)`` (1, 3) until it is MIN_SPACING from
    those before it (dart throwing)."""
    pts: list[np.ndarray] = []
    for _ in range(tries):
        p = np.asarray(sample(rng, 1))[0]
        if all(np.linalg.norm(p - q) >= MIN_SPACING for q in pts):
            pts.append(p)
            if len(pts) == n:
                return np.asarray(pts)
    raise RuntimeError(f"could not place {n} drones {MIN_SPACING} m apart")


def sample_scenario(
    rng: np.random.Generator, scenario: str, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Starts and goals (n, 3) each, m, world, for ``scenario`` (module docstring)."""
    z = rng.uniform(*Z_RANGE, n)
    if scenario == "swap":
        half = math.ceil(n / 2)
        length = rng.uniform(2.0, 3.0)
        gap = rng.uniform(0.5, 0.7)
        y = gap * (np.arange(half) - (half - 1) / 2.0)
        a = np.stack([np.full(half, -length / 2), y, z[:half]], axis=1)
        b = np.stack([np.full(half, length / 2), y, rng.uniform(*Z_RANGE, half)], axis=1)
        # row b has ``half`` slots, n - half of them taken: a's odd drone gets the free one
        return np.concatenate([a, b[: n - half]]), np.concatenate([b, a[: n - half]])
    if scenario == "cross":
        radius = max(1.0, 0.7 * n / (2 * math.pi)) * rng.uniform(1.0, 1.25)
        angle = 2 * math.pi * np.arange(n) / n + rng.uniform(-0.05, 0.05, n) + rng.uniform(0, 6.3)
        ring = np.stack([np.cos(angle), np.sin(angle)], axis=1) * radius
        starts = np.concatenate([ring, z[:, None]], axis=1)
        goals = np.concatenate([-ring, z[:, None]], axis=1)
        return starts, goals
    if scenario == "formation":
        radius = max(1.0, 0.6 * n / (2 * math.pi)) * rng.uniform(1.0, 1.2)

        def scatter(r: np.random.Generator, m: int) -> np.ndarray:
            xy = r.uniform(-radius, radius, (m, 2))
            return np.concatenate([xy, r.uniform(*Z_RANGE, (m, 1))], axis=1)

        starts = _spread(rng, n, scatter)
        angle = 2 * math.pi * np.arange(n) / n + rng.uniform(0, 6.3)
        ring = np.stack([np.cos(angle), np.sin(angle)], axis=1) * radius
        goals = np.concatenate([ring, np.full((n, 1), rng.uniform(1.0, 1.5))], axis=1)
        return starts, goals[rng.permutation(n)]
    raise ValueError(f"unknown swarm scenario '{scenario}' (available: {', '.join(SCENARIOS)})")


def pair_distances(pos: np.ndarray) -> np.ndarray:
    """Centre distances (..., N, N) of positions (..., N, 3); the diagonal is +inf."""
    d = np.linalg.norm(pos[..., None, :, :] - pos[..., :, None, :], axis=-1)
    n = pos.shape[-2]
    d[..., np.arange(n), np.arange(n)] = np.inf
    return d


def min_separation(pos: np.ndarray) -> np.ndarray:
    """Least centre distance (...,) between any two of N drones (..., N, 3)."""
    return pair_distances(pos).min(axis=(-2, -1))


def swarm_features(
    pos: np.ndarray, vel: np.ndarray, goal: np.ndarray, k: int, v_max: float
) -> np.ndarray:
    """Per-drone features (..., N, SELF_DIM + NEIGHBOUR_DIM k) of N drones in each world:
    positions, velocities (m/s, world) and goals (..., N, 3).

    Own part: goal - position scaled by GOAL_CAP with its length capped at 1 (3), velocity
    / v_max (3), height - 1 m (1). Each of the k nearest other drones (nearest first):
    relative position / SENSE_RANGE, length capped at 1 (3), relative velocity / (2 v_max)
    (3), closeness max(0, 1 - distance / SENSE_RANGE) (1); a missing neighbour (N - 1 < k)
    is all zeros. The exported graph computes the same (policies/swarm/export.py)."""
    pos, vel, goal = (np.asarray(a, np.float64) for a in (pos, vel, goal))
    n = pos.shape[-2]
    err = (goal - pos) / GOAL_CAP
    err = err / np.maximum(1.0, np.linalg.norm(err, axis=-1, keepdims=True))
    own = np.concatenate([err, vel / v_max, pos[..., 2:3] - 1.0], axis=-1)
    nb = np.zeros((*pos.shape[:-1], k, NEIGHBOUR_DIM))
    m = min(k, n - 1)
    if m > 0:
        dist = pair_distances(pos)
        order = np.argsort(dist, axis=-1, kind="stable")[..., :m]  # (..., N, m)
        pj = np.take_along_axis(pos[..., None, :, :], order[..., None], axis=-2)
        vj = np.take_along_axis(vel[..., None, :, :], order[..., None], axis=-2)
        dj = np.take_along_axis(dist, order, axis=-1)[..., None]
        rel = (pj - pos[..., None, :]) / SENSE_RANGE
        rel = rel / np.maximum(1.0, np.linalg.norm(rel, axis=-1, keepdims=True))
        rv = (vj - vel[..., None, :]) / (2.0 * v_max)
        close = np.maximum(0.0, 1.0 - dj / SENSE_RANGE)
        nb[..., :m, :] = np.concatenate([rel, rv, close], axis=-1)
    return np.concatenate([own, nb.reshape(*pos.shape[:-1], -1)], axis=-1)


def feature_dim(k: int) -> int:
    return SELF_DIM + NEIGHBOUR_DIM * k
