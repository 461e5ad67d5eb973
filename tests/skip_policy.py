"""Which skipped tests CI tolerates on its machine class (used by tests/conftest.py)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

ALLOW_LIST = Path(__file__).resolve().parent / "expected_skips.txt"


def expected_skips(path: Path | None = None) -> list[tuple[str, str]]:
    """The allow-list: (node id glob, reason substring) pairs."""
    path = path or ALLOW_LIST
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            glob, _, reason = line.partition("|")
            out.append((glob.strip(), reason.strip()))
    return out


def unexpected_skips(
    skips: list[tuple[str, str]], allowed: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    return [
        (node, why)
        for node, why in skips
        if not any(fnmatch.fnmatch(node, g) and r in why for g, r in allowed)
    ]
