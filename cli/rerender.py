"""`tether dataset rerender IN OUT --config EXP.yaml`: a simulated dataset seen through other
cameras, without recording it again.

A frame of a dataset that ``tether record`` wrote in simulation holds the arm's joint
positions (``observation.state``) and every task object's pose
(``observation.environment_state``, 7 numbers per object in the task's ``objects`` order).
Those are all the state a picture of the table-top scene depends on, so each frame is posed
in the experiment's simulator (arm and fingers teleported, objects placed) and rendered by
every camera of the experiment's ``sim.cameras``. The output is the input with its cameras
replaced by those: every other feature, the episodes, their tasks and fps are the input's.
Written to a temporary folder and renamed into place, so a crash leaves no half dataset.

What this cannot re-create: anything not in the state (a light that moved, a body the task
does not observe), and the moment a camera frame was taken within its 1/fps (a rendered
frame shows the state of its row).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.cli.dataset import ENV_KEY, IMAGE_PREFIX, STATE_KEY
from tether.core.errors import TetherError

# an object's pose in environment_state: position (3) and quaternion w, x, y, z (4)
POSE = 7


class _Poser:
    """Puts a backend into one recorded frame's state: arm, fingers, task objects."""

    def __init__(self, backend: Any, state_dim: int, env_dim: int) -> None:
        spec = backend.spec
        if not hasattr(backend, "set_joint_positions"):
            raise TetherError(
                f"tether dataset rerender needs a simulator that can pose the arm "
                f"(set_joint_positions); {type(backend).__name__} cannot: use sim.type=mujoco"
            )
        self.backend = backend
        self.dof = spec.action.dim - 1  # the arm's joints; the last action is the gripper
        objects = tuple(getattr(getattr(backend, "task", None), "objects", ()) or ())
        if state_dim != len(spec.state_names):
            raise TetherError(
                f"observation.state has {state_dim} entries, the experiment's robot has "
                f"{len(spec.state_names)} ({', '.join(spec.state_names)}): rerender with the "
                "experiment the dataset was recorded from"
            )
        if env_dim != POSE * len(objects):
            raise TetherError(
                f"observation.environment_state has {env_dim} entries, the experiment's task "
                f"observes {len(objects)} objects ({', '.join(objects) or 'none'}, {POSE} "
                "each): rerender with the experiment the dataset was recorded from"
            )
        self.objects = objects

    def pose(self, state: np.ndarray, env: np.ndarray) -> None:
        fingers = state[self.dof :]
        self.backend.set_joint_positions(state[: self.dof], float(np.mean(fingers)))
        for i, name in enumerate(self.objects):
            row = env[POSE * i : POSE * (i + 1)]
            self.backend.set_body_pose(name, row[:3], row[3:])


def rerender_dataset(
    root: str | Path,
    out: str | Path,
    cfg: Any,
    episodes: tuple[int, int] | None = None,
    progress: bool = True,
) -> int:
    """Write ``out``: dataset ``root`` (its episodes ``[first, end)`` of ``episodes``, all by
    default) with its cameras replaced by ``cfg.sim.cameras``, each frame rendered from its
    recorded state in ``cfg``'s simulator. Returns the episodes written."""
    from tether.core import registry
    from tether.core.data.lerobot import DatasetError, LeRobotReader, LeRobotWriter
    from tether.core.data.lerobot_reader import DEFAULT_FEATURES, INFO_PATH
    from tether.core.experiment import build_task

    root, out = Path(root), Path(out)
    if not (root / INFO_PATH).exists():
        raise TetherError(f"{root}: no {INFO_PATH}, not a LeRobot v3.0 dataset")
    if out.exists():
        raise TetherError(f"{out} exists: choose a new dataset directory")
    reader = LeRobotReader(root)
    for key in (STATE_KEY, ENV_KEY):
        if key not in reader.features:
            raise TetherError(
                f"{root}: no '{key}' feature: rerender needs the arm's joint positions and the "
                "objects' poses of every frame (a dataset `tether record` wrote in simulation)"
            )
    cams = list(cfg.sim.cameras)
    if not cams:
        raise TetherError("the experiment's sim.cameras is empty: nothing to render")
    kept = {
        k: dict(v)
        for k, v in reader.features.items()
        if k not in DEFAULT_FEATURES and not k.startswith(IMAGE_PREFIX)
    }
    features = {
        **kept,
        **{
            f"{IMAGE_PREFIX}{c.name}": {"dtype": "video", "shape": [c.height, c.width, 3]}
            for c in cams
        },
    }
    task = build_task(cfg)
    backend = registry.build("sim", cfg.sim, robot=cfg.robot, task=task)
    tmp = out.with_name(f".{out.name}.rerender-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        poser = _Poser(
            backend,
            int(reader.features[STATE_KEY]["shape"][0]),
            int(reader.features[ENV_KEY]["shape"][0]),
        )
        backend.reset(0)
        first, end = _span(episodes, reader.num_episodes)
        n, frames = end - first, 0
        t0 = time.monotonic()
        writer = LeRobotWriter(tmp, reader.fps, features, robot_type=reader.info.get("robot_type"))
        for i in range(first, end):
            ep = reader.episode(i, decode_video=False)
            writer.start_episode(str(ep["task"][0]))
            for k in range(len(ep[STATE_KEY])):
                poser.pose(np.asarray(ep[STATE_KEY][k]), np.asarray(ep[ENV_KEY][k]))
                frame = {key: np.asarray(ep[key][k]) for key in kept}
                for c in cams:
                    frame[f"{IMAGE_PREFIX}{c.name}"] = backend.render(c.name)
                writer.add_frame(frame)
            writer.save_episode()
            frames += len(ep[STATE_KEY])
            done = i + 1 - first
            if progress and (done == n or done % max(1, min(n // 20, 25)) == 0):
                rate = frames / max(time.monotonic() - t0, 1e-9)
                print(f"  {done}/{n} episodes, {frames} frames, {rate:.0f} frames/s", flush=True)
        writer.finalize()
        tmp.rename(out)
    except DatasetError as exc:
        raise TetherError(f"tether dataset rerender: {exc}") from None
    finally:
        backend.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return n


def _span(episodes: tuple[int, int] | None, total: int) -> tuple[int, int]:
    if episodes is None:
        return 0, total
    first, end = episodes
    if not 0 <= first < end <= total:
        raise TetherError(
            f"--episodes {first}:{end}: choose a range within 0:{total} (the dataset has "
            f"{total} episodes)"
        )
    return first, end


def parse_span(text: str | None) -> tuple[int, int] | None:
    """``--episodes A:B`` -> (A, B); None for None."""
    if text is None:
        return None
    try:
        a, b = (int(x) for x in text.split(":"))
    except ValueError:
        raise TetherError(f"--episodes {text}: write FIRST:END, e.g. 0:100") from None
    return a, b


def _in_workers(
    root: str, out: str, config: str, overrides: list[str], workers: int, total: int
) -> int:
    """Rerender ``root`` in ``workers`` processes (each `tether dataset rerender` of a
    contiguous range of episodes into a part), then merge the parts into ``out`` in order.
    The workers are this command run again, so no Python object crosses a process."""
    from tether.core.data.lerobot import DatasetError, DatasetWriteError, merge_datasets

    if Path(out).exists():
        raise TetherError(f"{out} exists: choose a new dataset directory")
    bounds = np.linspace(0, total, min(workers, total) + 1).round().astype(int)
    parts_dir = Path(out).with_name(f".{Path(out).name}.rerender-parts")
    shutil.rmtree(parts_dir, ignore_errors=True)
    parts_dir.mkdir(parents=True)
    procs: list[tuple[Path, subprocess.Popen[bytes], Path]] = []
    try:
        for k, (a, b) in enumerate(itertools.pairwise(bounds)):
            part, log = parts_dir / f"part-{k:03d}", parts_dir / f"part-{k:03d}.log"
            cmd = [sys.executable, "-m", "tether.cli.main", "dataset", "rerender", root,
                   str(part), "--config", config, "--episodes", f"{a}:{b}", *overrides]  # fmt: skip
            with log.open("wb") as fh:
                procs.append(
                    (part, subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT), log)
                )
            print(f"  worker {k}: episodes {a}:{b} (log {log})", flush=True)
        failed = [(part, log) for part, p, log in procs if p.wait() != 0]
        if failed:
            part, log = failed[0]
            tail = log.read_text(errors="replace").strip().splitlines()[-1:]
            raise TetherError(f"rerendering {part.name} failed: {' '.join(tail)} (see {log})")
        merge_datasets([str(part) for part, _, _ in procs], out)
    except (DatasetError, DatasetWriteError) as exc:
        raise TetherError(f"tether dataset rerender: {exc}") from None
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.kill()
        if Path(out).exists():
            shutil.rmtree(parts_dir, ignore_errors=True)
    return total


def run_dataset_rerender(
    root: str,
    out: str,
    config: str,
    overrides: list[str],
    episodes: str | None = None,
    workers: int = 1,
) -> int:
    """``tether dataset rerender IN OUT --config EXP.yaml [--episodes A:B] [--workers N]
    [overrides]``."""
    from tether.core.config import load_config
    from tether.core.data.lerobot import LeRobotReader

    cfg = load_config(config, overrides)
    names = ", ".join(f"{c.name} {c.width}x{c.height}" for c in cfg.sim.cameras)
    print(f"tether dataset rerender: {root} -> {out} with cameras {names} ({cfg.sim.type})")
    span = parse_span(episodes)
    if workers < 1:
        raise TetherError(f"--workers {workers}: at least 1")
    if workers > 1:
        if span is not None:
            raise TetherError("--workers splits the whole dataset: leave out --episodes")
        if not Path(root).exists():
            raise TetherError(f"{root}: no such dataset directory")
        n = _in_workers(root, out, config, overrides, workers, LeRobotReader(root).num_episodes)
    else:
        n = rerender_dataset(root, out, cfg, episodes=span)
    print(f"wrote {out}: {n} episodes")
    return 0
