"""Turn asynchronous, timestamped streams into frames at a fixed rate (dataset fps).

A recorder hears joint states at the control rate, commands whenever a policy or teleop
sends them, and images at each camera's rate. A dataset wants one row every 1/fps seconds of
sim (or robot) time. The frame for time t holds, for every stream, the latest value stamped at
or before t (the value in force at t). It is emitted only once every stream has shown a stamp
at or after t, so nothing that arrives later can change it; a stream whose value at t is older
than ``max_age_s`` makes the frame dropped (and counted), never silently stale.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NS = 1_000_000_000


@dataclass
class SamplerStats:
    frames: int = 0
    dropped: int = 0
    # why frames were dropped, by stream key
    stale: dict[str, int] = field(default_factory=dict)


class FrameSampler:
    """Sample streams ``keys`` at ``fps`` on a grid k/fps of the streams' own clock (ns).

    ``max_age_s``: per-key limit on how old the value in force may be (default: 2 frames).
    """

    def __init__(
        self, keys: tuple[str, ...], fps: float, max_age_s: dict[str, float] | None = None
    ):
        if fps <= 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        self.keys = tuple(keys)
        self.fps = float(fps)
        self.period_ns = round(NS / self.fps)
        default_age = 2.0 / self.fps
        self.max_age_ns = {k: round((max_age_s or {}).get(k, default_age) * NS) for k in self.keys}
        self.stats = SamplerStats()
        self._buf: dict[str, deque[tuple[int, Any]]] = {k: deque() for k in self.keys}
        self._next: int | None = None  # index k of the next frame, at time k / fps
        self._last_stamp: int | None = None

    def reset(self) -> None:
        """Forget everything (a new episode, or the clock jumped back)."""
        for q in self._buf.values():
            q.clear()
        self._next = None
        self._last_stamp = None

    def push(self, key: str, stamp_ns: int, value: Any) -> list[dict[str, Any]]:
        """Add one value; return the frames that became final, oldest first.

        Each frame maps every key to its value plus ``"stamp_ns"`` (the frame's time).
        A stamp older than the last one seen on this key means that stream's clock jumped
        back (a simulator reset): its old values are forgotten and the grid restarts once
        every stream has a value again (a late message of the previous episode cannot then
        hold the new one back).
        """
        q = self._buf[key]
        if q and stamp_ns < q[-1][0]:
            q.clear()
            self._next = None
        q.append((stamp_ns, value))
        if self._next is None:
            if not all(self._buf[k] for k in self.keys):
                return []
            # the first grid point at which every stream has a value
            start = max(self._buf[k][0][0] for k in self.keys)
            self._next = int(np.ceil(start * self.fps / NS - 1e-9))
        return self._emit()

    def time_of(self, k: int) -> int:
        """Time of frame index k in ns: round(k / fps), exact on the grid (no drift)."""
        return round(k * NS / self.fps)

    def flush(self, until_ns: int) -> list[dict[str, Any]]:
        """At the end of an episode: emit the frames up to ``until_ns`` that wait only for
        streams which will not speak again (their values in force are used, age-checked)."""
        if self._next is None:
            return []
        return self._emit(until_ns)

    def _emit(self, until_ns: int | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        assert self._next is not None

        def ready(t: int) -> bool:
            if until_ns is not None:
                return t <= until_ns
            return all(self._buf[k][-1][0] >= t for k in self.keys)

        while ready(self.time_of(self._next)):
            t = self.time_of(self._next)
            frame: dict[str, Any] = {"stamp_ns": t}
            ok = True
            for k in self.keys:
                q = self._buf[k]
                # keep only the newest value at or before t, and everything after it
                while len(q) > 1 and q[1][0] <= t:
                    q.popleft()
                stamp, value = q[0]
                if stamp > t or t - stamp > self.max_age_ns[k]:
                    ok = False
                    self.stats.stale[k] = self.stats.stale.get(k, 0) + 1
                frame[k] = value
            if ok:
                out.append(frame)
                self.stats.frames += 1
            else:
                self.stats.dropped += 1
            self._next += 1
        return out
