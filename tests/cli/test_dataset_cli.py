"""`tether replay` and `tether dataset render` on a small dataset recorded over ROS 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tether.cli.main import main

pytestmark = [pytest.mark.slow, pytest.mark.ros, pytest.mark.mujoco]

EXPERIMENT = "configs/experiments/panda_lift_expert.yaml"
# Measured on 2 recorded lift episodes (30 fps dataset, 100 Hz expert): holding each action
# for 1/fps lags the recorded 100 Hz commands by ~1/60 s on average, giving a state RMS of
# 7.1-7.5 mrad (max 32-34 mrad, on the fast joints 2, 6, 7); linear interpolation between
# frames gives 1.2 mrad (max 5-6 mrad). Bounds are ~2x those, so a broken time alignment
# (one frame = 33 ms off is >20 mrad RMS) or a wrong seed fails.
HOLD_RMS_MAX = 0.015
LINEAR_RMS_MAX = 0.003
LINEAR_MAX_MAX = 0.012
CUBE_ERR_MAX = 0.01


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ds") / "lift"
    rc = main(
        [
            "record",
            EXPERIMENT,
            "--episodes",
            "2",
            "--out",
            str(root),
            "ros.rate_mode=lockstep",
            "sim.cameras=[{name: front, width: 96, height: 96, fps: 30}]",
        ]
    )
    assert rc == 0
    return root


def _decode(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


@pytest.mark.parametrize("interp", ["hold", "linear"])
def test_replay_is_faithful(dataset: Path, tmp_path: Path, interp: str) -> None:
    from tether.core.data.lerobot import LeRobotReader

    n = LeRobotReader(dataset).episodes[1]["length"]
    out = tmp_path / "replay"
    args = ["replay", str(dataset), "--episode", "1", "--out", str(out), "--interpolate", interp]
    if interp == "linear":
        args.append("--no-video")
    assert main(args) == 0
    rep = json.loads((out / "replay.json").read_text())
    assert rep["seed"] == 1 and rep["frames"] == n
    assert rep["reset_state_error"] < 1e-4
    assert rep["success"]
    assert rep["object"]["final_position_error_m"] < CUBE_ERR_MAX
    if interp == "hold":
        assert rep["state"]["rms_overall"] < HOLD_RMS_MAX
        frames = _decode(out / "replay.mp4")
        assert len(frames) == n and frames[0].shape[1] > 2 * 96  # recorded | replayed
    else:
        assert rep["state"]["rms_overall"] < LINEAR_RMS_MAX
        assert rep["state"]["max_overall"] < LINEAR_MAX_MAX
        assert not (out / "replay.mp4").exists()


def test_replay_wrong_seed_is_flagged(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    args = ["replay", str(dataset), "--episode", "0", "--seed", "7", "--out", str(out)]
    assert main([*args, "--no-video", "--settle", "0"]) == 0
    assert "warning" in capsys.readouterr().out
    assert json.loads((out / "replay.json").read_text())["reset_state_error"] > 1e-3


def test_render_mp4_and_png(dataset: Path, tmp_path: Path) -> None:
    from PIL import Image

    from tether.core.data.lerobot import LeRobotReader

    n = LeRobotReader(dataset).episodes[0]["length"]
    mp4 = tmp_path / "ep0.mp4"
    assert main(["dataset", "render", str(dataset), "--episode", "0", "--out", str(mp4)]) == 0
    frames = _decode(mp4)
    assert len(frames) == n and frames[0].shape == (96, 96, 3)
    png = tmp_path / "ep0.png"
    assert main(["dataset", "render", str(dataset), "--out", str(png)]) == 0
    with Image.open(png) as im:
        assert im.width > 800 and im.height > 400


@pytest.mark.parametrize("verb", [["replay"], ["dataset", "render"]])
def test_bad_episode_is_one_line(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: list[str]
) -> None:
    out = str(tmp_path / ("x.mp4" if verb[0] == "dataset" else "x"))
    assert main([*verb, str(dataset), "--episode", "9", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "out of range" in err
    assert main([*verb, str(tmp_path / "missing"), "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_merge_two_recordings_then_replay_from_the_second(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether dataset merge`: a recording and a copy of it (as two recording processes
    would leave) become one dataset of 4 episodes; the merged episode 3 is the copy's
    episode 1, and `tether replay` of it (with that episode's seed, 1) reproduces its
    states as of the original. Merging
    into an existing folder is one error line."""
    import shutil

    from tether.core.data.lerobot import LeRobotReader

    second = tmp_path / "second"
    shutil.copytree(dataset, second)
    merged = tmp_path / "merged"
    assert main(["dataset", "merge", str(merged), str(dataset), str(second)]) == 0
    assert "4 episodes" in capsys.readouterr().out
    r = LeRobotReader(merged)
    assert r.num_episodes == 4
    got, want = r.episode(3), LeRobotReader(dataset).episode(1)
    np.testing.assert_array_equal(got["observation.state"], want["observation.state"])
    np.testing.assert_array_equal(got["observation.images.front"], want["observation.images.front"])
    out = tmp_path / "replay"
    args = ["replay", str(merged), "--episode", "3", "--seed", "1", "--out", str(out)]
    assert main([*args, "--no-video"]) == 0
    rep = json.loads((out / "replay.json").read_text())
    assert rep["seed"] == 1 and rep["success"]
    assert rep["state"]["rms_overall"] < HOLD_RMS_MAX
    assert main(["dataset", "merge", str(merged), str(dataset)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "exists" in err
