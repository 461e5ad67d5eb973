"""ObsHistory and ChunkPlan: the scheduling shared by the torch and onnxruntime policies."""

from __future__ import annotations

import numpy as np
import pytest

from tether.core.types import Observation
from tether.policies.chunking import ChunkPlan, ObsHistory

MS = 1_000_000


def obs(t_ms: int, value: float) -> Observation:
    return Observation({"state": np.array([value], np.float32)}, stamp_ns=t_ms * MS)


def test_history_repeats_first_observation_after_reset() -> None:
    h = ObsHistory(["state"], horizon=3, period_s=0.1)
    h.push(obs(0, 1.0))
    assert h.stacked()["state"][:, 0].tolist() == [1.0, 1.0, 1.0]


def test_history_picks_observations_one_period_apart() -> None:
    h = ObsHistory(["state"], horizon=2, period_s=0.03)
    for t in range(0, 100, 10):  # 100 Hz observations, value = time in ms
        h.push(obs(t, float(t)))
    # latest at 90 ms; the one a period (30 ms) before is the newest at or before 60 ms
    assert h.stacked()["state"][:, 0].tolist() == [60.0, 90.0]


def test_history_resets_when_time_goes_back() -> None:
    h = ObsHistory(["state"], horizon=2, period_s=0.03)
    for t in range(0, 100, 10):
        h.push(obs(t, float(t)))
    h.push(obs(0, -1.0))
    assert h.stacked()["state"][:, 0].tolist() == [-1.0, -1.0]


def test_history_rejects_missing_keys() -> None:
    h = ObsHistory(["state", "env_state"], horizon=1, period_s=0.1)
    with pytest.raises(KeyError, match="env_state"):
        h.push(obs(0, 1.0))


def test_plan_replans_after_executed_rows() -> None:
    plan = ChunkPlan(action_dt=0.03, control_dt=0.01, execute_steps=2)
    assert plan.needs_plan(0)
    plan.set(np.zeros((4, 1)), t0_ns=0)
    assert not plan.needs_plan(50 * MS)
    assert plan.needs_plan(60 * MS)  # 2 rows x 30 ms have passed (half a control period early)
    assert plan.needs_plan(-1)  # time went back


def test_chunk_at_interpolates_rows_at_control_rate() -> None:
    plan = ChunkPlan(action_dt=0.03, control_dt=0.01, execute_steps=2)
    plan.set(np.array([[0.0], [3.0], [6.0]]), t0_ns=1000 * MS)
    chunk = plan.chunk_at(1010 * MS)
    assert chunk.t0_ns == 1010 * MS and chunk.dt == pytest.approx(0.01)
    # rows every 10 ms from 10 ms after t0 to the last row at 60 ms: values 1..6
    np.testing.assert_allclose(chunk.actions[:, 0], [1, 2, 3, 4, 5, 6], atol=1e-5)
    # past the end the last row holds
    np.testing.assert_allclose(plan.chunk_at(1100 * MS).actions[:, 0], [6.0])


def test_single_row_plan_passes_through() -> None:
    plan = ChunkPlan(action_dt=0.01, control_dt=0.01, execute_steps=1)
    plan.set(np.array([[2.0, 3.0]]), t0_ns=5)
    chunk = plan.chunk_at(5)
    assert chunk.actions.tolist() == [[2.0, 3.0]] and chunk.t0_ns == 5
    assert plan.needs_plan(5 + 10 * MS)
