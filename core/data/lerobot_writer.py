"""Crash-safe LeRobotDataset v3.0 writer, and ``recover`` for a dataset whose writer was killed.

Crash safety: every file the writer touches is replaced atomically (temp + fsync + os.replace),
in this order on ``save_episode``: data parquet, videos, tasks, ``meta/episodes`` (the commit
point), then stats.json and info.json. A SIGKILL at any moment leaves every saved episode
readable; rows/frames of an uncommitted episode sit past the last saved episode and are ignored
by :class:`LeRobotReader`, and :func:`recover` (run automatically on ``resume=True``) cuts them off
and rebuilds stats.json / info.json so LeRobot itself loads the dataset.

The in-progress episode is streamed to ``<root>/.tether_staging/`` (video encoded frame by frame,
vectors in memory) and dropped by a crash or ``discard_episode()``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .lerobot_reader import (
    CHUNKS_SIZE,
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_FEATURES,
    EPISODES_PATH,
    INFO_PATH,
    STAGING_DIR,
    STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    DatasetError,
    DatasetWriteError,
    atomic_write,
    atomic_write_json,
    data_file,
    episode_stats,
    read_episodes,
    read_tasks,
    video_file,
)
from .lerobot_stats import (
    STAT_NAMES,
    Stats,
    aggregate_stats,
    downsample_factor,
    feature_stats,
    image_stats,
    sample_indices,
    stats_to_json,
)
from .video import CODEC_NAMES, VideoEncoder, VideoError, concat_videos, count_frames, pick_codec

_WRITE_ERRORS: tuple[type[BaseException], ...] = (OSError, VideoError)


def _write_errors() -> tuple[type[BaseException], ...]:
    try:
        import av

        return (*_WRITE_ERRORS, av.FFmpegError)
    except ImportError:  # pragma: no cover
        return _WRITE_ERRORS


def _hf_features(features: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``huggingface`` (datasets.Features) description of the data parquet columns."""
    out: dict[str, Any] = {}
    for key, ft in features.items():
        if ft["dtype"] == "video":
            continue
        value = {"dtype": ft["dtype"], "_type": "Value"}
        out[key] = (
            value
            if key in DEFAULT_FEATURES
            else {"feature": value, "length": ft["shape"][0], "_type": "List"}
        )
    return out


def _arrow_type(pa: Any, ft: dict[str, Any], scalar: bool) -> Any:
    base = {
        "float32": pa.float32(),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
    }[ft["dtype"]]
    return base if scalar else pa.list_(base, ft["shape"][0])


def _episodes_schema(pa: Any, features: dict[str, dict[str, Any]]) -> Any:
    i64, f64 = pa.int64(), pa.float64()
    fields = [("episode_index", i64), ("tasks", pa.list_(pa.string())), ("length", i64)]
    fields += [
        (c, i64)
        for c in ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index")
    ]
    for key, ft in features.items():
        if ft["dtype"] == "video":
            fields += [(f"videos/{key}/chunk_index", i64), (f"videos/{key}/file_index", i64)]
            fields += [(f"videos/{key}/from_timestamp", f64), (f"videos/{key}/to_timestamp", f64)]
    for key, ft in features.items():
        for stat in STAT_NAMES:
            if stat == "count":
                typ = pa.list_(i64)
            elif ft["dtype"] in ("video", "image"):
                typ = pa.list_(pa.list_(pa.list_(f64)))
            elif stat in ("min", "max") and ft["dtype"] == "int64":
                typ = pa.list_(i64)
            else:
                typ = pa.list_(f64)
            fields.append((f"stats/{key}/{stat}", typ))
    fields += [("meta/episodes/chunk_index", i64), ("meta/episodes/file_index", i64)]
    return pa.schema(fields)


def feature_shapes(features: dict[str, dict[str, Any]]) -> dict[str, tuple[str, list[int]]]:
    """Each feature's dtype and shape: what two datasets must share to take each other's
    episodes (appending, merging)."""
    return {k: (f["dtype"], list(f["shape"])) for k, f in features.items()}


def _next_loc(chunk: int, file: int, chunks_size: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file + 1 >= chunks_size else (chunk, file + 1)


class LeRobotWriter:
    """Write a LeRobotDataset v3.0, one episode at a time.

    Args:
        root: dataset directory (created; must not hold a dataset unless ``resume``).
        fps: frames per second; frame ``i`` gets timestamp ``i / fps`` s.
        features: LeRobot feature dict, e.g. ``{"observation.state": {"dtype": "float32",
            "shape": [9], "names": [...]}, "observation.images.front": {"dtype": "video",
            "shape": [96, 96, 3]}}``. The 5 default columns are added.
        robot_type: written to info.json.
        video_codec: FFmpeg encoder, ``libsvtav1`` (LeRobot's default) falling back to ``libx264``.
        resume: append to an existing dataset (after :func:`recover`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        fps: int,
        features: dict[str, dict[str, Any]],
        robot_type: str | None = None,
        *,
        video_codec: str = "libsvtav1",
        crf: int = 30,
        resume: bool = False,
        data_files_size_in_mb: int = 100,
        video_files_size_in_mb: int = 200,
        chunks_size: int = CHUNKS_SIZE,
    ) -> None:
        self.root = Path(root)
        self.fps = int(fps)
        self.crf = crf
        self.chunks_size = chunks_size
        user = {k: dict(v) for k, v in features.items() if k not in DEFAULT_FEATURES}
        self.video_keys = [k for k, f in user.items() if f["dtype"] == "video"]
        for key, ft in user.items():
            if ft["dtype"] == "image":
                raise DatasetError(f"Feature {key}: dtype 'image' is not supported, use 'video'.")
            if ft["dtype"] == "video":
                ft["names"] = ft.get("names") or ["height", "width", "channels"]
            ft.setdefault("names", None)
        self.codec = pick_codec(video_codec) if self.video_keys else video_codec
        for key in self.video_keys:
            h, w, c = user[key]["shape"]
            user[key]["info"] = {
                "video.height": h,
                "video.width": w,
                "video.codec": CODEC_NAMES.get(self.codec, self.codec),
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": self.fps,
                "video.channels": c,
                "has_audio": False,
            }
        self.features: dict[str, dict[str, Any]] = {
            **user,
            **{k: dict(v) for k, v in DEFAULT_FEATURES.items()},
        }
        self.info: dict[str, Any] = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": robot_type,
            "total_episodes": 0,
            "total_frames": 0,
            "total_tasks": 0,
            "chunks_size": chunks_size,
            "data_files_size_in_mb": data_files_size_in_mb,
            "video_files_size_in_mb": video_files_size_in_mb,
            "fps": self.fps,
            "splits": {},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if self.video_keys else None,
            "features": self.features,
        }
        self._episodes: list[dict[str, Any]] = []
        self._tasks: list[str] = []
        self._data_loc, self._data_rows = (0, 0), 0
        self._video_loc = {k: (0, 0) for k in self.video_keys}
        self._video_frames = {k: 0 for k in self.video_keys}
        self._task: str | None = None
        self._buf: dict[str, list[np.ndarray]] = {}
        self._encoders: dict[str, VideoEncoder] = {}
        try:
            if (self.root / INFO_PATH).exists():
                if not resume:
                    raise DatasetWriteError(
                        f"{self.root} already holds a dataset: pass resume=True to append to it."
                    )
                self._resume()
            else:
                if self.root.exists() and any(p.name != STAGING_DIR for p in self.root.iterdir()):
                    raise DatasetWriteError(
                        f"{self.root} exists and is not empty: choose a new dataset directory."
                    )
                atomic_write_json(self.root / INFO_PATH, self.info)
        except _write_errors() as exc:
            raise DatasetWriteError(
                f"Cannot create a dataset in {self.root}: {_why(exc)}."
            ) from exc

    # ------------------------------------------------------------------ state

    def _resume(self) -> None:
        recover(self.root)
        info = json.loads((self.root / INFO_PATH).read_text())
        if feature_shapes(info["features"]) != feature_shapes(self.features) or (
            info["fps"] != self.fps
        ):
            raise DatasetWriteError(
                f"{self.root} holds a dataset with other features or fps: cannot append to it."
            )
        self.info, self.features = info, info["features"]
        self._episodes = read_episodes(self.root)
        self._tasks = read_tasks(self.root) if self._episodes else []
        if self._episodes:
            last = self._episodes[-1]
            self._data_loc = (last["data/chunk_index"], last["data/file_index"])
            self._data_rows = sum(
                e["length"]
                for e in self._episodes
                if (e["data/chunk_index"], e["data/file_index"]) == self._data_loc
            )
            for key in self.video_keys:
                self._video_loc[key] = (
                    last[f"videos/{key}/chunk_index"],
                    last[f"videos/{key}/file_index"],
                )
                self._video_frames[key] = round(last[f"videos/{key}/to_timestamp"] * self.fps)

    @property
    def num_episodes(self) -> int:
        """Saved episodes."""
        return len(self._episodes)

    @property
    def total_frames(self) -> int:
        """Saved frames."""
        return int(self.info["total_frames"])

    def _staging(self) -> Path:
        return self.root / STAGING_DIR / f"episode_{len(self._episodes):06d}"

    # ------------------------------------------------------------------ episode API

    def start_episode(self, task: str) -> None:
        """Begin an episode of ``task`` (a discarded/unsaved one in progress is dropped)."""
        if self._task is not None:
            self.discard_episode()
        self._task = str(task)
        self._buf = {
            k: []
            for k, f in self.features.items()
            if f["dtype"] != "video" and k not in DEFAULT_FEATURES
        }
        self._buf.update({f"_img/{k}": [] for k in self.video_keys})
        self._encoders = {}

    def add_frame(self, frame: dict[str, np.ndarray]) -> None:
        """Append one frame: each vector feature shape (D,), each camera (H, W, 3) uint8 RGB."""
        if self._task is None:
            raise DatasetError("add_frame() before start_episode(task).")
        expected = {k for k in self.features if k not in DEFAULT_FEATURES}
        if set(frame) != expected:
            raise DatasetError(f"Frame keys {sorted(frame)} must be exactly {sorted(expected)}.")
        for key in expected:
            ft, value = self.features[key], np.asarray(frame[key])
            if tuple(value.shape) != tuple(ft["shape"]):
                raise DatasetError(
                    f"{key} has shape {tuple(value.shape)}, expected {tuple(ft['shape'])}."
                )
            if ft["dtype"] != "video":
                self._buf[key].append(value.astype(ft["dtype"]))
                continue
            if value.dtype != np.uint8:
                raise DatasetError(f"{key} must be uint8 RGB, got {value.dtype}.")
            if key not in self._encoders:
                path = self._staging() / f"{key}.mp4"
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    h, w, _ = ft["shape"]
                    self._encoders[key] = VideoEncoder(path, self.fps, h, w, self.codec, self.crf)
                except _write_errors() as exc:
                    raise DatasetWriteError(
                        f"Cannot write episode video in {path.parent}: {_why(exc)}."
                    ) from exc
            self._encoders[key].add(value)
            f = downsample_factor(value.shape[0], value.shape[1])
            self._buf[f"_img/{key}"].append(value[::f, ::f])

    def discard_episode(self) -> None:
        """Drop the episode in progress: nothing of it stays on disk."""
        for enc in self._encoders.values():
            enc.abort()
        shutil.rmtree(self.root / STAGING_DIR, ignore_errors=True)
        self._task, self._buf, self._encoders = None, {}, {}

    def save_episode(self) -> int:
        """Commit the episode in progress (rows, videos, metadata, stats); returns its index."""
        if self._task is None:
            raise DatasetError("save_episode() without start_episode(task).")
        keys = [k for k in self.features if k not in DEFAULT_FEATURES and k not in self.video_keys]
        n = (
            len(self._buf[keys[0]])
            if keys
            else (self._encoders[self.video_keys[0]].count if self._encoders else 0)
        )
        if n == 0:
            raise DatasetError("save_episode() on an episode with no frames.")
        ep = len(self._episodes)
        task = self._task
        task_index = self._tasks.index(task) if task in self._tasks else len(self._tasks)
        start = int(self.info["total_frames"])
        cols: dict[str, np.ndarray] = {k: np.stack(self._buf[k]) for k in keys}
        cols["timestamp"] = (np.arange(n) / self.fps).astype(np.float32)
        cols["frame_index"] = np.arange(n, dtype=np.int64)
        cols["episode_index"] = np.full(n, ep, np.int64)
        cols["index"] = np.arange(start, start + n, dtype=np.int64)
        cols["task_index"] = np.full(n, task_index, np.int64)
        stats: dict[str, Stats] = {}
        for key in self.features:
            if key in self.video_keys:
                imgs = self._buf[f"_img/{key}"]
                stats[key] = image_stats(np.stack([imgs[i] for i in sample_indices(len(imgs))]))
            else:
                stats[key] = feature_stats(cols[key])
        try:
            for enc in self._encoders.values():
                enc.close()
            self._write_episode(ep, task, task_index, cols, stats)
        except _write_errors() as exc:
            self.discard_episode()
            raise DatasetWriteError(
                f"Could not save episode {ep} to {self.root} ({_why(exc)}); it was dropped, "
                f"the {ep} saved before it are intact."
            ) from exc
        self.discard_episode()
        return ep

    def _write_episode(
        self,
        ep: int,
        task: str,
        task_index: int,
        cols: dict[str, np.ndarray],
        stats: dict[str, Stats],
    ) -> dict[str, Any]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = len(cols["index"])
        # 1. data rows: rewrite the current data file with the new rows appended (or start a new file)
        loc, rows = self._data_loc, self._data_rows
        path = data_file(self.root, *loc)
        if rows and path.stat().st_size >= self.info["data_files_size_in_mb"] * 2**20:
            loc, rows = _next_loc(*loc, self.chunks_size), 0
            path = data_file(self.root, *loc)
        arrays, fields = [], []
        for key, ft in self.features.items():
            if key in self.video_keys:
                continue
            scalar = key in DEFAULT_FEATURES
            typ = _arrow_type(pa, ft, scalar)
            values = cols[key] if scalar else pa.array(cols[key].reshape(-1), typ.value_type)
            arrays.append(
                pa.array(values, typ)
                if scalar
                else pa.FixedSizeListArray.from_arrays(values, ft["shape"][0])
            )
            fields.append(pa.field(key, typ))
        hf: dict[str, Any] = {"info": {"features": _hf_features(self.features)}}
        hf["fingerprint"] = hashlib.sha256(json.dumps(hf).encode()).hexdigest()[:16]
        schema = pa.schema(fields, metadata={"huggingface": json.dumps(hf)})
        table = pa.Table.from_arrays(arrays, schema=schema)
        if rows:
            table = pa.concat_tables([pq.read_table(path).slice(0, rows).cast(schema), table])
        atomic_write(path, lambda p: pq.write_table(table, p))
        data_loc, data_rows = loc, rows + n
        # 2. videos: append the staged episode to each camera's current file by remuxing
        video_state: dict[str, tuple[tuple[int, int], int]] = {}
        row: dict[str, Any] = {
            "episode_index": ep,
            "tasks": [task],
            "length": n,
            "data/chunk_index": loc[0],
            "data/file_index": loc[1],
            "dataset_from_index": int(cols["index"][0]),
            "dataset_to_index": int(cols["index"][-1]) + 1,
        }
        for key in self.video_keys:
            staged = self._staging() / f"{key}.mp4"
            vloc, frames = self._video_loc[key], self._video_frames[key]
            vpath = video_file(self.root, key, *vloc)
            if frames and vpath.stat().st_size >= self.info["video_files_size_in_mb"] * 2**20:
                vloc, frames = _next_loc(*vloc, self.chunks_size), 0
                vpath = video_file(self.root, key, *vloc)
            parts = [(vpath, frames), (staged, n)] if frames else [(staged, n)]
            atomic_write(vpath, functools.partial(concat_videos, parts, fps=self.fps))
            video_state[key] = (vloc, frames + n)
            row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"] = vloc
            row[f"videos/{key}/from_timestamp"] = frames / self.fps
            row[f"videos/{key}/to_timestamp"] = (frames + n) / self.fps
        # 3. tasks, 4. episodes (the commit point), 5. stats + info
        tasks = self._tasks if task_index < len(self._tasks) else [*self._tasks, task]
        if tasks is not self._tasks:
            _write_tasks(self.root, tasks)
        for key, st in stats.items():
            for stat in STAT_NAMES:
                row[f"stats/{key}/{stat}"] = np.asarray(st[stat]).tolist()
        row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = 0, 0
        episodes = [*self._episodes, row]
        _write_episodes(self.root, self.features, episodes)
        self._episodes, self._tasks = episodes, tasks
        self._data_loc, self._data_rows = data_loc, data_rows
        for key, (vloc, frames) in video_state.items():
            self._video_loc[key], self._video_frames[key] = vloc, frames
        _write_derived(self.root, self.info, episodes, tasks)
        return row

    def finalize(self) -> None:
        """Drop any unsaved episode and remove the staging folder (metadata is already final)."""
        self.discard_episode()
        shutil.rmtree(self.root / STAGING_DIR, ignore_errors=True)

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finalize()


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _write_tasks(root: Path, tasks: list[str]) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pd.DataFrame(
        {"task_index": np.arange(len(tasks), dtype=np.int64)}, index=pd.Index(tasks, dtype=object)
    )
    table = pa.Table.from_pandas(df, preserve_index=True)
    i = table.schema.get_field_index("__index_level_0__")
    table = table.cast(
        table.schema.set(i, pa.field("__index_level_0__", pa.large_string()))
    )  # as LeRobot's file
    atomic_write(root / TASKS_PATH, lambda p: pq.write_table(table, p))


def _write_episodes(
    root: Path, features: dict[str, dict[str, Any]], episodes: list[dict[str, Any]]
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(episodes, schema=_episodes_schema(pa, features))
    atomic_write(
        root / EPISODES_PATH.format(chunk_index=0, file_index=0), lambda p: pq.write_table(table, p)
    )


def _write_derived(
    root: Path, info: dict[str, Any], episodes: list[dict[str, Any]], tasks: list[str]
) -> None:
    """stats.json and info.json, both derived from the episodes rows."""
    stats = aggregate_stats([episode_stats(r) for r in episodes])
    atomic_write_json(root / STATS_PATH, stats_to_json(stats))
    info["total_episodes"] = len(episodes)
    info["total_frames"] = int(sum(r["length"] for r in episodes))
    info["total_tasks"] = len(tasks)
    info["splits"] = {"train": f"0:{len(episodes)}"} if episodes else {}
    atomic_write_json(root / INFO_PATH, info)


def recover(root: str | os.PathLike[str]) -> int:
    """Make a dataset whose writer died consistent again; returns the number of saved episodes.

    Keeps exactly the episodes listed in meta/episodes: cuts data rows and video frames past
    them, deletes files no episode references, drops unreferenced trailing tasks, removes
    staging/temp files and rewrites stats.json and info.json.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    root = Path(root)
    if not (root / INFO_PATH).exists():
        raise DatasetError(f"{root / INFO_PATH} is missing: nothing to recover.")
    info = json.loads((root / INFO_PATH).read_text())
    episodes = read_episodes(root)
    shutil.rmtree(root / STAGING_DIR, ignore_errors=True)
    for tmp in root.rglob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    keep_rows: dict[Path, int] = {}
    keep_frames: dict[Path, int] = {}
    for e in episodes:
        p = data_file(root, e["data/chunk_index"], e["data/file_index"])
        keep_rows[p] = max(keep_rows.get(p, 0), e["dataset_to_index"])
        for key, ft in info["features"].items():
            if ft["dtype"] == "video":
                v = video_file(
                    root, key, e[f"videos/{key}/chunk_index"], e[f"videos/{key}/file_index"]
                )
                keep_frames[v] = max(
                    keep_frames.get(v, 0), round(e[f"videos/{key}/to_timestamp"] * info["fps"])
                )
    for p in sorted((root / "data").glob("chunk-*/file-*.parquet")):
        if p not in keep_rows:
            p.unlink()
            continue
        table = pq.read_table(p)
        if pc.max(table.column("index")).as_py() >= keep_rows[p]:
            kept = table.filter(pc.less(table.column("index"), keep_rows[p]))
            atomic_write(p, functools.partial(pq.write_table, kept))
    for p in sorted((root / "videos").glob("*/chunk-*/file-*.mp4")):
        if p not in keep_frames:
            p.unlink()
        elif count_frames(p) > keep_frames[p]:
            parts = [(p, keep_frames[p])]
            atomic_write(p, functools.partial(concat_videos, parts, fps=info["fps"]))
    tasks: list[str] = read_tasks(root) if (root / TASKS_PATH).exists() else []
    used = {t for e in episodes for t in e["tasks"]}
    while tasks and tasks[-1] not in used:
        tasks.pop()
    if tasks != (read_tasks(root) if (root / TASKS_PATH).exists() else []):
        _write_tasks(root, tasks)
    _write_derived(root, info, episodes, tasks)
    return len(episodes)
