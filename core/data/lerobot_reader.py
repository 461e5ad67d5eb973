"""LeRobotDataset v3.0 format helpers and a validating reader.

Layout (as LeRobot 0.4.4 writes it)::

    meta/info.json                            codebase_version "v3.0", features, totals, templates
    meta/stats.json                           {feature: {min,max,mean,std,count,q01..q99}}
    meta/tasks.parquet                        task string = pandas index, int64 task_index
    meta/episodes/chunk-000/file-000.parquet  one row per episode (ranges, video times, stats)
    data/chunk-XXX/file-YYY.parquet           one row per frame, episodes back to back
    videos/<key>/chunk-XXX/file-YYY.mp4       one stream per camera, episodes back to back

pyarrow, pandas and av are imported inside functions only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import TetherError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
STAGING_DIR = ".tether_staging"
#: Columns every LeRobot dataset has, after the user features, in this order.
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
TIMESTAMP_TOLERANCE_S = 1e-4


class DatasetError(TetherError):
    """A dataset on disk is missing, malformed or not in LeRobot v3.0 format."""


class DatasetWriteError(TetherError):
    """A dataset could not be written (unwritable path, full disk); saved episodes are intact."""


# ---------------------------------------------------------------- crash-safe file helpers


def fsync_dir(path: Path) -> None:
    """Flush a directory entry (so an ``os.replace`` into it survives a power cut)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """Hidden sibling temp name: never matched by ``*.parquet`` / ``*.mp4`` globs."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def atomic_write(path: Path, write: Callable[[Path], object]) -> None:
    """Write ``path`` via ``write(tmp)`` then fsync + ``os.replace``: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: Path, obj: Any) -> None:
    """JSON with ``indent=4`` (as LeRobot writes it), atomically."""
    atomic_write(path, lambda p: p.write_text(json.dumps(obj, indent=4)))


def version_major(version: str) -> int:
    """``"v3.0"`` -> 3."""
    try:
        return int(str(version).lstrip("v").split(".")[0])
    except ValueError as exc:
        raise DatasetError(f"codebase_version {version!r} is not of the form 'vX.Y'.") from exc


def data_file(root: Path, chunk: int, file: int) -> Path:
    """Path of a data parquet file."""
    return root / DATA_PATH.format(chunk_index=chunk, file_index=file)


def video_file(root: Path, key: str, chunk: int, file: int) -> Path:
    """Path of one camera's mp4 file."""
    return root / VIDEO_PATH.format(video_key=key, chunk_index=chunk, file_index=file)


def read_tasks(root: Path) -> list[str]:
    """Tasks by task_index from meta/tasks.parquet (strings are the pandas index, as in LeRobot)."""
    import pandas as pd

    path = root / TASKS_PATH
    if not path.exists():
        raise DatasetError(f"{path} is missing: not a LeRobot v3.0 dataset.")
    df = pd.read_parquet(path)
    if "task_index" not in df.columns or isinstance(df.index, pd.RangeIndex):
        raise DatasetError(
            f"{path} must hold an int64 task_index column indexed by the task strings."
        )
    order = np.argsort(df["task_index"].to_numpy())
    if not np.array_equal(df["task_index"].to_numpy()[order], np.arange(len(df))):
        raise DatasetError(f"{path}: task_index must be 0..{len(df) - 1}.")
    return [str(df.index[i]) for i in order]


def read_episodes(root: Path) -> list[dict[str, Any]]:
    """Rows of every meta/episodes parquet file, sorted by episode_index (empty if none yet)."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    rows.sort(key=lambda r: r["episode_index"])
    for pos, row in enumerate(rows):
        if row["episode_index"] != pos:
            raise DatasetError(
                f"meta/episodes: row {pos} holds episode {row['episode_index']}, expected {pos}."
            )
    return rows


def episode_stats(row: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """The ``stats/<feature>/<stat>`` columns of an episodes row as arrays."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for col, value in row.items():
        if col.startswith("stats/"):
            feat, stat = col[len("stats/") :].rsplit("/", 1)
            out.setdefault(feat, {})[stat] = np.asarray(value)
    return out


# ---------------------------------------------------------------- reader


class LeRobotReader:
    """Read and validate a LeRobotDataset v3.0 directory.

    ``meta/episodes`` is the source of truth: rows or video frames past the last saved
    episode (left by a writer killed mid-save) are ignored, and ``needs_recovery`` is True
    until :func:`tether.core.data.lerobot.recover` cleans them up.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        info_path = self.root / INFO_PATH
        if not info_path.exists():
            raise DatasetError(f"{info_path} is missing: not a LeRobot v3.0 dataset.")
        try:
            self.info: dict[str, Any] = json.loads(info_path.read_text())
        except ValueError as exc:
            raise DatasetError(f"{info_path} is not valid JSON.") from exc
        version = self.info.get("codebase_version", "?")
        if version_major(version) != 3:
            raise DatasetError(f"{self.root} is LeRobot format {version}; only v3.x is supported.")
        self.fps: int = int(self.info["fps"])
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.video_keys = [k for k, f in self.features.items() if f["dtype"] == "video"]
        self._table_cache: tuple[Path, Any] | None = None
        self.episodes = read_episodes(self.root)
        self.tasks = (
            read_tasks(self.root) if self.episodes or (self.root / TASKS_PATH).exists() else []
        )
        stats_path = self.root / STATS_PATH
        raw = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        self.stats = {k: {s: np.asarray(v) for s, v in st.items()} for k, st in raw.items()}
        self.needs_recovery = (
            self.info.get("total_episodes") != len(self.episodes)
            or (self.root / STAGING_DIR).exists()
        )
        for row in self.episodes:
            for t in row["tasks"]:
                if t not in self.tasks:
                    raise DatasetError(
                        f"Episode {row['episode_index']} has task {t!r} missing from tasks.parquet."
                    )

    @property
    def num_episodes(self) -> int:
        """Number of saved episodes."""
        return len(self.episodes)

    @property
    def num_frames(self) -> int:
        """Number of frames over all saved episodes."""
        return int(sum(r["length"] for r in self.episodes))

    def _rows(self, ep: dict[str, Any]) -> dict[str, np.ndarray]:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        path = data_file(self.root, ep["data/chunk_index"], ep["data/file_index"])
        if not path.exists():
            raise DatasetError(f"Data file {path} of episode {ep['episode_index']} is missing.")
        # episodes share data files (up to data_files_size_in_mb each): keep the last one
        # read, so reading a dataset episode by episode reads each file once
        if self._table_cache is None or self._table_cache[0] != path:
            self._table_cache = (path, pq.read_table(path))
        table = self._table_cache[1]
        lo, hi = ep["dataset_from_index"], ep["dataset_to_index"]
        idx = table.column("index")
        table = table.filter(pc.and_(pc.greater_equal(idx, lo), pc.less(idx, hi)))
        out: dict[str, np.ndarray] = {}
        for name in table.column_names:
            col = table.column(name).combine_chunks()
            if pa.types.is_fixed_size_list(col.type):
                out[name] = col.flatten().to_numpy().reshape(len(col), col.type.list_size)
            else:
                out[name] = col.to_numpy(zero_copy_only=False)
        return out

    def episode(self, i: int, decode_video: bool = True) -> dict[str, Any]:
        """Episode ``i`` as arrays: each vector feature (N, D), scalars (N,), cameras (N, H, W, 3) uint8.

        Also ``"task"``: the task string of each frame (list of N str). Validates ranges,
        frame_index, and timestamps (== frame_index / fps within 1e-4 s).
        """
        if not 0 <= i < len(self.episodes):
            raise DatasetError(
                f"Episode {i} does not exist: the dataset has {len(self.episodes)} episodes."
            )
        ep = self.episodes[i]
        out: dict[str, Any] = self._rows(ep)
        n = ep["length"]
        if len(out["index"]) != n or not np.array_equal(
            out["index"], np.arange(ep["dataset_from_index"], ep["dataset_to_index"])
        ):
            raise DatasetError(
                f"Episode {i}: data rows do not match dataset_from/to_index in meta/episodes."
            )
        if not np.array_equal(out["frame_index"], np.arange(n)) or np.any(
            out["episode_index"] != i
        ):
            raise DatasetError(
                f"Episode {i}: frame_index must be 0..{n - 1} and episode_index {i}."
            )
        ts = out["timestamp"].astype(np.float64)
        bad = np.abs(ts - np.arange(n) / self.fps) > TIMESTAMP_TOLERANCE_S
        if bad.any():
            raise DatasetError(
                f"Episode {i}: timestamp of frame {int(np.argmax(bad))} is not frame_index / fps."
            )
        out["task"] = [self.tasks[t] for t in out["task_index"]]
        if decode_video:
            for key in self.video_keys:
                out[key] = self.frames(i, key, ts)
        return out

    def frames(self, i: int, key: str, timestamps: np.ndarray | None = None) -> np.ndarray:
        """Decoded frames (N, H, W, 3) uint8 of camera ``key`` in episode ``i``, looked up at from_timestamp + timestamp."""
        from .video import decode_frames

        ep = self.episodes[i]
        path = video_file(
            self.root, key, ep[f"videos/{key}/chunk_index"], ep[f"videos/{key}/file_index"]
        )
        t0, t1 = ep[f"videos/{key}/from_timestamp"], ep[f"videos/{key}/to_timestamp"]
        frames, times = decode_frames(path, t0, t1)
        ts = (
            np.arange(ep["length"]) / self.fps
            if timestamps is None
            else np.asarray(timestamps, np.float64)
        )
        out = np.empty((len(ts), *frames.shape[1:]), np.uint8) if len(frames) else None
        for j, t in enumerate(ts):
            k = int(np.searchsorted(times, t0 + t - TIMESTAMP_TOLERANCE_S))
            if out is None or k >= len(times) or abs(times[k] - (t0 + t)) > TIMESTAMP_TOLERANCE_S:
                raise DatasetError(f"Episode {i}: no frame of {key} at {t0 + t:.4f} s in {path}.")
            out[j] = frames[k]
        assert out is not None
        return out
