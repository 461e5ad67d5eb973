"""The floor benchmark's ping-pong (benchmarks/ros_floor.py, issue #22): both executors carry
every state to the echo process and every answer back, in order, between two processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from ros_floor import EXECUTORS, ping  # noqa: E402


@pytest.mark.parametrize("kind", EXECUTORS)
def test_each_ping_is_answered_with_its_own_stamp(kind: str) -> None:
    # ping raises if an answer is missing or carries another ping's stamp
    r = ping(kind, steps=60, warmup=5)
    assert r["executor"] == kind and r["steps"] == 60
    assert r["rate_hz"] > 0
    assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] <= r["latency_ms"]["max"]


def test_a_paced_floor_never_runs_ahead_of_its_rate() -> None:
    """rate_hz paces the pings by the wall clock (the floor of the timer cases): the round
    trips come no faster than the rate, each still answered with its own stamp."""
    steps = 40
    r = ping(EXECUTORS[-1], steps=steps, warmup=5, rate_hz=200.0)
    assert r["paced_hz"] == 200.0
    # the timed pings start on ticks at least one period apart: steps - 1 periods at least
    # from the first to the last
    assert r["rate_hz"] <= 200.0 * steps / (steps - 1) * (1 + 1e-9)
