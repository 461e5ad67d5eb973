"""Tether's LeRobot v3 writer against the dump of what LeRobot 0.4.4 itself writes
(tests/data/lerobot_v3_format.txt, a copy of ../shared/reference/lerobot_v3_format.txt): the
same dataset written by Tether has the same info.json, parquet schemas, stats layout and an
AV1 video."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("av")

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "data" / "lerobot_v3_format.txt"
SHARED = REPO.parent / "shared" / "reference" / "lerobot_v3_format.txt"
DEFAULTS = ["timestamp", "frame_index", "episode_index", "index", "task_index"]


def _section(text: str, root: str) -> str:
    """The text of one '=== DATASET ROOT <root>' block."""
    blocks = re.split(r"^=== ", text, flags=re.M)
    (block,) = [b for b in blocks if b.startswith(f"DATASET ROOT {root}\n")]
    return block


def _after(block: str, header: str) -> list[str]:
    """The lines after '--- <header>' up to the next '--- ' line."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"--- {header}"))
    out = []
    for line in lines[start + 1 :]:
        if line.startswith("--- "):
            break
        out.append(line)
    return out


def _schema(block: str, file: str) -> list[tuple[str, str]]:
    """'  name: type' lines of a '--- schema of <file>' listing."""
    out = []
    for line in _after(block, f"schema of {file}"):
        m = re.fullmatch(r"  (\S+): (.+)", line)
        if m is None:
            break
        out.append((m.group(1), m.group(2)))
    return out


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    """Facts of the reference 'ds' dataset: 2 episodes x 20 frames, state (9), action (8),
    one 96x96 video camera."""
    text = REFERENCE.read_text()
    block = _section(text, "ds")
    stats = {}
    for line in _after(block, "meta/stats.json keys"):
        m = re.fullmatch(r"  (\S+): (\[.*\]) mean-shape=(\[.*\])", line)
        assert m is not None, line
        stats[m.group(1)] = (json.loads(m.group(2).replace("'", '"')), json.loads(m.group(3)))
    files = [line.split()[0] for line in _after(block, "file tree")]
    hf = re.search(r"\[huggingface metadata: (\{.*\})\]", block)
    assert hf is not None
    # the probe of ds's video comes after the ds_img block in the dump
    probe = re.search(
        r"video probe ds/videos/\S+\n\s+\S+ codec=(\S+) pix_fmt=(\S+) (\d+)x(\d+) .* frames\(meta\)=(\d+)",
        text,
    )
    assert probe is not None
    return {
        "info": json.loads("\n".join(_after(block, "meta/info.json"))),
        "files": sorted(files),
        "data": _schema(block, "data/chunk-000/file-000.parquet"),
        "episodes": _schema(block, "meta/episodes/chunk-000/file-000.parquet"),
        "tasks": _schema(block, "meta/tasks.parquet"),
        "stats": stats,
        "hf_features": json.loads(hf.group(1))["info"]["features"],
        "decoder": probe.group(1),
        "pix_fmt": probe.group(2),
        "size": (int(probe.group(3)), int(probe.group(4))),
        "frames": int(probe.group(5)),
    }


@pytest.fixture(scope="module")
def written(reference: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference's dataset written by Tether: its features (from the reference's own
    info.json), fps, robot type, episodes and task."""
    from tether.core.data.lerobot import LeRobotWriter

    info = reference["info"]
    features = {
        k: {f: v[f] for f in ("dtype", "shape", "names")}
        for k, v in info["features"].items()
        if k not in DEFAULTS
    }
    root = tmp_path_factory.mktemp("lerobot_ref") / "ds"
    rng = np.random.default_rng(0)
    per_episode = info["total_frames"] // info["total_episodes"]
    with LeRobotWriter(root, info["fps"], features, robot_type=info["robot_type"]) as w:
        for _ in range(info["total_episodes"]):
            w.start_episode("lift the cube")
            for i in range(per_episode):
                frame = {}
                for key, f in features.items():
                    if f["dtype"] == "video":
                        h, wd, c = f["shape"]
                        frame[key] = np.full((h, wd, c), (5 * i) % 256, np.uint8)
                    else:
                        frame[key] = rng.normal(size=f["shape"]).astype(f["dtype"])
                w.add_frame(frame)
            w.save_episode()
    return root


def test_reference_facts_parse(reference: dict[str, Any]) -> None:
    """The dump says what the header promises (so a changed dump fails here first)."""
    info = reference["info"]
    assert info["codebase_version"] == "v3.0"
    assert list(info["features"])[-5:] == DEFAULTS
    assert info["features"]["observation.images.front"]["info"]["video.codec"] == "av1"
    assert [n for n, _ in reference["data"]][-5:] == DEFAULTS
    # 7 index columns, 4 per video key, 10 stats per feature (3 + 5 defaults), 2 self-refs
    assert len(reference["episodes"]) == 7 + 4 + 10 * 8 + 2 and len(reference["stats"]) == 8
    assert reference["decoder"] == "libdav1d" and reference["frames"] == 40


def test_info_json_equals_the_reference(reference: dict[str, Any], written: Path) -> None:
    """Every field, in LeRobot's order: version, totals, path templates, the feature layout
    with the default columns and their dtypes/shapes, and the video info (codec av1)."""
    info = json.loads((written / "meta/info.json").read_text())
    ref = reference["info"]
    assert list(info) == list(ref)
    assert list(info["features"]) == list(ref["features"])
    for key in ref["features"]:
        assert info["features"][key] == ref["features"][key], key
    assert info == ref


def test_files_and_parquet_schemas_equal_the_reference(
    reference: dict[str, Any], written: Path
) -> None:
    files = sorted(str(p.relative_to(written)) for p in written.rglob("*") if p.is_file())
    assert files == reference["files"]

    def schema(rel: str) -> list[tuple[str, str]]:
        return [(f.name, str(f.type)) for f in pq.read_schema(written / rel)]

    assert schema("data/chunk-000/file-000.parquet") == reference["data"]
    assert schema("meta/episodes/chunk-000/file-000.parquet") == reference["episodes"]
    assert schema("meta/tasks.parquet") == reference["tasks"]
    meta = pq.read_schema(written / "data/chunk-000/file-000.parquet").metadata
    assert json.loads(meta[b"huggingface"])["info"]["features"] == reference["hf_features"]


def test_stats_layout_equals_the_reference(reference: dict[str, Any], written: Path) -> None:
    stats = json.loads((written / "meta/stats.json").read_text())
    assert set(stats) == set(reference["stats"])
    for key, (names, mean_shape) in reference["stats"].items():
        assert sorted(stats[key]) == names, key
        assert list(np.asarray(stats[key]["mean"]).shape) == mean_shape, key


def test_video_is_av1_like_lerobots(reference: dict[str, Any], written: Path) -> None:
    """README: AV1 MP4 per camera. No silent fallback to h264 is accepted here."""
    import av

    (video,) = written.glob("videos/*/chunk-000/file-000.mp4")
    with av.open(str(video)) as c:
        s = c.streams.video[0]
        assert s.codec_context.name in ("av1", "libdav1d", "libaom-av1"), s.codec_context.name
        assert s.codec_context.pix_fmt == reference["pix_fmt"]
        assert (s.width, s.height) == reference["size"]
        assert sum(1 for _ in c.decode(s)) == reference["frames"]


def test_committed_reference_equals_the_shared_one() -> None:
    if not SHARED.is_file():
        pytest.skip(f"{SHARED} is not beside the repository (only on the shared workspace)")
    assert REFERENCE.read_bytes() == SHARED.read_bytes()
