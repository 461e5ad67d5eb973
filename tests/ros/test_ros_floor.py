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
    # the timed pings belong to grid ticks at least one period apart (a late one is sent
    # after its tick, the next keeps to the grid): steps - 1 periods at least from the first
    # tick to the last ping
    assert r["rate_hz"] <= 200.0 * steps / (steps - 1) * (1 + 1e-9)


def test_a_padded_floor_spends_its_work_on_every_round_trip() -> None:
    """work_us pads each side with busy work per message (the floor with as much CPU work as
    Tether's per step): every timed round trip takes at least the echo side's work, and the
    period at least both sides' work together."""
    steps, work = 40, (1500.0, 2500.0)
    r = ping(EXECUTORS[-1], steps=steps, warmup=5, work_us=work)
    assert r["work_us"] == list(work)
    assert r["latency_ms"]["p50"] >= work[1] * 1e-3  # the echo's work is inside the round trip
    assert r["period_ms"] >= sum(work) * 1e-3


def test_hot_path_times_both_callbacks_of_a_lockstep_step() -> None:
    """ros_loop.hot_path: the sim bridge's and the policy server's work per step, in one
    process, fed each other's messages: the simulator really steps once per answered
    action (the measurement is of the loop's work, not of an idle callback)."""
    import ros_loop

    hot = ros_loop.hot_path(steps=30, idle_s=1e-4)
    for key in ros_loop.HOT_PATH_KEYS:
        assert hot[key]["mean_us"] > 0
    assert hot["steps_simulated"] == 2 * 30 + ros_loop.WARMUP_STEPS
