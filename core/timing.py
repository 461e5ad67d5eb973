"""Timing helpers: obs->action latency, stamp synchronisation, rate and percentile stats."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

import numpy as np


def now_ns() -> int:
    """Monotonic wall clock in ns (for latency, never for sim time)."""
    return time.monotonic_ns()


def percentiles_ms(samples_ms: list[float] | np.ndarray) -> dict[str, float]:
    """p50/p90/p99/max/mean of latencies in ms; NaN when there are none."""
    a = np.asarray(samples_ms, np.float64)
    if a.size == 0:
        nan = float("nan")
        return {"p50": nan, "p90": nan, "p99": nan, "max": nan, "mean": nan, "count": 0}
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
        "mean": float(a.mean()),
        "count": int(a.size),
    }


class LatencyTracker:
    """Observation -> action latency: ``mark`` when an observation with a stamp goes out,
    ``match`` when the action answering that stamp comes back. Keeps at most ``capacity``
    unanswered stamps."""

    def __init__(self, capacity: int = 256) -> None:
        self._sent: OrderedDict[int, int] = OrderedDict()
        self.capacity = capacity
        self.samples_ms: list[float] = []

    def mark(self, stamp_ns: int, wall_ns: int | None = None) -> None:
        if stamp_ns in self._sent:
            return  # a re-sent observation keeps its first send time
        self._sent[stamp_ns] = now_ns() if wall_ns is None else wall_ns
        while len(self._sent) > self.capacity:
            self._sent.popitem(last=False)

    def match(self, stamp_ns: int, wall_ns: int | None = None) -> float | None:
        """Record and return the latency in ms for ``stamp_ns``, or None if unknown/answered."""
        sent = self._sent.pop(stamp_ns, None)
        if sent is None:
            return None
        ms = ((now_ns() if wall_ns is None else wall_ns) - sent) * 1e-6
        self.samples_ms.append(ms)
        return ms

    def clear(self) -> None:
        self._sent.clear()
        self.samples_ms = []


class StampSync:
    """Collect messages from several streams and release them together once every required
    key has a value for the same stamp (exact match: one simulator step publishes them all)."""

    def __init__(self, required: tuple[str, ...], max_pending: int = 64) -> None:
        self.required = tuple(required)
        self.max_pending = max_pending
        self._pending: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def add(self, key: str, stamp_ns: int, value: Any) -> dict[str, Any] | None:
        """Store one value; return the complete set for ``stamp_ns`` when it is complete."""
        slot = self._pending.setdefault(stamp_ns, {})
        slot[key] = value
        if all(k in slot for k in self.required):
            del self._pending[stamp_ns]
            # anything older than a completed stamp will never complete
            for old in [s for s in self._pending if s < stamp_ns]:
                del self._pending[old]
            return slot
        while len(self._pending) > self.max_pending:
            self._pending.popitem(last=False)
        return None

    def clear(self) -> None:
        self._pending.clear()


class RateMeter:
    """Achieved rate over a window of event times."""

    def __init__(self) -> None:
        self.times_ns: list[int] = []

    def tick(self, t_ns: int | None = None) -> None:
        self.times_ns.append(now_ns() if t_ns is None else t_ns)

    def rate_hz(self) -> float:
        if len(self.times_ns) < 2:
            return float("nan")
        span = (self.times_ns[-1] - self.times_ns[0]) * 1e-9
        return (len(self.times_ns) - 1) / span if span > 0 else float("nan")

    def clear(self) -> None:
        self.times_ns = []
