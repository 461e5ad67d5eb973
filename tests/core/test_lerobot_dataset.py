"""LeRobotDataset v3.0 writer/reader: format to the letter of LeRobot 0.4.4, stats, crash safety."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pd = pytest.importorskip("pandas")
pytest.importorskip("av")

from tether.core.data.lerobot import (  # noqa: E402
    DatasetError,
    DatasetWriteError,
    LeRobotReader,
    LeRobotWriter,
    merge_datasets,
    recover,
)

FPS = 30
CAM = "observation.images.front"
STATS = ["min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"]
DEFAULTS = ["timestamp", "frame_index", "episode_index", "index", "task_index"]
FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [9], "names": [f"s{i}" for i in range(9)]},
    "action": {"dtype": "float32", "shape": [8], "names": [f"a{i}" for i in range(8)]},
    CAM: {"dtype": "video", "shape": [96, 96, 3], "names": ["height", "width", "channels"]},
}


def make_frame(ep: int, i: int) -> dict[str, np.ndarray]:
    """Deterministic frame ``i`` of episode ``ep``: smooth image (codec friendly), vectors."""
    rng = np.random.default_rng(1000 * ep + i)
    yy, xx = np.mgrid[0:96, 0:96]
    img = np.stack(
        [(xx * 2 + i * 5) % 256, (yy * 2 + ep * 40) % 256, np.full_like(xx, 60 + 3 * i)], axis=-1
    )
    return {
        "observation.state": rng.normal(size=9).astype(np.float32),
        "action": rng.normal(size=8).astype(np.float32),
        CAM: img.astype(np.uint8),
    }


def write_dataset(
    root: Path, lengths: list[int], tasks: list[str], first: int = 0, **writer: Any
) -> LeRobotWriter:
    """Episodes ``first``, ``first + 1``, ... of make_frame, of the given lengths and tasks."""
    w = LeRobotWriter(root, FPS, FEATURES, robot_type="test_robot", **writer)
    for ep, (n, task) in enumerate(zip(lengths, tasks, strict=True)):
        w.start_episode(task)
        for i in range(n):
            w.add_frame(make_frame(first + ep, i))
        w.save_episode()
    w.finalize()
    return w


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lerobot") / "ds"
    write_dataset(root, [20, 18, 22], ["lift the cube", "push the cube", "lift the cube"])
    return root


def test_tree_and_info_json(ds: Path):
    files = sorted(str(p.relative_to(ds)) for p in ds.rglob("*") if p.is_file())
    assert files == [
        "data/chunk-000/file-000.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        f"videos/{CAM}/chunk-000/file-000.mp4",
    ]
    info = json.loads((ds / "meta/info.json").read_text())
    assert list(info) == [
        "codebase_version", "robot_type", "total_episodes", "total_frames", "total_tasks", "chunks_size",
        "data_files_size_in_mb", "video_files_size_in_mb", "fps", "splits", "data_path", "video_path", "features",
    ]  # fmt: skip
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "test_robot"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 60, 2)
    assert info["chunks_size"] == 1000 and info["fps"] == FPS and info["splits"] == {"train": "0:3"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert (
        info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    )
    feats = info["features"]
    assert list(feats) == [*FEATURES, *DEFAULTS]
    assert feats["observation.state"] == FEATURES["observation.state"]
    assert feats["timestamp"] == {"dtype": "float32", "shape": [1], "names": None}
    for k in DEFAULTS[1:]:
        assert feats[k] == {"dtype": "int64", "shape": [1], "names": None}
    cam = feats[CAM]
    assert cam["dtype"] == "video" and cam["shape"] == [96, 96, 3]
    assert cam["names"] == ["height", "width", "channels"]
    assert cam["info"] == {
        "video.height": 96, "video.width": 96, "video.codec": "av1", "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False, "video.fps": FPS, "video.channels": 3, "has_audio": False,
    }  # fmt: skip


def test_data_parquet_schema(ds: Path):
    t = pq.read_table(ds / "data/chunk-000/file-000.parquet")
    assert [(f.name, str(f.type)) for f in t.schema] == [
        ("observation.state", "fixed_size_list<element: float>[9]"),
        ("action", "fixed_size_list<element: float>[8]"),
        ("timestamp", "float"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ]
    hf = json.loads(t.schema.metadata[b"huggingface"])
    assert hf["info"]["features"]["observation.state"] == {
        "feature": {"dtype": "float32", "_type": "Value"},
        "length": 9,
        "_type": "List",
    }
    assert hf["info"]["features"]["timestamp"] == {"dtype": "float32", "_type": "Value"}
    assert t.num_rows == 60
    assert t.column("index").to_pylist() == list(range(60))
    assert t.column("task_index").to_pylist() == [0] * 20 + [1] * 18 + [0] * 22


def test_tasks_parquet(ds: Path):
    t = pq.read_table(ds / "meta/tasks.parquet")
    assert [(f.name, str(f.type)) for f in t.schema] == [
        ("task_index", "int64"),
        ("__index_level_0__", "large_string"),
    ]
    assert t.schema.pandas_metadata["index_columns"] == ["__index_level_0__"]
    df = pd.read_parquet(ds / "meta/tasks.parquet")
    assert df.iloc[0].name == "lift the cube" and df.iloc[1].name == "push the cube"
    assert df.loc["push the cube", "task_index"] == 1


def test_episodes_parquet(ds: Path):
    t = pq.read_table(ds / "meta/episodes/chunk-000/file-000.parquet")
    types = {f.name: str(f.type) for f in t.schema}
    head = [
        "episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
        "dataset_to_index", f"videos/{CAM}/chunk_index", f"videos/{CAM}/file_index",
        f"videos/{CAM}/from_timestamp", f"videos/{CAM}/to_timestamp",
    ]  # fmt: skip
    stats_cols = [f"stats/{k}/{s}" for k in [*FEATURES, *DEFAULTS] for s in STATS]
    assert list(types) == [
        *head,
        *stats_cols,
        "meta/episodes/chunk_index",
        "meta/episodes/file_index",
    ]
    assert types["tasks"] == "list<element: string>"
    assert types[f"videos/{CAM}/from_timestamp"] == "double"
    assert types["stats/observation.state/min"] == "list<element: double>"
    assert types["stats/observation.state/count"] == "list<element: int64>"
    assert types[f"stats/{CAM}/mean"] == "list<element: list<element: list<element: double>>>"
    assert types[f"stats/{CAM}/count"] == "list<element: int64>"
    assert types["stats/frame_index/min"] == "list<element: int64>"
    assert types["stats/frame_index/mean"] == "list<element: double>"
    assert types["stats/timestamp/min"] == "list<element: double>"
    rows = t.to_pylist()
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    assert [(r["dataset_from_index"], r["dataset_to_index"], r["length"]) for r in rows] == [
        (0, 20, 20),
        (20, 38, 18),
        (38, 60, 22),
    ]
    assert [r["tasks"] for r in rows] == [["lift the cube"], ["push the cube"], ["lift the cube"]]
    for r in rows:
        assert r[f"videos/{CAM}/from_timestamp"] == pytest.approx(r["dataset_from_index"] / FPS)
        assert r[f"videos/{CAM}/to_timestamp"] == pytest.approx(r["dataset_to_index"] / FPS)
        assert np.asarray(r[f"stats/{CAM}/mean"]).shape == (3, 1, 1)


def test_round_trip_and_video(ds: Path):
    r = LeRobotReader(ds)
    assert r.num_episodes == 3 and r.num_frames == 60 and not r.needs_recovery
    for ep, n in enumerate([20, 18, 22]):
        got = r.episode(ep)
        want = [make_frame(ep, i) for i in range(n)]
        assert got["observation.state"].dtype == np.float32 and got["observation.state"].shape == (
            n,
            9,
        )
        np.testing.assert_array_equal(
            got["observation.state"], np.stack([f["observation.state"] for f in want])
        )
        np.testing.assert_array_equal(got["action"], np.stack([f["action"] for f in want]))
        np.testing.assert_array_equal(got["frame_index"], np.arange(n))
        np.testing.assert_allclose(got["timestamp"], np.arange(n) / FPS, atol=1e-6)
        assert got["timestamp"].dtype == np.float32
        assert got["task"][0] == ["lift the cube", "push the cube", "lift the cube"][ep]
        frames = got[CAM]
        assert frames.shape == (n, 96, 96, 3) and frames.dtype == np.uint8
        err = np.abs(frames.astype(np.int16) - np.stack([f[CAM] for f in want]).astype(np.int16))
        assert err.mean() < 6.0, err.mean()


def test_video_stream(ds: Path):
    import av

    with av.open(str(ds / f"videos/{CAM}/chunk-000/file-000.mp4")) as c:
        s = c.streams.video[0]
        assert s.codec_context.pix_fmt == "yuv420p" and (s.width, s.height) == (96, 96)
        # README: AV1 (libsvtav1 encodes, libdav1d decodes); no h264 fallback accepted
        assert s.codec_context.name in ("av1", "libdav1d"), s.codec_context.name
        times = [float(f.pts * s.time_base) for f in c.decode(s)]
    np.testing.assert_allclose(times, np.arange(60) / FPS, atol=1e-4)


def test_stats_match_numpy(ds: Path):
    r = LeRobotReader(ds)
    eps = [r.episode(i, decode_video=False) for i in range(3)]
    state = np.concatenate([e["observation.state"] for e in eps]).astype(np.float64)
    st = r.stats["observation.state"]
    assert sorted(r.stats) == sorted([*FEATURES, *DEFAULTS])
    assert sorted(st) == sorted(STATS)
    np.testing.assert_allclose(st["min"], state.min(0), rtol=1e-6)
    np.testing.assert_allclose(st["max"], state.max(0), rtol=1e-6)
    np.testing.assert_allclose(st["mean"], state.mean(0), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(st["std"], state.std(0), rtol=1e-6)
    assert st["count"].tolist() == [60]
    assert r.stats["index"]["max"].tolist() == [59] and r.stats["frame_index"]["min"].tolist() == [
        0
    ]
    # per-episode quantiles are exact
    ep1 = pq.read_table(ds / "meta/episodes/chunk-000/file-000.parquet").to_pylist()[1]
    np.testing.assert_allclose(
        ep1["stats/action/q90"], np.quantile(eps[1]["action"].astype(np.float64), 0.9, axis=0)
    )
    # images: per channel in [0, 1], shape (3, 1, 1), from the original frames
    imgs = (
        np.stack([make_frame(e, i)[CAM] for e, n in enumerate([20, 18, 22]) for i in range(n)])
        / 255.0
    )
    cam = r.stats[CAM]
    assert cam["mean"].shape == (3, 1, 1) and cam["count"].tolist() == [60]
    np.testing.assert_allclose(cam["mean"].ravel(), imgs.mean(axis=(0, 1, 2)), rtol=1e-9)
    np.testing.assert_allclose(cam["std"].ravel(), imgs.std(axis=(0, 1, 2)), rtol=1e-9)
    np.testing.assert_allclose(cam["max"].ravel(), imgs.max(axis=(0, 1, 2)))


def test_discarded_episode_leaves_no_trace(tmp_path: Path):
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FPS, FEATURES, robot_type="test_robot")
    w.start_episode("keep")
    for i in range(5):
        w.add_frame(make_frame(0, i))
    w.save_episode()
    w.start_episode("throw away")
    for i in range(7):
        w.add_frame(make_frame(1, i))
    w.discard_episode()
    w.start_episode("keep")
    for i in range(6):
        w.add_frame(make_frame(2, i))
    w.save_episode()
    w.finalize()
    r = LeRobotReader(root)
    assert r.num_episodes == 2 and r.num_frames == 11 and r.tasks == ["keep"]
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 11
    assert not any(p.name.startswith(".") for p in root.rglob("*"))
    np.testing.assert_array_equal(r.episode(1)["action"][0], make_frame(2, 0)["action"])


def test_unwritable_root_raises_one_clear_error(tmp_path: Path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(DatasetWriteError, match="Cannot create a dataset in") as exc:
        LeRobotWriter(blocker / "ds", FPS, FEATURES)
    assert "\n" not in str(exc.value)


def test_full_disk_keeps_earlier_episodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FPS, FEATURES)
    for ep in range(2):
        w.start_episode("t")
        for i in range(4):
            w.add_frame(make_frame(ep, i))
        w.save_episode()

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    w.start_episode("t")
    for i in range(4):
        w.add_frame(make_frame(2, i))
    with monkeypatch.context() as m:
        m.setattr(pq, "write_table", full)
        with pytest.raises(DatasetWriteError, match="No space left on device.*intact"):
            w.save_episode()
    assert LeRobotReader(root).num_episodes == 2
    w.start_episode("t")  # the writer carries on once space is back
    for i in range(3):
        w.add_frame(make_frame(3, i))
    assert w.save_episode() == 2
    r = LeRobotReader(root)
    assert r.num_frames == 11 and r.episode(2)[CAM].shape == (3, 96, 96, 3)


def test_reader_rejects_old_versions_and_bad_tasks(tmp_path: Path, ds: Path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(ds, bad)
    info = json.loads((bad / "meta/info.json").read_text())
    info["codebase_version"] = "v2.1"
    (bad / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="v2.1"):
        LeRobotReader(bad)
    info["codebase_version"] = "v3.0"
    (bad / "meta/info.json").write_text(json.dumps(info))
    pd.DataFrame({"task": ["lift the cube"], "task_index": [0]}).to_parquet(
        bad / "meta/tasks.parquet"
    )
    with pytest.raises(DatasetError, match="tasks.parquet"):
        LeRobotReader(bad)
    with pytest.raises(DatasetError, match="missing"):
        LeRobotReader(tmp_path / "nowhere")


CHILD = """
import sys
sys.path.insert(0, {tests!r})
from test_lerobot_dataset import make_frame, FEATURES, FPS
from tether.core.data.lerobot import LeRobotWriter
w = LeRobotWriter({root!r}, FPS, FEATURES, robot_type="test_robot")
for ep in range(100):
    w.start_episode("task %d" % (ep % 2))
    for i in range(8 + ep % 3):
        w.add_frame(make_frame(ep, i))
        print("frame", ep, i, flush=True)
    print("saving", ep, flush=True)
    w.save_episode()
    print("saved", ep, flush=True)
"""


def test_sigkill_at_any_moment_keeps_saved_episodes(tmp_path: Path):
    rnd = random.Random(7)
    tests_dir = str(Path(__file__).parent)
    for it in range(6):
        root = tmp_path / f"ds{it}"
        target_ep = rnd.randint(0, 2)
        during_save = it % 2 == 0
        target = f"saving {target_ep}" if during_save else f"frame {target_ep} {rnd.randint(0, 7)}"
        code = CHILD.format(tests=tests_dir, root=str(root))
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        saved = -1
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("saved"):
                saved = int(line.split()[1])
            if line.strip() == target:
                if during_save:
                    time.sleep(rnd.uniform(0.0, 0.05))  # land somewhere inside save_episode
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        r = LeRobotReader(root)
        assert r.num_episodes in (saved + 1, saved + 2), (it, target, saved, r.num_episodes)
        for ep in range(r.num_episodes):
            got = r.episode(ep)
            n = 8 + ep % 3
            np.testing.assert_array_equal(
                got["action"], np.stack([make_frame(ep, i)["action"] for i in range(n)])
            )
            assert got[CAM].shape == (n, 96, 96, 3)
        saved_eps = recover(root)
        r2 = LeRobotReader(root)
        assert saved_eps == r.num_episodes == r2.num_episodes and not r2.needs_recovery
        if r2.num_episodes:
            assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == r2.num_frames
            assert (
                json.loads((root / "meta/info.json").read_text())["total_frames"] == r2.num_frames
            )
        # a resumed writer appends after the survivors
        w = LeRobotWriter(root, FPS, FEATURES, robot_type="test_robot", resume=True)
        w.start_episode("after crash")
        for i in range(3):
            w.add_frame(make_frame(50, i))
        assert w.save_episode() == saved_eps
        w.finalize()
        r3 = LeRobotReader(root)
        assert r3.episode(saved_eps)["task"] == ["after crash"] * 3
        assert r3.episode(saved_eps)[CAM].shape == (3, 96, 96, 3)


def test_merge_keeps_every_episode_its_frames_and_task(ds: Path, tmp_path: Path):
    """Two datasets merged: the second's episodes follow the first's with their rows, video
    frames (the files copied, so decoded bit for bit as from the input) and tasks; indices,
    task indices and stats are those of one dataset, and LeRobot's format checks hold. The
    second input keeps one data and video file per episode (sizes of 0 MB), so the copy maps
    several files."""
    other = tmp_path / "other"
    write_dataset(
        other,
        [15, 17],
        ["place the cube", "push the cube"],
        first=10,
        data_files_size_in_mb=0,
        video_files_size_in_mb=0,
    )
    assert len(list((other / "data").rglob("*.parquet"))) == 2
    out = tmp_path / "merged"
    assert merge_datasets([ds, other], out) == 5
    r, a, b = LeRobotReader(out), LeRobotReader(ds), LeRobotReader(other)
    assert r.num_episodes == 5 and r.num_frames == 60 + 32 and not r.needs_recovery
    assert len(list((out / f"videos/{CAM}").rglob("*.mp4"))) == 3
    sources = [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    for ep, (src, i) in enumerate(sources):
        got, want = r.episode(ep), src.episode(i)
        assert got["task"][0] == want["task"][0]
        for key in ("observation.state", "action", "frame_index", "timestamp", CAM):
            np.testing.assert_array_equal(got[key], want[key])
        assert (got["episode_index"] == ep).all()
    table = pa.concat_tables(pq.read_table(p) for p in sorted((out / "data").rglob("*.parquet")))
    assert table.column("index").to_pylist() == list(range(92))
    tasks = pd.read_parquet(out / "meta/tasks.parquet")
    assert dict(zip(tasks.index, tasks["task_index"], strict=True)) == {
        "lift the cube": 0,
        "push the cube": 1,
        "place the cube": 2,
    }
    assert sorted(set(table.column("task_index").to_pylist())) == [0, 1, 2]
    assert r.episode(4)["task_index"][0] == 1  # "push the cube", the first input's index
    state = np.concatenate(
        [r.episode(e, decode_video=False)["observation.state"] for e in range(5)]
    )
    np.testing.assert_allclose(r.stats["observation.state"]["max"], state.max(0), rtol=1e-6)
    assert r.stats["observation.state"]["count"].tolist() == [92]
    info = json.loads((out / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (5, 92, 3)
    # the inputs are untouched
    assert LeRobotReader(other).num_episodes == 2 and a.num_frames == 60


def test_merge_refuses_what_it_cannot_merge(ds: Path, tmp_path: Path):
    """An existing output, different features, an input mid-recording, or none at all: one
    clear error each, and no output folder left behind."""
    with pytest.raises(DatasetWriteError, match="exists"):
        merge_datasets([ds], ds)
    wide = tmp_path / "wide"
    w = LeRobotWriter(
        wide, FPS, {**FEATURES, "action": {"dtype": "float32", "shape": [7], "names": None}}
    )
    w.start_episode("lift the cube")
    frame = make_frame(0, 0)
    w.add_frame({**frame, "action": frame["action"][:7]})
    w.save_episode()
    w.finalize()
    with pytest.raises(DatasetError, match="features"):
        merge_datasets([ds, wide], tmp_path / "out")
    busy = tmp_path / "busy"
    write_dataset(busy, [5], ["lift the cube"])
    (busy / ".tether_staging").mkdir()
    with pytest.raises(DatasetError, match="in progress"):
        merge_datasets([ds, busy], tmp_path / "out")
    with pytest.raises(DatasetError, match="no input"):
        merge_datasets([], tmp_path / "out")
    with pytest.raises(DatasetError, match="twice"):
        merge_datasets([ds, ds], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.merging"))
