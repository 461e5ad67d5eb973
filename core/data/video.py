"""Video helpers for datasets: stream-encode RGB frames to MP4, concatenate MP4s, decode by time.

PyAV (``av``) is imported lazily inside functions: ``import tether.core`` stays light.

Conventions (those of LeRobot 0.4.4): yuv420p, GOP ``g=2``, CRF 30, MP4 with ``+faststart``;
frame ``i`` of a file has presentation time ``i / fps`` seconds (no B-frames, so pts == dts).
Episodes are concatenated in one file by remuxing packets (no re-encode), each episode
starting at ``from_timestamp = frames_before / fps``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import MissingDependency, TetherError

#: Encoders tried in order when the requested one is missing from the bundled FFmpeg.
CODEC_FALLBACKS = ("libsvtav1", "libx264")
#: LeRobot's name for each encoder's codec, as written to info.json ``video.codec``.
CODEC_NAMES = {"libsvtav1": "av1", "libaom-av1": "av1", "libx264": "h264", "h264": "h264"}


class VideoError(TetherError):
    """A video file could not be encoded, concatenated or decoded."""


def _av() -> Any:
    os.environ.setdefault("SVT_LOG", "1")  # svt-av1 prints its banner unless told to keep quiet
    try:
        import av
    except ImportError as exc:  # pragma: no cover - av is in the lock file
        raise MissingDependency("av", "media", "Dataset video encoding") from exc
    return av


# real-time scheduling policies (Linux); empty where the os module has none
_REALTIME = {getattr(os, n) for n in ("SCHED_FIFO", "SCHED_RR") if hasattr(os, n)}


def _thread_policies() -> dict[int, int]:
    """Scheduling policy of each thread of this process (Linux; empty elsewhere)."""
    out: dict[int, int] = {}
    if not _REALTIME or not os.path.isdir("/proc/self/task"):
        return out
    for name in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError, ValueError):
            out[int(name)] = os.sched_getscheduler(int(name))
    return out


@contextlib.contextmanager
def no_realtime_threads() -> Iterator[None]:
    """Undo what the code inside does to this process's scheduling: SVT-AV1 (libsvtav1),
    when the process may (root, as in most containers), moves the calling thread and the
    ~40 worker threads it starts to SCHED_FIFO priority 99 when its encoder opens. A
    recorder encoding at that priority would preempt the simulator, the policy server and
    the safety watchdog on the same machine, and every process it starts afterwards would
    inherit it. Threads that were real-time before (set on purpose, e.g. with chrt) stay."""
    before = _thread_policies()
    try:
        yield
    finally:
        for tid, policy in _thread_policies().items():
            if policy in _REALTIME and before.get(tid) not in _REALTIME:
                with contextlib.suppress(OSError):
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


def pick_codec(preferred: str = "libsvtav1") -> str:
    """Return ``preferred`` if this FFmpeg has the encoder, else the first available fallback."""
    av = _av()
    for name in (preferred, *CODEC_FALLBACKS):
        if name in av.codecs_available:
            return name
    raise VideoError(
        f"No usable video encoder: tried {preferred} and {', '.join(CODEC_FALLBACKS)}."
    )


def encoder_options(
    codec: str, crf: int = 30, gop: int = 2, preset: int | None = None
) -> dict[str, str]:
    """FFmpeg options for ``codec``: LeRobot's g/crf, no B-frames, a fast preset.

    ``preset`` (libsvtav1 0..13, larger = faster) defaults to 11 for svt-av1 and
    ``veryfast`` for x264.
    """
    opts = {"g": str(gop), "crf": str(crf)}
    if codec == "libsvtav1":
        opts["preset"] = str(11 if preset is None else preset)
        opts["svtav1-params"] = "lp=2"  # keep svt-av1 from spawning one thread pool per core
    elif codec == "libx264":
        opts["preset"] = "veryfast"
        opts["bf"] = "0"  # pts == dts: packets remux with a plain offset
    return opts


class VideoEncoder:
    """Stream-encode (H, W, 3) uint8 RGB frames at ``fps`` into an MP4 at ``path``.

    ``add(frame)`` encodes frame ``i`` at time ``i / fps`` s; ``close()`` flushes and
    finishes the file (the file is incomplete until then).
    """

    def __init__(
        self, path: Path, fps: int, height: int, width: int, codec: str, crf: int = 30
    ) -> None:
        av = _av()
        self.path = Path(path)
        self.fps = int(fps)
        self.height, self.width = int(height), int(width)
        self.count = 0
        self._container = av.open(
            str(self.path), mode="w", format="mp4", options={"movflags": "+faststart"}
        )
        self._stream = self._container.add_stream(
            codec, rate=self.fps, options=encoder_options(codec, crf)
        )
        self._stream.width, self._stream.height = self.width, self.height
        self._stream.pix_fmt = "yuv420p"
        self._stream.codec_context.time_base = Fraction(1, self.fps)
        self._stream.thread_count = 2

    def add(self, frame: np.ndarray) -> None:
        """Encode one (H, W, 3) uint8 RGB frame."""
        if frame.shape != (self.height, self.width, 3) or frame.dtype != np.uint8:
            raise VideoError(
                f"Video frames must be uint8 of shape {(self.height, self.width, 3)}, "
                f"got {frame.dtype} {tuple(frame.shape)}."
            )
        av = _av()
        vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        vf.pts = self.count
        vf.time_base = Fraction(1, self.fps)
        with no_realtime_threads():  # the encoder opens (and starts its threads) here
            packets = self._stream.encode(vf)
        for packet in packets:
            self._container.mux(packet)
        self.count += 1

    def close(self) -> None:
        """Flush the encoder and write the MP4 trailer."""
        if self._container is None:
            return
        try:
            with no_realtime_threads():
                packets = self._stream.encode(None)
            for packet in packets:
                self._container.mux(packet)
        finally:
            self._container.close()
            self._container = None

    def abort(self) -> None:
        """Close without caring about the result (the file is to be deleted)."""
        try:
            if self._container is not None:
                self._container.close()
        except Exception:  # noqa: BLE001 - best effort on a file being thrown away
            pass
        self._container = None


def concat_videos(parts: list[tuple[Path, int]], out: Path, fps: int) -> None:
    """Remux the first ``n`` frames of each ``(path, n)`` into one MP4 at ``out``, back to back.

    Part ``k`` starts at ``sum(n of earlier parts) / fps`` seconds. No re-encode: the parts
    must come from the same encoder settings (same codec parameters).
    """
    av = _av()
    inputs = [av.open(str(p)) for p, _ in parts]
    try:
        output = av.open(str(out), mode="w", format="mp4", options={"movflags": "+faststart"})
        try:
            ostream = output.add_stream_from_template(inputs[0].streams.video[0], opaque=True)
            frames_before = 0
            for ctr, (_, n) in zip(inputs, parts, strict=True):
                istream = ctr.streams.video[0]
                tb = istream.time_base
                offset = int(Fraction(frames_before, fps) / tb)
                taken = 0
                for packet in ctr.demux(istream):
                    if packet.dts is None or taken >= n:
                        continue
                    packet.pts = (packet.pts if packet.pts is not None else packet.dts) + offset
                    packet.dts = packet.dts + offset
                    packet.stream = ostream
                    output.mux(packet)
                    taken += 1
                if taken < n:
                    raise VideoError(f"Video file {parts[0][0]} has {taken} frames, expected {n}.")
                frames_before += n
        finally:
            output.close()
    finally:
        for ctr in inputs:
            ctr.close()


def count_frames(path: Path) -> int:
    """Number of video packets (= frames) in the first video stream of ``path``."""
    av = _av()
    with av.open(str(path)) as ctr:
        return sum(1 for p in ctr.demux(ctr.streams.video[0]) if p.dts is not None)


def decode_frames(path: Path, from_s: float, to_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Decode frames with presentation time in ``[from_s, to_s)`` seconds.

    Returns ``(frames, times)``: (N, H, W, 3) uint8 RGB and (N,) float64 seconds in the file.
    """
    av = _av()
    if not os.path.exists(path):
        raise VideoError(f"Video file {path} is missing.")
    frames: list[np.ndarray] = []
    times: list[float] = []
    eps = 1e-4
    with av.open(str(path)) as ctr:
        stream = ctr.streams.video[0]
        stream.thread_type = "AUTO"
        tb = stream.time_base
        if from_s > eps:
            ctr.seek(int(from_s / tb), stream=stream, backward=True, any_frame=False)
        for frame in ctr.decode(stream):
            if frame.pts is None:
                continue
            t = float(frame.pts * tb)
            if t < from_s - eps:
                continue
            if t >= to_s - eps:
                break
            frames.append(frame.to_ndarray(format="rgb24"))
            times.append(t)
    if not frames:
        return np.zeros((0, 0, 0, 3), np.uint8), np.zeros(0)
    return np.stack(frames), np.asarray(times)
