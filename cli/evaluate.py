"""The episode runner of `tether eval`: an evaluation experiment's episodes in-process (the
simulator and the policy in this process) or over ROS 2 (the `tether demo` graph).

It sits in the cli layer because it needs both the simulators and the ROS 2 graph; trainers
(tether.policies) receive it as ``options.runner`` (tether.policies.evaluation.EpisodeRunner).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tether.core.config import parse_experiment
from tether.core.types import IMAGE_PREFIX, ActionChunk, Observation
from tether.policies.evaluation import summarize


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
