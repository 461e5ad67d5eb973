from __future__ import annotations

import math

from tether.core.timing import LatencyTracker, RateMeter, StampSync, percentiles_ms


def test_latency_tracker_matches_stamps():
    t = LatencyTracker(capacity=2)
    t.mark(10, wall_ns=1_000_000)
    t.mark(10, wall_ns=9_000_000)  # a re-send keeps the first time
    assert t.match(10, wall_ns=3_500_000) == 2.5
    assert t.match(10, wall_ns=4_000_000) is None  # already answered
    t.mark(1, 0)
    t.mark(2, 0)
    t.mark(3, 0)
    assert t.match(1, 5) is None  # evicted beyond capacity
    assert t.samples_ms == [2.5]


def test_stamp_sync_releases_complete_sets_and_drops_older():
    s = StampSync(("state", "cube"))
    assert s.add("state", 1, "s1") is None
    assert s.add("state", 2, "s2") is None
    assert s.add("cube", 2, "c2") == {"state": "s2", "cube": "c2"}
    assert s.add("cube", 1, "c1") is None  # stamp 1 was dropped when 2 completed


def test_percentiles_and_rate():
    p = percentiles_ms(list(range(1, 101)))
    assert p["p50"] == 50.5 and p["max"] == 100 and p["count"] == 100
    assert math.isnan(percentiles_ms([])["p50"])
    r = RateMeter()
    for k in range(11):
        r.tick(k * 10_000_000)
    assert r.rate_hz() == 100.0
