"""Time sources for the mocks: the wall clock in use, a hand-advanced clock in tests."""

from __future__ import annotations

import time
from collections.abc import Callable

# seconds, monotonic
Clock = Callable[[], float]


def monotonic() -> float:
    """The system's monotonic clock (s)."""
    return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: mocks integrate exactly, tests stay
    deterministic. Call it for the time (s)."""

    def __init__(self, t0: float = 0.0) -> None:
        self.t = t0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        """Move forward ``dt`` seconds; returns the new time."""
        if dt < 0:
            raise ValueError("a clock cannot go back")
        self.t += dt
        return self.t
