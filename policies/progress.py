"""The status line the RL trainers (quad hover, residual fine-tuning) print while they run."""

from __future__ import annotations

import sys
import time


class Progress:
    """One status line, redrawn in place on a terminal (a line every few seconds otherwise)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.tty = sys.stdout.isatty()
        self._last = 0.0

    def show(self, text: str, final: bool = False) -> None:
        line = f"[{self.label}] {text}"
        if self.tty:
            print(f"\r{line:<110}", end="\n" if final else "", flush=True)
        elif final or time.monotonic() - self._last > 5.0:
            self._last = time.monotonic()
            print(line, flush=True)
