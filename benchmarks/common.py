"""Shared helpers for benchmarks: result files, machine description."""

from __future__ import annotations

import json
import os
import platform
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


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=2))
    print(f"wrote {path}")
    return path
