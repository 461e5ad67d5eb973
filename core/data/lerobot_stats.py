"""Per-episode and aggregate feature statistics, computed the way LeRobot 0.4.4 does.

Each feature gets ``{min, max, mean, std, count, q01, q10, q50, q90, q99}`` as numpy arrays:
vectors (N, D) reduce over frames to shape (D,); scalars (N,) to shape (1,); images
(N, H, W, 3) uint8 reduce over sampled frames and pixels to shape (3, 1, 1) in [0, 1].
Integer features keep integer min/max (LeRobot stores them as int64 lists).
"""

from __future__ import annotations

import numpy as np

STAT_NAMES = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}

Stats = dict[str, np.ndarray]


def estimate_num_samples(
    n: int, min_num_samples: int = 100, max_num_samples: int = 10_000, power: float = 0.75
) -> int:
    """Number of frames LeRobot samples from an episode of ``n`` frames for image stats."""
    if n < min_num_samples:
        min_num_samples = n
    return max(min_num_samples, min(int(n**power), max_num_samples))


def sample_indices(n: int) -> list[int]:
    """Indices of the frames (out of ``n``) that image stats are computed on."""
    k = estimate_num_samples(n)
    return [int(i) for i in np.round(np.linspace(0, n - 1, k)).astype(int)]


def downsample_factor(height: int, width: int, target: int = 150, threshold: int = 300) -> int:
    """Pixel stride LeRobot uses to shrink images before stats (1 below ``threshold`` px)."""
    if max(height, width) < threshold:
        return 1
    return max(1, int(width / target) if width > height else int(height / target))


def feature_stats(array: np.ndarray) -> Stats:
    """Stats of a (N,) or (N, D) array over axis 0; results have shape (1,) or (D,)."""
    keepdims = array.ndim == 1
    out: Stats = {
        "min": np.min(array, axis=0, keepdims=keepdims),
        "max": np.max(array, axis=0, keepdims=keepdims),
        "mean": np.asarray(np.mean(array, axis=0, keepdims=keepdims, dtype=np.float64)),
        "std": np.asarray(np.std(array, axis=0, keepdims=keepdims, dtype=np.float64)),
        "count": np.array([len(array)], dtype=np.int64),
    }
    qs = np.quantile(array.astype(np.float64), list(QUANTILES.values()), axis=0, keepdims=keepdims)
    for name, q in zip(QUANTILES, qs, strict=True):
        out[name] = q
    return out


def image_stats(frames: np.ndarray) -> Stats:
    """Stats of sampled (N, H, W, 3) uint8 frames per channel, shape (3, 1, 1), scaled to [0, 1]."""
    chw = np.moveaxis(frames, -1, 1).astype(np.float64) / 255.0  # (N, 3, H, W)
    axes = (0, 2, 3)
    out: Stats = {
        "min": np.min(chw, axis=axes, keepdims=True)[0],
        "max": np.max(chw, axis=axes, keepdims=True)[0],
        "mean": np.mean(chw, axis=axes, keepdims=True)[0],
        "std": np.std(chw, axis=axes, keepdims=True)[0],
        "count": np.array([len(frames)], dtype=np.int64),
    }
    flat = np.moveaxis(chw, 1, 0).reshape(3, -1)  # (3, N*H*W)
    qs = np.quantile(flat, list(QUANTILES.values()), axis=1)  # (5, 3): one sort for all five
    for name, q in zip(QUANTILES, qs, strict=True):
        out[name] = q.reshape(3, 1, 1)
    return out


def aggregate_stats(per_episode: list[dict[str, Stats]]) -> dict[str, Stats]:
    """Combine per-episode stats into dataset stats (LeRobot's ``aggregate_stats``).

    min/max: elementwise extremes; mean/std: exact pooled values weighted by count;
    quantiles: count-weighted mean of the per-episode quantiles (an approximation, as in LeRobot).
    """
    if not per_episode:
        return {}
    out: dict[str, Stats] = {}
    for key in per_episode[0]:
        eps = [ep[key] for ep in per_episode if key in ep]
        counts = np.stack([e["count"] for e in eps]).astype(np.float64)  # (E, 1)
        total = counts.sum(axis=0)
        means = np.stack([np.asarray(e["mean"], np.float64) for e in eps])
        w = counts.reshape(counts.shape + (1,) * (means.ndim - counts.ndim))
        mean = (means * w).sum(axis=0) / w.sum(axis=0)
        var = np.stack([np.asarray(e["std"], np.float64) ** 2 for e in eps])
        pooled = ((var + (means - mean) ** 2) * w).sum(axis=0) / (w.sum(axis=0))
        agg: Stats = {
            "min": np.min(np.stack([e["min"] for e in eps]), axis=0),
            "max": np.max(np.stack([e["max"] for e in eps]), axis=0),
            "mean": mean,
            "std": np.sqrt(pooled),
            "count": total.astype(np.int64),
        }
        for name in QUANTILES:
            qs = np.stack([np.asarray(e[name], np.float64) for e in eps])
            agg[name] = (qs * w).sum(axis=0) / w.sum(axis=0)
        out[key] = agg
    return out


def stats_to_json(stats: dict[str, Stats]) -> dict[str, dict[str, list]]:
    """Nested lists for meta/stats.json (same shapes as the arrays)."""
    return {k: {s: np.asarray(v).tolist() for s, v in st.items()} for k, st in stats.items()}
