"""`tether replay` and `tether dataset render`: look at a recorded episode, or play it back.

``replay`` rebuilds the simulator of an experiment, resets it with the episode's seed and
plays the recorded actions back open loop at the dataset fps (each action held for 1/fps
through the safety filter, as the sim bridge does), then reports how far the simulated joint
states drift from the recorded ``observation.state``.

Seed assumption: ``tether record`` resets the k-th attempted episode with seed
``episodes.seed + k`` and keeps only successful ones, so episode K was recorded with seed K
when ``episodes.seed`` was 0 and no attempt failed. Pass ``--seed`` when that is not so;
``replay`` checks the reset state against frame 0 and says when they differ.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.core.errors import TetherError

IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"
ENV_KEY = "observation.environment_state"
ACTION_KEY = "action"
#: reset state vs. frame 0 beyond this (rad / m) means the seed is probably not the episode's
RESET_MISMATCH_TOL = 1e-3


def open_episode(root: str, episode: int) -> tuple[Any, dict[str, Any]]:
    """Reader and decoded episode ``episode`` of dataset ``root``; one-line errors."""
    from tether.core.data.lerobot import DatasetError, LeRobotReader

    if not Path(root).exists():
        raise TetherError(f"{root}: no such dataset directory")
    try:
        reader = LeRobotReader(root)
    except (DatasetError, FileNotFoundError) as exc:
        raise TetherError(f"{root}: {exc}") from None
    n = reader.num_episodes
    if not 0 <= episode < n:
        span = f"0..{n - 1}" if n else "none"
        raise TetherError(f"--episode {episode} is out of range: {root} has {n} episodes ({span})")
    try:
        ep = reader.episode(episode)
    except (DatasetError, FileNotFoundError) as exc:
        raise TetherError(f"{root}: {exc}") from None
    return reader, ep


def camera_keys(reader: Any) -> list[str]:
    """The dataset's camera features (``observation.images.<name>``), in feature order."""
    return [k for k in reader.video_keys if k.startswith(IMAGE_PREFIX)]


def side_by_side(images: list[np.ndarray], gap: int = 2) -> np.ndarray:
    """Images (H_i, W_i, 3) uint8 next to each other on a white background, top aligned."""
    h = max(im.shape[0] for im in images)
    w = sum(im.shape[1] for im in images) + gap * (len(images) - 1)
    out = np.full((h, w, 3), 255, np.uint8)
    x = 0
    for im in images:
        out[: im.shape[0], x : x + im.shape[1]] = im
        x += im.shape[1] + gap
    return out


class _Progress:
    """A one-line progress bar: redrawn in place on a terminal, a few lines otherwise."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label = max(total, 1), label
        self.tty = sys.stdout.isatty()
        self._last_quarter = -1
        self._t0 = time.monotonic()

    def update(self, done: int) -> None:
        frac = done / self.total
        bar = "#" * int(30 * frac)
        line = f"  [{bar:<30}] {done}/{self.total} {self.label}"
        if self.tty:
            print(f"\r{line}", end="" if done < self.total else "\n", flush=True)
        elif int(frac * 4) > self._last_quarter:
            self._last_quarter = int(frac * 4)
            print(f"{line}  {time.monotonic() - self._t0:.1f} s", flush=True)


# ------------------------------------------------------------------------------- replay


def run_replay(
    root: str,
    episode: int,
    config: str,
    overrides: list[str],
    seed: int | None = None,
    out: str | None = None,
    video: bool = True,
    interpolate: str = "hold",
    settle_s: float = 0.5,
) -> int:
    """Replay episode ``episode`` of ``root`` open loop in the experiment's simulator.

    Writes ``<out>/replay.json`` (deviations, success) and, when the dataset has cameras,
    ``<out>/replay.mp4`` (recorded | replayed, per camera). ``interpolate``: "hold" (each
    action for 1/fps) or "linear" (between frames); after the last frame the last action is
    held up to ``settle_s`` until the task succeeds. Returns 0 (the replay ran; its
    fidelity is in the report), TetherError for unusable inputs.
    """
    from tether.core.config import load_config
    from tether.core.types import ActionChunk
    from tether.sim.runner import SimRunner

    reader, ep = open_episode(root, episode)
    fps = reader.fps
    seed = episode if seed is None else seed
    cfg = load_config(config, [*overrides, f"episodes.seed={seed}"])
    for key in (STATE_KEY, ACTION_KEY):
        if key not in ep:
            raise TetherError(f"{root}: the dataset has no '{key}' feature to replay")
    states = np.asarray(ep[STATE_KEY], np.float64)
    actions = np.asarray(ep[ACTION_KEY], np.float32)
    env_rec = np.asarray(ep[ENV_KEY], np.float64) if ENV_KEY in ep else None
    n = len(actions)

    runner = SimRunner(cfg)
    spec = runner.spec
    if actions.shape[1] != spec.action.dim:
        raise TetherError(
            f"{root}: actions have {actions.shape[1]} columns but {cfg.robot} in {config} "
            f"takes {spec.action.dim}: replay it with the experiment it was recorded from"
        )
    if states.shape[1] != len(spec.state_names):
        raise TetherError(
            f"{root}: observation.state has {states.shape[1]} entries, {cfg.robot} has "
            f"{len(spec.state_names)}"
        )
    sim_cams = {c.name for c in spec.cameras}
    cams = [k for k in camera_keys(reader) if k[len(IMAGE_PREFIX) :] in sim_cams]
    cams = cams if video else []
    names = list(reader.features[STATE_KEY].get("names") or spec.state_names)
    control_hz = 1.0 / spec.dt
    out_dir = Path(out) if out else Path("runs") / time.strftime("replay-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"tether replay: {root} episode {episode} ({n} frames at {fps} fps) in {cfg.sim.type}, "
        f"seed {seed}, {control_hz:g} Hz control ({control_hz / fps:.2f} steps per frame, "
        f"{interpolate}) "
        f"-> {out_dir}"
    )

    obs = runner.reset()
    period_ns = round(spec.dt * 1e9)
    tol_ns = period_ns // 100
    # the whole episode (plus `settle_s` holding the last action) as one chunk at the
    # control rate: "hold" keeps frame k's action over [k/fps, (k+1)/fps), "linear"
    # interpolates between frames
    settle_steps = round(max(settle_s, 0.0) / spec.dt)
    t_ctrl = np.arange(int(np.ceil(n / fps / spec.dt - 1e-9)) + settle_steps) * spec.dt
    if interpolate == "linear":
        rows = np.stack(
            [np.interp(t_ctrl, np.arange(n) / fps, actions[:, j]) for j in range(actions.shape[1])],
            axis=1,
        )
    elif interpolate == "hold":
        rows = actions[np.minimum(np.floor(t_ctrl * fps + 1e-6).astype(int), n - 1)]
    else:
        raise TetherError(f"--interpolate {interpolate}: choose hold or linear")
    runner.submit(ActionChunk(rows, dt=spec.dt, t0_ns=obs.stamp_ns))
    sim_states = np.empty_like(states)
    sim_env = np.empty_like(env_rec) if env_rec is not None else None
    frames: list[np.ndarray] = []
    success_at: float | None = None
    progress = _Progress(n, "frames")
    wall0 = time.monotonic()
    for k in range(n + 1):
        t_k = obs.stamp_ns if k == 0 else round(k * 1e9 / fps)
        # step while the next state (one period on) is still at or before frame k's time:
        # afterwards runner.obs is the state in force at t_k, as the recorder samples it
        while runner.obs is not None and runner.obs.stamp_ns + period_ns <= t_k + tol_ns:
            runner.step()
            if runner.success and success_at is None:
                success_at = runner.obs.stamp_s
        if k == n:
            break  # the last action has been held for its full 1/fps
        o = runner.obs
        assert o is not None
        sim_states[k] = o["state"]
        if sim_env is not None and "env_state" in o:
            sim_env[k] = o["env_state"][: sim_env.shape[1]]
        if cams:
            rec = [ep[c][k] for c in cams]
            sim = [runner.backend.render(c[len(IMAGE_PREFIX) :]) for c in cams]
            frames.append(
                side_by_side([side_by_side([r, s]) for r, s in zip(rec, sim, strict=True)], gap=6)
            )
        progress.update(k + 1)
    success_in_time = bool(runner.success)
    # the recording stops at the step the task succeeded; a replay lagging by a step or two
    # gets `settle_s` more of the last action to get there
    for _ in range(settle_steps):
        if runner.success:
            break
        runner.step()
        if runner.success:
            success_at = runner.obs.stamp_s if runner.obs is not None else None
    wall_s = time.monotonic() - wall0

    err = sim_states - states
    rms = np.sqrt(np.mean(err**2, axis=0))
    mx = np.max(np.abs(err), axis=0)
    report: dict[str, Any] = {
        "dataset": str(root),
        "episode": episode,
        "seed": seed,
        "config": str(config),
        "overrides": list(overrides),
        "frames": n,
        "fps": fps,
        "control_hz": control_hz,
        "steps": runner.steps,
        "wall_s": round(wall_s, 3),
        "interpolate": interpolate,
        "settle_s": settle_steps * spec.dt,
        "success": bool(runner.success),
        "success_within_recording": success_in_time,
        "success_at_s": None if success_at is None else round(success_at, 4),
        "recorded_duration_s": round(n / fps, 4),
        "reset_state_error": float(np.max(np.abs(err[0]))),
        "state": {
            "names": names,
            "rms": [float(x) for x in rms],
            "max": [float(x) for x in mx],
            "rms_overall": float(np.sqrt(np.mean(err**2))),
            "max_overall": float(np.max(np.abs(err))),
        },
    }
    if env_rec is not None and sim_env is not None:
        d = np.linalg.norm(sim_env[:, :3] - env_rec[:, :3], axis=1)
        report["object"] = {
            "names": list(reader.features[ENV_KEY].get("names") or [])[:3],
            "final_position_error_m": float(d[-1]),
            "max_position_error_m": float(d.max()),
            "final_recorded_xyz": [float(x) for x in env_rec[-1, :3]],
            "final_replayed_xyz": [float(x) for x in sim_env[-1, :3]],
        }
    if frames:
        from tether.cli.report import write_mp4

        report["video"] = str(write_mp4(frames, out_dir / "replay.mp4", fps=fps))
    (out_dir / "replay.json").write_text(json.dumps(report, indent=2))

    if report["reset_state_error"] > RESET_MISMATCH_TOL:
        print(
            f"  warning: the reset state differs from frame 0 by "
            f"{report['reset_state_error']:.4f}: seed {seed} is probably not this episode's "
            f"(pass --seed)"
        )
    print(f"  {'joint':20s} rms (mrad)   max (mrad)")
    for name, r, m in zip(names, rms, mx, strict=True):
        print(f"  {name:20s} {r * 1e3:10.2f}   {m * 1e3:10.2f}")
    if "object" in report:
        obj = report["object"]
        print(
            f"  object position error: final {obj['final_position_error_m'] * 1e3:.1f} mm, "
            f"max {obj['max_position_error_m'] * 1e3:.1f} mm"
        )
    verdict = "succeeded" if report["success"] else "did NOT succeed"
    when = f" at {success_at:.2f} s" if success_at is not None else ""
    if success_at is not None and not success_in_time:
        when += f", {(success_at - n / fps) * 1e3:.0f} ms after the last frame"
    print(
        f"task {verdict} on replay{when} (recorded {n / fps:.2f} s); "
        f"state rms {report['state']['rms_overall'] * 1e3:.2f} mrad, "
        f"max {report['state']['max_overall'] * 1e3:.2f} mrad"
    )
    print(f"wrote {out_dir / 'replay.json'}" + (f", {report['video']}" if frames else ""))
    return 0


# ------------------------------------------------------------------------------- render


def run_render(root: str, episode: int, out: str | None = None, strip: int = 8) -> int:
    """Write episode ``episode`` of ``root`` as an MP4 (cameras side by side) or, for a
    ``.png`` path, a strip of ``strip`` evenly spaced frames over plots of state and action."""
    reader, ep = open_episode(root, episode)
    path = Path(out) if out else Path("runs") / f"{Path(root).resolve().name}-ep{episode}.mp4"
    suffix = path.suffix.lower()
    if suffix not in (".mp4", ".png"):
        raise TetherError(f"--out {path}: write a .mp4 or a .png")
    cams = camera_keys(reader)
    n = len(ep["frame_index"])
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".mp4":
        if not cams:
            raise TetherError(f"{root} has no camera to render; ask for a .png of its plots")
        from tether.cli.report import write_mp4

        progress = _Progress(n, "frames")
        frames = []
        for k in range(n):
            frames.append(side_by_side([ep[c][k] for c in cams]))
            progress.update(k + 1)
        write_mp4(frames, path, fps=reader.fps)
    else:
        _render_png(reader, ep, cams, path, strip)
    what = ", ".join(c[len(IMAGE_PREFIX) :] for c in cams) or "plots"
    print(f"wrote {path} ({n} frames at {reader.fps} fps, episode {episode}: {what})")
    return 0


def _render_png(reader: Any, ep: dict[str, Any], cams: list[str], path: Path, strip: int) -> None:
    """Frame strip (if cameras) above state and action plots, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(ep["frame_index"])
    t = np.arange(n) / reader.fps
    idx = np.unique(np.linspace(0, n - 1, min(strip, n)).round().astype(int))
    plots = [k for k in (STATE_KEY, ACTION_KEY) if k in ep]
    rows = (1 if cams else 0) + len(plots)
    # row heights in inches: the strip as tall as one (square-ish) frame, 2 in per plot
    ratios = ([12.0 / len(idx) + 0.3] if cams else []) + [2.0] * len(plots)
    fig = plt.figure(figsize=(12, sum(ratios) + 0.3 * rows + 0.4), dpi=110)
    grid = fig.add_gridspec(rows, 1, height_ratios=ratios, hspace=0.35)
    row = 0
    if cams:
        sub = grid[0].subgridspec(1, len(idx), wspace=0.04)
        for j, k in enumerate(idx):
            ax = fig.add_subplot(sub[0, j])
            ax.imshow(side_by_side([ep[c][k] for c in cams]), interpolation="nearest")
            ax.set_title(f"#{k}  {t[k]:.2f} s", fontsize=7, pad=2)
            ax.set_xticks([])
            ax.set_yticks([])
        row = 1
    for key in plots:
        ax = fig.add_subplot(grid[row])
        row += 1
        data = np.asarray(ep[key], np.float64)
        names = reader.features[key].get("names") or [f"{key}[{i}]" for i in range(data.shape[1])]
        for i in range(data.shape[1]):
            ax.plot(t, data[:, i], lw=1.1, label=str(names[i]))
        for k in idx:
            ax.axvline(t[k], color="0.85", lw=0.6, zorder=0)
        ax.set_title(key, fontsize=9, loc="left")
        ax.set_xlim(t[0], t[-1] if n > 1 else 1.0)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, ncol=1, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    fig.axes[-1].set_xlabel("time (s)", fontsize=8)
    task = ep["task"][0] if ep.get("task") else ""
    fig.suptitle(
        f"{reader.root.name} - episode {int(ep['episode_index'][0])}: {n} frames at "
        f"{reader.fps} fps  ({task})",
        fontsize=10,
    )
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
