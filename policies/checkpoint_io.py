"""The part every trainer's checkpoint shares: ``contract.json`` (JSON, no pickle), replaced
atomically and read back with a check of who wrote it. Light import (no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tether.core.errors import TetherError

CONTRACT = "contract.json"


def write_contract(path: Path, contract: dict[str, Any]) -> None:
    """``path/contract.json``, replaced last and atomically: a crash mid-write leaves the
    previous one (``default=str`` writes paths and other plain values as text)."""
    tmp = path / (CONTRACT + ".tmp")
    tmp.write_text(json.dumps(contract, indent=2, default=str))
    tmp.replace(path / CONTRACT)


def read_contract(path: Path, key: str, expected: str, what: str | None = None) -> dict[str, Any]:
    """contract.json of the checkpoint directory ``path``, whose ``key`` must be
    ``expected`` (the trainer or format that wrote it; ``what`` names it in the error)."""
    file = path / CONTRACT
    if not file.is_file():
        raise TetherError(f"{path}: not a checkpoint (no {CONTRACT})")
    contract: dict[str, Any] = json.loads(file.read_text())
    if contract.get(key) != expected:
        label = {"trainer": "written by trainer", "format": "format"}.get(key, key)
        raise TetherError(f"{file}: {label} {contract.get(key)!r}, expected {what or expected!r}")
    return contract
