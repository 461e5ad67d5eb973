"""Closed-loop evaluation of a checkpoint over N seeded episodes, in-process or over ROS 2.

Writes ``summary.json`` (``success_rate``, ``episodes``, per-episode results, latency) and an
MP4 of the first episode. The experiment comes from the checkpoint's contract (the config it
was trained with), its policy section replaced by the checkpoint's policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tether.core.config import apply_overrides, parse_experiment
from tether.core.errors import TetherError
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation


class FrameGrabber:
    """Wraps a policy to keep the frames of one camera the loop hands it (for the MP4)."""

    def __init__(self, policy: Any, camera: str) -> None:
        self.policy = policy
        self.key = IMAGE_PREFIX + camera
        self.frames: list[np.ndarray] = []
        self.recording = True

    def reset(self) -> None:
        self.policy.reset()

    def act(self, obs: Observation) -> ActionChunk:
        img = obs.data.get(self.key)
        if self.recording and img is not None and (not self.frames or img is not self.frames[-1]):
            self.frames.append(img)
        return self.policy.act(obs)

    @property
    def contract(self) -> dict[str, Any]:
        c = dict(self.policy.contract)
        keys = list(c.get("observation_keys", ["state"]))
        c["observation_keys"] = keys if self.key in keys else [*keys, self.key]
        return c


def eval_experiment(checkpoint: Path, options: Any, policy: dict[str, Any]) -> dict[str, Any]:
    """The experiment dict an evaluation runs: the trained one, this policy, these episodes."""
    contract_file = checkpoint / "contract.json"
    contract = json.loads(contract_file.read_text())
    if "experiment" not in contract:
        raise TetherError(f"{contract_file}: no 'experiment' section to evaluate in")
    return episode_experiment(contract["experiment"], options, policy)


def episode_experiment(
    experiment: dict[str, Any], options: Any, policy: dict[str, Any]
) -> dict[str, Any]:
    """``experiment`` with ``policy`` in place of its own, the evaluation's episodes and the
    user's overrides (``options.sim`` among them)."""
    data = dict(experiment)
    data.pop("train", None)
    data["policy"] = dict(policy)
    data["episodes"] = {
        **data.get("episodes", {}),
        "count": options.episodes,
        "seed": options.seed,
    }
    overrides = list(options.overrides)
    if options.sim:
        overrides.append(f"sim.type={options.sim}")
    return apply_overrides(data, overrides)


def evaluate_model(model_dir: Path, options: Any) -> dict[str, Any]:
    """Evaluate an exported model folder (model.onnx + model.json, as in ``models/``) in the
    experiment its model.json carries, or in ``options.config`` (an experiment YAML)."""
    from tether.core.config import dump_config, load_config
    from tether.policies.runtime import MODEL_FILE, read_contract

    contract = read_contract(model_dir / MODEL_FILE)
    if options.config:
        experiment = dump_config(load_config(options.config))
    elif isinstance(contract.get("experiment"), dict):
        experiment = contract["experiment"]
    else:
        raise TetherError(
            f"{model_dir}/model.json names no experiment to evaluate in: pass --config "
            "<experiment.yaml>"
        )
    policy = {"type": "onnx", "model": str((model_dir / MODEL_FILE).resolve())}
    data = episode_experiment(experiment, options, policy)
    return run_evaluation(data, model_dir, options, str(model_dir / "model.json"))


def summarize(name: str, results: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    from tether.core.timing import percentiles_ms

    lat = percentiles_ms([x for r in results for x in r.get("latency_ms", [])])
    n = len(results)
    wins = sum(bool(r["success"]) for r in results)
    return {
        "experiment": name,
        "episodes": n,
        "successes": wins,
        "success_rate": wins / max(1, n),
        "latency_ms": lat,
        **extra,
        "per_episode": [{k: v for k, v in r.items() if k != "latency_ms"} for r in results],
    }


def evaluate_checkpoint(checkpoint: Path, options: Any, policy: dict[str, Any]) -> dict[str, Any]:
    """Run ``options.episodes`` episodes from seed ``options.seed``; returns the summary."""
    data = eval_experiment(checkpoint, options, policy)
    return run_evaluation(data, checkpoint, options, str(checkpoint / "contract.json"))


def run_evaluation(
    data: dict[str, Any], checkpoint: Path, options: Any, source: str
) -> dict[str, Any]:
    """Run the evaluation experiment ``data`` in-process or over ROS 2; the summary."""
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    if options.ros:
        from tether.cli.demo import run_demo

        path = out / "experiment.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        run_demo(str(path), [], str(out), video=options.video)
        return json.loads((out / "summary.json").read_text())
    from tether.core.experiment import build_policy
    from tether.sim.loop import run_local_episode
    from tether.sim.runner import SimRunner

    cfg = parse_experiment(data, source)
    runner = SimRunner(cfg)
    inner = build_policy(cfg, runner.spec)
    cams = [c.name for c in runner.spec.cameras]
    grab = FrameGrabber(inner, cams[0]) if options.video and cams else None
    active = grab or inner
    results = []
    print(
        f"tether eval: {options.episodes} episodes of {cfg.task.type} from seed {options.seed}, "
        f"{cfg.policy.type} policy, in-process {cfg.sim.type} -> {out}"
    )
    for k in range(options.episodes):
        r = run_local_episode(cfg, runner, active)
        if grab is not None:
            grab.recording = False
        results.append(r)
        print(
            f"  episode {k} seed {r['seed']}: {'success' if r['success'] else 'failure'} "
            f"({r['steps']} steps, {r['sim_time_s']:.2f} s)"
        )
    extra = {
        "checkpoint": str(checkpoint),
        "mode": "in-process",
        "num_inference_steps": inner.contract.get("num_inference_steps"),
        "inferences": getattr(inner, "inferences", None),
    }
    summary = summarize(cfg.name, results, extra)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if grab is not None and grab.frames:
        from tether.cli.report import write_mp4

        fps = runner.spec.cameras[0].fps
        write_mp4(grab.frames, out / "episode_000.mp4", fps=fps)
    print(
        f"success {summary['successes']}/{summary['episodes']} "
        f"({100 * summary['success_rate']:.0f}%), policy latency p50 "
        f"{summary['latency_ms']['p50']:.2f} ms, p99 {summary['latency_ms']['p99']:.2f} ms"
    )
    return summary
