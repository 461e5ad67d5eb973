from __future__ import annotations

import numpy as np
import pytest

from tether.core.types import ActionChunk, Observation


def test_chunk_action_at_follows_time():
    chunk = ActionChunk(np.arange(6, dtype=np.float32).reshape(3, 2), dt=0.01, t0_ns=1_000_000_000)
    assert chunk.horizon == 3 and chunk.dim == 2
    np.testing.assert_array_equal(chunk.action_at(1_000_000_000), [0, 1])
    np.testing.assert_array_equal(chunk.action_at(1_015_000_000), [2, 3])  # zero-order hold
    np.testing.assert_array_equal(chunk.action_at(1_020_000_000), [4, 5])
    assert chunk.action_at(1_030_000_000) is None  # past the end: the action's time has passed
    assert chunk.action_at(990_000_000) is None  # before the start


def test_chunk_rejects_bad_shapes():
    with pytest.raises(ValueError):
        ActionChunk(np.zeros((0, 3)), dt=0.1)
    with pytest.raises(ValueError):
        ActionChunk(np.zeros((2, 3)), dt=0.0)
    assert ActionChunk(np.zeros(3), dt=0.1).actions.shape == (1, 3)


def test_chunk_shifted_adds_residual():
    chunk = ActionChunk(np.ones((2, 3)), dt=0.1, t0_ns=5)
    out = chunk.shifted(np.array([0.5, 0.0, -1.0]))
    np.testing.assert_allclose(out.actions, [[1.5, 1.0, 0.0]] * 2)
    assert out.t0_ns == 5


def test_observation_is_a_mapping_with_images():
    img = np.zeros((4, 4, 3), np.uint8)
    obs = Observation({"state": np.zeros(3), "images/front": img}, stamp_ns=2_500_000_000)
    assert set(obs) == {"state", "images/front"}
    assert obs.stamp_s == pytest.approx(2.5)
    assert obs.images["front"] is img
