"""The CI skip policy: only allow-listed skips pass under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from skip_policy import expected_skips, unexpected_skips


def test_allow_list_matches_by_node_and_reason():
    allowed = [("tests/policies/*", "needs a CUDA GPU"), ("*", "Isaac Sim")]
    skips = [
        ("tests/policies/test_export.py::test_trt", "needs a CUDA GPU (no nvidia-smi here)"),
        ("tests/sim/test_isaac.py", "Isaac Sim is not installed"),
        ("tests/ros/test_record_teleop_tmux.py::test_x", "tmux is not installed"),
        ("tests/sim/test_gpu.py::test_y", "needs a CUDA GPU"),
    ]
    assert unexpected_skips(skips, allowed) == [skips[2], skips[3]]


def test_the_committed_allow_list_parses():
    allowed = expected_skips()
    assert allowed and all(glob and reason for glob, reason in allowed)
    assert not any("tmux" in reason for _, reason in allowed)  # make setup installs tmux


def test_an_unexpected_skip_fails_a_ci_run(tmp_path: Path):
    """A pytest run under CI=true with a skip that is not allow-listed exits non-zero."""
    tests = Path(__file__).resolve().parent
    case = tmp_path / "test_case.py"
    case.write_text(
        "import pytest\n"
        "def test_runs():\n    assert True\n"
        "@pytest.mark.skip(reason='tmux is not installed')\n"
        "def test_skipped():\n    pass\n"
    )
    (tmp_path / "conftest.py").write_text((tests / "conftest.py").read_text())
    (tmp_path / "skip_policy.py").write_text((tests / "skip_policy.py").read_text())
    (tmp_path / "expected_skips.txt").write_text("* | needs a CUDA GPU\n")
    env = {**os.environ, "CI": "true"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(case)]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    assert "skipped that must run on this machine class" in run.stdout
    assert "test_case.py::test_skipped: tmux is not installed" in run.stdout
    env.pop("CI")
    env.pop("TETHER_STRICT_SKIPS", None)
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout
