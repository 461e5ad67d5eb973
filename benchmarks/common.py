"""Shared helpers for benchmarks: result files, machine description."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_1m": os.getloadavg()[0],
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write_result(name: str, data: dict[str, Any], results: Path = RESULTS) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=2))
    print(f"wrote {path}")
    return path


def tether_eval_ros(
    model: Path, episodes: int, seed: int, overrides: list[str], timeout_s: float = 900
) -> dict[str, Any]:
    """`tether eval MODEL --ros` (a process per node, as a user runs it) on ``episodes``
    seeds from ``seed`` with config ``overrides``, no video: its summary.json."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "tether.cli.main", "eval", str(model), "--ros",
            "--episodes", str(episodes), "--seed", str(seed), "--out", tmp, "--no-video",
            *overrides,
        ]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout_s)
        summary: dict[str, Any] = json.loads((Path(tmp) / "summary.json").read_text())
    return summary
