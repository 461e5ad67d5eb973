"""`tether dataset rerender`: a simulated dataset seen through other cameras, each frame posed
from its recorded joint state and object poses (tether.cli.rerender)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.cli.main import main
from tether.core.errors import TetherError

pytestmark = pytest.mark.mujoco
pytest.importorskip("mujoco")

EXPERIMENT = "configs/experiments/panda_multitask_expert.yaml"
TABLE = "{name: table, width: 64, height: 64, fps: 30}"
WRIST = "{name: wrist, width: 48, height: 48, fps: 30, fovy_deg: 70}"
TABLE_WRIST = f"sim.cameras=[{TABLE}, {WRIST}]"
# the source dataset's simulator: front for the dataset, table and wrist to compare with
ALL = f"sim.cameras=[{{name: front, width: 64, height: 48, fps: 30}}, {TABLE}, {WRIST}]"
# a rendered frame against its decoded video frame, mean absolute difference over the pixels
# (the codec's loss: measured 2.6-5.4 of 255 at these sizes); the wrist's first and last
# frames of the sweep differ by 41, so a frame posed from another row's state fails
CODEC_MEAN_ABS = 7.0


def _write(root: Path, episodes: int, frames: int, drop_env: bool = False) -> list[dict]:
    """A multi-task dataset with the front camera written from the MuJoCo scene, the arm
    driven through a sweep so frames differ; returns each frame's table and wrist pictures,
    rendered at the frame's state, for comparison."""
    from tether.core import registry
    from tether.core.config import load_config
    from tether.core.data.lerobot import LeRobotWriter
    from tether.core.experiment import build_task

    cfg = load_config(EXPERIMENT, [ALL])
    sim = registry.build("sim", cfg.sim, robot=cfg.robot, task=build_task(cfg))
    spec = sim.spec
    features: dict[str, dict[str, Any]] = {
        "observation.state": {"dtype": "float32", "shape": [len(spec.state_names)]},
        "action": {"dtype": "float32", "shape": [spec.action.dim]},
        "observation.images.front": {"dtype": "video", "shape": [48, 64, 3]},
    }
    if not drop_env:
        features["observation.environment_state"] = {"dtype": "float32", "shape": [35]}
    expected: list[dict] = []
    try:
        with LeRobotWriter(root, 30, features, robot_type="panda") as w:
            for e in range(episodes):
                obs = sim.reset(e)
                w.start_episode(f"push the green cube onto the white square #{e}")
                home = obs["state"][: spec.action.dim].copy()
                for k in range(frames):
                    act = home.copy()
                    act[0] += 0.6 * np.sin(k / 4 + e)
                    act[3] += 0.6 * k / frames
                    frame = {
                        "observation.state": obs["state"],
                        "action": act.astype(np.float32),
                        "observation.images.front": sim.render("front"),
                    }
                    if not drop_env:
                        frame["observation.environment_state"] = obs["env_state"]
                    expected.append({"table": sim.render("table"), "wrist": sim.render("wrist")})
                    w.add_frame(frame)
                    for _ in range(3):
                        obs = sim.step(act).observation
                w.save_episode()
    finally:
        sim.close()
    return expected


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    src = tmp_path_factory.mktemp("rerender") / "src"
    return src, _write(src, episodes=3, frames=12)


def _check(src: Path, out: Path, expected: list[dict], first: int = 0) -> None:
    """``out`` holds ``src``'s episodes from ``first`` on, rows and tasks unchanged, and the
    table and wrist pictures of each frame's state."""
    from tether.core.data.lerobot import LeRobotReader

    a, b = LeRobotReader(src), LeRobotReader(out)
    assert b.tasks == [a.tasks[i] for i in range(first, first + b.num_episodes)]
    assert b.fps == a.fps and b.num_frames == 12 * b.num_episodes
    assert sorted(b.video_keys) == ["observation.images.table", "observation.images.wrist"]
    assert b.features["observation.images.table"]["shape"] == [64, 64, 3]
    assert b.features["observation.images.wrist"]["shape"] == [48, 48, 3]
    assert "observation.images.table" in b.stats and "observation.images.front" not in b.stats
    for j in range(b.num_episodes):
        ea, eb = a.episode(first + j), b.episode(j)
        for key in ("observation.state", "observation.environment_state", "action"):
            np.testing.assert_array_equal(eb[key], ea[key])
        assert eb["task"] == ea["task"]
        for f in range(12):
            for cam in ("table", "wrist"):
                got = eb[f"observation.images.{cam}"][f].astype(np.int32)
                diff = np.abs(got - expected[12 * (first + j) + f][cam]).mean()
                assert diff < CODEC_MEAN_ABS, (j, f, cam, diff)
    # the arm swept: the pictures change along an episode
    ep = b.episode(0)["observation.images.wrist"]
    assert np.abs(ep[0].astype(np.int32) - ep[-1]).mean() > 3 * CODEC_MEAN_ABS


def test_rerender_replaces_the_cameras_and_keeps_everything_else(
    source: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    src, expected = source
    out = tmp_path / "out"
    args = ["dataset", "rerender", str(src), str(out), "--config", EXPERIMENT, TABLE_WRIST]
    assert main(args) == 0
    _check(src, out, expected)
    # a range of episodes
    part = tmp_path / "part"
    assert main([*args[:3], str(part), *args[4:], "--episodes", "1:3"]) == 0
    _check(src, part, expected, first=1)


def test_rerender_in_two_workers_merges_their_parts_in_order(
    source: tuple[Path, list[dict]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, expected = source
    out = tmp_path / "out"
    args = ["dataset", "rerender", str(src), str(out), "--config", EXPERIMENT, TABLE_WRIST]
    assert main([*args, "--workers", "2"]) == 0
    _check(src, out, expected)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # parts cleaned up
    bad = [*args[:3], str(tmp_path / "x"), *args[4:], "--workers", "2", "--episodes", "0:1"]
    assert main(bad) == 2
    assert "leave out --episodes" in capsys.readouterr().err


def test_rerender_refuses_what_it_cannot_pose(tmp_path: Path) -> None:
    from tether.cli.rerender import rerender_dataset
    from tether.core.config import load_config

    no_env = tmp_path / "no_env"
    _write(no_env, episodes=1, frames=2, drop_env=True)
    cfg = load_config(EXPERIMENT, [TABLE_WRIST])
    with pytest.raises(TetherError, match="observation.environment_state"):
        rerender_dataset(no_env, tmp_path / "a", cfg)
    good = tmp_path / "good"
    _write(good, episodes=1, frames=2)
    lift = load_config("configs/experiments/panda_lift_expert.yaml", [TABLE_WRIST])
    with pytest.raises(TetherError, match="35 entries.*1 objects"):
        rerender_dataset(good, tmp_path / "b", lift)
    (tmp_path / "taken").mkdir()
    with pytest.raises(TetherError, match="exists"):
        rerender_dataset(good, tmp_path / "taken", cfg)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
