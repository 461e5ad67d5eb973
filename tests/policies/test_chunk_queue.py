"""ChunkQueue: drop late rows, cross-fade overlapping chunks, low-water requests, underruns."""

from __future__ import annotations

import numpy as np

from tether.core.types import ActionChunk
from tether.policies.chunk_queue import ChunkQueue

MS = 1_000_000


def chunk(values: list[float], t0_ms: int, dt: float = 0.01) -> ActionChunk:
    return ActionChunk(np.array(values, np.float32)[:, None], dt, t0_ms * MS)


def test_rows_whose_time_passed_are_dropped() -> None:
    q = ChunkQueue(low_water_s=0.02)
    q.add(chunk([0, 1, 2, 3, 4], t0_ms=0), now_ns=25 * MS)
    assert q.stats.dropped_rows == 2  # rows at 0 and 10 ms; the one at 20 ms is in force
    assert q.pop(25 * MS)[0] == 2.0
    assert q.pop(30 * MS)[0] == 3.0


def test_underrun_when_the_queue_runs_dry() -> None:
    q = ChunkQueue(low_water_s=0.02)
    assert q.pop(0) is None
    q.add(chunk([1, 2], t0_ms=0), now_ns=0)
    assert q.pop(0)[0] == 1 and q.pop(10 * MS)[0] == 2
    assert q.pop(20 * MS) is None
    assert q.stats.underruns == 2 and q.stats.executed == 2


def test_low_water_mark_requests_the_next_chunk() -> None:
    q = ChunkQueue(low_water_s=0.025)
    q.add(chunk([0, 1, 2, 3, 4], t0_ms=0), now_ns=0)  # actions until 50 ms
    assert not q.needs_more(20 * MS)  # 30 ms left
    assert q.needs_more(30 * MS)  # 20 ms left


def test_overlapping_chunk_is_cross_faded() -> None:
    q = ChunkQueue(low_water_s=0.02, blend_steps=3)
    q.add(chunk([0] * 10, t0_ms=0), now_ns=0)
    q.add(chunk([4] * 10, t0_ms=30), now_ns=30 * MS)
    got = [q.pop(t * MS)[0] for t in range(30, 90, 10)]
    # new weight 1/4, 2/4, 3/4 over three rows, then the new chunk alone
    np.testing.assert_allclose(got, [1, 2, 3, 4, 4, 4])
    assert q.stats.blended_rows == 3


def test_chunk_after_a_gap_is_not_blended() -> None:
    q = ChunkQueue(low_water_s=0.02, blend_steps=3)
    q.add(chunk([0, 0], t0_ms=0), now_ns=0)
    q.add(chunk([5, 5], t0_ms=100), now_ns=100 * MS)
    assert q.pop(100 * MS)[0] == 5 and q.stats.blended_rows == 0
