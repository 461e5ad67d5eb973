"""Timestamped action chunks executed at the control rate, robot side (torch-free).

What the ``chunk_executor`` node runs: chunks arrive late and overlap; rows whose time has
passed are dropped, an overlapping chunk is cross-faded into the queue over ``blend_steps``
rows, and the queue asks for more when less than ``low_water_s`` of actions remain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tether.core.types import ActionChunk


@dataclass
class QueueStats:
    """Counters since the last reset."""

    chunks: int = 0
    executed: int = 0
    # control ticks with no action for now (the queue ran dry)
    underruns: int = 0
    # rows of incoming chunks already in the past on arrival
    dropped_rows: int = 0
    # rows cross-faded with the previous chunk
    blended_rows: int = 0


class ChunkQueue:
    """Rows (time ns, action) in time order; the row in force at t is the last with time <= t
    (zero-order hold for one row period)."""

    def __init__(self, low_water_s: float, blend_steps: int = 4) -> None:
        self.low_water_ns = round(low_water_s * 1e9)
        self.blend_steps = int(blend_steps)
        self.times = np.zeros(0, np.int64)
        self.actions = np.zeros((0, 0), np.float32)
        self.row_ns = 0  # period of the latest chunk's rows
        self.stats = QueueStats()

    def reset(self) -> None:
        self.times = np.zeros(0, np.int64)
        self.actions = np.zeros((0, 0), np.float32)
        self.stats = QueueStats()

    def end_ns(self) -> int:
        """Time after which the queue has no action (0 when empty)."""
        return int(self.times[-1]) + self.row_ns if len(self.times) else 0

    def remaining_s(self, now_ns: int) -> float:
        return max(0, self.end_ns() - now_ns) * 1e-9

    def needs_more(self, now_ns: int) -> bool:
        """True when less than ``low_water_s`` of actions remain."""
        return self.end_ns() - now_ns < self.low_water_ns

    def _held(self, t: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, len(self.times) - 1)
        return self.actions[i]

    def add(self, chunk: ActionChunk, now_ns: int) -> None:
        """Merge a chunk: drop its past rows (keeping the one in force now), cross-fade the
        rows that overlap the queue, replace the queue from the chunk's first row on."""
        times = np.array([chunk.time_of(i) for i in range(chunk.horizon)], np.int64)
        row_ns = round(chunk.dt * 1e9)
        keep = times + row_ns > now_ns
        self.stats.dropped_rows += int((~keep).sum())
        self.stats.chunks += 1
        if not keep.any():
            return
        times, rows = times[keep], chunk.actions[keep].copy()
        if len(self.times) and self.actions.shape[1] == rows.shape[1]:
            overlap = times < self.end_ns()
            n = int(min(overlap.sum(), self.blend_steps))
            if n:
                w = (np.arange(1, n + 1) / (n + 1))[:, None].astype(np.float32)
                rows[:n] = (1 - w) * self._held(times[:n]) + w * rows[:n]
                self.stats.blended_rows += n
            before = self.times < times[0]
            self.times = np.concatenate([self.times[before], times])
            self.actions = np.concatenate([self.actions[before], rows])
        else:
            self.times, self.actions = times, rows
        self.row_ns = row_ns

    def pop(self, now_ns: int) -> np.ndarray | None:
        """The action in force at ``now_ns`` (None: underrun); forgets rows before it."""
        if not len(self.times) or now_ns < self.times[0] or now_ns >= self.end_ns():
            self.stats.underruns += 1
            return None
        i = int(np.searchsorted(self.times, now_ns, side="right") - 1)
        self.times, self.actions = self.times[i:], self.actions[i:]
        self.stats.executed += 1
        return self.actions[0].copy()
