"""The wire between Tether and a LeRobot worker process: framed JSON + safetensors, no pickle.

Both sides import this file: Tether as ``tether.policies.lerobot.protocol``, the worker (run
by path with the LeRobot environment's Python, where Tether is not installed) as the
top-level module ``protocol`` from its own folder. So it needs only the standard library,
numpy and safetensors, which both environments have.

One message is::

    8 bytes   little-endian uint32 header length H, uint32 payload length P
    H bytes   UTF-8 JSON object; "op" names the message
    P bytes   safetensors of the message's arrays (absent when P == 0)

Tether -> worker: ``infer`` (arrays: each LeRobot input feature stacked over the policy's
observation steps, oldest first; ``task``: the instruction or ""), ``reset``, ``close``.
Worker -> Tether: ``ready`` (what the checkpoint reads and writes), ``chunk`` (array
``action``: (horizon, action_dim), unnormalised), ``ok``, ``error`` (``message``).
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import IO, Any

import numpy as np
from safetensors.numpy import load as _load_arrays
from safetensors.numpy import save as _save_arrays

FORMAT = "tether-lerobot/1"
_HEAD = struct.Struct("<II")
# a frame this large is a broken stream, not a message (a 4K RGB stack is ~100 MB)
MAX_BYTES = 1 << 30


class ProtocolError(RuntimeError):
    """The other side sent something that is not a message, closed the pipe, or was silent
    past the deadline."""


def encode(header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """One message as bytes (header JSON, then the arrays as safetensors)."""
    head = json.dumps(header, separators=(",", ":")).encode()
    body = b""
    if arrays:
        body = _save_arrays({k: np.ascontiguousarray(v) for k, v in arrays.items()})
    return _HEAD.pack(len(head), len(body)) + head + body


def send(
    stream: IO[bytes], header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None
) -> None:
    stream.write(encode(header, arrays))
    stream.flush()


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise ProtocolError("timed out waiting for the other side")
        part = os.read(fd, min(n - got, 1 << 20))
        if not part:
            raise ProtocolError("the other side closed the pipe")
        chunks.append(part)
        got += len(part)
    return b"".join(chunks)


def receive(
    stream: IO[bytes], timeout_s: float | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The next message: (header, arrays). Raises ProtocolError on EOF, garbage or timeout."""
    fd = stream.fileno()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    n_head, n_body = _HEAD.unpack(_read_exact(fd, _HEAD.size, deadline))
    if n_head == 0 or n_head > MAX_BYTES or n_body > MAX_BYTES:
        raise ProtocolError(f"not a {FORMAT} frame (lengths {n_head}, {n_body})")
    try:
        header = json.loads(_read_exact(fd, n_head, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"a header that is not JSON ({exc})") from None
    if not isinstance(header, dict) or "op" not in header:
        raise ProtocolError(f"a header without 'op': {header!r:.200}")
    arrays = _load_arrays(_read_exact(fd, n_body, deadline)) if n_body else {}
    return header, arrays
