"""Fixtures for policy tests (helpers in policy_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from policy_helpers import write_dataset


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("ds") / "lift")


@pytest.fixture(scope="session")
def tiny_image_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("ds_img") / "lift", image=True)


@pytest.fixture
def torch_one_thread() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
