"""Merge LeRobot v3.0 datasets into a new one without re-encoding a video.

Demonstrations recorded in several processes, sessions or machines (``tether record`` into
one folder each) become one dataset for training: ``tether dataset merge OUT IN [IN ...]``.

Each input's data and video files are copied whole, each to the next free file index of the
output (a v3 episode row names its files and, for a camera, its time span inside the file,
which a copy keeps). The data rows' ``episode_index``, ``index`` and ``task_index`` are
renumbered, the episodes rows point at the copied files, tasks are the union in first-seen
order, and stats.json / info.json are derived from the episodes rows as the writer derives
them. The inputs are only read; the output is written to a temporary folder and renamed into
place, so a crash leaves no half-merged dataset. Inputs must share fps and features (dtype and
shape; a camera's codec may differ between files, each file carries its own).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

from .lerobot_reader import (
    INFO_PATH,
    STAGING_DIR,
    DatasetError,
    DatasetWriteError,
    atomic_write,
    data_file,
    fsync_dir,
    read_episodes,
    read_tasks,
    video_file,
)
from .lerobot_writer import (
    _next_loc,
    _write_derived,
    _write_episodes,
    _write_tasks,
    feature_shapes,
)


def _read_input(root: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    if not (root / INFO_PATH).exists():
        raise DatasetError(f"{root}: no {INFO_PATH}, not a LeRobot v3.0 dataset.")
    if (root / STAGING_DIR).exists():
        raise DatasetError(
            f"{root}: a recording into it is in progress or died (its {STAGING_DIR} folder "
            "exists); let it finish, or run `tether record` on it again to recover it, first."
        )
    info = json.loads((root / INFO_PATH).read_text())
    episodes = read_episodes(root)
    if not episodes:
        raise DatasetError(f"{root}: the dataset has no episodes.")
    return info, episodes, read_tasks(root)


def merge_datasets(inputs: list[str | os.PathLike[str]], out: str | os.PathLike[str]) -> int:
    """Write the episodes of ``inputs``, in order, into the new dataset ``out``; returns the
    number of episodes. Raises DatasetError for a bad input or an existing ``out``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    roots = [Path(p) for p in inputs]
    out = Path(out)
    if not roots:
        raise DatasetError("merge: no input datasets.")
    if out.exists():
        raise DatasetWriteError(f"{out} exists: merge writes a new dataset folder.")
    if len({r.resolve() for r in roots}) != len(roots):
        raise DatasetError("merge: an input dataset is named twice.")
    read = [_read_input(r) for r in roots]
    first = read[0][0]
    for root, (info, _, _) in zip(roots[1:], read[1:], strict=True):
        if info["fps"] != first["fps"] or (
            feature_shapes(info["features"]) != feature_shapes(first["features"])
        ):
            raise DatasetError(
                f"{root}: its fps or features (dtype, shape) differ from {roots[0]}'s; "
                "only datasets recorded with the same robot, cameras and fps merge."
            )
    info = dict(first)
    video_keys = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    chunks_size = int(info["chunks_size"])
    tmp = out.with_name(f".{out.name}.merging")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tasks: list[str] = []
    episodes: list[dict[str, Any]] = []
    frames = 0
    data_loc: tuple[int, int] | None = None
    video_loc: dict[str, tuple[int, int] | None] = {k: None for k in video_keys}

    def advance(loc: tuple[int, int] | None) -> tuple[int, int]:
        return (0, 0) if loc is None else _next_loc(*loc, chunks_size)

    try:
        for root, (_, rows, their_tasks) in zip(roots, read, strict=True):
            for t in their_tasks:
                if t not in tasks:
                    tasks.append(t)
            task_map = pa.array([tasks.index(t) for t in their_tasks], pa.int64())
            base_ep, base_frame = len(episodes), frames
            data_map: dict[tuple[int, int], tuple[int, int]] = {}
            video_map: dict[tuple[str, int, int], tuple[int, int]] = {}
            # each data file's end: past it lie only a crashed writer's rows, not copied
            ends: dict[tuple[int, int], int] = {}
            for r in rows:
                loc = (r["data/chunk_index"], r["data/file_index"])
                ends[loc] = max(ends.get(loc, 0), r["dataset_to_index"])
            for row in rows:
                src = (row["data/chunk_index"], row["data/file_index"])
                if src not in data_map:
                    data_loc = advance(data_loc)
                    data_map[src] = data_loc
                    table = pq.read_table(data_file(root, *src))
                    table = table.filter(pc.less(table.column("index"), ends[src]))
                    cols = {
                        "episode_index": pc.add(table.column("episode_index"), base_ep),
                        "index": pc.add(table.column("index"), base_frame),
                        "task_index": pc.take(task_map, table.column("task_index")),
                    }
                    for name, col in cols.items():
                        i = table.schema.get_field_index(name)
                        table = table.set_column(i, table.schema.field(i), col.cast(pa.int64()))
                    dst = data_file(tmp, *data_loc)
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(dst, functools.partial(pq.write_table, table))
                new = dict(row)
                new["episode_index"] = base_ep + row["episode_index"]
                new["data/chunk_index"], new["data/file_index"] = data_map[src]
                new["dataset_from_index"] = base_frame + row["dataset_from_index"]
                new["dataset_to_index"] = base_frame + row["dataset_to_index"]
                for key in video_keys:
                    vsrc = (key, row[f"videos/{key}/chunk_index"], row[f"videos/{key}/file_index"])
                    if vsrc not in video_map:
                        video_loc[key] = advance(video_loc[key])
                        video_map[vsrc] = video_loc[key]  # type: ignore[assignment]
                        dst = video_file(tmp, key, *video_map[vsrc])
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(video_file(root, *vsrc), dst)
                    new[f"videos/{key}/chunk_index"], new[f"videos/{key}/file_index"] = video_map[
                        vsrc
                    ]
                new["meta/episodes/chunk_index"], new["meta/episodes/file_index"] = 0, 0
                episodes.append(new)
            frames += sum(int(r["length"]) for r in rows)
        _write_tasks(tmp, tasks)
        _write_episodes(tmp, info["features"], episodes)
        _write_derived(tmp, info, episodes, tasks)
        os.replace(tmp, out)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(episodes)
