"""Realtime stepping keeps the simulator on the wall clock: a tick that comes late (rclpy's
timer skips the periods it missed) steps again until the steps match the wall time since the
episode's first tick, at most MAX_CATCH_UP extra; further behind, the timeline starts afresh;
a world with a clock of its own (Isaac Sim playing, hardware) steps once per tick. A fake
wall clock drives RunnerBridge._steps_due, so nothing here depends on the machine's speed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("rclpy")
pytestmark = pytest.mark.ros

from tether_ros.kinds import runner as runner_mod  # noqa: E402
from tether_ros.kinds.runner import MAX_CATCH_UP, RunnerBridge  # noqa: E402

PERIOD = 1_000_000  # 1 kHz


def _bridge(own_clock: bool = True) -> SimpleNamespace:
    return SimpleNamespace(_own_clock=own_clock, _period_ns=PERIOD, _rt_origin_ns=None, _rt_ticks=0)


def _ticks(monkeypatch: pytest.MonkeyPatch, bridge: SimpleNamespace, at_ns: list[int]) -> list[int]:
    out = []
    for t in at_ns:
        monkeypatch.setattr(runner_mod, "now_ns", lambda t=t: t)
        out.append(RunnerBridge._steps_due(bridge))  # type: ignore[arg-type]
    return out


def test_on_time_ticks_step_once(monkeypatch: pytest.MonkeyPatch) -> None:
    jitter = [0, 30_000, -40_000, 10_000, 0]
    at = [5_000_000_000 + k * PERIOD + j for k, j in enumerate(jitter)]
    assert _ticks(monkeypatch, _bridge(), at) == [1, 1, 1, 1, 1]


def test_late_ticks_catch_up_to_the_wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ticks at 0, 1, 2 ms, then none until 5.1 ms (the timer skipped 3 and 4): that tick
    steps three times, and the steps match the wall clock again (6 steps for 0..5 ms)."""
    b = _bridge()
    due = _ticks(monkeypatch, b, [0, PERIOD, 2 * PERIOD, 5 * PERIOD + 100_000, 6 * PERIOD])
    assert due == [1, 1, 1, 3, 1]
    assert sum(due) == 7 == b._rt_ticks


def test_far_behind_starts_the_timeline_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    b = _bridge()
    late = (MAX_CATCH_UP + 3) * PERIOD
    due = _ticks(monkeypatch, b, [0, late, late + PERIOD])
    assert due == [1, 1, 1]
    assert b._rt_origin_ns == late


def test_a_world_with_its_own_clock_steps_once_per_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    b = _bridge(own_clock=False)
    assert _ticks(monkeypatch, b, [0, 5 * PERIOD, 9 * PERIOD]) == [1, 1, 1]


def test_readers_ask_the_middleware_at_most_once_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bridge's "does any node read this topic" (object poses, /clock, a drone's imu):
    asked of the publisher at most once per READERS_TTL_NS, so a node that subscribes is
    served from at most that long after; forget() (an episode's start) asks afresh."""
    ttl = runner_mod.READERS_TTL_NS

    class Pub:  # a publisher's one call the bridge makes here
        count, asked = 0, 0

        def get_subscription_count(self) -> int:
            self.asked += 1
            return self.count

    pub = Pub()
    read = runner_mod.Readers()

    def at(t: int) -> bool:
        monkeypatch.setattr(runner_mod, "now_ns", lambda: t)
        return read(pub)

    assert not at(0) and pub.asked == 1
    pub.count = 1  # a node subscribes
    assert not at(ttl // 2) and pub.asked == 1  # not asked again within the ttl
    assert at(ttl + 1) and pub.asked == 2
    pub.count = 0
    assert at(ttl + 2) and pub.asked == 2
    read.forget()
    assert not at(ttl + 3) and pub.asked == 3
