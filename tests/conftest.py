"""Shared fixtures: a Panda spec, environment for headless rendering and Fast DDS."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("FASTDDS_DEFAULT_PROFILES_FILE", str(REPO / "configs/dds/fastdds_shm.xml"))


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def panda():
    from tether.core import registry

    return registry.load("robot", "panda").spec(control_hz=100.0)


# Every test session gets its own DDS domain, so concurrent runs (or stray nodes) on this
# machine never cross-talk. Nodes started as subprocesses inherit it. Under pytest-xdist
# (`make test` runs three workers) each worker gets one of the domains after the session's:
# the controller picks the base before the workers start, and they inherit it. Sessions
# start 4 domains apart (the controller and up to three workers).
if "TETHER_TEST_DOMAIN_BASE" not in os.environ:
    os.environ["TETHER_TEST_DOMAIN_BASE"] = os.environ.get(
        "ROS_DOMAIN_ID", str(100 + (os.getpid() % 32) * 4)
    )
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ["ROS_DOMAIN_ID"] = str(
    (
        int(os.environ["TETHER_TEST_DOMAIN_BASE"])
        + (int(_worker.removeprefix("gw")) + 1 if _worker.startswith("gw") else 0)
    )
    % 233  # Fast DDS's highest domain is 232
)


# --- no test leaves this process real-time --------------------------------------------------
# (a library that switches the calling thread to SCHED_FIFO, as SVT-AV1 does for root, would
# make every process a later test starts real-time too: CPU hogs at FIFO 99 froze a run)
@pytest.fixture(autouse=True)
def _normal_scheduling():
    yield
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) in (
        getattr(os, "SCHED_FIFO", -1),
        getattr(os, "SCHED_RR", -1),
    ):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        pytest.fail("this test left the test process with a real-time scheduling policy")


# --- markers skip, with a reason, when their dependency is absent --------------------------
# (a marker alone skips nothing; this is what makes `-m "not ros"` and a missing package
# behave alike, and says why in the summary)
MARKER_DEPENDENCIES = {
    "mujoco": ("mujoco", "pip install 'tether[mujoco]' (make setup installs it)"),
    "pybullet": ("pybullet", "pip install 'tether[pybullet]' (make setup installs it)"),
    "ros": ("rclpy", "pip install 'tether[ros]' (the ROS 2 wheels; make setup installs them)"),
}


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _cuda_gpu() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is not None


def pytest_collection_modifyitems(config, items):
    for item in items:
        for marker, (module, hint) in MARKER_DEPENDENCIES.items():
            if item.get_closest_marker(marker) and not _installed(module):
                item.add_marker(pytest.mark.skip(reason=f"{module} is not installed: {hint}"))
        if item.get_closest_marker("gpu") and not _cuda_gpu():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (no nvidia-smi here)"))


# --- CI fails when a test that should run on this machine class was skipped ---------------
# tests/expected_skips.txt lists what may skip here (a GPU, TensorRT, Isaac Sim): one
# `<node id glob> | <reason substring>` per line. Anything else skipped under CI=true (or
# TETHER_STRICT_SKIPS=1) fails the run, so a missing install step cannot hide behind a skip.
_SKIPS: list[tuple[str, str]] = []


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _SKIPS.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report):
    if report.skipped:
        _SKIPS.append((report.nodeid, _skip_reason(report)))


def pytest_sessionfinish(session, exitstatus):
    if not (os.environ.get("CI") or os.environ.get("TETHER_STRICT_SKIPS")):
        return
    from skip_policy import expected_skips, unexpected_skips

    bad = unexpected_skips(_SKIPS, expected_skips())
    if not bad:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(bad)} test(s) skipped that must run on this machine class:"]
    lines += [f"  {node}: {why}" for node, why in bad]
    lines.append(
        "(install what they need in the Makefile, or list them in tests/expected_skips.txt)"
    )
    if reporter is not None:
        reporter.ensure_newline()
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line)
    session.exitstatus = 1
