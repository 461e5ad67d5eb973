"""Keyboard teleop in a terminal (raw/cbreak mode, non-blocking reads).

A terminal reports key presses, never releases, so a motion key moves for ``key_hold_s``
after each press (held keys auto-repeat, so holding a key moves continuously; the first
repeat comes after the terminal's repeat delay, ~0.25-0.6 s). The dead-man is a toggle
that must be armed for any motion; it disarms itself after ``idle_disarm_s`` without a
key, and on e-stop.

Keys (command frame: x forward, y left, z up)::

    m          arm / disarm motion (the dead-man; nothing is sent while disarmed)
    w / s      +x / -x            i / k   rotate +y / -y (pitch)
    a / d      +y / -y            j / l   rotate +x / -x (roll)
    q / e      +z / -z            u / o   rotate +z / -z (yaw)
    space      toggle the gripper (open / close)
    + / -      speed up / down (x1.5, between 10 % and 100 %)
    Esc or x   E-STOP (latched, disarms)          R (shift-r)   release the e-stop
    n          start an episode    y  stop: success    f  stop: failure
    Backspace  discard the episode  h or ?  print this help
    Ctrl-C     quit

Run ``python -m tether.hardware.teleop.keyboard [--log FILE]`` to see (or log as JSON
lines) what the device reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import sys
import termios
import time
import tty
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from tether.core.errors import TetherError
from tether.hardware.teleop.command import EpisodeEvent, TeleopCommand

HELP = (__doc__ or "").split("Keys", 1)[1].split("Run ``", 1)[0]

# key -> (linear (3,), angular (3,)) unit directions
MOTION_KEYS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "w": ((1, 0, 0), (0, 0, 0)),
    "s": ((-1, 0, 0), (0, 0, 0)),
    "a": ((0, 1, 0), (0, 0, 0)),
    "d": ((0, -1, 0), (0, 0, 0)),
    "q": ((0, 0, 1), (0, 0, 0)),
    "e": ((0, 0, -1), (0, 0, 0)),
    "j": ((0, 0, 0), (1, 0, 0)),
    "l": ((0, 0, 0), (-1, 0, 0)),
    "i": ((0, 0, 0), (0, 1, 0)),
    "k": ((0, 0, 0), (0, -1, 0)),
    "u": ((0, 0, 0), (0, 0, 1)),
    "o": ((0, 0, 0), (0, 0, -1)),
}
EVENT_KEYS = {
    "n": EpisodeEvent.START,
    "y": EpisodeEvent.STOP_SUCCESS,
    "f": EpisodeEvent.STOP_FAIL,
    "\x7f": EpisodeEvent.DISCARD,
    "\x08": EpisodeEvent.DISCARD,
}
ESC = "\x1b"


class KeyboardState:
    """The key-press state machine, separate from the terminal so it can be unit tested.

    ``feed(text, now)`` takes the characters read since the last call (escape sequences
    such as arrow keys are ignored; a lone Esc is the e-stop); ``command(now)`` returns the
    TeleopCommand for this step. ``now``: seconds, monotonic.
    """

    def __init__(self, key_hold_s: float = 0.25, idle_disarm_s: float = 10.0) -> None:
        self.key_hold_s = key_hold_s
        self.idle_disarm_s = idle_disarm_s
        self.armed = False
        self.estop = False
        self.speed = 0.5
        self.last_key_t = -np.inf
        self._until: dict[str, float] = {}  # motion key -> time its motion ends
        self._toggle = False
        self._events: list[EpisodeEvent] = []
        self.help_requested = False

    def feed(self, text: str, now: float) -> None:
        i = 0
        while i < len(text):
            ch = text[i]
            i += 1
            if ch == ESC:
                if i < len(text) and text[i] in "[O":
                    # CSI / SS3 sequence (arrows, function keys): skip to its final byte
                    i += 1
                    while i < len(text) and not ("@" <= text[i] <= "~"):
                        i += 1
                    i += 1
                    continue
                self._press_estop()
            else:
                self._key(ch, now)
            self.last_key_t = now

    def _press_estop(self) -> None:
        self.estop = True
        self.armed = False
        self._until.clear()

    def _key(self, ch: str, now: float) -> None:
        if ch == "x":
            self._press_estop()
        elif ch == "R":
            self.estop = False
        elif ch == "m":
            self.armed = not self.armed and not self.estop
            self._until.clear()
        elif ch in MOTION_KEYS:
            self._until[ch] = now + self.key_hold_s
        elif ch == " ":
            self._toggle = True
        elif ch in "+=":
            self.speed = min(1.0, self.speed * 1.5)
        elif ch in "-_":
            self.speed = max(0.1, self.speed / 1.5)
        elif ch in EVENT_KEYS:
            self._events.append(EVENT_KEYS[ch])
        elif ch in "h?":
            self.help_requested = True

    def command(self, now: float) -> TeleopCommand:
        if self.armed and now - self.last_key_t > self.idle_disarm_s:
            self.armed = False
        lin = np.zeros(3)
        ang = np.zeros(3)
        for key, until in list(self._until.items()):
            if now >= until:
                del self._until[key]
                continue
            dl, da = MOTION_KEYS[key]
            lin += dl
            ang += da
        deadman = self.armed and not self.estop
        cmd = TeleopCommand(
            linear=np.clip(lin, -1, 1) * self.speed if deadman else np.zeros(3),
            angular=np.clip(ang, -1, 1) * self.speed if deadman else np.zeros(3),
            gripper_toggle=self._toggle and deadman,
            deadman=deadman,
            estop=self.estop,
            events=tuple(self._events),
        )
        self._toggle = False
        self._events.clear()
        return cmd


class KeyboardDevice:
    """Keyboard teleop on a terminal: stdin when it is a TTY, else ``/dev/tty``.

    The terminal is put in cbreak mode (no echo, no line buffering; Ctrl-C still
    interrupts) and restored by ``close``.
    """

    name = "keyboard"

    def __init__(
        self,
        key_hold_s: float = 0.25,
        idle_disarm_s: float = 10.0,
        tty_path: str | None = None,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = KeyboardState(key_hold_s, idle_disarm_s)
        self.clock = clock
        self.out = out if out is not None else sys.stderr
        self._own_fd = False
        if tty_path is None and sys.stdin is not None and sys.stdin.isatty():
            self.fd = sys.stdin.fileno()
        else:
            path = tty_path or "/dev/tty"
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
            except OSError as exc:
                raise TetherError(
                    f"keyboard teleop needs a terminal, and {path} cannot be opened "
                    f"({exc.strerror}): run the teleop node in a terminal (not under a "
                    "launcher without a TTY), or use device:=gamepad / scripted."
                ) from None
            self._own_fd = True
        if not os.isatty(self.fd):
            raise TetherError("keyboard teleop needs a terminal, but its input is not a TTY.")
        self._saved: list[Any] | None = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        self._print(f"keyboard teleop ready. Keys:{HELP}")

    def _print(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.out.write(text.replace("\n", "\r\n") + "\r\n")
            self.out.flush()

    def _drain(self) -> str:
        chunks = []
        while select.select([self.fd], [], [], 0)[0]:
            data = os.read(self.fd, 1024)
            if not data:
                break
            chunks.append(data.decode("utf-8", errors="ignore"))
        return "".join(chunks)

    def read(self) -> TeleopCommand:
        now = self.clock()
        text = self._drain()
        if text:
            was = (self.state.armed, self.state.estop)
            self.state.feed(text, now)
            if self.state.help_requested:
                self.state.help_requested = False
                self._print(HELP)
            if (self.state.armed, self.state.estop) != was:
                status = "E-STOP" if self.state.estop else "armed" if self.state.armed else "idle"
                self._print(f"[teleop] {status}")
        return self.state.command(now)

    def release_estop(self) -> None:
        """Release the latched e-stop (the node's ~/release_estop service)."""
        self.state.estop = False

    def close(self) -> None:
        if self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None
        if self._own_fd:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self._own_fd = False


def main(argv: list[str] | None = None) -> int:
    """Read the keyboard at ``--hz`` and log every command (JSON lines) to ``--log``."""
    ap = argparse.ArgumentParser(description="Show what keyboard teleop reads.")
    ap.add_argument("--log", help="append each command as a JSON line to this file")
    ap.add_argument("--hz", type=float, default=50.0)
    ap.add_argument("--duration", type=float, default=0.0, help="seconds; 0 = until Ctrl-C")
    args = ap.parse_args(argv)
    try:
        dev = KeyboardDevice()
    except TetherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    log = open(args.log, "a", buffering=1) if args.log else None  # noqa: SIM115
    try:
        while not args.duration or time.monotonic() - t0 < args.duration:
            cmd = dev.read()
            line = json.dumps({"t": round(time.monotonic() - t0, 4), **cmd.to_json()})
            if log is not None:
                log.write(line + "\n")
            time.sleep(1.0 / args.hz)
    except KeyboardInterrupt:
        pass
    finally:
        dev.close()
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
