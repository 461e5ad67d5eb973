"""A navigation function for the DWA planner: the cost-to-goal over a grid built from the
lidar hits seen so far (what Nav2's NavFn planner computes on its costmap, and what DWB's
GoalDist / PathDist critics read). Pure numpy.

``ObstacleMap`` keeps one point per grid cell of every lidar hit in the odom (world) frame;
``potential`` turns them into a grid of costs (lethal within ``lethal_radius`` of a hit,
then an exponentially decaying inflation cost out to ``inflation_radius``, as Nav2's
inflation layer) and propagates the cost-weighted distance to the goal through it (an
8-connected wavefront, vectorised: each sweep relaxes every cell from its neighbours until
nothing changes). The result has no local minimum but the goal: an arc that lowers it gets
nearer the goal around obstacles, where the straight-line distance leads into dead ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# 8-connected neighbours (row, column, length in cells)
NEIGHBOURS = tuple(
    (di, dj, math.hypot(di, dj)) for di in (-1, 0, 1) for dj in (-1, 0, 1) if (di, dj) != (0, 0)
)


class ObstacleMap:
    """Lidar hits in the world frame, at most one per ``res`` cell (static obstacles: hits
    accumulate, nothing is cleared)."""

    def __init__(self, res: float) -> None:
        self.res = res
        self._cells: set[tuple[int, int]] = set()
        self._points: np.ndarray | None = None

    def clear(self) -> None:
        self._cells.clear()
        self._points = None

    def add(self, points: np.ndarray) -> None:
        """Add hits (N, 2) in the world frame (m)."""
        if len(points) == 0:
            return
        keys = np.floor(points / self.res).astype(np.int64)
        before = len(self._cells)
        self._cells.update(map(tuple, keys.tolist()))
        if len(self._cells) != before:
            self._points = None

    def points(self) -> np.ndarray:
        """One point (the cell centre) per occupied cell, (N, 2) m."""
        if self._points is None:
            cells = np.array(sorted(self._cells), np.float64).reshape(-1, 2)
            self._points = (cells + 0.5) * self.res
        return self._points


def grid_cells(
    xy: np.ndarray, origin: np.ndarray, res: Any, h: Any, w: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row and column (clipped to the grid) of points (..., 2) on grids of ``h`` x ``w``
    cells of ``res`` m from ``origin`` (..., 2), and whether each point lies on its grid.
    One grid, or one per point (origin (K, 2), res, h and w (K,))."""
    j = np.floor((xy[..., 0] - origin[..., 0]) / res).astype(np.int64)
    i = np.floor((xy[..., 1] - origin[..., 1]) / res).astype(np.int64)
    inside = (i >= 0) & (i < h) & (j >= 0) & (j < w)
    return np.clip(i, 0, h - 1), np.clip(j, 0, w - 1), inside


@dataclass
class Potential:
    """Cost-to-goal (m, cost-weighted) on a grid: ``values[i, j]`` at x = origin[0] + (j +
    0.5) res, y = origin[1] + (i + 0.5) res; inf in lethal cells and outside."""

    values: np.ndarray
    origin: np.ndarray
    res: float

    def index(self, xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row and column of points (..., 2), and whether they lie on the grid."""
        return grid_cells(xy, self.origin, self.res, *self.values.shape)

    def at(self, xy: np.ndarray) -> np.ndarray:
        """The potential at points (..., 2) (nearest cell; inf off the grid)."""
        i, j, inside = self.index(xy)
        return np.where(inside, self.values[i, j], np.inf)

    def descend(self, xy: np.ndarray, distance: float) -> np.ndarray:
        """Follow the steepest descent from ``xy`` (2,) cell by cell for about ``distance``
        m (or until the goal): the point a path-following controller steers for."""
        i, j, inside = (int(v) for v in self.index(np.asarray(xy, np.float64)))
        if not inside:
            return np.asarray(xy, np.float64)
        h, w = self.values.shape
        travelled = 0.0
        while travelled < distance:
            best = (self.values[i, j], i, j, 0.0)
            for di, dj, length in NEIGHBOURS:
                a, b = i + di, j + dj
                if 0 <= a < h and 0 <= b < w and self.values[a, b] < best[0]:
                    best = (self.values[a, b], a, b, length)
            if best[3] == 0.0:  # the goal (or a cell with no lower neighbour)
                break
            _, i, j, length = best
            travelled += length * self.res
        return self.origin + (np.array([j, i], np.float64) + 0.5) * self.res


def potential(
    obstacles: np.ndarray,
    goal: np.ndarray,
    around: np.ndarray,
    res: float,
    lethal_radius: float,
    inflation_radius: float,
    cost_scale: float,
    inflation_weight: float,
    margin: float = 3.0,
) -> Potential:
    """The navigation function towards ``goal`` (2,) on a grid covering the points
    ``around`` (M, 2, e.g. the base and the goal) plus ``margin`` m, from obstacle points
    (N, 2): a cell's cost is 1 plus ``inflation_weight`` x exp(-``cost_scale`` x (distance
    to the nearest obstacle point - ``lethal_radius``)) within ``inflation_radius``, inf
    within ``lethal_radius``."""
    pts = np.vstack([np.asarray(around, np.float64).reshape(-1, 2), goal[None]])
    lo = pts.min(axis=0) - margin
    hi = pts.max(axis=0) + margin
    w, h = (int(math.ceil(v)) for v in (hi - lo) / res)
    # the distance to the nearest obstacle point, within inflation_radius: a disc stamped
    # around each point
    reach = int(math.ceil(inflation_radius / res))
    offs = np.arange(-reach, reach + 1)
    disc = np.hypot(*np.meshgrid(offs, offs, indexing="ij")) * res
    # padded by 2 reach: a point up to reach off the grid still inflates the cells near it
    near = np.full((h + 4 * reach, w + 4 * reach), np.inf)
    cells = np.floor((np.asarray(obstacles, np.float64).reshape(-1, 2) - lo) / res).astype(int)
    keep = (cells[:, 0] >= -reach) & (cells[:, 0] < w + reach)
    keep &= (cells[:, 1] >= -reach) & (cells[:, 1] < h + reach)
    for j, i in cells[keep] + reach:
        win = near[i : i + 2 * reach + 1, j : j + 2 * reach + 1]
        np.minimum(win, disc, out=win)
    dist = near[2 * reach : 2 * reach + h, 2 * reach : 2 * reach + w]
    cost = 1.0 + inflation_weight * np.exp(-cost_scale * np.maximum(dist - lethal_radius, 0.0))
    cost[dist > inflation_radius] = 1.0
    cost[dist <= lethal_radius] = np.inf
    gi, gj = (int(v) for v in np.floor((goal - lo) / res)[::-1])
    step = cost * res
    d = np.full((h + 2, w + 2), np.inf)
    inner = d[1:-1, 1:-1]
    inner[gi, gj] = 0.0
    for _ in range(4 * (h + w)):
        best = inner.copy()
        for di, dj, length in NEIGHBOURS:
            np.minimum(best, d[1 + di : 1 + di + h, 1 + dj : 1 + dj + w] + length * step, out=best)
        if np.array_equal(best, inner):
            break
        inner[...] = best
    return Potential(inner.copy(), lo, res)
