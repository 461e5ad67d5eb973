"""Things a person would rather look at than read: latency histograms (PNG), videos (MP4)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def latency_histogram(samples_ms: Sequence[float], path: str | Path, title: str = "") -> Path:
    """Histogram of latencies (ms) with p50/p99 marked; log-scaled counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = np.asarray(samples_ms, np.float64)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if a.size:
        ax.hist(a, bins=min(80, max(10, a.size // 20)), color="#3a7ca5", log=True)
        for q, style in ((50, "--"), (99, ":")):
            v = float(np.percentile(a, q))
            ax.axvline(v, color="k", linestyle=style, label=f"p{q} = {v:.2f} ms")
        ax.legend()
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("steps")
    ax.set_title(title or "observation -> action latency")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return Path(path)


def write_mp4(frames: Sequence[np.ndarray], path: str | Path, fps: float = 30.0) -> Path:
    """H.264 MP4 (yuv420p, plays in browsers) from (H, W, 3) uint8 frames; odd sizes are padded."""
    import av

    path = Path(path)
    if not frames:
        raise ValueError("no frames to write")
    h, w = frames[0].shape[:2]
    ph, pw = h + h % 2, w + w % 2
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=round(fps))
        stream.width, stream.height, stream.pix_fmt = pw, ph, "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast"}
        for img in frames:
            if (ph, pw) != img.shape[:2]:
                img = np.pad(img, ((0, ph - h), (0, pw - w), (0, 0)), mode="edge")
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            ):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path
